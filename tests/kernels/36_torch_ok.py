# A correct torch implementation of problem 36 (RMSNorm), for CPU tests.
import torch


def solve(hidden_states, weight):
    x = hidden_states.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    return y.to(hidden_states.dtype)
