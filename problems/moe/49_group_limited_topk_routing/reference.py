"""Problem 49: group-limited top-k routing (DeepSeek-V3 gate), 256 experts.

scores = sigmoid(logits); biased = scores + correction bias. The 256 experts
form 8 groups of 32; each group is ranked by the sum of its two best biased
scores and the best 4 groups are kept; the top 8 experts by biased score
inside the kept groups are chosen. Their weights are the unbiased scores
renormalised to sum 1, times the routed scaling factor 2.5.
Returns (indices int32 [tokens, 8] in ascending expert id,
         weights fp32 [tokens, 8] in the same order).
"""
import torch

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
ROUTED_SCALING = 2.5
MARGIN = 1e-3    # selection margin on sigmoid(logit) + bias


def _select(router_logits, correction_bias, acc):
    """Chosen expert ids (descending biased score) [T, 8], unbiased scores, and
    the smaller of the group-level and expert-level selection gaps."""
    scores = torch.sigmoid(router_logits.to(acc))
    biased = scores + correction_bias.to(acc)
    t, e = biased.shape
    group_scores = biased.view(t, N_GROUP, e // N_GROUP).topk(2, dim=-1).values.sum(dim=-1)
    g_top = group_scores.topk(TOPK_GROUP + 1, dim=-1)
    group_gap = g_top.values[:, TOPK_GROUP - 1] - g_top.values[:, TOPK_GROUP]
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool)
    group_mask.scatter_(1, g_top.indices[:, :TOPK_GROUP], True)
    candidates = biased.masked_fill(~group_mask.repeat_interleave(e // N_GROUP, dim=1), float("-inf"))
    e_top = candidates.topk(TOP_K + 1, dim=-1)
    expert_gap = e_top.values[:, TOP_K - 1] - e_top.values[:, TOP_K]
    return e_top.indices[:, :TOP_K], scores, torch.minimum(group_gap, expert_gap)


def reference(router_logits, correction_bias):
    acc = torch.promote_types(router_logits.dtype, torch.float32)
    weight_dtype = torch.float32 if acc == torch.float32 else acc
    idx, scores, _ = _select(router_logits, correction_bias, acc)
    idx = idx.sort(dim=-1).values                       # defined order: ascending expert id
    w = scores.gather(1, idx)
    w = w / w.sum(dim=-1, keepdim=True) * ROUTED_SCALING
    return idx.to(torch.int32), w.to(weight_dtype)


def inputs_ok(router_logits, correction_bias):
    idx64, _, gap64 = _select(router_logits, correction_bias, torch.float64)
    idx32, _, _ = _select(router_logits, correction_bias, torch.float32)
    same = torch.equal(idx64.sort(dim=-1).values, idx32.sort(dim=-1).values)
    return bool(same) and float(gap64.min()) >= MARGIN


def make_inputs(tokens, experts, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)

    correction_bias = 0.1 * randn(experts)
    router_logits = randn(tokens, experts).to(torch.bfloat16)
    for _ in range(64):  # redraw tokens whose selection is nearly tied
        _, _, gap = _select(router_logits, correction_bias, torch.float64)
        bad = gap < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        router_logits[bad] = randn(n, experts).to(torch.bfloat16)
    return router_logits, correction_bias
