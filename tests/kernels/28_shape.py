import torch


def rmsnorm(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()


def solve(hidden_states, residual, weight):
    out = rmsnorm(hidden_states, residual, weight).to(hidden_states.dtype)
    return out[:, :-1]  # wrong output shape