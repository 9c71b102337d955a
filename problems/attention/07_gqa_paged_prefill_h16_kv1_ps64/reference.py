"""Problem 07: causal GQA prefill over a paged KV cache, 16 q heads / 1 kv head,
head dim 128, page size 64 (FlashInfer-Trace gqa_paged_prefill_causal_h16_kv1_d128_ps64,
Qwen3 235B-A22B at tensor-parallel 4).

Sequence b owns the query rows qo_indptr[b] : qo_indptr[b+1] and the 64-token
pages kv_indices[kv_indptr[b] : kv_indptr[b+1]], in order, all full except the
last, which holds kv_last_page_len[b] tokens. Query i of a sequence with q_len
queries and kv_len keys sees keys j <= i + kv_len - q_len; all 16 q heads read
the one kv head. Scores are scaled by sm_scale (an input). Returns the bf16
output and the base-2 log-sum-exp of the scaled scores (fp32). Queries are
processed in chunks of 512 rows, all heads at once.
"""
import math

import torch

CHUNK = 512
PAGE_SIZE = 64
SM_SCALE = 0.08838834764831843
LAYOUT_SEED = 7    # fixed lengths of the workloads that are not captured

# The captured workload: 15 sequences; each has as many pages as query tokens
# (qo_indptr = kv_indptr) and a last page holding 1 token.
CAPTURED_QO_INDPTR = (0, 17, 79, 172, 442, 458, 475, 480, 530, 540, 548, 595, 598, 610, 629, 969)
CAPTURED_KV_INDPTR = CAPTURED_QO_INDPTR
LAST_PAGE_LEN = 1


def _tokens(cache, pages, last, acc):
    """The keys (or values) of one sequence, [kv_len, kv_heads, d]: its full
    pages flattened to tokens, then the used part of its last page."""
    full = cache[pages[:len(pages) - 1]].to(acc).reshape(-1, cache.shape[2], cache.shape[3])
    return torch.cat([full, cache[pages[-1], :last].to(acc)], dim=0)


def reference(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    q_tokens, q_heads, head_dim = q.shape
    group = q_heads // k_cache.shape[2]
    out = torch.zeros_like(q)
    lse = torch.full((q_tokens, q_heads), -math.inf, dtype=acc, device=q.device)
    qw = q.to(acc)
    qo, kv, last = qo_indptr.tolist(), kv_indptr.tolist(), kv_last_page_len.tolist()
    for b in range(len(qo) - 1):
        pages = kv_indices[kv[b]:kv[b + 1]].long()
        k = _tokens(k_cache, pages, last[b], acc).permute(1, 0, 2).repeat_interleave(group, dim=0)  # [q_heads, kv_len, d]
        v = _tokens(v_cache, pages, last[b], acc).permute(1, 0, 2).repeat_interleave(group, dim=0)
        q_len, kv_len = qo[b + 1] - qo[b], k.shape[1]
        key_pos = torch.arange(kv_len, device=q.device)
        for c in range(0, q_len, CHUNK):
            rows = slice(qo[b] + c, qo[b] + min(c + CHUNK, q_len))
            s = torch.einsum("qhd,hkd->hqk", qw[rows], k) * sm_scale
            query_pos = torch.arange(c, min(c + CHUNK, q_len), device=q.device)[:, None]
            s.masked_fill_((key_pos > query_pos + kv_len - q_len)[None], -math.inf)
            lse[rows] = (torch.logsumexp(s, dim=-1) / math.log(2.0)).permute(1, 0)
            out[rows] = torch.einsum("hqk,hkd->qhd", torch.softmax(s, dim=-1), v).to(q.dtype)
    return out, lse


def layout(batch, q_tokens, captured):
    """(qo_indptr, kv_indptr) as lists, kv in pages: the captured tables, or fixed
    ones of the same kind (a random composition of q_tokens drawn once from
    LAYOUT_SEED; as many pages as query tokens per sequence)."""
    if captured:
        return list(CAPTURED_QO_INDPTR), list(CAPTURED_KV_INDPTR)
    gen = torch.Generator().manual_seed(LAYOUT_SEED)
    cuts = torch.randperm(q_tokens - 1, generator=gen)[:batch - 1].sort().values + 1
    qo = [0] + cuts.tolist() + [q_tokens]
    return qo, list(qo)


def attended_pairs(qo, kv):
    """(query, key) pairs the causal mask lets through (kv_indptr in pages, every
    last page holding LAST_PAGE_LEN tokens)."""
    total = 0
    for b in range(len(qo) - 1):
        n = qo[b + 1] - qo[b]
        m = PAGE_SIZE * (kv[b + 1] - kv[b] - 1) + LAST_PAGE_LEN
        total += n * (m - n) + n * (n + 1) // 2
    return total


def make_inputs(batch, q_tokens, kv_pages, pool_pages, q_heads, kv_heads, head_dim, captured, kv_tokens=None,
                pairs=None, *, seed, device="cuda"):
    qo, kv = layout(batch, q_tokens, captured)
    assert (len(qo) - 1, qo[-1], kv[-1]) == (batch, q_tokens, kv_pages) and kv_pages <= pool_pages
    assert kv_tokens is None or kv_tokens == PAGE_SIZE * (kv_pages - batch) + LAST_PAGE_LEN * batch
    assert pairs is None or pairs == attended_pairs(qo, kv)
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q = randn(q_tokens, q_heads, head_dim)
    k_cache = randn(pool_pages, PAGE_SIZE, kv_heads, head_dim)
    v_cache = randn(pool_pages, PAGE_SIZE, kv_heads, head_dim)
    qo_indptr = torch.tensor(qo, dtype=torch.int32, device=device)
    kv_indptr = torch.tensor(kv, dtype=torch.int32, device=device)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_pages].to(torch.int32)
    kv_last_page_len = torch.full((batch,), LAST_PAGE_LEN, dtype=torch.int32, device=device)
    return q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, SM_SCALE
