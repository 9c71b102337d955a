"""Problem 46: MoE router backward (Qwen3-MoE sized: 128 experts, top-8, hidden 2048).

Forward (recomputed here): logits = x W^T, probs = softmax(logits), the top-8
probabilities renormalised to sum 1 and scattered into a dense [tokens,
experts] routing-weight map, plus the Switch load-balancing loss
(experts * sum_e f_e * P_e, f_e = fraction of assignments to e, not
differentiated; P_e = mean probability) and the ST-MoE router z-loss
(mean logsumexp^2). Backward of
    L = sum(grad_routing_weights * routing_weights) + AUX_COEF * aux + Z_COEF * z
with respect to the hidden states and the router weight.
Returns (grad_hidden_states bf16 [tokens, hidden], grad_router_weight bf16 [experts, hidden]).
"""
import torch

TOP_K = 8          # Qwen3-MoE: 8 of 128 experts
AUX_COEF = 1e-2    # Switch Transformer load-balancing coefficient
Z_COEF = 1e-3      # ST-MoE router z-loss coefficient
MARGIN = 2e-3      # selection margin on the router logits


def _gap(logits):
    v = logits.topk(TOP_K + 1, dim=-1).values
    return v[:, TOP_K - 1] - v[:, TOP_K]


def _router_losses(x, w, grad_routing_weights):
    tokens, experts = x.shape[0], w.shape[0]
    logits = x @ w.T
    probs = torch.softmax(logits, dim=-1)
    top_p, top_i = probs.topk(TOP_K, dim=-1)
    routing_weights = torch.zeros_like(probs).scatter(1, top_i, top_p / top_p.sum(dim=-1, keepdim=True))
    counts = torch.zeros_like(probs).scatter(1, top_i, 1.0).sum(dim=0).detach()
    aux = experts * (counts / (tokens * TOP_K) * probs.mean(dim=0)).sum()
    z = torch.logsumexp(logits, dim=-1).pow(2).mean()
    return (routing_weights * grad_routing_weights).sum() + AUX_COEF * aux + Z_COEF * z


def reference(hidden_states, router_weight, grad_routing_weights):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    x = hidden_states.to(acc).detach().requires_grad_(True)
    w = router_weight.to(acc).detach().requires_grad_(True)
    with torch.enable_grad():
        loss = _router_losses(x, w, grad_routing_weights.to(acc))
        grad_x, grad_w = torch.autograd.grad(loss, (x, w))
    return grad_x.to(hidden_states.dtype), grad_w.to(router_weight.dtype)


def inputs_ok(hidden_states, router_weight, grad_routing_weights):
    l64 = hidden_states.double() @ router_weight.double().T
    l32 = hidden_states.float() @ router_weight.float().T
    same = torch.equal(l64.topk(TOP_K, dim=-1).indices.sort(dim=-1).values,
                       l32.topk(TOP_K, dim=-1).indices.sort(dim=-1).values)
    return bool(same) and float(_gap(l64).min()) >= MARGIN


def make_inputs(tokens, hidden, experts, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).mul_(scale)

    router_weight = randn(experts, hidden, scale=hidden ** -0.5).to(torch.bfloat16)
    hidden_states = randn(tokens, hidden).to(torch.bfloat16)
    for _ in range(64):  # redraw tokens whose top-8 is nearly tied
        bad = _gap(hidden_states.double() @ router_weight.double().T) < 2 * MARGIN
        n = int(bad.sum())
        if n == 0:
            break
        hidden_states[bad] = randn(n, hidden).to(torch.bfloat16)
    # Upstream gradient of a token-mean loss, O(0.02 / tokens) per entry: small
    # enough that the load-balancing and z-loss terms visibly shape the result.
    grad_routing_weights = randn(tokens, experts, scale=0.02 / tokens)
    return hidden_states, router_weight, grad_routing_weights
