"""Problem 38: backward of residual add + RMSNorm, Qwen3-4B shape
(SOL-ExecBench), bf16.

Forward (not computed here): h = x + residual, normalized = h * rstd with
rstd = 1 / sqrt(mean(h^2) + eps), out = normalized * weight. Given the saved
normalized and rstd and grad_output = dL/d(out), returns
    (grad_hidden, grad_residual, grad_weight)
where the gradient w.r.t. the summed input reaches x and residual alike, so the
first two outputs are the same values. 64 x 8192 tokens, width 2560.
"""
import torch


def reference(grad_output, normalized, rstd, weight):
    acc = torch.promote_types(grad_output.dtype, torch.float32)
    dy = grad_output.to(acc)
    n = normalized.to(acc)
    grad_weight = (dy * n).sum(dim=(0, 1))
    g = dy * weight.to(acc)
    proj = (g * n).mean(dim=-1, keepdim=True)
    grad_hidden = (rstd.to(acc) * (g - n * proj)).to(grad_output.dtype)
    return grad_hidden, grad_hidden.clone(), grad_weight.to(grad_output.dtype)


def make_inputs(batch, seq, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf = torch.bfloat16
    x = torch.randn((batch, seq, hidden), generator=g, device=device, dtype=torch.float32).to(bf)
    # per-token magnitudes in [0.5, 2.0)
    x = x * (torch.rand((batch, seq, 1), generator=g, device=device, dtype=torch.float32).to(bf) * 1.5 + 0.5)
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    normalized = x * rstd
    weight = torch.randn((hidden,), generator=g, device=device, dtype=torch.float32).to(bf) * 0.1 + 1.0
    grad_output = (torch.randn((batch, seq, hidden), generator=g, device=device, dtype=torch.float32).to(bf)
                   + 0.5 * normalized * weight).to(bf)
    return grad_output, normalized, rstd, weight
