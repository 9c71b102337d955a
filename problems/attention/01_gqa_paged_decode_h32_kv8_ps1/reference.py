"""Problem 01: GQA paged decode, 32 q heads / 8 kv heads, head dim 128, page size 1
(FlashInfer-Trace).

One new query token per sequence attends to that sequence's whole KV history,
which lives scattered in a shared pool of 1-token pages: kv_indices[kv_indptr[b]
: kv_indptr[b+1]] are the pool slots of sequence b, in order. Each group of
q_heads // kv_heads consecutive query heads shares one KV head. Returns the
attention output and the log-sum-exp of the scaled scores in base 2.
"""
import math

import torch

LOG2E = 1.0 / math.log(2.0)


def reference(q, k_cache, v_cache, kv_indptr, kv_indices):
    # q [batch, q_heads, d]; k_cache / v_cache [pool_pages, 1, kv_heads, d]
    acc = torch.promote_types(q.dtype, torch.float32)
    batch, q_heads, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    group = q_heads // kv_heads
    scale = head_dim ** -0.5
    out = torch.empty(batch, q_heads, head_dim, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, q_heads, dtype=acc, device=q.device)
    indptr = kv_indptr.tolist()
    for b in range(batch):
        pages = kv_indices[indptr[b]:indptr[b + 1]].long()
        k = k_cache[pages].flatten(0, 1).to(acc)          # [kv_len, kv_heads, d]
        v = v_cache[pages].flatten(0, 1).to(acc)
        qb = q[b].to(acc).view(kv_heads, group, head_dim)
        s = torch.einsum("hgd,khd->hgk", qb, k) * scale   # [kv_heads, group, kv_len]
        lse_b = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse_b[..., None])
        o = torch.einsum("hgk,khd->hgd", p, v)
        out[b] = o.reshape(q_heads, head_dim).to(q.dtype)
        lse[b] = (lse_b * LOG2E).reshape(q_heads)
    return out, lse


def _composition(total, parts, g, device):
    """`parts` positive integers summing to `total` (uniformly random cut points)."""
    cuts = torch.randperm(total - 1, generator=g, device=device)[:parts - 1] + 1
    edges = torch.cat([torch.zeros(1, dtype=torch.long, device=device), cuts.sort().values,
                       torch.full((1,), total, dtype=torch.long, device=device)])
    return edges.diff()


def make_inputs(batch, kv_tokens, pool_pages, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    q = draw(batch, q_heads, head_dim)
    k_cache = draw(pool_pages, 1, kv_heads, head_dim)
    v_cache = draw(pool_pages, 1, kv_heads, head_dim)
    kv_lens = _composition(kv_tokens, batch, g, device)
    kv_indptr = torch.cat([torch.zeros(1, dtype=torch.long, device=device), kv_lens.cumsum(0)])
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens]
    return q, k_cache, v_cache, kv_indptr.to(torch.int32), kv_indices.to(torch.int32)
