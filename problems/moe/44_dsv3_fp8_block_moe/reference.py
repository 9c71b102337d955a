"""Problem 44: DeepSeek-V3 MoE layer on one expert-parallel rank, FP8 block
scales (FlashInfer-Trace moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048).

Routing runs over all 256 experts: s = 1 / (1 + exp(-logit)), the biased score
s + bias picks the experts. The 8 groups of 32 experts are ranked by the sum of
their two best biased scores and the best 4 groups are kept; the top 8 biased
scores inside them are the token's experts. Their unbiased scores, normalised
to sum 1 (+1e-20) and times routed_scaling_factor, weight the expert outputs.
Only the 32 experts local to this rank (global ids local_expert_offset + e)
run here; tokens routed elsewhere contribute nothing.

Expert e: h = x @ W13[e]^T of width 2I, whose FIRST half is the up projection
and SECOND half the gate; y = (silu(gate) * up) @ W2[e]^T, with silu written
as gate / (1 + exp(-gate)). Activations are FP8 E4M3 with one fp32 scale per
(128-column block, token), stored [hidden/128, tokens]; weights FP8 with one
scale per 128 x 128 block. Everything after dequantisation is fp32 (float64 for
the anchor); the output has the routing bias's dtype (bf16).
"""
import torch

GROUPS, GROUPS_KEPT, TOP_K = 8, 4, 8   # DeepSeek-V3 routing
BLOCK = 128                            # FP8 scaling block
LOCAL_EXPERT_OFFSET = 32               # this rank owns global experts 32..63
ROUTED_SCALING_FACTOR = 2.5
MARGIN = 1e-4                          # routing decisions redrawn closer than this

# The captured gate: logits ~ N(-1.6706, 0.6560) on the bf16 grid (returned as
# fp32); the correction bias is 4.9375 except 4.96875 on these experts.
LOGIT_MEAN, LOGIT_STD = -1.6706, 0.6560
BIAS_LOW, BIAS_HIGH = 4.9375, 4.96875
BIAS_HIGH_IDS = (3, 6, 7, 9, 10, 11, 16, 17, 18, 23, 30, 31, 36, 37, 41, 42, 43, 44, 46, 47, 48, 49, 54,
                 55, 56, 58, 61, 62, 63, 66, 67, 68, 69, 72, 74, 75, 79, 80, 81, 82, 83, 84, 87, 90, 92,
                 96, 100, 101, 102, 104, 105, 108, 109, 110, 112, 114, 119, 120, 123, 125, 126, 127, 131,
                 136, 147, 151, 152, 153, 154, 157, 159, 167, 170, 171, 174, 183, 185, 195, 196, 197, 200,
                 203, 214, 216, 217, 219, 222, 223, 226, 230, 231, 234, 235, 236, 237, 238, 240, 241, 242,
                 243, 253)


def _group_pick(biased):
    """Boolean [tokens, experts] mask of the experts inside each token's kept
    groups, and the per-group scores [tokens, GROUPS]."""
    tokens, experts = biased.shape
    per_group = biased.view(tokens, GROUPS, experts // GROUPS)
    group_score = per_group.topk(2, dim=2, sorted=False).values.sum(dim=2)
    kept = group_score.topk(GROUPS_KEPT, dim=1, sorted=False).indices
    keep = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, kept, True)
    mask = keep.unsqueeze(2).expand(tokens, GROUPS, experts // GROUPS).reshape(tokens, experts)
    return mask, group_score


def _select(scores, bias):
    biased = scores + bias
    mask, _ = _group_pick(biased)
    floor = torch.finfo(torch.float32).min
    return biased.masked_fill(~mask, floor).topk(TOP_K, dim=1, sorted=False).indices


def _dequant(w, scale, acc):
    """FP8 [R, C] with scales [R/128, C/128] -> acc [R, C]."""
    r, c = w.shape
    blocks = w.to(acc).view(r // BLOCK, BLOCK, c // BLOCK, BLOCK)
    return blocks.mul(scale.to(acc)[:, None, :, None]).view(r, c)


def reference(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
              gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
              routed_scaling_factor):
    acc = torch.promote_types(routing_logits.dtype, torch.float32)
    tokens, hidden = hidden_states.shape
    inter = gemm2_weights.shape[2]
    x = hidden_states.to(acc).view(tokens, hidden // BLOCK, BLOCK)
    x = x.mul(hidden_states_scale.to(acc).t().unsqueeze(-1)).view(tokens, hidden)

    scores = 1.0 / (1.0 + torch.exp(-routing_logits.to(acc)))
    chosen = _select(scores, routing_bias.to(acc))
    onehot = torch.zeros_like(scores).scatter_(1, chosen, 1.0)
    weight = scores * onehot
    weight = weight / (weight.sum(dim=1, keepdim=True) + 1e-20) * routed_scaling_factor

    out = torch.zeros(tokens, hidden, dtype=acc, device=hidden_states.device)
    for e in range(gemm1_weights.shape[0]):
        expert = local_expert_offset + e
        rows = (chosen == expert).any(dim=1).nonzero().squeeze(1)
        if rows.numel() == 0:
            continue
        h = x.index_select(0, rows).matmul(_dequant(gemm1_weights[e], gemm1_weights_scale[e], acc).t())
        up, gate = h[:, :inter], h[:, inter:]
        act = gate / (1.0 + torch.exp(-gate)) * up
        y = act.matmul(_dequant(gemm2_weights[e], gemm2_weights_scale[e], acc).t())
        out.index_add_(0, rows, y * weight[rows, expert].unsqueeze(1))
    return out.to(routing_bias.dtype)


def _gaps(routing_logits, routing_bias):
    """Per token, the smaller of the 4th-5th group-score gap and the 8th-9th
    biased-score gap inside the kept groups (fp32, as the redraw rule)."""
    biased = 1.0 / (1.0 + torch.exp(-routing_logits.float())) + routing_bias.float()
    mask, group_score = _group_pick(biased)
    g = group_score.sort(dim=1, descending=True).values
    s = biased.masked_fill(~mask, torch.finfo(torch.float32).min).sort(dim=1, descending=True).values
    return torch.minimum(g[:, GROUPS_KEPT - 1] - g[:, GROUPS_KEPT], s[:, TOP_K - 1] - s[:, TOP_K])


def inputs_ok(routing_logits, routing_bias, *rest):
    return bool((_gaps(routing_logits, routing_bias) >= MARGIN).all())


def make_inputs(tokens, hidden, intermediate, experts, local_experts, *, seed, device="cuda"):
    assert experts == 256 and LOCAL_EXPERT_OFFSET + local_experts <= experts
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    def logits(n):
        return (randn(n, experts) * LOGIT_STD + LOGIT_MEAN).to(torch.bfloat16).to(torch.float32)

    routing_bias = torch.full((experts,), BIAS_LOW, dtype=torch.bfloat16)
    routing_bias[list(BIAS_HIGH_IDS)] = BIAS_HIGH
    routing_bias = routing_bias.to(device)
    routing_logits = logits(tokens)
    for _ in range(16):   # redraw the tokens whose routing is nearly tied
        tied = _gaps(routing_logits, routing_bias) < MARGIN
        if not bool(tied.any()):
            break
        routing_logits[tied] = logits(int(tied.sum()))
    fp8 = torch.float8_e4m3fn
    hidden_states = randn(tokens, hidden).to(fp8)
    hidden_states_scale = rand(hidden // BLOCK, tokens)
    gemm1_weights = randn(local_experts, 2 * intermediate, hidden).to(fp8)
    gemm1_weights_scale = rand(local_experts, 2 * intermediate // BLOCK, hidden // BLOCK)
    gemm2_weights = randn(local_experts, hidden, intermediate).to(fp8)
    gemm2_weights_scale = rand(local_experts, hidden // BLOCK, intermediate // BLOCK)
    return (routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
            gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, LOCAL_EXPERT_OFFSET,
            ROUTED_SCALING_FACTOR)
