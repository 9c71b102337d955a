"""Problem 33: residual add, RMSNorm and SwiGLU MLP in bf16 (SOL-ExecBench).

    h   = x + residual
    n   = RMSNorm(h) (mean of squares in fp32, eps an input, weight in bf16)
    out = W_down( silu(n W_gate^T) * (n W_up^T) )

batch 64 x 128 tokens, hidden 16,384, intermediate 53,248; separate gate and
up weights.
"""
import torch
import torch.nn.functional as F

EPS = 1e-5  # the visible workload's eps, passed as the last input


def reference(x, residual, norm_weight, w_gate, w_up, w_down, eps):
    h = x + residual
    input_dtype = h.dtype
    compute_dtype = torch.promote_types(input_dtype, torch.float32)
    hw = h.to(compute_dtype)
    variance = hw.pow(2).mean(dim=-1, keepdim=True)
    hw = hw * torch.rsqrt(variance + eps)
    normed = norm_weight * hw.to(input_dtype)
    gate = F.linear(normed, w_gate)
    up = F.linear(normed, w_up)
    act = F.silu(gate) * up
    return F.linear(act, w_down)


def make_inputs(batch, seq, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
        return t * scale + shift if (scale != 1.0 or shift != 0.0) else t
    x = draw(batch, seq, hidden)
    residual = draw(batch, seq, hidden)
    norm_weight = draw(hidden, scale=0.1, shift=1.0)
    w_gate = draw(intermediate, hidden) / hidden ** 0.5
    w_up = draw(intermediate, hidden) / hidden ** 0.5
    w_down = draw(hidden, intermediate) / intermediate ** 0.5
    return x, residual, norm_weight, w_gate, w_up, w_down, EPS
