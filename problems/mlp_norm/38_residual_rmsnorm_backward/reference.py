"""Problem 38: backward of residual add + RMSNorm (SOL-ExecBench).

Forward: h = x + residual, out = h / rms(h) * weight (rms over the last
dimension; h and the norm in fp32). Given grad_out = dL/d(out), returns
    (grad_hidden, grad_weight)
where grad_hidden = dL/dx = dL/d(residual) (the two are equal, so it is
returned once). Computed with torch.autograd. 64 x 8192 tokens, width 2560.
"""
import torch

EPS = 1e-6  # chosen: the catalog does not give it


def forward(h, weight):
    acc = torch.promote_types(h.dtype, torch.float32)
    out = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.to(acc)
    return out.to(weight.dtype)


def reference(x, residual, weight, grad_out):
    acc = torch.promote_types(x.dtype, torch.float32)
    # d(out)/dx = d(out)/d(residual) = d(out)/dh: the sum is the autograd leaf
    # (no extra copy of x at float64 size).
    h = x.to(acc) + residual.to(acc)
    with torch.enable_grad():
        h.requires_grad_(True)
        weight_ = weight.detach().requires_grad_(True)
        out = forward(h, weight_)
        grad_h, grad_weight = torch.autograd.grad(out, (h, weight_), grad_out)
    return grad_h.to(x.dtype), grad_weight


def make_inputs(batch, seq, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return (shift + scale * t).to(torch.bfloat16)
    x = draw(batch, seq, hidden)
    residual = draw(batch, seq, hidden, scale=2.0)
    weight = draw(hidden, scale=0.1, shift=1.0)
    grad_out = draw(batch, seq, hidden)
    return x, residual, weight, grad_out
