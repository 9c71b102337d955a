"""Problem 31: GroupNorm in fp32 (Stable-Diffusion UNet shape, SOL-ExecBench).

[batch, channels, H, W] with 32 groups of channels/32 channels each: every
(sample, group) slab is normalised by its own mean and (biased) variance, then
scaled and shifted per channel.
"""
import torch

GROUPS = 32  # the UNet / ResNet convention (the catalog does not give it)
EPS = 1e-5   # torch.nn.GroupNorm's default


def reference(x, weight, bias):
    batch, channels, height, width = x.shape
    acc = torch.promote_types(x.dtype, torch.float32)
    h = x.to(acc).view(batch, GROUPS, -1)
    mean = h.mean(dim=-1, keepdim=True)
    var = (h - mean).pow(2).mean(dim=-1, keepdim=True)
    h = ((h - mean) * torch.rsqrt(var + EPS)).view(batch, channels, height, width)
    y = h * weight.to(acc).view(1, channels, 1, 1) + bias.to(acc).view(1, channels, 1, 1)
    return y.to(x.dtype)


def make_inputs(batch, channels, height, width, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    # Per-channel offsets and scales, so that group statistics differ.
    offset = draw(1, channels, 1, 1)
    scale = 1.0 + 0.5 * draw(1, channels, 1, 1).abs()
    x = offset + scale * draw(batch, channels, height, width)
    weight = 1.0 + 0.1 * draw(channels)
    bias = 0.1 * draw(channels)
    return x, weight, bias
