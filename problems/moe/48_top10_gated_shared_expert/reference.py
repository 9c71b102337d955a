"""Problem 48: top-10 of 512 experts + sigmoid-gated shared expert (Qwen3-Next sized).

Softmax router over 512 experts, the top-10 probabilities renormalised to sum
1; SwiGLU routed experts (hidden 2048, intermediate 512) combined with those
weights, plus a shared SwiGLU expert (intermediate 512) scaled per token by
sigmoid(x . w_shared_gate).
"""
import torch

TOP_K = 10       # 10 of 512 experts per token
MARGIN = 2e-3    # selection margin on the router logits


def _router_logits(hidden_states, router_weight, acc):
    x = hidden_states.reshape(-1, hidden_states.shape[-1]).to(acc)
    return x @ router_weight.to(acc).T


def _gap(logits):
    v = logits.topk(TOP_K + 1, dim=-1).values
    return v[:, TOP_K - 1] - v[:, TOP_K]


def _swiglu(x, w_gate_up, w_down, acc):
    h = x @ w_gate_up.to(acc).T
    inter = w_down.shape[-1]
    return (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]) @ w_down.to(acc).T


def reference(hidden_states, router_weight, w_gate_up, w_down,
              shared_gate_up, shared_down, shared_gate_weight):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1]).to(acc)
    probs = torch.softmax(_router_logits(hidden_states, router_weight, acc), dim=-1)
    top_p, top_i = probs.topk(TOP_K, dim=-1)
    top_p = top_p / top_p.sum(dim=-1, keepdim=True)

    gate = torch.sigmoid(x @ shared_gate_weight.to(acc).T)              # [T, 1]
    out = gate * _swiglu(x, shared_gate_up, shared_down, acc)
    for e in range(router_weight.shape[0]):
        tok, slot = (top_i == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        y = _swiglu(x[tok], w_gate_up[e], w_down[e], acc)
        out.index_add_(0, tok, y * top_p[tok, slot].unsqueeze(1))
    return out.reshape(shape).to(hidden_states.dtype)


def inputs_ok(hidden_states, router_weight, *rest):
    l64 = _router_logits(hidden_states, router_weight, torch.float64)
    l32 = _router_logits(hidden_states, router_weight, torch.float32)
    same = torch.equal(l64.topk(TOP_K, dim=-1).indices.sort(dim=-1).values,
                       l32.topk(TOP_K, dim=-1).indices.sort(dim=-1).values)
    return bool(same) and float(_gap(l64).min()) >= MARGIN


def make_inputs(batch, seq, hidden, experts, intermediate, shared_intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype).mul_(scale)

    router_weight = randn(experts, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    hidden_states = randn(batch, seq, hidden).to(torch.bfloat16)
    flat = hidden_states.view(-1, hidden)
    for _ in range(64):  # redraw tokens whose top-10 is nearly tied
        bad = _gap(_router_logits(flat, router_weight, torch.float64)) < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        flat[bad] = randn(n, hidden).to(torch.bfloat16)
    w_gate_up = randn(experts, 2 * intermediate, hidden, scale=hidden ** -0.5, dtype=torch.bfloat16)
    w_down = randn(experts, hidden, intermediate, scale=intermediate ** -0.5, dtype=torch.bfloat16)
    shared_gate_up = randn(2 * shared_intermediate, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    shared_down = randn(hidden, shared_intermediate, scale=shared_intermediate ** -0.5).to(torch.bfloat16)
    shared_gate_weight = randn(1, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    return (hidden_states, router_weight, w_gate_up, w_down,
            shared_gate_up, shared_down, shared_gate_weight)
