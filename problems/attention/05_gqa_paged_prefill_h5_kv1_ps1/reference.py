"""Problem 05: causal GQA prefill over a paged KV cache, 5 q heads / 1 kv head,
head dim 128, page size 1 (FlashInfer-Trace gqa_paged_prefill_causal_h5_kv1_d128_ps1,
Llama 4 Scout 17B-16E at tensor-parallel 8).

Sequence b owns the query rows qo_indptr[b] : qo_indptr[b+1] and the KV pool
slots kv_indices[kv_indptr[b] : kv_indptr[b+1]], in order; sequences may
continue a cached prefix, so q_len <= kv_len. Query i of a sequence sees keys
j <= i + kv_len - q_len (mask aligned to the end). All 5 query heads read the
one kv head. Scores are scaled by sm_scale (an input). Returns the bf16 output
and the base-2 log-sum-exp of the scaled scores (fp32). One sequence at a time,
all its queries and heads at once.
"""
import math

import torch

SM_SCALE = 0.08838834764831843
LAYOUT_SEED = 5    # fixed lengths of the workloads that are not captured

# The captured workload: 54 sequences, 10,847 query tokens over 10,945 kv tokens.
CAPTURED_QO_INDPTR = (0, 5, 73, 74, 94, 113, 124, 153, 156, 162, 182, 216, 229, 338, 347, 353, 380, 389, 412, 432,
                      735, 1002, 1250, 1325, 1373, 1394, 1402, 1406, 1840, 1855, 2171, 2191, 2205, 2222, 2270, 2274,
                      2286, 2292, 2441, 2448, 2454, 2462, 3211, 5262, 5269, 5364, 5383, 5531, 5537, 5563, 5636,
                      5645, 5656, 5708, 10847)
CAPTURED_KV_INDPTR = (0, 7, 76, 79, 100, 122, 134, 166, 170, 178, 200, 235, 250, 364, 376, 383, 414, 424, 448, 469,
                      774, 1043, 1293, 1369, 1418, 1440, 1450, 1455, 1890, 1906, 2225, 2246, 2261, 2279, 2328, 2335,
                      2349, 2357, 2510, 2519, 2526, 2536, 3289, 5341, 5350, 5449, 5469, 5619, 5626, 5653, 5727,
                      5737, 5752, 5805, 10945)


def reference(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    q_tokens, q_heads, _ = q.shape
    out = torch.zeros_like(q)
    lse = torch.full((q_tokens, q_heads), -math.inf, dtype=acc, device=q.device)
    qw = q.to(acc)
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        slots = kv_indices[kv[b]:kv[b + 1]].long()
        k = k_cache[slots, 0, 0].to(acc)                           # [kv_len, d]: the one kv head
        v = v_cache[slots, 0, 0].to(acc)
        rows = slice(qo[b], qo[b + 1])
        q_len, kv_len = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        s = torch.einsum("qhd,kd->qhk", qw[rows], k) * sm_scale    # [q_len, q_heads, kv_len]
        query_pos = torch.arange(q_len, device=q.device)[:, None]
        key_pos = torch.arange(kv_len, device=q.device)[None, :]
        s = s.masked_fill((key_pos > query_pos + kv_len - q_len)[:, None, :], -math.inf)
        lse[rows] = torch.logsumexp(s, dim=-1) / math.log(2.0)
        out[rows] = torch.einsum("qhk,kd->qhd", torch.softmax(s, dim=-1), v).to(q.dtype)
    return out, lse


def _composition(total, parts, g):
    cuts = torch.randperm(total - 1, generator=g)[:parts - 1].sort().values + 1
    return torch.cat([torch.tensor([0]), cuts, torch.tensor([total])]).diff().tolist()


def _indptr(lens):
    return [0] + torch.tensor(lens).cumsum(0).tolist()


def layout(batch, q_tokens, kv_tokens, captured):
    """(qo_indptr, kv_indptr) as lists: the captured tables, or fixed ones of the
    same kind drawn once from LAYOUT_SEED (random q lengths >= 1, cached prefixes
    kv_len - q_len >= 0 a random composition of kv_tokens - q_tokens)."""
    if captured:
        return list(CAPTURED_QO_INDPTR), list(CAPTURED_KV_INDPTR)
    g = torch.Generator().manual_seed(LAYOUT_SEED)
    q_lens = _composition(q_tokens, batch, g)
    prefix = [n - 1 for n in _composition(kv_tokens - q_tokens + batch, batch, g)]
    return _indptr(q_lens), _indptr([a + b for a, b in zip(q_lens, prefix)])


def attended_pairs(qo, kv):
    """(query, key) pairs the causal mask lets through."""
    total = 0
    for b in range(len(qo) - 1):
        n, m = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        total += n * (m - n) + n * (n + 1) // 2
    return total


def make_inputs(batch, q_tokens, kv_tokens, pool_pages, q_heads, kv_heads, head_dim, captured, pairs=None,
                *, seed, device="cuda"):
    qo, kv = layout(batch, q_tokens, kv_tokens, captured)
    assert (len(qo) - 1, qo[-1], kv[-1]) == (batch, q_tokens, kv_tokens) and kv_tokens <= pool_pages
    assert pairs is None or pairs == attended_pairs(qo, kv)
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q = randn(q_tokens, q_heads, head_dim)
    k_cache = randn(pool_pages, 1, kv_heads, head_dim)
    v_cache = randn(pool_pages, 1, kv_heads, head_dim)
    qo_indptr = torch.tensor(qo, dtype=torch.int32, device=device)
    kv_indptr = torch.tensor(kv, dtype=torch.int32, device=device)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens].to(torch.int32)
    return q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, SM_SCALE
