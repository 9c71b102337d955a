"""Problem 34: SwiGLU MLP backward, Hermes (Llama-style MLP), bf16
(SOL-ExecBench recipe).

Forward (not recomputed; its activations are inputs):
    gate = x Wg^T,  up = x Wu^T,  act = silu(gate),  y = (act * up) Wd^T
Given grad_output = dL/dy and the saved x (hidden_states), gate, up and act,
returns (grad_hidden_states, grad_gate_weight, grad_up_weight,
grad_down_weight):
    g_inter = grad_output Wd                    g_up   = g_inter * act
    g_act   = g_inter * up                      g_gate = g_act * silu'(gate)   (in compute_dtype)
    grad_down = grad_output^T (act * up)        grad_gate = g_gate^T x,  grad_up = g_up^T x
    grad_hidden_states = g_gate Wg + g_up Wu
Matmuls and products in the input dtype; silu' = s (1 + gate (1 - s)),
s = sigmoid(gate), in compute_dtype = promote_types(grad_output.dtype, fp32),
cast back. The three activations are independent draws (as in the public
problem), so act is not silu(gate).
"""
import math

import torch


def reference(grad_output, hidden_states, gate_output, up_output, silu_output,
              gate_proj_weight, up_proj_weight, down_proj_weight):
    hidden_size = hidden_states.shape[-1]
    intermediate_size = gate_output.shape[-1]
    dtype = grad_output.dtype
    grad_2d = grad_output.reshape(-1, hidden_size)
    x_2d = hidden_states.reshape(-1, hidden_size)
    gate_2d = gate_output.reshape(-1, intermediate_size)
    up_2d = up_output.reshape(-1, intermediate_size)
    act_2d = silu_output.reshape(-1, intermediate_size)

    grad_down_weight = grad_2d.t() @ (act_2d * up_2d)
    grad_inter = grad_2d @ down_proj_weight
    grad_up = grad_inter * act_2d
    grad_act = grad_inter * up_2d

    compute_dtype = torch.promote_types(grad_output.dtype, torch.float32)
    sig = torch.sigmoid(gate_2d.to(compute_dtype))
    gate_wide = gate_2d.to(compute_dtype)
    silu_grad = sig * (1.0 + gate_wide * (1.0 - sig))
    grad_gate = (grad_act.to(compute_dtype) * silu_grad).to(dtype)

    grad_gate_weight = grad_gate.t() @ x_2d
    grad_up_weight = grad_up.t() @ x_2d
    grad_hidden = grad_gate @ gate_proj_weight + grad_up @ up_proj_weight
    return grad_hidden.reshape(hidden_states.shape), grad_gate_weight, grad_up_weight, grad_down_weight


def make_inputs(batch, seq, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    return [
        draw(batch, seq, hidden),
        draw(batch, seq, hidden),
        draw(batch, seq, intermediate),
        draw(batch, seq, intermediate),
        draw(batch, seq, intermediate),
        draw(intermediate, hidden) / math.sqrt(hidden),
        draw(intermediate, hidden) / math.sqrt(hidden),
        draw(hidden, intermediate) / math.sqrt(intermediate),
    ]
