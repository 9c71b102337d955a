"""Problem 33: pre-norm SwiGLU MLP sub-layer with its residual connection
(Llama-3.1-405B widths, SOL-ExecBench).

    out = x + W_down( silu(gate) * up ),  [gate | up] = RMSNorm(x) W_gate_up^T

hidden 16,384, intermediate 53,248; gate and up projections are one fused
weight [2 * intermediate, hidden] (gate rows first), as serving stacks store it.
"""
import torch
import torch.nn.functional as F

EPS = 1e-5  # Llama-3.1's rms_norm_eps


def reference(x, norm_weight, w_gate_up, w_down):
    acc = torch.promote_types(x.dtype, torch.float32)
    h = x.to(acc)
    normed = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * norm_weight.to(acc)
    gate, up = F.linear(normed.to(x.dtype), w_gate_up).chunk(2, dim=-1)
    act = (F.silu(gate.to(acc)) * up.to(acc)).to(x.dtype)
    return (h + F.linear(act, w_down).to(acc)).to(x.dtype)


def make_inputs(batch, seq, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return (shift + scale * t).to(torch.bfloat16)
    x = draw(batch, seq, hidden)
    norm_weight = draw(hidden, scale=0.1, shift=1.0)
    w_gate_up = draw(2 * intermediate, hidden, scale=hidden ** -0.5)
    w_down = draw(hidden, intermediate, scale=intermediate ** -0.5)
    return x, norm_weight, w_gate_up, w_down
