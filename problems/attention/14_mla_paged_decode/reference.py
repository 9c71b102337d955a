"""Problem 14: MLA (DeepSeek multi-head latent attention) paged decode, 16 heads,
compressed kv 512 + rope 64, page size 1 (FlashInfer-Trace
mla_paged_decode_h16_ckv512_kpe64_ps1, DeepSeek-V3 at tensor-parallel 8).

Weight-absorbed MLA: every head's query is split into a part against the
compressed KV latent (ckv, 512) and a RoPE part (kpe, 64); the latent is both
key and value. One query token per request; the request's KV tokens are the
pool rows kv_indices[kv_indptr[b]:kv_indptr[b+1]]:
    logit[h, j] = (q_nope[b,h] . ckv[j] + q_pe[b,h] . kpe[j]) * sm_scale    (sm_scale an input)
    out[b, h]   = softmax_j(logit[h]) @ ckv
    lse[b, h]   = log2(sum_j exp(logit[h, j]))      (base 2, as FlashInfer returns it)
"""
import math

import torch

SM_SCALE = 0.1352337747812271   # the captured value, about 1/sqrt(192) times DeepSeek-V3's YaRN mscale squared
LAYOUT_SEED = 14   # fixed lengths of the workloads that are not captured

# The captured workload: kv_indptr of its 64 requests.
CAPTURED_KV_INDPTR = (0, 537, 1051, 1689, 2199, 3771, 5311, 6904, 8494, 11155, 13258, 15676, 24873, 25427, 25946,
                      27825, 28517, 29331, 30010, 30680, 31220, 31736, 32254, 32866, 33378, 36677, 37310, 37846,
                      38896, 39415, 39983, 40641, 41155, 41689, 42417, 43059, 43975, 45419, 47001, 48634, 50171,
                      51682, 52311, 53407, 54908, 56394, 57906, 58425, 58975, 59915, 60483, 61003, 64016, 64571,
                      65094, 66520, 67099, 67743, 68267, 68784, 69317, 70745, 72061, 73455, 75145)


def reference(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale):
    acc = torch.promote_types(q_nope.dtype, torch.float32)
    batch, heads, ckv_dim = q_nope.shape
    ckv, kpe = ckv_cache.squeeze(1), kpe_cache.squeeze(1)         # page size 1: [pool, dim]
    out = torch.zeros((batch, heads, ckv_dim), dtype=q_nope.dtype, device=q_nope.device)
    lse = torch.full((batch, heads), -math.inf, dtype=acc, device=q_nope.device)
    bounds = kv_indptr.tolist()
    for b in range(batch):
        rows = kv_indices[bounds[b]:bounds[b + 1]].long()
        kc, kp = ckv[rows].to(acc), kpe[rows].to(acc)
        s = (q_nope[b].to(acc) @ kc.T + q_pe[b].to(acc) @ kp.T) * sm_scale   # [heads, kv_len]
        lse[b] = torch.logsumexp(s, dim=-1) / math.log(2.0)
        out[b] = (torch.softmax(s, dim=-1) @ kc).to(q_nope.dtype)
    return out, lse


def layout(batch, kv_tokens, captured):
    """kv_indptr as a list: the captured table, or a fixed one of the same kind
    (a random composition of kv_tokens drawn once from LAYOUT_SEED)."""
    if captured:
        return list(CAPTURED_KV_INDPTR)
    gen = torch.Generator().manual_seed(LAYOUT_SEED)
    cuts = torch.randperm(kv_tokens - 1, generator=gen)[:batch - 1].sort().values + 1
    return [0] + cuts.tolist() + [kv_tokens]


def make_inputs(batch, kv_tokens, pool_pages, q_heads, ckv_dim, kpe_dim, captured, *, seed, device="cuda"):
    bounds = layout(batch, kv_tokens, captured)
    assert (len(bounds) - 1, bounds[-1]) == (batch, kv_tokens) and kv_tokens <= pool_pages
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q_nope = randn(batch, q_heads, ckv_dim)
    q_pe = randn(batch, q_heads, kpe_dim)
    ckv_cache = randn(pool_pages, 1, ckv_dim)
    kpe_cache = randn(pool_pages, 1, kpe_dim)
    kv_indptr = torch.tensor(bounds, dtype=torch.int32, device=device)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens].to(torch.int32)
    return q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, SM_SCALE
