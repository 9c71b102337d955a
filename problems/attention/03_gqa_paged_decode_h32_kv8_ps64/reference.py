"""Problem 03: GQA paged decode, 32 q heads / 8 kv heads (Llama 3.1 8B), head dim 128, page size 64
(FlashInfer-Trace gqa_paged_decode_h32_kv8_d128_ps64).

As problem 01, but the KV pool is made of 64-token pages: kv_indices[kv_indptr[b]
: kv_indptr[b+1]] are the pages of sequence b, in order, all full except the
last, which holds kv_last_page_len[b] tokens. q head h reads kv head
h // (q_heads / kv_heads). Scores are scaled by sm_scale (an input). Returns
the bf16 output and the base-2 log-sum-exp of the scaled scores (fp32).
"""
import math

import torch

PAGE_SIZE = 64
SM_SCALE = 0.08838834764831843
LAYOUT_SEED = 3   # fixed page counts of the workloads that are not captured

# The captured workload: kv_indptr (in pages) of its 64 sequences; every last page holds 1 token.
CAPTURED_KV_INDPTR = (0, 46, 75, 149, 252, 534, 562, 591, 608, 670, 692, 712, 771, 786, 810, 841, 1193, 1275, 3349,
                      5940, 6987, 8811, 10637, 11618, 12695, 13716, 13747, 13956, 13981, 14014, 14041, 14083, 14103,
                      14131, 14167, 14189, 14613, 14758, 14951, 14972, 14992, 15018, 15073, 15109, 15150, 17537,
                      20213, 20539, 20565, 20969, 21115, 21131, 21158, 21213, 23212, 23247, 24874, 25967, 26278,
                      26339, 26358, 26710, 27130, 27143, 27222)
LAST_PAGE_LEN = 1


def reference(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    batch, q_heads, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    group = q_heads // kv_heads
    out = torch.zeros_like(q)
    lse = torch.full((batch, q_heads), -math.inf, dtype=acc, device=q.device)
    qw = q.to(acc)
    bounds, last = kv_indptr.tolist(), kv_last_page_len.tolist()
    for b in range(batch):
        pages = kv_indices[bounds[b]:bounds[b + 1]].long()

        def tokens(cache):
            # the full pages, flattened to tokens, then the used part of the last page
            full = cache[pages[:len(pages) - 1]].to(acc).reshape(-1, kv_heads, head_dim)
            return torch.cat([full, cache[pages[-1], :last[b]].to(acc)], dim=0)

        k = tokens(k_cache).permute(1, 0, 2).repeat_interleave(group, dim=0)    # [q_heads, kv_len, d]
        v = tokens(v_cache).permute(1, 0, 2).repeat_interleave(group, dim=0)
        s = torch.bmm(qw[b].unsqueeze(1), k.transpose(1, 2)).squeeze(1) * sm_scale   # [q_heads, kv_len]
        lse[b] = torch.logsumexp(s, dim=-1) / math.log(2.0)
        out[b] = torch.bmm(torch.softmax(s, dim=-1).unsqueeze(1), v).squeeze(1).to(q.dtype)
    return out, lse


def layout(batch, kv_pages, captured):
    """kv_indptr (in pages) as a list: the captured table, or a fixed one of the
    same kind (a random composition of kv_pages drawn once from LAYOUT_SEED)."""
    if captured:
        return list(CAPTURED_KV_INDPTR)
    gen = torch.Generator().manual_seed(LAYOUT_SEED)
    cuts = torch.randperm(kv_pages - 1, generator=gen)[:batch - 1].sort().values + 1
    return [0] + cuts.tolist() + [kv_pages]


def make_inputs(batch, kv_pages, pool_pages, q_heads, kv_heads, head_dim, captured, kv_tokens=None,
                *, seed, device="cuda"):
    bounds = layout(batch, kv_pages, captured)
    assert (len(bounds) - 1, bounds[-1]) == (batch, kv_pages) and kv_pages <= pool_pages
    assert kv_tokens is None or kv_tokens == PAGE_SIZE * (kv_pages - batch) + LAST_PAGE_LEN * batch
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q = randn(batch, q_heads, head_dim)
    k_cache = randn(pool_pages, PAGE_SIZE, kv_heads, head_dim)
    v_cache = randn(pool_pages, PAGE_SIZE, kv_heads, head_dim)
    kv_indptr = torch.tensor(bounds, dtype=torch.int32, device=device)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_pages].to(torch.int32)
    kv_last_page_len = torch.full((batch,), LAST_PAGE_LEN, dtype=torch.int32, device=device)
    return q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, SM_SCALE
