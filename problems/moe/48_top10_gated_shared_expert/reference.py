"""Problem 48: top-10 of 512 experts + sigmoid-gated shared expert (Qwen3-Next sized).

Softmax router over 512 experts, the top-10 probabilities renormalised to sum
1; SwiGLU routed experts (hidden 2048, intermediate 512) combined with those
weights, plus a shared SwiGLU expert (intermediate 512) scaled per token by
sigmoid(x . w_shared_gate).
"""
import torch

TOP_K = 10       # 10 of 512 experts per token
MARGIN = 1e-5    # selection margin on the softmax probabilities (DECISION_MARGIN)


def _router_logits(hidden_states, router_weight, acc):
    x = hidden_states.reshape(-1, hidden_states.shape[-1]).to(acc)
    return x @ router_weight.to(acc).T


def _gap(logits):
    v = torch.softmax(logits, dim=-1).topk(TOP_K + 1, dim=-1).values
    return v[:, TOP_K - 1] - v[:, TOP_K]


def _swiglu(x, w_gate, w_up, w_down, acc):
    return (torch.nn.functional.silu(x @ w_gate.to(acc).T) * (x @ w_up.to(acc).T)) @ w_down.to(acc).T


def reference(hidden_states, router_weight, gate_proj, up_proj, down_proj,
              shared_gate_proj, shared_up_proj, shared_down_proj, shared_expert_gate):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1]).to(acc)
    router_logits = _router_logits(hidden_states, router_weight, acc)
    probs = torch.softmax(router_logits, dim=-1)
    top_p, top_i = probs.topk(TOP_K, dim=-1)
    top_p = top_p / top_p.sum(dim=-1, keepdim=True)

    gate = torch.sigmoid(x @ shared_expert_gate.to(acc).T)              # [T, 1]
    out = gate * _swiglu(x, shared_gate_proj, shared_up_proj, shared_down_proj, acc)
    for e in range(router_weight.shape[0]):
        tok, slot = (top_i == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        y = _swiglu(x[tok], gate_proj[e], up_proj[e], down_proj[e], acc)
        out.index_add_(0, tok, y * top_p[tok, slot].unsqueeze(1))
    return out.reshape(shape).to(hidden_states.dtype), router_logits.to(hidden_states.dtype)


def inputs_ok(hidden_states, router_weight, *rest):
    l64 = _router_logits(hidden_states, router_weight, torch.float64)
    l32 = _router_logits(hidden_states, router_weight, torch.float32)
    same = torch.equal(l64.topk(TOP_K, dim=-1).indices.sort(dim=-1).values,
                       l32.topk(TOP_K, dim=-1).indices.sort(dim=-1).values)
    return bool(same) and float(_gap(l64).min()) >= MARGIN


def make_inputs(batch, seq, hidden, experts, intermediate, shared_intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).mul_(scale).to(torch.bfloat16)

    hidden_states = randn(batch, seq, hidden)
    router_weight = randn(experts, hidden, scale=hidden ** -0.5)
    gate_proj = randn(experts, intermediate, hidden, scale=hidden ** -0.5)
    up_proj = randn(experts, intermediate, hidden, scale=hidden ** -0.5)
    down_proj = randn(experts, hidden, intermediate, scale=intermediate ** -0.5)
    shared_gate_proj = randn(shared_intermediate, hidden, scale=hidden ** -0.5)
    shared_up_proj = randn(shared_intermediate, hidden, scale=hidden ** -0.5)
    shared_down_proj = randn(hidden, shared_intermediate, scale=shared_intermediate ** -0.5)
    shared_expert_gate = randn(1, hidden, scale=hidden ** -0.5)
    flat = hidden_states.view(-1, hidden)
    for _ in range(16):  # REDRAW_LIMIT: redraw tokens whose 10th/11th probabilities nearly tie
        bad = _gap(_router_logits(flat, router_weight, torch.float64)) < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        flat[bad] = randn(n, hidden)
    return (hidden_states, router_weight, gate_proj, up_proj, down_proj,
            shared_gate_proj, shared_up_proj, shared_down_proj, shared_expert_gate)
