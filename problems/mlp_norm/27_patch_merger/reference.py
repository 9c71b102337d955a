"""Problem 27: vision patch merger (Qwen2-VL style, SOL-ExecBench).

The vision encoder's output tokens lie on a grid per image (row-major). They
are LayerNorm-ed, every 2x2 block of neighbouring tokens is concatenated into
one token of width 4 * dim, and a GELU MLP projects it to the language model's
width: 32,768 x 1536 -> 8,192 x 6144 -> 6144 -> 3584.
"""
import torch
import torch.nn.functional as F

EPS = 1e-6  # chosen: Qwen2-VL's merger LayerNorm uses 1e-6


def reference(x, ln_weight, ln_bias, w1, b1, w2, b2):
    images, height, width, dim = x.shape
    acc = torch.promote_types(x.dtype, torch.float32)
    # LayerNorm in (at least) fp32, result back in the activation dtype.
    h = x.to(acc)
    mean = h.mean(dim=-1, keepdim=True)
    var = (h - mean).pow(2).mean(dim=-1, keepdim=True)
    h = (h - mean) * torch.rsqrt(var + EPS) * ln_weight.to(acc) + ln_bias.to(acc)
    h = h.to(x.dtype)
    # 2x2 spatial merge: (i, j) blocks of rows 2i..2i+1, columns 2j..2j+1,
    # concatenated in the order (0,0), (0,1), (1,0), (1,1).
    h = h.view(images, height // 2, 2, width // 2, 2, dim)
    h = h.permute(0, 1, 3, 2, 4, 5).reshape(-1, 4 * dim)
    # GELU MLP (exact erf GELU), matmuls in the activation dtype.
    h = F.gelu(F.linear(h, w1, b1))
    return F.linear(h, w2, b2)


def make_inputs(images, height, width, dim, out_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return (shift + scale * t).to(torch.bfloat16)
    merged = 4 * dim
    x = draw(images, height, width, dim, scale=2.0, shift=0.5)
    ln_weight = draw(dim, scale=0.1, shift=1.0)
    ln_bias = draw(dim, scale=0.1)
    w1 = draw(merged, merged, scale=merged ** -0.5)
    b1 = draw(merged, scale=0.1)
    w2 = draw(out_dim, merged, scale=merged ** -0.5)
    b2 = draw(out_dim, scale=0.1)
    return x, ln_weight, ln_bias, w1, b1, w2, b2
