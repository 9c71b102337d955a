"""Problem 47: sigmoid routing with a load-balancing correction bias + shared expert.

Auxiliary-loss-free routing (DeepSeek-V3 / GLM-4.5 style, without groups):
scores = sigmoid(x W_r^T); the top-6 experts are chosen on scores + bias, but
weighted by their unbiased scores renormalised to sum 1. The routed SwiGLU
experts' outputs are summed with those weights and an always-on shared
SwiGLU expert is added. Hidden 8192, 64 routed experts of intermediate 1024,
shared expert intermediate 2048.
"""
import torch

TOP_K = 6        # chosen: 6 of 64 experts per token
MARGIN = 1e-3    # selection margin on sigmoid(logit) + bias


def _biased_scores(hidden_states, router_weight, correction_bias, acc):
    x = hidden_states.reshape(-1, hidden_states.shape[-1]).to(acc)
    scores = torch.sigmoid(x @ router_weight.to(acc).T)
    return scores, scores + correction_bias.to(acc)


def _gap(biased):
    v = biased.topk(TOP_K + 1, dim=-1).values
    return v[:, TOP_K - 1] - v[:, TOP_K]


def _swiglu(x, w_gate_up, w_down, acc):
    h = x @ w_gate_up.to(acc).T
    inter = w_down.shape[-1]
    return (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]) @ w_down.to(acc).T


def reference(hidden_states, router_weight, correction_bias, w_gate_up, w_down,
              shared_gate_up, shared_down):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1]).to(acc)
    scores, biased = _biased_scores(hidden_states, router_weight, correction_bias, acc)
    top_i = biased.topk(TOP_K, dim=-1).indices
    top_w = scores.gather(1, top_i)
    top_w = top_w / top_w.sum(dim=-1, keepdim=True)

    out = _swiglu(x, shared_gate_up, shared_down, acc)      # shared expert
    for e in range(router_weight.shape[0]):
        tok, slot = (top_i == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        y = _swiglu(x[tok], w_gate_up[e], w_down[e], acc)
        out.index_add_(0, tok, y * top_w[tok, slot].unsqueeze(1))
    return out.reshape(shape).to(hidden_states.dtype)


def inputs_ok(hidden_states, router_weight, correction_bias, *rest):
    _, b64 = _biased_scores(hidden_states, router_weight, correction_bias, torch.float64)
    _, b32 = _biased_scores(hidden_states, router_weight, correction_bias, torch.float32)
    same = torch.equal(b64.topk(TOP_K, dim=-1).indices.sort(dim=-1).values,
                       b32.topk(TOP_K, dim=-1).indices.sort(dim=-1).values)
    return bool(same) and float(_gap(b64).min()) >= MARGIN


def make_inputs(batch, seq, hidden, experts, intermediate, shared_intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype).mul_(scale)

    router_weight = randn(experts, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    correction_bias = randn(experts, scale=0.05)
    hidden_states = randn(batch, seq, hidden).to(torch.bfloat16)
    flat = hidden_states.view(-1, hidden)
    for _ in range(64):  # redraw tokens whose top-6 is nearly tied
        _, biased = _biased_scores(flat, router_weight, correction_bias, torch.float64)
        bad = _gap(biased) < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        flat[bad] = randn(n, hidden).to(torch.bfloat16)
    w_gate_up = randn(experts, 2 * intermediate, hidden, scale=hidden ** -0.5, dtype=torch.bfloat16)
    w_down = randn(experts, hidden, intermediate, scale=intermediate ** -0.5, dtype=torch.bfloat16)
    shared_gate_up = randn(2 * shared_intermediate, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    shared_down = randn(hidden, shared_intermediate, scale=shared_intermediate ** -0.5).to(torch.bfloat16)
    return (hidden_states, router_weight, correction_bias, w_gate_up, w_down,
            shared_gate_up, shared_down)
