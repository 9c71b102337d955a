"""Problem 37: backward of a two-layer tanh-GELU MLP with biases, fp32
(Step1X shape, SOL-ExecBench).

Forward (not recomputed here): h = x @ W1^T + b1, a = gelu_tanh(h),
out = a @ W2^T + b2, width 2048, intermediate 8192. From grad_output and the
saved x, h and a, returns the five gradients
    (grad_x, grad_w1, grad_b1, grad_w2, grad_b2).
The biases themselves are not needed (only their gradients are returned).
"""
import math

import torch

K0 = math.sqrt(2.0 / math.pi)
K1 = 0.044715


def gelu_tanh_grad(h):
    u = K0 * (h + K1 * h.pow(3))
    t = torch.tanh(u)
    return 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * K0 * (1.0 + 3.0 * K1 * h * h)


def reference(grad_output, x, w1, w2, pre_activation, activation):
    dim = x.shape[-1]
    inter = w1.shape[0]
    go = grad_output.reshape(-1, dim)
    x2 = x.reshape(-1, dim)
    h = pre_activation.reshape(-1, inter)
    a = activation.reshape(-1, inter)
    grad_w2 = go.t() @ a
    grad_b2 = go.sum(dim=0)
    grad_a = go @ w2
    grad_h = grad_a * gelu_tanh_grad(h)
    grad_w1 = grad_h.t() @ x2
    grad_b1 = grad_h.sum(dim=0)
    grad_x = (grad_h @ w1).reshape(x.shape)
    return grad_x, grad_w1, grad_b1, grad_w2, grad_b2


def make_inputs(batch, seq, dim, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    grad_output = draw(batch, seq, dim)
    x = draw(batch, seq, dim)
    w1 = draw(intermediate, dim) / math.sqrt(dim)
    w2 = draw(dim, intermediate) / math.sqrt(intermediate)
    pre_activation = draw(batch, seq, intermediate)
    activation = draw(batch, seq, intermediate)
    return grad_output, x, w1, w2, pre_activation, activation
