"""Problem 51: gpt-oss sparse expert dispatch / combine with clamped GLU
experts, fp32 (SOL-ExecBench).

Routing is given: router_indices [tokens, 4] (the experts of each token) and
routing_weights [tokens, experts] (a weight for every expert; only the
selected ones are used). For every expert that some token selected:
  gu    = x_e @ W_gu[e] + b_gu[e]            W_gu [experts, hidden, 2*inter]
  gate  = gu[..., 0::2] clamped above at 7   (even columns are gate,
  up    = gu[..., 1::2] clamped to [-7, 7]    odd columns are up)
  y     = ((up + 1) * gate * sigmoid(1.702 * gate)) @ W_d[e] + b_d[e]
  out[tokens of e] += y * routing_weights[tokens of e, e]
"""
import torch

TOP_K = 4
GLU_ALPHA = 1.702
GLU_LIMIT = 7.0


def reference(hidden_states, router_indices, routing_weights,
              gate_up_projection, gate_up_projection_bias, down_projection, down_projection_bias):
    experts = gate_up_projection.shape[0]
    out = torch.zeros_like(hidden_states)
    # selected[e, k, t]: token t picked expert e in its k-th slot
    selected = torch.nn.functional.one_hot(router_indices, num_classes=experts).permute(2, 1, 0)
    hit = (selected.sum(dim=(-1, -2)) > 0).nonzero()
    for e_tensor in hit:
        e = int(e_tensor[0])
        _, tokens = torch.where(selected[e])
        x = hidden_states[tokens]
        gu = x @ gate_up_projection[e] + gate_up_projection_bias[e]
        gate = gu[..., 0::2].clamp(max=GLU_LIMIT)
        up = gu[..., 1::2].clamp(min=-GLU_LIMIT, max=GLU_LIMIT)
        h = (up + 1) * (gate * torch.sigmoid(gate * GLU_ALPHA))
        y = h @ down_projection[e] + down_projection_bias[e]
        out.index_add_(0, tokens, y * routing_weights[tokens, e, None])
    return out


def make_inputs(tokens, hidden, intermediate, experts, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    hidden_states = draw(tokens, hidden)
    router_logits = draw(tokens, experts)
    router_indices = torch.topk(router_logits, TOP_K, dim=-1).indices
    routing_weights = torch.softmax(router_logits, dim=-1)
    return (hidden_states, router_indices, routing_weights,
            draw(experts, hidden, 2 * intermediate) * 0.03,
            draw(experts, 2 * intermediate) * 0.5,
            draw(experts, intermediate, hidden) * DOWN_STD,
            draw(experts, hidden) * DOWN_BIAS_STD)


DOWN_STD = 0.02       # reconstructed: the recipe hides this 3-token literal
DOWN_BIAS_STD = 0.1   # reconstructed likewise
