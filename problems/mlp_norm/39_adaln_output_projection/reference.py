"""Problem 39: AdaLN-modulated output projection of a Flux Kontext
transformer (its norm_out + proj_out), fp32 (SOL-ExecBench).

    scale, shift = Linear(silu(c)).chunk(2)        (scale first, as in
                                                    AdaLayerNormContinuous)
    y   = LayerNorm(x, no affine, eps) * (1 + scale) + shift   (per sample)
    out = y @ W_out^T + b_out                      (3072 -> 64)

eps is an input (a Python float), as in the public problem.
"""
import torch
import torch.nn.functional as F


def reference(x, c, w_mod, b_mod, w_out, b_out, eps):
    scale, shift = F.linear(F.silu(c), w_mod, b_mod).chunk(2, dim=-1)
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + eps)
    y = y * (1 + scale[:, None, :]) + shift[:, None, :]
    return F.linear(y, w_out, b_out)


def make_inputs(batch, seq, hidden, out_dim, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden)
    c = draw(batch, hidden)
    w_mod = draw(2 * hidden, hidden) / hidden ** 0.5
    b_mod = draw(2 * hidden)
    w_out = draw(out_dim, hidden) / hidden ** 0.5
    b_out = draw(out_dim)
    return x, c, w_mod, b_mod, w_out, b_out, float(eps)
