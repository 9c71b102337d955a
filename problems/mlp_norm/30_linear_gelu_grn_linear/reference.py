"""Problem 30: ConvNeXt-V2 pointwise MLP with Global Response Normalisation,
fp32 (SOL-ExecBench).

Channels-last feature map [batch, H, W, C]: Linear(C -> 4C), exact GELU, GRN
over the spatial dimensions, Linear(4C -> C). GRN:
    Gx = ||x||_2 over (H, W) per (sample, channel)
    Nx = Gx / (mean of Gx over channels + eps)
    y  = gamma * (x * Nx) + beta + x
"""
import torch
import torch.nn.functional as F

EPS = 1e-6  # the visible workload's eps, passed as the last input


def reference(x, w1, b1, gamma, beta, w2, b2, eps):
    h = F.gelu(x @ w1.T + b1)
    gx = h.pow(2).sum(dim=(1, 2), keepdim=True).sqrt()
    nx = gx / (gx.mean(dim=-1, keepdim=True) + eps)
    h = gamma * (h * nx) + beta + h
    return h @ w2.T + b2


def make_inputs(batch, height, width, dim, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, height, width, dim)
    w1 = draw(hidden, dim, scale=dim ** -0.5)
    b1 = draw(hidden)
    gamma = draw(1, 1, 1, hidden, scale=hidden ** -0.5)
    beta = draw(1, 1, 1, hidden)
    w2 = draw(dim, hidden, scale=hidden ** -0.5)
    b2 = draw(dim)
    return x, w1, b1, gamma, beta, w2, b2, EPS
