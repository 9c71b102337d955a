"""Problem 50: backward of routed SwiGLU experts, fp32.

Forward (recomputed): out[t] = sum_k topk_weights[t, k] * expert_{topk_ids[t, k]}(x[t]),
expert_e(x) = (silu(x Wg_e^T) * (x Wu_e^T)) Wd_e^T, with [Wg_e; Wu_e] = w_gate_up[e].
The routing (ids and weights) is given; nothing is selected here.
Returns the gradients of sum(out * grad_out):
    (grad_x [tokens, hidden], grad_topk_weights [tokens, top_k],
     grad_w_gate_up [experts, 2*intermediate, hidden], grad_w_down [experts, hidden, intermediate]).
"""
import torch


def _forward(x, topk_ids, topk_weights, w_gate_up, w_down):
    inter = w_down.shape[-1]
    out = torch.zeros_like(x)
    # unbind: one leaf per expert view; the backward stacks the expert gradients once.
    for e, (wgu, wd) in enumerate(zip(w_gate_up.unbind(0), w_down.unbind(0))):
        tok, slot = (topk_ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x[tok] @ wgu.T
        y = (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]) @ wd.T
        out = out.index_add(0, tok, y * topk_weights[tok, slot].unsqueeze(1))
    return out


def reference(x, topk_ids, topk_weights, w_gate_up, w_down, grad_out):
    acc = torch.promote_types(x.dtype, torch.float32)
    leaves = [t.to(acc).detach().requires_grad_(True) for t in (x, topk_weights, w_gate_up, w_down)]
    with torch.enable_grad():
        out = _forward(leaves[0], topk_ids, leaves[1], leaves[2], leaves[3])
        grads = torch.autograd.grad(out, leaves, grad_outputs=grad_out.to(acc))
    return tuple(gr.to(t.dtype) for gr, t in zip(grads, (x, topk_weights, w_gate_up, w_down)))


def make_inputs(tokens, hidden, intermediate, experts, top_k, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).mul_(scale)

    x = randn(tokens, hidden)
    # top_k distinct experts per token, uniformly at random, in random order
    topk_ids = torch.rand(tokens, experts, generator=g, device=device).argsort(dim=-1)[:, :top_k]
    topk_weights = torch.softmax(randn(tokens, top_k), dim=-1)
    w_gate_up = randn(experts, 2 * intermediate, hidden, scale=hidden ** -0.5)
    w_down = randn(experts, hidden, intermediate, scale=intermediate ** -0.5)
    grad_out = randn(tokens, hidden)
    return x, topk_ids, topk_weights, w_gate_up, w_down, grad_out
