# A correct torch implementation of problem 28 (fused add + RMSNorm), for
# exercising the judge on the CPU. Not a DSL kernel.
import torch


def solve(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
