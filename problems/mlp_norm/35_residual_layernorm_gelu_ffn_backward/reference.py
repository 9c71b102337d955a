"""Problem 35: backward of a pre-norm transformer FFN sub-layer, fp32
(SOL-ExecBench).

Forward: out = x + fc2( gelu( fc1( LayerNorm(x) ) ) ), width 512, FFN 2048.
Given grad_out = dL/d(out), returns the 7 gradients
    (grad_x, grad_ln_weight, grad_ln_bias, grad_w1, grad_b1, grad_w2, grad_b2),
computed with torch.autograd.
"""
import torch
import torch.nn.functional as F

EPS = 1e-5  # torch.nn.LayerNorm's default


def forward(x, ln_weight, ln_bias, w1, b1, w2, b2):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    normed = (x - mean) * torch.rsqrt(var + EPS) * ln_weight + ln_bias
    return x + F.linear(F.gelu(F.linear(normed, w1, b1)), w2, b2)


def reference(x, ln_weight, ln_bias, w1, b1, w2, b2, grad_out):
    with torch.enable_grad():
        params = [t.detach().requires_grad_(True) for t in (x, ln_weight, ln_bias, w1, b1, w2, b2)]
        out = forward(*params)
        grads = torch.autograd.grad(out, params, grad_out)
    return tuple(grads)


def make_inputs(batch, seq, dim, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        return shift + scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, dim, scale=2.0, shift=0.5)
    ln_weight = draw(dim, scale=0.1, shift=1.0)
    ln_bias = draw(dim, scale=0.1)
    w1 = draw(hidden, dim, scale=dim ** -0.5)
    b1 = draw(hidden, scale=0.1)
    w2 = draw(dim, hidden, scale=hidden ** -0.5)
    b2 = draw(dim, scale=0.1)
    grad_out = draw(batch, seq, dim)
    return x, ln_weight, ln_bias, w1, b1, w2, b2, grad_out
