"""Problem 17: DSA (DeepSeek sparse attention) over top-k selected tokens, 16 heads,
compressed kv 512 + rope 64, top-k 2048, page size 64 (FlashInfer-Trace
dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64, DeepSeek-V3.2 at tensor-parallel 8).

Weight-absorbed MLA where each query token attends only to the (at most topk)
KV tokens an indexer selected for it. sparse_indices[t] holds global token
slots of the paged cache (slot = page * 64 + offset); -1 marks padding and
contributes nothing:
    logit[t, h, j] = (q_nope[t,h] . ckv[s_j] + q_pe[t,h] . kpe[s_j]) * sm_scale    s_j = sparse_indices[t, j] != -1
    out[t, h] = softmax_j(logit) @ ckv[s];   lse[t, h] = log2 sum_j exp(logit)     (sm_scale an input)
All tokens at once.
"""
import math

import torch

PAGE_SIZE = 64
SM_SCALE = 0.1352337788608801   # the captured value: 1/sqrt(192) times DeepSeek-V3.2's YaRN mscale squared
LAYOUT_SEED = 17   # fixed selections of the workloads that are not captured

# The captured workload, 62 query tokens: how many tokens each selects (all of
# its context, in pages of its own), except one long row whose 2,161-token
# context is cut to 2,048 positions given as (start, length) runs.
CAPTURED_SELECT_LENS = (18, 11, 2048, 20, 25, 45, 135, 7, 8, 10, 22, 17, 11, 30, 130, 9, 600, 255, 1033, 1010, 58,
                        2, 21, 954, 7, 14, 1015, 28, 64, 5, 18, 33, 26, 86, 5, 14, 10, 90, 53, 22, 2, 17, 154, 51,
                        121, 25, 16, 5, 19, 12, 44, 124, 33, 1157, 9, 5, 1319, 300, 23, 35, 389, 8)
CAPTURED_LONG_ROW = 2
CAPTURED_LONG_CONTEXT = 2161
CAPTURED_LONG_RUNS = ((0, 53), (54, 10), (65, 25), (91, 11), (103, 42), (146, 12), (159, 65), (225, 7), (233, 3),
                      (237, 40), (278, 1), (280, 12), (293, 13), (307, 8), (316, 1), (318, 5), (324, 4), (329, 3),
                      (333, 3), (337, 21), (359, 14), (374, 1), (377, 1), (379, 24), (404, 110), (515, 13), (529,
                      20), (550, 6), (557, 41), (599, 16), (616, 14), (631, 15), (647, 10), (658, 6), (665, 24),
                      (691, 11), (703, 15), (719, 10), (730, 21), (752, 21), (774, 26), (801, 28), (830, 7), (838,
                      11), (850, 1), (852, 12), (865, 18), (884, 5), (890, 1), (892, 1), (894, 9), (904, 11), (916,
                      10), (927, 12), (940, 4), (946, 23), (970, 7), (978, 6), (985, 29), (1015, 5), (1021, 22),
                      (1045, 13), (1059, 37), (1097, 10), (1108, 42), (1151, 1), (1153, 30), (1184, 2), (1187, 31),
                      (1219, 33), (1253, 8), (1262, 102), (1366, 54), (1421, 98), (1520, 19), (1540, 23), (1564, 7),
                      (1572, 31), (1604, 35), (1640, 21), (1662, 4), (1668, 10), (1681, 4), (1688, 15), (1706, 4),
                      (1711, 13), (1725, 3), (1729, 1), (1731, 3), (1736, 12), (1749, 47), (1798, 70), (1869, 108),
                      (1978, 2), (1981, 9), (1992, 6), (1999, 31), (2031, 24), (2056, 105))


def reference(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    acc = torch.promote_types(q_nope.dtype, torch.float32)
    ckv = ckv_cache.reshape(-1, ckv_cache.shape[-1])          # [pool_pages * 64, ckv_dim]
    kpe = kpe_cache.reshape(-1, kpe_cache.shape[-1])
    padding = sparse_indices == -1                              # [tokens, topk]
    slots = sparse_indices.masked_fill(padding, 0).long()
    kc, kp = ckv[slots].to(acc), kpe[slots].to(acc)             # [tokens, topk, dim]
    s = (q_nope.to(acc) @ kc.transpose(-1, -2) + q_pe.to(acc) @ kp.transpose(-1, -2)) * sm_scale
    s.masked_fill_(padding[:, None, :], -math.inf)              # [tokens, heads, topk]
    lse = torch.logsumexp(s, dim=-1) / math.log(2.0)
    out = (torch.softmax(s, dim=-1) @ kc).to(q_nope.dtype)
    return out, lse


def layout(tokens, topk, long_rows, captured):
    """(context length of every row, {long row: its selected context positions}):
    the captured selection, or a fixed one of the same kind drawn once from
    LAYOUT_SEED (log-uniform counts in 2..topk, each row selecting its whole
    context; long_rows rows with a context of topk + 1 .. topk * 9 / 8 tokens,
    topk positions of it chosen at random). A row's selection is positions
    0..context-1 unless it is a long row."""
    if captured:
        contexts = list(CAPTURED_SELECT_LENS)
        contexts[CAPTURED_LONG_ROW] = CAPTURED_LONG_CONTEXT
        picks = [p for start, n in CAPTURED_LONG_RUNS for p in range(start, start + n)]
        return contexts, {CAPTURED_LONG_ROW: picks}
    g = torch.Generator().manual_seed(LAYOUT_SEED)
    u = torch.rand(tokens, generator=g, dtype=torch.float64)
    contexts = (2 * (topk / 2) ** u).floor().long().clamp(1, topk).tolist()
    picks = {}
    for row in torch.randperm(tokens, generator=g)[:long_rows].tolist():
        contexts[row] = topk + 1 + int(torch.randint(topk // 8, (1,), generator=g))
        picks[row] = torch.randperm(contexts[row], generator=g)[:topk].sort().values.tolist()
    return contexts, picks


def selected_count(contexts, picks):
    """Valid (not -1) entries of sparse_indices."""
    return sum(len(picks[t]) if t in picks else n for t, n in enumerate(contexts))


def make_inputs(tokens, pool_pages, q_heads, ckv_dim, kpe_dim, topk, captured, long_rows=1, selected=None,
                *, seed, device="cuda"):
    contexts, picks = layout(tokens, topk, long_rows, captured)
    assert len(contexts) == tokens and len(picks) == long_rows
    assert all(len(p) <= topk for p in picks.values())
    assert all(n <= topk for t, n in enumerate(contexts) if t not in picks)
    assert selected is None or selected == selected_count(contexts, picks)
    pages_per_row = [(n + PAGE_SIZE - 1) // PAGE_SIZE for n in contexts]
    assert sum(pages_per_row) <= pool_pages
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    q_nope = randn(tokens, q_heads, ckv_dim)
    q_pe = randn(tokens, q_heads, kpe_dim)
    ckv_cache = randn(pool_pages, PAGE_SIZE, ckv_dim)
    kpe_cache = randn(pool_pages, PAGE_SIZE, kpe_dim)
    # every row's context lives in pages of its own, all distinct, drawn per draw
    pages = torch.randperm(pool_pages, generator=g, device=device)[:sum(pages_per_row)]
    sparse_indices = torch.full((tokens, topk), -1, dtype=torch.int32, device=device)
    first = 0
    for t in range(tokens):
        own = pages[first:first + pages_per_row[t]]
        first += pages_per_row[t]
        if t in picks:
            positions = torch.tensor(picks[t], dtype=torch.long, device=device)
        else:
            positions = torch.arange(contexts[t], device=device)
        slots = own[positions // PAGE_SIZE] * PAGE_SIZE + positions % PAGE_SIZE
        sparse_indices[t, :len(slots)] = slots.sort().values.to(torch.int32)
    return q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, SM_SCALE
