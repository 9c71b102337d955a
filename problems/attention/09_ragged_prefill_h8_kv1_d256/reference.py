"""Problem 09: ragged (varlen) causal GQA prefill, 8 q heads / 1 kv head, head dim 256
(FlashInfer-Trace gqa_ragged_prefill_causal_h8_kv1_d256, Qwen3-Next 80B-A3B at tensor-parallel 2).

Queries, keys and values of a batch of sequences are packed contiguously:
sequence b owns q rows qo_indptr[b] : qo_indptr[b+1] and k / v rows
kv_indptr[b] : kv_indptr[b+1]. Sequences may continue a cached prefix, so
q_len <= kv_len, and the causal mask is aligned to the end: query i sees keys
j <= i + kv_len - q_len. All 8 q heads read the one kv head. Scores are scaled
by sm_scale (an input; the captured value is 1/sqrt(128), not 1/sqrt(256)).
Returns the bf16 output and the base-2 log-sum-exp of the scaled scores (fp32).
"""
import math

import torch

SM_SCALE = 0.08838834764831843
LAYOUT_SEED = 9    # fixed lengths of the workloads that are not captured
MAX_PREFIX = 64    # cached prefixes of the captured kind are 0..64 tokens

# The captured workload: query lengths and cached-prefix lengths of its 63 sequences.
CAPTURED_Q_LENS = (35, 71, 76, 69, 62, 52, 61, 39, 102, 94, 64, 44, 63, 37, 49, 56, 53, 58, 47, 18, 61, 83, 49, 63,
                   64, 19, 82, 63, 17, 39, 59, 46, 66, 86, 41, 58, 36, 41, 33, 18, 19, 25, 32, 39, 68, 47, 73, 41,
                   50, 13, 27, 59, 22, 29, 66, 23, 20, 37, 32, 40, 19, 55, 43)
CAPTURED_PREFIX_LENS = (0, 64, 17, 39, 5, 58, 26, 44, 11, 0, 33, 61, 8, 22, 49, 0, 14, 55, 30, 3, 41, 64, 19, 7, 36,
                        0, 52, 24, 60, 13, 28, 46, 1, 0, 57, 20, 35, 9, 63, 42, 16, 0, 50, 27, 4, 38, 59, 23, 12,
                        45, 0, 31, 54, 18, 6, 40, 62, 29, 15, 48, 0, 34, 21)


def reference(q, k, v, qo_indptr, kv_indptr, sm_scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    q_tokens, q_heads, _ = q.shape
    group = q_heads // k.shape[1]
    out = torch.zeros_like(q)
    lse = torch.full((q_tokens, q_heads), -math.inf, dtype=acc, device=q.device)
    qw, kw, vw = q.to(acc), k.to(acc), v.to(acc)
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        rows, keys = slice(qo[b], qo[b + 1]), slice(kv[b], kv[b + 1])
        q_len, kv_len = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        kb = kw[keys].repeat_interleave(group, dim=1)               # [kv_len, q_heads, d]
        vb = vw[keys].repeat_interleave(group, dim=1)
        s = torch.einsum("qhd,khd->qhk", qw[rows], kb) * sm_scale    # [q_len, q_heads, kv_len]
        query_pos = torch.arange(q_len, device=q.device)[:, None]
        key_pos = torch.arange(kv_len, device=q.device)[None, :]
        s = s.masked_fill((key_pos > query_pos + kv_len - q_len)[:, None, :], -math.inf)
        lse[rows] = torch.logsumexp(s, dim=-1) / math.log(2.0)
        out[rows] = torch.einsum("qhk,khd->qhd", torch.softmax(s, dim=-1), vb).to(q.dtype)
    return out, lse


def lengths(batch, q_tokens, captured):
    """(q lengths, cached-prefix lengths): the captured ones, or fixed ones of the
    same kind drawn once from LAYOUT_SEED (a random composition of q_tokens,
    prefixes uniform in 0..MAX_PREFIX)."""
    if captured:
        return list(CAPTURED_Q_LENS), list(CAPTURED_PREFIX_LENS)
    g = torch.Generator().manual_seed(LAYOUT_SEED)
    cuts = torch.randperm(q_tokens - 1, generator=g)[:batch - 1].sort().values + 1
    q_lens = torch.cat([torch.tensor([0]), cuts, torch.tensor([q_tokens])]).diff().tolist()
    prefix = torch.randint(0, MAX_PREFIX + 1, (batch,), generator=g).tolist()
    return q_lens, prefix


def attended_pairs(q_lens, prefix):
    """(query, key) pairs the causal mask lets through."""
    return sum(n * p + n * (n + 1) // 2 for n, p in zip(q_lens, prefix))


def _indptr(lens):
    return [0] + torch.tensor(lens).cumsum(0).tolist()


def make_inputs(batch, q_tokens, kv_tokens, q_heads, kv_heads, head_dim, captured, pairs=None, *, seed, device="cuda"):
    q_lens, prefix = lengths(batch, q_tokens, captured)
    assert (len(q_lens), sum(q_lens), sum(q_lens) + sum(prefix)) == (batch, q_tokens, kv_tokens)
    assert pairs is None or pairs == attended_pairs(q_lens, prefix)
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q = randn(q_tokens, q_heads, head_dim)
    k = randn(kv_tokens, kv_heads, head_dim)
    v = randn(kv_tokens, kv_heads, head_dim)
    qo_indptr = torch.tensor(_indptr(q_lens), dtype=torch.int32, device=device)
    kv_indptr = torch.tensor(_indptr([n + p for n, p in zip(q_lens, prefix)]), dtype=torch.int32, device=device)
    return q, k, v, qo_indptr, kv_indptr, SM_SCALE
