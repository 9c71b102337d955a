"""Problem 45: capacity-factor expert dispatch, Qwen3-Coder-480B MoE layer,
bf16 (SOL-ExecBench recipe).

Routing is an input: selected_experts [tokens, top_k] (int64) and
routing_weights [tokens, top_k] (bf16). Every expert has a buffer of
capacity = ceil(CAPACITY_FACTOR * tokens * top_k / experts) slots. The
(token, k) assignments are dispatched in token order (a stable sort of the
flattened expert ids); assignments beyond an expert's capacity are dropped.
Each expert runs a SwiGLU MLP on its buffer with weights laid out
[E, H, I] / [E, I, H] (x @ W), in the input dtype, and the surviving
results are combined back weighted by their routing weights (not
renormalised); the combine is accumulated in fp32 and returned in the input
dtype.
"""
import math

import torch
import torch.nn.functional as F

CAPACITY_FACTOR = 1.25   # hidden in the recipe; GShard / Switch style capacity factor, reconstructed


def expert_capacity(tokens, top_k, experts):
    return int(math.ceil(CAPACITY_FACTOR * tokens * top_k / experts))


def reference(hidden_states, selected_experts, routing_weights, expert_gate_weights, expert_up_weights,
              expert_down_weights):
    num_tokens, hidden_size = hidden_states.shape
    num_experts = expert_gate_weights.shape[0]
    top_k = selected_experts.shape[1]
    capacity = expert_capacity(num_tokens, top_k, num_experts)

    flat_experts = selected_experts.reshape(-1)
    flat_weights = routing_weights.reshape(-1)
    flat_tokens = torch.arange(num_tokens, device=hidden_states.device).repeat_interleave(top_k)
    sorted_experts, order = flat_experts.sort(stable=True)
    sorted_tokens = flat_tokens[order]
    sorted_weights = flat_weights[order]
    counts = torch.bincount(sorted_experts, minlength=num_experts)
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(sorted_experts.numel(), device=hidden_states.device) - starts[sorted_experts]
    keep = position < capacity
    kept_experts, kept_position = sorted_experts[keep], position[keep]
    kept_tokens, kept_weights = sorted_tokens[keep], sorted_weights[keep]

    buffer = hidden_states.new_zeros(num_experts, capacity, hidden_size)
    buffer[kept_experts, kept_position] = hidden_states[kept_tokens]
    gate = torch.bmm(buffer, expert_gate_weights)
    up = torch.bmm(buffer, expert_up_weights)
    expert_out = torch.bmm(F.silu(gate) * up, expert_down_weights)

    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    combined = expert_out[kept_experts, kept_position].to(acc) * kept_weights.to(acc)[:, None]
    output = torch.zeros(num_tokens, hidden_size, dtype=acc, device=hidden_states.device)
    output.index_add_(0, kept_tokens, combined)
    return output.to(hidden_states.dtype)


def make_inputs(tokens, hidden, intermediate, experts, top_k, popularity_std, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    hidden_states = torch.randn(tokens, hidden, dtype=bf16, device=device, generator=g)
    expert_popularity = torch.randn(experts, device=device, generator=g) * popularity_std
    gumbel = -torch.log(-torch.log(torch.rand(tokens, experts, device=device, generator=g)))
    selected_experts = (expert_popularity + gumbel).argsort(dim=-1, descending=True)[:, :top_k]
    routing_weights = torch.randn(tokens, top_k, dtype=bf16, device=device, generator=g)
    routing_weights = torch.softmax(routing_weights.float(), dim=-1).to(bf16)
    expert_gate_weights = (torch.randn(experts, hidden, intermediate, device=device, generator=g,
                                       dtype=bf16) / math.sqrt(hidden))
    expert_up_weights = (torch.randn(experts, hidden, intermediate, device=device, generator=g,
                                     dtype=bf16) / math.sqrt(hidden))
    expert_down_weights = (torch.randn(experts, intermediate, hidden, device=device, generator=g,
                                       dtype=bf16) / math.sqrt(intermediate))
    return [hidden_states, selected_experts, routing_weights, expert_gate_weights, expert_up_weights,
            expert_down_weights]
