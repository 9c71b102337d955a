"""Problem 45: capacity-factor token dispatch + SwiGLU experts + combine.

DeepSeek-V2 sized MoE layer (160 routed experts, top-6, hidden 5120, expert
intermediate 1536). A softmax router picks 6 experts per token; every expert
has a fixed capacity C = ceil(1.25 * tokens * 6 / 160) slots. Tokens are
dispatched into per-expert buffers in token order; assignments beyond an
expert's capacity are dropped (they contribute nothing). Each expert runs a
SwiGLU MLP on its buffer and the results are combined back, weighted by the
(unnormalised) router probabilities.
"""
import math

import torch

TOP_K = 6                # DeepSeek-V2: 6 routed experts per token
CAPACITY_FACTOR = 1.25   # GShard / Switch style training capacity factor
MARGIN = 2e-3            # selection margin on the router logits


def _router_logits(hidden_states, router_weight, acc):
    return hidden_states.to(acc) @ router_weight.to(acc).T


def _gap(logits):
    v = logits.topk(TOP_K + 1, dim=-1).values
    return v[:, TOP_K - 1] - v[:, TOP_K]


def reference(hidden_states, router_weight, w_gate_up, w_down):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    x = hidden_states.to(acc)
    tokens, hidden = x.shape
    experts, inter = router_weight.shape[0], w_down.shape[-1]

    probs = torch.softmax(_router_logits(hidden_states, router_weight, acc), dim=-1)
    top_p, top_i = probs.topk(TOP_K, dim=-1)
    capacity = math.ceil(CAPACITY_FACTOR * tokens * TOP_K / experts)

    # Dispatch: slot of each (token, expert) pair in the expert's buffer, in token order.
    routed = torch.zeros(tokens, experts, dtype=torch.bool, device=x.device).scatter_(1, top_i, True)
    slot = routed.to(torch.int64).cumsum(dim=0) - 1
    kept = routed & (slot < capacity)
    combine = torch.zeros(tokens, experts, dtype=acc, device=x.device).scatter_(1, top_i, top_p)
    combine = combine * kept

    out = torch.zeros(tokens, hidden, dtype=acc, device=x.device)
    for e in range(experts):
        tok = kept[:, e].nonzero().squeeze(1)           # buffer order = token order
        if tok.numel() == 0:
            continue
        buf = torch.zeros(capacity, hidden, dtype=acc, device=x.device)
        buf[slot[tok, e]] = x[tok]                       # dispatch
        h = buf @ w_gate_up[e].to(acc).T                 # [C, 2I]: gate | up
        y = (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]) @ w_down[e].to(acc).T
        out.index_add_(0, tok, y[slot[tok, e]] * combine[tok, e].unsqueeze(1))   # combine
    return out.to(hidden_states.dtype)


def inputs_ok(hidden_states, router_weight, w_gate_up, w_down):
    l64 = _router_logits(hidden_states, router_weight, torch.float64)
    l32 = _router_logits(hidden_states, router_weight, torch.float32)
    same = torch.equal(l64.topk(TOP_K, dim=-1).indices.sort(dim=-1).values,
                       l32.topk(TOP_K, dim=-1).indices.sort(dim=-1).values)
    return bool(same) and float(_gap(l64).min()) >= MARGIN


def make_inputs(tokens, hidden, intermediate, experts, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype).mul_(scale)

    # A shared direction in the activations makes some experts popular, so that
    # capacity actually binds (about a fifth of the experts overflow).
    mean_dir = randn(hidden, scale=0.3)
    def draw_x(n):
        return (randn(n, hidden) + mean_dir).to(torch.bfloat16)
    router_weight = randn(experts, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    hidden_states = draw_x(tokens)
    for _ in range(64):  # redraw tokens whose top-6 is nearly tied
        bad = _gap(_router_logits(hidden_states, router_weight, torch.float64)) < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        hidden_states[bad] = draw_x(n)
    w_gate_up = randn(experts, 2 * intermediate, hidden, scale=hidden ** -0.5, dtype=torch.bfloat16)
    w_down = randn(experts, hidden, intermediate, scale=intermediate ** -0.5, dtype=torch.bfloat16)
    return hidden_states, router_weight, w_gate_up, w_down
