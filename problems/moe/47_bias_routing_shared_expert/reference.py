"""Problem 47: ERNIE 4.5 MoE block: softmax router with a correction bias, routed + shared SwiGLU experts.

The router logits are computed in the gate weight's dtype (fp32), softmax over
the 64 experts; the top-8 are chosen on probability + e_score_correction_bias
but weighted by their unbiased probabilities, renormalised by
max(sum, norm_min) and rounded to the activation dtype. Every expert (routed
and the always-on shared one) is a SwiGLU MLP evaluated in the activation
dtype (bf16): each projection's result, the SiLU, the product and the weighted
expert output are rounded to bf16 as in the published eager code, and the
routed outputs are accumulated in bf16 in ascending expert order before the
shared expert's output is added. Returns (out [B, S, H], router_logits [B*S, E]).
"""
import math

import torch
import torch.nn.functional as F

TOP_K = 8            # experts per token
MARGIN = 1e-4        # DECISION_MARGIN: gap between the 8th and 9th selection score
REDRAW_LIMIT = 16    # rounds of redrawing near-tied tokens
NORM_MIN = 1e-10     # the last input: floor of the routing-weight sum


def _router(hidden_flat, gate_weight, e_score_correction_bias):
    """(router logits, softmax probabilities, selection scores = probabilities + bias)."""
    logits = hidden_flat.to(gate_weight.dtype) @ gate_weight.T
    probs = torch.softmax(logits, dim=-1)
    return logits, probs, probs + e_score_correction_bias


def _gap(scores):
    v = scores.topk(TOP_K + 1, dim=-1).values
    return v[:, TOP_K - 1] - v[:, TOP_K]


def _swiglu(x, w_gate, w_up, w_down):
    """SwiGLU in x's dtype: every intermediate is rounded like an eager bf16 MLP."""
    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def reference(hidden_states, gate_weight, e_score_correction_bias, gate_proj, up_proj, down_proj,
              shared_gate_proj, shared_up_proj, shared_down_proj, norm_min):
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    shared = _swiglu(x, shared_gate_proj, shared_up_proj, shared_down_proj)

    logits, probs, scores = _router(x, gate_weight, e_score_correction_bias)
    top_i = scores.topk(TOP_K, dim=-1).indices
    top_w = probs.gather(1, top_i)
    top_w = (top_w / top_w.sum(dim=-1, keepdim=True).clamp(min=norm_min)).to(x.dtype)

    out = torch.zeros_like(x)
    for e in range(gate_weight.shape[0]):          # ascending expert id, accumulated in x's dtype
        tok, slot = (top_i == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        y = _swiglu(x[tok], gate_proj[e], up_proj[e], down_proj[e])
        out.index_add_(0, tok, y * top_w[tok, slot].unsqueeze(1))
    out = out + shared
    return out.reshape(shape), logits


def inputs_ok(hidden_states, gate_weight, e_score_correction_bias, *rest):
    x = hidden_states.reshape(-1, hidden_states.shape[-1])
    _, _, s64 = _router(x.double(), gate_weight.double(), e_score_correction_bias.double())
    _, _, s32 = _router(x.float(), gate_weight.float(), e_score_correction_bias.float())
    same = torch.equal(s64.topk(TOP_K, dim=-1).indices.sort(dim=-1).values,
                       s32.topk(TOP_K, dim=-1).indices.sort(dim=-1).values)
    return bool(same) and float(_gap(s64).min()) >= MARGIN


def make_inputs(batch, seq, hidden, experts, intermediate, shared_intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)

    hidden_states = randn(batch, seq, hidden)
    gate_weight = randn(experts, hidden, dtype=torch.float32).div_(math.sqrt(hidden))
    e_score_correction_bias = randn(1, experts, dtype=torch.float32).mul_(0.02)
    gate_proj = randn(experts, intermediate, hidden).div_(math.sqrt(hidden))
    up_proj = randn(experts, intermediate, hidden).div_(math.sqrt(hidden))
    down_proj = randn(experts, hidden, intermediate).div_(math.sqrt(intermediate))
    shared_gate_proj = randn(shared_intermediate, hidden).div_(math.sqrt(hidden))
    shared_up_proj = randn(shared_intermediate, hidden).div_(math.sqrt(hidden))
    shared_down_proj = randn(hidden, shared_intermediate).div_(math.sqrt(shared_intermediate))

    flat = hidden_states.view(-1, hidden)
    for _ in range(REDRAW_LIMIT):  # redraw tokens whose 8th/9th selection scores nearly tie
        _, _, scores = _router(flat.double(), gate_weight.double(), e_score_correction_bias.double())
        bad = _gap(scores) < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        flat[bad] = randn(n, hidden)
    return (hidden_states, gate_weight, e_score_correction_bias, gate_proj, up_proj, down_proj,
            shared_gate_proj, shared_up_proj, shared_down_proj, NORM_MIN)
