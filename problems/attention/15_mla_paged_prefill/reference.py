"""Problem 15: MLA (DeepSeek multi-head latent attention) paged causal prefill,
16 heads, compressed kv 512 + rope 64, page size 1 (FlashInfer-Trace
mla_paged_prefill_causal_h16_ckv512_kpe64_ps1, DeepSeek-V3 at tensor-parallel 8).

Weight-absorbed MLA over a batch of requests that each append q_len new tokens
to a context of kv_len >= q_len tokens (the new tokens are the last q_len of
it). Query i of a request (0-based among its q_len) sits at context position
kv_len - q_len + i and sees positions 0..kv_len - q_len + i. KV rows come from
the page pool via kv_indices[kv_indptr[b]:kv_indptr[b+1]] (in context order):
    logit[t, h, j] = (q_nope[t,h] . ckv[j] + q_pe[t,h] . kpe[j]) * sm_scale    (sm_scale an input)
    out[t, h] = softmax_j(logit) @ ckv;   lse[t, h] = log2 sum_j exp(logit)
One query token at a time.
"""
import math

import torch

SM_SCALE = 0.1352337747812271   # the captured value, about 1/sqrt(192) times DeepSeek-V3's YaRN mscale squared
LAYOUT_SEED = 15   # fixed lengths of the workloads that are not captured

# The captured workload: 28 requests, 1,954 new tokens over 2,044 context tokens.
CAPTURED_QO_INDPTR = (0, 20, 31, 114, 128, 164, 173, 190, 327, 423, 456, 460, 499, 520, 602, 603, 613, 1033, 1061,
                      1081, 1142, 1532, 1581, 1757, 1823, 1832, 1864, 1943, 1954)
CAPTURED_KV_INDPTR = (0, 23, 38, 123, 141, 180, 191, 212, 353, 452, 488, 494, 538, 561, 651, 655, 669, 1092, 1122,
                      1145, 1209, 1602, 1655, 1835, 1905, 1917, 1951, 2032, 2044)


def reference(q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    acc = torch.promote_types(q_nope.dtype, torch.float32)
    q_tokens, heads, ckv_dim = q_nope.shape
    ckv, kpe = ckv_cache.squeeze(1), kpe_cache.squeeze(1)         # page size 1: [pool, dim]
    out = torch.zeros((q_tokens, heads, ckv_dim), dtype=q_nope.dtype, device=q_nope.device)
    lse = torch.full((q_tokens, heads), -math.inf, dtype=acc, device=q_nope.device)
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        rows = kv_indices[kv[b]:kv[b + 1]].long()
        kc, kp = ckv[rows].to(acc), kpe[rows].to(acc)
        qn, qp = q_nope[qo[b]:qo[b + 1]].to(acc), q_pe[qo[b]:qo[b + 1]].to(acc)
        q_len, kv_len = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        key_pos = torch.arange(kv_len, device=q_nope.device)
        for i in range(q_len):
            s = (qn[i] @ kc.T + qp[i] @ kp.T) * sm_scale                  # [heads, kv_len]
            s.masked_fill_((key_pos > kv_len - q_len + i)[None], -math.inf)
            lse[qo[b] + i] = torch.logsumexp(s, dim=-1) / math.log(2.0)
            out[qo[b] + i] = (torch.softmax(s, dim=-1) @ kc).to(q_nope.dtype)
    return out, lse


def _composition(total, parts, g):
    cuts = torch.randperm(total - 1, generator=g)[:parts - 1].sort().values + 1
    return torch.cat([torch.tensor([0]), cuts, torch.tensor([total])]).diff().tolist()


def _indptr(lens):
    return [0] + torch.tensor(lens).cumsum(0).tolist()


def layout(batch, q_tokens, kv_tokens, captured):
    """(qo_indptr, kv_indptr) as lists: the captured tables, or fixed ones of the
    same kind drawn once from LAYOUT_SEED (random q lengths >= 1, cached context
    kv_len - q_len >= 0 a random composition of kv_tokens - q_tokens)."""
    if captured:
        return list(CAPTURED_QO_INDPTR), list(CAPTURED_KV_INDPTR)
    g = torch.Generator().manual_seed(LAYOUT_SEED)
    q_lens = _composition(q_tokens, batch, g)
    cached = [n - 1 for n in _composition(kv_tokens - q_tokens + batch, batch, g)]
    return _indptr(q_lens), _indptr([a + b for a, b in zip(q_lens, cached)])


def attended_pairs(qo, kv):
    """(query, key) pairs the causal mask lets through."""
    total = 0
    for b in range(len(qo) - 1):
        n, m = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        total += n * (m - n) + n * (n + 1) // 2
    return total


def make_inputs(batch, q_tokens, kv_tokens, pool_pages, q_heads, ckv_dim, kpe_dim, captured, pairs=None,
                *, seed, device="cuda"):
    qo, kv = layout(batch, q_tokens, kv_tokens, captured)
    assert (len(qo) - 1, qo[-1], kv[-1]) == (batch, q_tokens, kv_tokens) and kv_tokens <= pool_pages
    assert pairs is None or pairs == attended_pairs(qo, kv)
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q_nope = randn(q_tokens, q_heads, ckv_dim)
    q_pe = randn(q_tokens, q_heads, kpe_dim)
    ckv_cache = randn(pool_pages, 1, ckv_dim)
    kpe_cache = randn(pool_pages, 1, kpe_dim)
    qo_indptr = torch.tensor(qo, dtype=torch.int32, device=device)
    kv_indptr = torch.tensor(kv, dtype=torch.int32, device=device)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens].to(torch.int32)
    return q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices, SM_SCALE
