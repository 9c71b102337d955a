"""Problem 46: router dispatch backward, Qwen3-Coder-30B-A3B MoE router
(128 experts, top-8, normalised top-k probabilities), bf16 (SOL-ExecBench
recipe).

Forward (its saved state is an input):
    router_logits   = hidden_states gate_weight^T                      [T, E]
    routing_probs   = softmax(router_logits, fp32)                     [T, E]
    routing_weights, selected_experts = topk(routing_probs, 8)         [T, 8]
    routing_weights_sum = routing_weights.sum(-1, keepdim)             [T, 1]
    weights  = routing_weights / routing_weights_sum                   (norm_topk_prob)
    expert_mask = one_hot(selected_experts, E).permute(2, 1, 0)        [E, 8, T]
Backward from three upstream gradients (of weights [T, 8], of expert_mask
[E, 8, T], of router_logits [T, E]) to (grad_hidden_states, grad_gate_weight):
    normalisation:  g_topk = (g_w - sum_k g_w * weights) / routing_weights_sum
    expert mask (straight-through onto the selected probabilities):
                    g_topk += g_mask[selected_experts[t, k], k, t]
    top-k:          g_probs = scatter of g_topk at selected_experts    [T, E]
    softmax:        g_logits = probs * (g_probs - sum_e g_probs * probs) + grad_router_logits
    projection:     grad_hidden_states = g_logits W,  grad_gate_weight = g_logits^T hidden_states
in the dtype of routing_probs (fp32); the two GEMMs in the input dtype.
"""
import torch


def reference(hidden_states, gate_weight, routing_probs, selected_experts, routing_weights_sum,
              grad_routing_weights, grad_expert_mask, grad_router_logits):
    dtype = hidden_states.dtype
    topk_probs = routing_probs.gather(1, selected_experts)
    grad_routing_weights_wide = grad_routing_weights.to(routing_probs.dtype)

    weights_sum = routing_weights_sum.to(routing_probs.dtype)
    normalized = topk_probs / weights_sum
    dot = (grad_routing_weights_wide * normalized).sum(dim=-1, keepdim=True)
    grad_topk = (grad_routing_weights_wide - dot) / weights_sum

    grad_mask = grad_expert_mask.permute(2, 1, 0).to(routing_probs.dtype)          # [T, K, E]
    grad_topk = grad_topk + grad_mask.gather(2, selected_experts.unsqueeze(-1)).squeeze(-1)
    grad_probs = torch.zeros_like(routing_probs).scatter_add_(1, selected_experts, grad_topk)

    dot = (grad_probs * routing_probs).sum(dim=-1, keepdim=True)
    grad_logits = routing_probs * (grad_probs - dot) + grad_router_logits.to(routing_probs.dtype)
    grad_logits = grad_logits.to(dtype)

    grad_hidden_states = torch.matmul(grad_logits, gate_weight)
    grad_gate_weight = torch.matmul(grad_logits.t(), hidden_states)
    return grad_hidden_states, grad_gate_weight


def make_inputs(tokens, hidden, experts, top_k, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    def draw(*shape, scale=1.0):
        t = torch.randn(*shape, dtype=bf16, device=device, generator=g)
        return t * scale if scale != 1.0 else t
    hidden_states = draw(tokens, hidden)
    gate_weight = draw(experts, hidden, scale=0.02)
    router_logits = draw(tokens, experts)
    routing_probs = torch.softmax(router_logits.float(), dim=-1)
    routing_weights, selected_experts = torch.topk(routing_probs, top_k, dim=-1)
    routing_weights_sum = routing_weights.sum(dim=-1, keepdim=True)
    grad_routing_weights = draw(tokens, top_k, scale=0.1)
    grad_expert_mask = draw(experts, top_k, tokens, scale=0.1)
    grad_router_logits = draw(tokens, experts, scale=0.1)
    return [hidden_states, gate_weight, routing_probs, selected_experts, routing_weights_sum,
            grad_routing_weights, grad_expert_mask, grad_router_logits]
