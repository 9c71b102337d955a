"""Problem 31: GroupNorm with affine, fp32 (Stable Diffusion 1.5 shape,
SOL-ExecBench).

[batch, channels, H, W] in 32 groups of channels/32 channels: every (sample,
group) slab is normalised as (x - mean) / sqrt(biased var + eps), then scaled
and shifted per channel. eps is an input (a Python float), as in the public
problem.
"""
import torch

GROUPS = 32


def reference(x, weight, bias, eps):
    batch, channels, height, width = x.shape
    acc = torch.promote_types(x.dtype, torch.float32)
    h = x.reshape(batch, GROUPS, -1).to(acc)
    mean = h.mean(dim=-1, keepdim=True)
    var = h.var(dim=-1, keepdim=True, unbiased=False)
    h = ((h - mean) / torch.sqrt(var + eps)).reshape(batch, channels, height, width)
    y = h * weight.to(acc).reshape(1, channels, 1, 1) + bias.to(acc).reshape(1, channels, 1, 1)
    return y.to(x.dtype)


def make_inputs(batch, channels, height, width, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, channels, height, width)
    weight = 1 + 0.1 * draw(channels)
    bias = 0.1 * draw(channels)
    return x, weight, bias, float(eps)
