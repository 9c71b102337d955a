"""Problem 32: SwiGLU MLP in fp32 (SOL-ExecBench style).

One fused gate-up projection, SiLU gating, then the down projection:
down( silu(x Wg^T) * (x Wu^T) ) with [Wg; Wu] stored as one [2I, H] matrix,
batch 64 x 128 tokens, hidden 1024, intermediate 4096.
"""
import torch


def reference(x, w_gate_up, w_down):
    gate_up = x @ w_gate_up.T
    gate, up = gate_up.chunk(2, dim=-1)
    h = torch.nn.functional.silu(gate) * up
    return h @ w_down.T


def make_inputs(batch, seq, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden)
    w_gate_up = draw(2 * intermediate, hidden, scale=hidden ** -0.5)
    w_down = draw(hidden, intermediate, scale=intermediate ** -0.5)
    return x, w_gate_up, w_down
