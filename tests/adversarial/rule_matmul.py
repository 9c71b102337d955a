"""The heavy part through cuBLAS: the mean of squares as a matrix-vector
product (torch.matmul), the rest eager. GPU only: rejected, a vendor-library
kernel (cuBLAS / cuBLASLt) during solve. (The static checks do not see
torch.matmul: it is ordinary torch.)"""
import torch


def solve(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    ones = torch.full((x.shape[-1], 1), 1.0 / x.shape[-1], device=x.device, dtype=x.dtype)
    ms = torch.matmul(x * x, ones)  # [T, 1]: cuBLAS
    y = x * torch.rsqrt(ms + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
