"""Problem 15: MLA paged prefill, page size 1 (FlashInfer-Trace style).

Weight-absorbed MLA (16 heads, latent 512 + RoPE 64) over a batch of requests
that each append q_len new tokens to a context of kv_len >= q_len tokens (the new
tokens are the last q_len of it). Causal, bottom-right aligned: query i of a
request (0-based among its q_len) sits at position kv_len - q_len + i and sees
context positions 0..kv_len - q_len + i. KV rows come from the page pool via
kv_indices[kv_indptr[b]:kv_indptr[b+1]] (in context order):
    logit[t, h, j] = (q_nope[t,h] . ckv[j] + q_pe[t,h] . kpe[j]) * SM_SCALE
    out[t, h] = softmax_j(logit) @ ckv;   lse[t, h] = log2 sum_j exp(logit)
"""
import math

import torch

SM_SCALE = (128 + 64) ** -0.5   # DeepSeek-V3: 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)


def reference(q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices):
    acc = torch.promote_types(q_nope.dtype, torch.float32)
    total_q, heads, ckv_dim = q_nope.shape
    ckv = ckv_cache.reshape(-1, ckv_dim)
    kpe = kpe_cache.reshape(-1, kpe_cache.shape[-1])
    out = torch.empty(total_q, heads, ckv_dim, dtype=acc, device=q_nope.device)
    lse = torch.empty(total_q, heads, dtype=acc, device=q_nope.device)
    qb, kb = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qb) - 1):
        q_len, kv_len = qb[b + 1] - qb[b], kb[b + 1] - kb[b]
        idx = kv_indices[kb[b]:kb[b + 1]].long()
        kc, kp = ckv[idx].to(acc), kpe[idx].to(acc)
        qn = q_nope[qb[b]:qb[b + 1]].to(acc).transpose(0, 1)          # [heads, q_len, ckv_dim]
        qp = q_pe[qb[b]:qb[b + 1]].to(acc).transpose(0, 1)
        logits = (qn @ kc.T + qp @ kp.T) * SM_SCALE                    # [heads, q_len, kv_len]
        visible = torch.ones(q_len, kv_len, dtype=torch.bool, device=q_nope.device).tril(kv_len - q_len)
        logits = logits.masked_fill(~visible, float("-inf"))
        lse_b = torch.logsumexp(logits, dim=-1)
        out[qb[b]:qb[b + 1]] = (torch.exp(logits - lse_b[..., None]) @ kc).transpose(0, 1)
        lse[qb[b]:qb[b + 1]] = (lse_b / math.log(2.0)).T
    return out.to(q_nope.dtype), lse


def _split(total, parts, g, device, minimum):
    """parts integer lengths >= minimum summing to total, drawn from g."""
    w = 0.25 + torch.rand(parts, generator=g, device=device, dtype=torch.float64)
    extra = total - parts * minimum
    lens = (w / w.sum() * extra).floor().long().tolist()
    for i in range(extra - sum(lens)):
        lens[i % parts] += 1
    return [n + minimum for n in lens]


def make_inputs(batch, q_tokens, kv_tokens, pool_pages, heads, ckv_dim, kpe_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    q_lens = _split(q_tokens, batch, g, device, minimum=1)
    cached = _split(kv_tokens - q_tokens, batch, g, device, minimum=0)   # context already in the cache
    kv_lens = [q + c for q, c in zip(q_lens, cached)]
    qo_indptr = torch.tensor([0] + q_lens, device=device).cumsum(0).to(torch.int32)
    kv_indptr = torch.tensor([0] + kv_lens, device=device).cumsum(0).to(torch.int32)
    kv_indices = torch.randperm(pool_pages, generator=g, device=device)[:kv_tokens].to(torch.int32)
    q_nope = draw(q_tokens, heads, ckv_dim)
    q_pe = draw(q_tokens, heads, kpe_dim)
    ckv_cache = draw(pool_pages, 1, ckv_dim)
    kpe_cache = draw(pool_pages, 1, kpe_dim)
    return q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices
