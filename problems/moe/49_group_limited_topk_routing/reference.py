"""Problem 49: group-limited top-k routing with the gating GEMM (Ring-flash / DeepSeek-V3 gate).

logits = hidden_states @ weight^T (in the compute dtype), scores = sigmoid(logits),
biased = scores + expert_bias. The experts form 8 groups; each group is ranked
by the sum of its two best biased scores and the best 4 groups are kept; the
top 8 experts by biased score inside the kept groups are chosen, best first.
Their weights are the unbiased scores renormalised to sum 1, times
routed_scaling_factor.
Returns (topk_indices int64 [tokens, 8], descending biased score,
         topk_weights [tokens, 8] in the compute dtype, in the same order).
"""
import math

import torch
import torch.nn.functional as F

NUM_GROUPS = 8
TOPK_GROUPS = 4
NUM_EXPERTS_PER_TOKEN = 8
ROUTED_SCALING_FACTOR = 2.5
DECISION_MARGIN = 1e-4   # on the 4th/5th group gap and on every gap of the 9 best kept scores
REDRAW_LIMIT = 16


def _scores(hidden_states, weight, expert_bias):
    """(sigmoid scores, biased scores) [T, E] in promote_types(hidden_states.dtype, fp32)."""
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    scores = torch.sigmoid(F.linear(hidden_states.to(acc), weight.to(acc)))
    return scores, scores + expert_bias.to(acc)


def _kept_groups(biased):
    """Group scores [T, G] and the biased scores with every expert outside the
    4 best groups set to the dtype's lowest value."""
    tokens, experts = biased.shape
    per_group = experts // NUM_GROUPS
    grouped = biased.view(tokens, NUM_GROUPS, per_group)
    group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
    best = group_scores.topk(TOPK_GROUPS, dim=-1, sorted=False).indices
    keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
    keep = keep.unsqueeze(-1).expand(tokens, NUM_GROUPS, per_group).reshape(tokens, experts)
    return group_scores, biased.masked_fill(~keep, torch.finfo(biased.dtype).min)


def reference(hidden_states, weight, expert_bias, routed_scaling_factor):
    scores, biased = _scores(hidden_states, weight, expert_bias)
    _, masked = _kept_groups(biased)
    topk_indices = masked.topk(NUM_EXPERTS_PER_TOKEN, dim=-1, sorted=True).indices
    topk_weights = scores.gather(1, topk_indices)
    topk_weights = topk_weights / (topk_weights.sum(dim=-1, keepdim=True) + 1e-20)
    return topk_indices, topk_weights * routed_scaling_factor


def _unstable_rows(hidden_states, weight, expert_bias):
    """Tokens whose selection or its order is within DECISION_MARGIN of a tie
    (computed like the reference, in its compute dtype)."""
    _, biased = _scores(hidden_states, weight, expert_bias)
    group_scores, masked = _kept_groups(biased)
    g = group_scores.sort(dim=-1, descending=True).values
    group_gap = g[:, TOPK_GROUPS - 1] - g[:, TOPK_GROUPS]
    s = masked.sort(dim=-1, descending=True).values[:, :NUM_EXPERTS_PER_TOKEN + 1]
    expert_gap = (s[:, :-1] - s[:, 1:]).min(dim=-1).values
    return (group_gap < DECISION_MARGIN) | (expert_gap < DECISION_MARGIN)


def inputs_ok(hidden_states, weight, expert_bias, routed_scaling_factor):
    """The public margin holds, and the float64 anchor picks the same experts
    in the same order (so the anchor's weights line up slot by slot)."""
    if bool(_unstable_rows(hidden_states, weight, expert_bias).any()):
        return False
    wide = [t.to(torch.float64) for t in (hidden_states, weight, expert_bias)]
    ids = reference(hidden_states, weight, expert_bias, routed_scaling_factor)[0]
    ids64 = reference(*wide, routed_scaling_factor)[0]
    return bool(torch.equal(ids, ids64))


def make_inputs(tokens, hidden, experts, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)

    hidden_states = randn(tokens, hidden)
    weight = randn(experts, hidden) / math.sqrt(hidden)
    expert_bias = randn(experts)
    for _ in range(REDRAW_LIMIT):
        unstable = _unstable_rows(hidden_states, weight, expert_bias)
        if not bool(unstable.any()):
            return hidden_states, weight, expert_bias, ROUTED_SCALING_FACTOR
        hidden_states[unstable] = randn(int(unstable.sum()), hidden)
    raise ValueError(f"routing margins under {DECISION_MARGIN} persist after {REDRAW_LIMIT} redraws")
