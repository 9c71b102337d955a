"""Problem 16: MLA ragged prefill with a shared prefix (FlashInfer-Trace style).

The non-absorbed (prefill) form of DeepSeek MLA: per head, qk dim 192 (128 nope +
64 rope) and v dim 128. All requests start with the same prefix (e.g. a shared
system prompt) whose K/V are stored once; each request then has its own ragged
block of new tokens, qo_indptr[b]..qo_indptr[b+1], with q, k, v for each. A
query attends to the whole prefix and, causally, to its own request's tokens up
to itself (cascade attention in one pass):
    out[t, h] = softmax( q[t,h] . [prefix_k ; k_req(<= t)] * SM_SCALE ) @ [prefix_v ; v_req(<= t)]
    lse[t, h] = log2 of the softmax denominator
"""
import math

import torch

SM_SCALE = 192 ** -0.5   # 1/sqrt(qk head dim)


def reference(q, k, v, prefix_k, prefix_v, qo_indptr):
    acc = torch.promote_types(q.dtype, torch.float32)
    total_q, heads, _ = q.shape
    prefix = prefix_k.shape[0]
    out = torch.empty(total_q, heads, v.shape[-1], dtype=acc, device=q.device)
    lse = torch.empty(total_q, heads, dtype=acc, device=q.device)
    pk = prefix_k.to(acc).transpose(0, 1)                         # [heads, prefix, 192]
    pv = prefix_v.to(acc).transpose(0, 1)
    bounds = qo_indptr.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        n = end - start
        qs, ks, vs = (t[start:end].to(acc).transpose(0, 1) for t in (q, k, v))
        keys = torch.cat([pk, ks], dim=1)                         # [heads, prefix + n, 192]
        values = torch.cat([pv, vs], dim=1)
        logits = (qs @ keys.transpose(-1, -2)) * SM_SCALE         # [heads, n, prefix + n]
        visible = torch.ones(n, prefix + n, dtype=torch.bool, device=q.device).tril(prefix)
        logits = logits.masked_fill(~visible, float("-inf"))
        lse_b = torch.logsumexp(logits, dim=-1)
        out[start:end] = (torch.exp(logits - lse_b[..., None]) @ values).transpose(0, 1)
        lse[start:end] = (lse_b / math.log(2.0)).T
    return out.to(q.dtype), lse


def _split(total, parts, g, device, minimum):
    """parts integer lengths >= minimum summing to total, drawn from g."""
    w = 0.25 + torch.rand(parts, generator=g, device=device, dtype=torch.float64)
    extra = total - parts * minimum
    lens = (w / w.sum() * extra).floor().long().tolist()
    for i in range(extra - sum(lens)):
        lens[i % parts] += 1
    return [n + minimum for n in lens]


def make_inputs(batch, q_tokens, prefix, heads, qk_dim, v_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    lens = _split(q_tokens, batch, g, device, minimum=1)
    qo_indptr = torch.tensor([0] + lens, device=device).cumsum(0).to(torch.int32)
    q = draw(q_tokens, heads, qk_dim)
    k = draw(q_tokens, heads, qk_dim)
    v = draw(q_tokens, heads, v_dim)
    prefix_k = draw(prefix, heads, qk_dim)
    prefix_v = draw(prefix, heads, v_dim)
    return q, k, v, prefix_k, prefix_v, qo_indptr
