"""Attention vendored in torch doing the reduction: with all-zero queries and
keys every weight is 1/H, so scaled_dot_product_attention over the squares
returns their mean (flash / memory-efficient attention, or the math path's
cuBLAS batched GEMMs). GPU only: rejected, a vendor-library kernel."""
import torch
import torch.nn.functional as F


def solve(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    t, h = x.reshape(-1, x.shape[-1]).shape
    q = torch.zeros(t, 1, 1, 8, device=x.device, dtype=torch.bfloat16)
    k = torch.zeros(t, 1, h, 8, device=x.device, dtype=torch.bfloat16)
    v = (x * x).reshape(t, 1, h, 1).expand(t, 1, h, 8).to(torch.bfloat16)
    ms = F.scaled_dot_product_attention(q, k, v)[..., 0].float().reshape(*x.shape[:-1], 1)
    y = x * torch.rsqrt(ms + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
