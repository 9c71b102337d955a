"""Problem 37: backward of a GELU MLP, fp32 (SOL-ExecBench).

Forward: out = fc2( gelu( fc1(x) ) ), width 2048, intermediate 8192.
Given grad_out = dL/d(out), returns the 5 gradients
    (grad_x, grad_w1, grad_b1, grad_w2, grad_b2),
computed with torch.autograd.
"""
import torch
import torch.nn.functional as F


def forward(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def reference(x, w1, b1, w2, b2, grad_out):
    with torch.enable_grad():
        params = [t.detach().requires_grad_(True) for t in (x, w1, b1, w2, b2)]
        out = forward(*params)
        grads = torch.autograd.grad(out, params, grad_out)
    return tuple(grads)


def make_inputs(batch, seq, dim, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, dim)
    w1 = draw(intermediate, dim, scale=dim ** -0.5)
    b1 = draw(intermediate, scale=0.1)
    w2 = draw(dim, intermediate, scale=intermediate ** -0.5)
    b2 = draw(dim, scale=0.1)
    grad_out = draw(batch, seq, dim)
    return x, w1, b1, w2, b2, grad_out
