"""Problem 44: DeepSeek-V3 style MoE layer on one expert-parallel rank.

Grouped routing over all 256 experts (sigmoid scores + correction bias; the 8
groups of 32 are ranked by the sum of their two best biased scores, the best 4
groups are kept, then the top 8 experts inside them), followed by the expert
MLPs of the 32 experts that live on this rank. Activations and weights are FP8
E4M3 (stored as uint8 bits) with fp32 scales: activations per (token, 128
columns), weights per 128 x 128 block. Tokens routed to experts of other ranks
contribute nothing here. Output bf16.
"""
import torch

N_GROUP = 8            # DeepSeek-V3: 8 expert groups
TOPK_GROUP = 4         # ... of which 4 are kept per token
TOP_K = 8              # experts per token
ROUTED_SCALING = 2.5   # DeepSeek-V3 routed_scaling_factor
BLOCK = 128            # FP8 scaling block
EP_RANK = 3            # this rank: experts [3 * local, 4 * local)
MARGIN = 1e-3          # selection margin on sigmoid(logit) + bias


def _route(logits, bias, acc):
    """Top-8 expert ids [T, 8] (descending biased score), normalised weights,
    and the group-level / expert-level selection gaps."""
    scores = torch.sigmoid(logits.to(acc))
    biased = scores + bias.to(acc)
    t, e = biased.shape
    group_scores = biased.view(t, N_GROUP, e // N_GROUP).topk(2, dim=-1).values.sum(dim=-1)
    g_sorted = group_scores.sort(dim=-1, descending=True).values
    group_gap = g_sorted[:, TOPK_GROUP - 1] - g_sorted[:, TOPK_GROUP]
    group_idx = group_scores.topk(TOPK_GROUP, dim=-1).indices
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, group_idx, True)
    expert_mask = group_mask.repeat_interleave(e // N_GROUP, dim=1)
    candidates = biased.masked_fill(~expert_mask, float("-inf"))
    top = candidates.topk(TOP_K + 1, dim=-1)
    expert_gap = top.values[:, TOP_K - 1] - top.values[:, TOP_K]
    idx = top.indices[:, :TOP_K]
    w = scores.gather(1, idx)
    w = w / w.sum(dim=-1, keepdim=True) * ROUTED_SCALING
    return idx, w, torch.minimum(group_gap, expert_gap)


def _dequant_blocks(q, scale, acc):
    """uint8 e4m3 bits [R, C] with scales [R/128, C/128] -> acc [R, C]."""
    s = scale.to(acc).repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
    return q.view(torch.float8_e4m3fn).to(acc) * s


def reference(routing_logits, routing_bias, hidden_states, hidden_scale,
              w13, w13_scale, w2, w2_scale, local_expert_offset):
    acc = torch.promote_types(routing_logits.dtype, torch.float32)
    out_dtype = torch.bfloat16 if acc == torch.float32 else acc
    idx, weights, _ = _route(routing_logits, routing_bias, acc)

    # Activations: per-token, per-128-column scales.
    x = hidden_states.view(torch.float8_e4m3fn).to(acc) \
        * hidden_scale.to(acc).repeat_interleave(BLOCK, dim=1)
    tokens, hidden = x.shape
    inter = w2.shape[-1]
    out = torch.zeros(tokens, hidden, dtype=acc, device=x.device)
    for e in range(w13.shape[0]):
        tok, slot = (idx == local_expert_offset + e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x[tok] @ _dequant_blocks(w13[e], w13_scale[e], acc).T   # [n, 2I]: gate | up
        a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
        y = a @ _dequant_blocks(w2[e], w2_scale[e], acc).T          # [n, H]
        out.index_add_(0, tok, y * weights[tok, slot].unsqueeze(1))
    return out.to(out_dtype)


def inputs_ok(routing_logits, routing_bias, *rest):
    idx64, _, gap64 = _route(routing_logits, routing_bias, torch.float64)
    idx32, _, _ = _route(routing_logits, routing_bias, torch.float32)
    same = torch.equal(idx64.sort(dim=-1).values, idx32.sort(dim=-1).values)
    return bool(same) and float(gap64.min()) >= MARGIN


def make_inputs(tokens, hidden, intermediate, experts, local_experts, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    def fp8(*shape):  # e4m3 bits of values spread over the format's range
        return (64.0 * randn(*shape)).clamp_(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)

    routing_bias = (0.1 * randn(experts)).to(torch.bfloat16)
    routing_logits = randn(tokens, experts)
    # Redraw the few tokens whose selection is nearly tied (twice the margin).
    for _ in range(64):
        _, _, gap = _route(routing_logits, routing_bias, torch.float64)
        bad = gap < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        routing_logits[bad] = randn(n, experts)

    hidden_states = fp8(tokens, hidden)
    hidden_scale = (0.5 + rand(tokens, hidden // BLOCK)) / 64.0           # x ~ O(1)
    w13 = fp8(local_experts, 2 * intermediate, hidden)
    w13_scale = (0.5 + rand(local_experts, 2 * intermediate // BLOCK, hidden // BLOCK)) \
        * (hidden ** -0.5 / 64.0)
    w2 = fp8(local_experts, hidden, intermediate)
    w2_scale = (0.5 + rand(local_experts, hidden // BLOCK, intermediate // BLOCK)) \
        * (intermediate ** -0.5 / 64.0)
    local_expert_offset = (EP_RANK % (experts // local_experts)) * local_experts
    return (routing_logits, routing_bias, hidden_states, hidden_scale,
            w13, w13_scale, w2, w2_scale, local_expert_offset)
