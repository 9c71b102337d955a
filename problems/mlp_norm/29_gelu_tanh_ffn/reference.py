"""Problem 29: tanh-approximate GELU feed-forward block in fp32 (GPT-2 style,
SOL-ExecBench).

gelu_tanh(x W1^T + b1) W2^T + b2: batch 32 x 512 tokens, model width
3072, hidden width 12,288 (4x).
"""
import math

import torch


def gelu_tanh(x):
    # 0.5 x (1 + tanh( sqrt(2/pi) (x + 0.044715 x^3) )), written out.
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def reference(x, w1, b1, w2, b2):
    h = gelu_tanh(x @ w1.T + b1)
    return h @ w2.T + b2


def make_inputs(batch, seq, dim, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, dim)
    w1 = draw(hidden, dim, scale=dim ** -0.5)
    b1 = draw(hidden)
    w2 = draw(dim, hidden, scale=hidden ** -0.5)
    b2 = draw(dim)
    return x, w1, b1, w2, b2
