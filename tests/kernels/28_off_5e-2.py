import torch


def rmsnorm(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()


def solve(hidden_states, residual, weight):
    # 5e-2 relative error: beyond the bf16 allowance, must fail on values.
    return (rmsnorm(hidden_states, residual, weight) * 1.05).to(hidden_states.dtype)