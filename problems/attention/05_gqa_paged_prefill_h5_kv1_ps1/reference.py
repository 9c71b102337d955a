"""Problem 05: GQA paged causal prefill, 5 q heads / 1 kv head, head dim 128,
page size 1 (FlashInfer-Trace).

As problem 04 (packed queries, keys and values in a pool of 1-token pages),
but sequences may already hold a cached prefix, so q_len <= kv_len: query i of
a sequence with q_len queries and kv_len keys sees keys j <= i + kv_len - q_len
(causal mask aligned to the end). All 5 query heads share the one KV head.
Returns the output and the log-sum-exp of the scaled scores in base 2.
"""
import math

import torch

LOG2E = 1.0 / math.log(2.0)
SCORE_BUDGET = 2 ** 28  # score elements per query chunk: bounds the reference's memory


def _causal_attention(q, k, v, out, lse):
    """One sequence: q [q_len, q_heads, d], k / v [kv_len, kv_heads, d]; writes
    out [q_len, q_heads, d] and lse [q_len, q_heads] (base 2)."""
    acc = lse.dtype
    q_len, q_heads, head_dim = q.shape
    kv_len, kv_heads = k.shape[0], k.shape[1]
    group = q_heads // kv_heads
    offset = kv_len - q_len
    scale = head_dim ** -0.5
    k, v = k.to(acc), v.to(acc)
    chunk = max(1, SCORE_BUDGET // (q_heads * kv_len))
    for start in range(0, q_len, chunk):
        stop = min(q_len, start + chunk)
        end = stop + offset                                   # keys this chunk can see
        qc = q[start:stop].to(acc).view(stop - start, kv_heads, group, head_dim) * scale
        s = torch.einsum("chgd,khd->hgck", qc, k[:end])      # [kv_heads, group, c, end]
        i = torch.arange(start, stop, device=q.device)
        j = torch.arange(end, device=q.device)
        s.masked_fill_(j > i[:, None] + offset, float("-inf"))
        lse_c = torch.logsumexp(s, dim=-1)                    # [kv_heads, group, c]
        p = s.sub_(lse_c[..., None]).exp_()                   # softmax, in place
        o = torch.einsum("hgck,khd->chgd", p, v[:end])
        out[start:stop] = o.reshape(stop - start, q_heads, head_dim).to(out.dtype)
        lse[start:stop] = (lse_c * LOG2E).permute(2, 0, 1).reshape(stop - start, q_heads)


def reference(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices):
    # q [q_tokens, q_heads, d]; k_cache / v_cache [pool_pages, 1, kv_heads, d]
    acc = torch.promote_types(q.dtype, torch.float32)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], q.shape[1], dtype=acc, device=q.device)
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        pages = kv_indices[kv[b]:kv[b + 1]].long()
        k = k_cache[pages].flatten(0, 1)                      # [kv_len, kv_heads, d]
        v = v_cache[pages].flatten(0, 1)
        rows = slice(qo[b], qo[b + 1])
        _causal_attention(q[rows], k, v, out[rows], lse[rows])
    return out, lse


def _composition(total, parts, g, device):
    """`parts` positive integers summing to `total` (uniformly random cut points)."""
    cuts = torch.randperm(total - 1, generator=g, device=device)[:parts - 1] + 1
    edges = torch.cat([torch.zeros(1, dtype=torch.long, device=device), cuts.sort().values,
                       torch.full((1,), total, dtype=torch.long, device=device)])
    return edges.diff()


def _indptr(lens):
    return torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(torch.int32)


def make_inputs(batch, q_tokens, kv_tokens, pool_pages, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    assert batch <= q_tokens <= kv_tokens <= pool_pages
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    q = draw(q_tokens, q_heads, head_dim)
    k_cache = draw(pool_pages, 1, kv_heads, head_dim)
    v_cache = draw(pool_pages, 1, kv_heads, head_dim)
    q_lens = _composition(q_tokens, batch, g, device)
    # cached prefix per sequence (kv_len - q_len >= 0), a composition of kv_tokens - q_tokens
    prefix = _composition(kv_tokens - q_tokens + batch, batch, g, device) - 1
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens]
    return (q, k_cache, v_cache, _indptr(q_lens), _indptr(q_lens + prefix),
            kv_indices.to(torch.int32))
