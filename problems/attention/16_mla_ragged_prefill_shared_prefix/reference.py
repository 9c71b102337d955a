"""Problem 16: MLA ragged causal prefill, 16 heads, qk dim 192, v dim 128
(FlashInfer-Trace mla_ragged_prefill_causal_h16_qk192_vo128, DeepSeek-V3 at tensor-parallel 8).

The non-absorbed (prefill) form of DeepSeek MLA: per head, qk dim 192 (128 nope +
64 rope) and v dim 128, as many kv heads as q heads. Queries, keys and values
of a batch of requests are packed contiguously: request b owns q rows
qo_indptr[b] : qo_indptr[b+1] and k / v rows kv_indptr[b] : kv_indptr[b+1],
its cached prefix (256 tokens in the captured workload) followed by its new
tokens, so q_len <= kv_len. Causal mask aligned to the end: query i sees keys
j <= i + kv_len - q_len. Scores are scaled by sm_scale (an input):
    out[t, h] = softmax_j(q[t,h] . k[j,h] * sm_scale) @ v[:, h]
    lse[t, h] = log2 of the softmax denominator (fp32)
"""
import math

import torch

SM_SCALE = 0.08838834764831843   # the captured value (1/sqrt(128), not 1/sqrt(192))
LAYOUT_SEED = 16   # fixed lengths of the workloads that are not captured
PREFIX = 256       # cached prefix of every request, as captured

# The captured workload: new-token counts of its 63 requests (each after a 256-token prefix).
CAPTURED_Q_LENS = (39, 38, 39, 39, 39, 40, 40, 40, 41, 40, 40, 42, 42, 41, 42, 42, 43, 42, 43, 42, 43, 43, 44, 44,
                   44, 46, 45, 44, 45, 45, 46, 46, 46, 46, 46, 47, 47, 47, 47, 48, 49, 48, 47, 48, 49, 50, 49, 49,
                   50, 50, 51, 51, 50, 51, 51, 52, 50, 52, 53, 53, 54, 53, 52)
CAPTURED_PREFIX_LENS = (PREFIX,) * len(CAPTURED_Q_LENS)


def reference(q, k, v, qo_indptr, kv_indptr, sm_scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    q_tokens, heads, _ = q.shape
    out = torch.zeros((q_tokens, heads, v.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.full((q_tokens, heads), -math.inf, dtype=acc, device=q.device)
    qw, kw, vw = q.to(acc), k.to(acc), v.to(acc)
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        rows, keys = slice(qo[b], qo[b + 1]), slice(kv[b], kv[b + 1])
        q_len, kv_len = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        s = torch.einsum("qhd,khd->qhk", qw[rows], kw[keys]) * sm_scale    # [q_len, heads, kv_len]
        query_pos = torch.arange(q_len, device=q.device)[:, None]
        key_pos = torch.arange(kv_len, device=q.device)[None, :]
        s = s.masked_fill((key_pos > query_pos + kv_len - q_len)[:, None, :], -math.inf)
        lse[rows] = torch.logsumexp(s, dim=-1) / math.log(2.0)
        out[rows] = torch.einsum("qhk,khd->qhd", torch.softmax(s, dim=-1), vw[keys]).to(q.dtype)
    return out, lse


def lengths(batch, q_tokens, captured):
    """(new-token counts, prefix lengths): the captured ones, or fixed ones of the
    same kind drawn once from LAYOUT_SEED (counts within about 20% of the mean,
    a PREFIX-token prefix each)."""
    if captured:
        return list(CAPTURED_Q_LENS), list(CAPTURED_PREFIX_LENS)
    g = torch.Generator().manual_seed(LAYOUT_SEED)
    weights = 0.8 + 0.4 * torch.rand(batch, generator=g, dtype=torch.float64)
    q_lens = (weights / weights.sum() * q_tokens).floor().long().tolist()
    for i in range(q_tokens - sum(q_lens)):
        q_lens[i] += 1
    return q_lens, [PREFIX] * batch


def attended_pairs(q_lens, prefix):
    """(query, key) pairs the causal mask lets through."""
    return sum(n * p + n * (n + 1) // 2 for n, p in zip(q_lens, prefix))


def _indptr(lens):
    return [0] + torch.tensor(lens).cumsum(0).tolist()


def make_inputs(batch, q_tokens, kv_tokens, heads, qk_dim, vo_dim, captured, pairs=None, *, seed, device="cuda"):
    q_lens, prefix = lengths(batch, q_tokens, captured)
    assert (len(q_lens), sum(q_lens), sum(q_lens) + sum(prefix)) == (batch, q_tokens, kv_tokens) and min(q_lens) > 0
    assert pairs is None or pairs == attended_pairs(q_lens, prefix)
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    qo_indptr = torch.tensor(_indptr(q_lens), dtype=torch.int32, device=device)
    kv_indptr = torch.tensor(_indptr([n + p for n, p in zip(q_lens, prefix)]), dtype=torch.int32, device=device)
    q = randn(q_tokens, heads, qk_dim)
    k = randn(kv_tokens, heads, qk_dim)
    v = randn(kv_tokens, heads, vo_dim)
    return q, k, v, qo_indptr, kv_indptr, SM_SCALE
