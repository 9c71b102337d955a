"""Problem 18: DSA (DeepSeek sparse attention) top-k indexer over FP8 keys
(FlashInfer-Trace style).

The "lightning indexer" of DeepSeek-V3.2 for one decode step of a batch of
requests. Index keys live in a paged cache (PAGE_SIZE tokens per page) as FP8
E4M3 bytes (uint8) with one fp32 scale per token; the request's pages are listed
in its block-table row. For request b and each of its tokens s < seq_lens[b]:
    key[s]   = e4m3(k_cache[page, off]) * k_scale[page, off]     page = block_table[b, s // PAGE_SIZE]
    score[s] = sum_h weights[b, h] * relu(q[b, h] . key[s])
The output is the set of the topk highest-scoring token positions s (positions
within the request), written in ascending order of s; requests shorter than
topk return all their positions 0..len-1 followed by -1 padding.
"""
import torch

MARGIN = 1e-3   # minimum score gap between the topk-th and (topk+1)-th best token
WEIGHT_SCALE = 2.0  # head weights ~ 2 N(0,1): scores ~ 100 std; fp32 rounding stays < 2.5e-4 (max seen) while ~70% of visible draws pass the margin


def _dequant(k_cache, k_scale, acc):
    return k_cache.view(torch.float8_e4m3fn).to(acc) * k_scale.to(acc)[..., None]


def _scores(q, weights, keys, block_table, seq_len, b, acc):
    """fp32 (acc) scores of request b's tokens: [seq_len]."""
    page_size = keys.shape[1]
    n_pages = (seq_len + page_size - 1) // page_size
    k = keys[block_table[b, :n_pages].long()].reshape(-1, keys.shape[-1])[:seq_len]   # [seq_len, head_dim]
    logits = torch.relu(q[b].to(acc) @ k.T)                                             # [heads, seq_len]
    return weights[b].to(acc) @ logits


def reference(q, weights, k_cache, k_scale, seq_lens, block_table, topk=2048):
    acc = torch.promote_types(weights.dtype, torch.float32)
    keys = _dequant(k_cache, k_scale, acc)            # [pages, page_size, head_dim]
    batch = q.shape[0]
    out = torch.full((batch, topk), -1, dtype=torch.int32, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        if n <= topk:
            out[b, :n] = torch.arange(n, dtype=torch.int32, device=q.device)
            continue
        s = _scores(q, weights, keys, block_table, n, b, acc)
        out[b] = s.topk(topk).indices.sort().values.to(torch.int32)
    return out


def inputs_ok(q, weights, k_cache, k_scale, seq_lens, block_table, topk=2048):
    """Every request longer than topk has a gap >= MARGIN between its topk-th and
    (topk+1)-th score (fp32 scores), so the selected set is unambiguous."""
    acc = torch.promote_types(weights.dtype, torch.float32)
    keys = _dequant(k_cache, k_scale, acc)
    for b, n in enumerate(seq_lens.tolist()):
        if n > topk:
            top = _scores(q, weights, keys, block_table, n, b, acc).topk(topk + 1).values
            if float(top[topk - 1] - top[topk]) < MARGIN:
                return False
    return True


def make_inputs(batch, heads, head_dim, topk, page_size, min_len, max_len, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    seq_lens = torch.randint(min_len, max_len + 1, (batch,), generator=g, device=device)
    pages_per = (seq_lens + page_size - 1) // page_size
    max_pages = int(pages_per.max())
    total_pages = int(pages_per.sum()) + batch          # some spare pages in the pool
    perm = torch.randperm(total_pages, generator=g, device=device)
    block_table = torch.full((batch, max_pages), -1, dtype=torch.int32, device=device)
    start = 0
    for b, n in enumerate(pages_per.tolist()):
        block_table[b, :n] = perm[start:start + n].to(torch.int32)
        start += n
    q = torch.randn(batch, heads, head_dim, generator=g, device=device).to(torch.bfloat16)
    weights = WEIGHT_SCALE * torch.randn(batch, heads, generator=g, device=device)
    raw = torch.randn(total_pages, page_size, head_dim, generator=g, device=device)
    k_scale = (raw.abs().amax(dim=-1) / 448.0)             # per-token amax scaling to the e4m3 range
    k_cache = (raw / k_scale[..., None]).to(torch.float8_e4m3fn).view(torch.uint8)
    return q, weights, k_cache, k_scale, seq_lens.to(torch.int32), block_table, topk
