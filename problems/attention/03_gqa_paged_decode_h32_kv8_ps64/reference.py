"""Problem 03: GQA paged decode, 32 q heads / 8 kv heads, head dim 128, page size 64
(FlashInfer-Trace).

As problem 01, but the KV pool is made of 64-token pages: kv_indices[kv_indptr[b]
: kv_indptr[b+1]] are the pages of sequence b, in order, all full except the
last, which holds kv_last_page_len[b] tokens (1..64). Returns the attention
output and the log-sum-exp of the scaled scores in base 2.
"""
import math

import torch

LOG2E = 1.0 / math.log(2.0)
PAGE_SIZE = 64


def reference(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len):
    # q [batch, q_heads, d]; k_cache / v_cache [pool_pages, 64, kv_heads, d]
    acc = torch.promote_types(q.dtype, torch.float32)
    batch, q_heads, head_dim = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    scale = head_dim ** -0.5
    out = torch.empty(batch, q_heads, head_dim, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, q_heads, dtype=acc, device=q.device)
    indptr = kv_indptr.tolist()
    last = kv_last_page_len.tolist()
    for b in range(batch):
        pages = kv_indices[indptr[b]:indptr[b + 1]].long()
        kv_len = (len(pages) - 1) * page_size + last[b]
        k = k_cache[pages].flatten(0, 1)[:kv_len].to(acc)   # [kv_len, kv_heads, d]
        v = v_cache[pages].flatten(0, 1)[:kv_len].to(acc)
        qb = q[b].to(acc).view(kv_heads, group, head_dim)
        s = torch.einsum("hgd,khd->hgk", qb, k) * scale     # [kv_heads, group, kv_len]
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


def _bounded(total, parts, cap, g, device):
    """`parts` integers in [1, cap] summing to `total`: 1 each plus the rest
    spread over random unit cells of a parts x (cap - 1) grid."""
    cells = torch.randperm(parts * (cap - 1), generator=g, device=device)[:total - parts]
    return 1 + torch.bincount(cells // (cap - 1), minlength=parts)


def make_inputs(batch, kv_pages, kv_tokens, pool_pages, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    # kv_tokens = 64 * (kv_pages - batch) + sum(kv_last_page_len)
    assert 64 * (kv_pages - batch) + batch <= kv_tokens <= 64 * kv_pages and kv_pages <= pool_pages
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    q = draw(batch, q_heads, head_dim)
    k_cache = draw(pool_pages, PAGE_SIZE, kv_heads, head_dim)
    v_cache = draw(pool_pages, PAGE_SIZE, kv_heads, head_dim)
    pages_per_seq = _composition(kv_pages, batch, g, device)
    last = _bounded(kv_tokens - PAGE_SIZE * (kv_pages - batch), batch, PAGE_SIZE, g, device)
    kv_indptr = torch.cat([torch.zeros(1, dtype=torch.long, device=device), pages_per_seq.cumsum(0)])
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_pages]
    return (q, k_cache, v_cache, kv_indptr.to(torch.int32), kv_indices.to(torch.int32),
            last.to(torch.int32))
