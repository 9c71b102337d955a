"""Problem 02: GQA paged decode, 5 q heads / 1 kv head (Llama 4 Scout at TP=8), head dim 128, page size 1
(FlashInfer-Trace gqa_paged_decode_h5_kv1_d128_ps1).

One new query token per sequence attends to that sequence's whole KV history,
stored in a shared pool of 1-token pages: kv_indices[kv_indptr[b] :
kv_indptr[b+1]] are the pool slots of sequence b, in order. q head h reads kv
head h // (q_heads / kv_heads). Scores are scaled by sm_scale (an input).
Returns the bf16 output and the base-2 log-sum-exp of the scaled scores (fp32).
"""
import math

import torch

SM_SCALE = 0.08838834764831843
LAYOUT_SEED = 2   # fixed lengths of the workloads that are not captured

# The captured workload: kv_indptr of its 63 sequences.
CAPTURED_KV_INDPTR = (0, 20, 28, 98, 102, 124, 147, 160, 193, 198, 207, 230, 266, 282, 397, 410, 418, 450, 461, 486, 508,
                      814, 1084, 1335, 1412, 1462, 1485, 1496, 1502, 1938, 1955, 2275, 2297, 2313, 2332, 2382, 2390,
                      2405, 2414, 2568, 2578, 2586, 2597, 4650, 4660, 4760, 4781, 4932, 4940, 4968, 5043, 5054, 5070,
                      5124, 10265, 15933, 15946, 16069, 16081, 17894, 19017, 19040, 19118, 19134)


def reference(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    batch, q_heads, head_dim = q.shape
    group = q_heads // k_cache.shape[2]
    out = torch.zeros_like(q)
    lse = torch.full((batch, q_heads), -math.inf, dtype=acc, device=q.device)
    k_pool, v_pool = k_cache.squeeze(1), v_cache.squeeze(1)       # [pool, kv_heads, d]
    qw = q.to(acc)
    bounds = kv_indptr.tolist()
    for b in range(batch):
        slots = kv_indices[bounds[b]:bounds[b + 1]].long()
        k = k_pool[slots].to(acc).permute(1, 0, 2).repeat_interleave(group, dim=0)   # [q_heads, kv_len, d]
        v = v_pool[slots].to(acc).permute(1, 0, 2).repeat_interleave(group, dim=0)
        s = torch.bmm(qw[b].unsqueeze(1), k.transpose(1, 2)).squeeze(1) * sm_scale      # [q_heads, kv_len]
        lse[b] = torch.logsumexp(s, dim=-1) / math.log(2.0)
        out[b] = torch.bmm(torch.softmax(s, dim=-1).unsqueeze(1), v).squeeze(1).to(q.dtype)
    return out, lse


def layout(batch, kv_tokens, captured):
    if captured:
        return list(CAPTURED_KV_INDPTR)
    gen = torch.Generator().manual_seed(LAYOUT_SEED)
    cuts = torch.randperm(kv_tokens - 1, generator=gen)[:batch - 1].sort().values + 1
    return [0] + cuts.tolist() + [kv_tokens]


def make_inputs(batch, kv_tokens, pool_pages, q_heads, kv_heads, head_dim, captured, *, seed, device="cuda"):
    bounds = layout(batch, kv_tokens, captured)
    assert (len(bounds) - 1, bounds[-1]) == (batch, kv_tokens) and kv_tokens <= pool_pages
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q = randn(batch, q_heads, head_dim)
    k_cache = randn(pool_pages, 1, kv_heads, head_dim)
    v_cache = randn(pool_pages, 1, kv_heads, head_dim)
    kv_indptr = torch.tensor(bounds, dtype=torch.int32, device=device)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens].to(torch.int32)
    return q, k_cache, v_cache, kv_indptr, kv_indices, SM_SCALE
