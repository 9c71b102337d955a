"""Problem 17: DSA (DeepSeek sparse attention) over top-k selected tokens,
page size 64 (FlashInfer-Trace style).

Weight-absorbed MLA decode/prefill where each query token attends only to the
topk KV tokens an indexer selected for it. sparse_indices[t] holds global
token slots in the paged cache (slot = page * PAGE_SIZE + offset); -1 marks
padding (fewer than topk tokens available) and contributes nothing:
    logit[t, h, j] = (q_nope[t,h] . ckv[s_j] + q_pe[t,h] . kpe[s_j]) * SM_SCALE   s_j = sparse_indices[t, j] != -1
    out[t, h] = softmax_j(logit) @ ckv[s];   lse[t, h] = log2 sum_j exp(logit)
"""
import math

import torch

SM_SCALE = (128 + 64) ** -0.5   # DeepSeek-V3.2: 1/sqrt(qk_nope 128 + qk_rope 64)


def reference(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices):
    acc = torch.promote_types(q_nope.dtype, torch.float32)
    ckv = ckv_cache.reshape(-1, ckv_cache.shape[-1])          # [pages * page_size, ckv_dim]
    kpe = kpe_cache.reshape(-1, kpe_cache.shape[-1])
    valid = sparse_indices >= 0                                 # [tokens, topk]
    idx = sparse_indices.clamp(min=0).long()
    kc, kp = ckv[idx].to(acc), kpe[idx].to(acc)                 # [tokens, topk, dim]
    logits = (torch.einsum("thd,tkd->thk", q_nope.to(acc), kc)
              + torch.einsum("thd,tkd->thk", q_pe.to(acc), kp)) * SM_SCALE
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(logits, dim=-1)                       # [tokens, heads]
    out = torch.einsum("thk,tkd->thd", torch.exp(logits - lse[..., None]), kc)
    return out.to(q_nope.dtype), lse / math.log(2.0)


def make_inputs(tokens, heads, topk, pages, page_size, ckv_dim, kpe_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    slots = pages * page_size
    # Each query token selects distinct cache slots; its count of valid ones is
    # drawn in [topk/4, topk] (every 4th token gets the full topk), the rest is -1.
    picked = torch.rand(tokens, slots, generator=g, device=device).topk(topk, dim=-1).indices
    n_valid = torch.randint(topk // 4, topk + 1, (tokens,), generator=g, device=device)
    n_valid[::4] = topk
    pad = torch.arange(topk, device=device)[None, :] >= n_valid[:, None]
    sparse_indices = picked.masked_fill(pad, -1).to(torch.int32)
    q_nope = draw(tokens, heads, ckv_dim)
    q_pe = draw(tokens, heads, kpe_dim)
    ckv_cache = draw(pages, page_size, ckv_dim)
    kpe_cache = draw(pages, page_size, kpe_dim)
    return q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices
