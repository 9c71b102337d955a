"""Problem 50: backward of routed SwiGLU experts with weighted aggregation,
fp32 (MiMo shape, SOL-ExecBench).

Forward (recomputed): out[t] = sum_k topk_weights[t, k] * expert_{topk_indices[t, k]}(x[t]),
expert_e(x) = (silu(x Wg_e^T) * (x Wu_e^T)) Wd_e^T with separate gate, up and
down weights. The routing (ids and weights) is given; nothing is selected.
Returns the gradients of sum(out * grad_output):
    (grad_hidden_states [tokens, hidden], grad_topk_weights [tokens, top_k],
     grad_gate [experts, I, hidden], grad_up [experts, I, hidden], grad_down [experts, hidden, I]).
"""
import torch


def _forward(x, topk_indices, topk_weights, gate, up, down):
    out = torch.zeros_like(x)
    for e, (wg, wu, wd) in enumerate(zip(gate.unbind(0), up.unbind(0), down.unbind(0))):
        tok, slot = (topk_indices == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        xe = x[tok]
        y = (torch.nn.functional.silu(xe @ wg.T) * (xe @ wu.T)) @ wd.T
        out = out.index_add(0, tok, y * topk_weights[tok, slot].unsqueeze(1))
    return out


def reference(grad_output, hidden_states, topk_indices, topk_weights, gate_weights, up_weights, down_weights):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    src = (hidden_states, topk_weights, gate_weights, up_weights, down_weights)
    leaves = [t.to(acc).detach().requires_grad_(True) for t in src]
    with torch.enable_grad():
        out = _forward(leaves[0], topk_indices, *leaves[1:])
        grads = torch.autograd.grad(out, leaves, grad_outputs=grad_output.to(acc))
    return tuple(gr.to(t.dtype) for gr, t in zip(grads, src))


def make_inputs(tokens, hidden, intermediate, experts, top_k, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)

    grad_output = randn(tokens, hidden)
    hidden_states = randn(tokens, hidden)
    # top_k distinct experts per token, uniformly at random
    topk_indices = torch.rand(tokens, experts, generator=g, device=device).argsort(dim=-1)[:, :top_k]
    topk_weights = torch.softmax(randn(tokens, top_k), dim=-1)
    gate_weights = randn(experts, intermediate, hidden) * 0.02
    up_weights = randn(experts, intermediate, hidden) * 0.02
    down_weights = randn(experts, hidden, intermediate) * 0.02
    return grad_output, hidden_states, topk_indices, topk_weights, gate_weights, up_weights, down_weights
