"""Problem 14: MLA (DeepSeek multi-head latent attention) paged decode,
page size 1 (FlashInfer-Trace style).

Weight-absorbed MLA: every head's query is split into a part against the
compressed KV latent (ckv, 512) and a RoPE part (kpe, 64); the latent is both
key and value. One query token per request; the request's KV tokens are the
pool rows kv_indices[kv_indptr[b]:kv_indptr[b+1]]:
    logit[h, j] = (q_nope[b,h] . ckv[j] + q_pe[b,h] . kpe[j]) * SM_SCALE
    out[b, h]   = softmax_j(logit[h]) @ ckv
    lse[b, h]   = log2(sum_j exp(logit[h, j]))      (base 2, as FlashInfer returns it)
"""
import math

import torch

SM_SCALE = (128 + 64) ** -0.5   # DeepSeek-V3: 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)


def reference(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices):
    acc = torch.promote_types(q_nope.dtype, torch.float32)
    batch, heads, ckv_dim = q_nope.shape
    ckv = ckv_cache.reshape(-1, ckv_dim)                 # page size 1: one token per page
    kpe = kpe_cache.reshape(-1, kpe_cache.shape[-1])
    out = torch.empty(batch, heads, ckv_dim, dtype=acc, device=q_nope.device)
    lse = torch.empty(batch, heads, dtype=acc, device=q_nope.device)
    bounds = kv_indptr.tolist()
    for b in range(batch):
        idx = kv_indices[bounds[b]:bounds[b + 1]].long()
        kc, kp = ckv[idx].to(acc), kpe[idx].to(acc)
        logits = (q_nope[b].to(acc) @ kc.T + q_pe[b].to(acc) @ kp.T) * SM_SCALE   # [heads, len]
        lse_b = torch.logsumexp(logits, dim=-1)
        out[b] = torch.exp(logits - lse_b[:, None]) @ kc
        lse[b] = lse_b / math.log(2.0)
    return out.to(q_nope.dtype), lse


def _split(total, parts, g, device, minimum):
    """parts integer lengths >= minimum summing to total, drawn from g."""
    w = 0.25 + torch.rand(parts, generator=g, device=device, dtype=torch.float64)
    extra = total - parts * minimum
    lens = (w / w.sum() * extra).floor().long().tolist()
    for i in range(extra - sum(lens)):
        lens[i % parts] += 1
    return [n + minimum for n in lens]


def make_inputs(batch, kv_tokens, pool_pages, heads, ckv_dim, kpe_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    lens = _split(kv_tokens, batch, g, device, minimum=1)
    kv_indptr = torch.tensor([0] + lens, device=device).cumsum(0).to(torch.int32)
    # distinct pool pages, scattered over the whole pool
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens].to(torch.int32)
    q_nope = draw(batch, heads, ckv_dim)
    q_pe = draw(batch, heads, kpe_dim)
    ckv_cache = draw(pool_pages, 1, ckv_dim)
    kpe_cache = draw(pool_pages, 1, kpe_dim)
    return q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices
