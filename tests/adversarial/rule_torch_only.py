"""The reference's own torch operations and nothing else: correct, about as
fast as eager, and no DSL at all. GPU only (the CPU test mode checks no
run-time rule): rejected, "no <DSL> kernel ran during solve"."""
import torch


def solve(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
