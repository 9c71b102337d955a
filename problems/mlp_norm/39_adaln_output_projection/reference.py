"""Problem 39: DiT-style final layer, fp32 (SOL-ExecBench).

AdaLN modulation from a conditioning vector, then the output projection:
    shift, scale = Linear(silu(c)).chunk(2)
    y   = LayerNorm(x, no affine) * (1 + scale) + shift    (per sample)
    out = y @ W_out^T + b_out                              (3072 -> 64)
"""
import torch
import torch.nn.functional as F

EPS = 1e-6  # DiT's final-layer LayerNorm epsilon


def reference(x, c, w_mod, b_mod, w_out, b_out):
    shift, scale = F.linear(F.silu(c), w_mod, b_mod).chunk(2, dim=-1)
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + EPS)
    y = y * (1 + scale[:, None, :]) + shift[:, None, :]
    return F.linear(y, w_out, b_out)


def make_inputs(batch, seq, hidden, out_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        return shift + scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden, scale=2.0, shift=0.5)
    c = draw(batch, hidden)
    w_mod = draw(2 * hidden, hidden, scale=hidden ** -0.5)
    b_mod = draw(2 * hidden, scale=0.1)
    w_out = draw(out_dim, hidden, scale=hidden ** -0.5)
    b_out = draw(out_dim, scale=0.1)
    return x, c, w_mod, b_mod, w_out, b_out
