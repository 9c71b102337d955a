"""Problem 32: SwiGLU MLP in fp32 (SOL-ExecBench style).

down( silu(x @ W_gate^T) * (x @ W_up^T) ): the feed-forward block of a
LLaMA-style decoder, batch 64 x 128 tokens, hidden 1024, intermediate 4096.
"""
import torch


def reference(x, w_gate, w_up, w_down):
    gate = torch.nn.functional.silu(x @ w_gate.T)
    up = x @ w_up.T
    return (gate * up) @ w_down.T


def make_inputs(batch, seq, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden)
    w_gate = draw(intermediate, hidden, scale=hidden ** -0.5)
    w_up = draw(intermediate, hidden, scale=hidden ** -0.5)
    w_down = draw(hidden, intermediate, scale=intermediate ** -0.5)
    return x, w_gate, w_up, w_down
