"""Problem 68: KDA (Kimi Delta Attention), recurrent form
(flash-linear-attention fla/ops/kda/naive.py naive_recurrent_kda).

A gated delta rule with a per-key-channel decay. Per batch and value head, a
state S [key_dim, value_dim]:

    S <- Diag(exp(g_t)) S
    S <- S + (beta_t k_t) (v_t - S^T k_t)^T        o_t = S^T q_t

with q, k L2-normalised (F.normalize), q scaled by key_dim^-1/2, and the
q/k heads repeated over the v_heads / heads value heads of a group. Inputs
[batch, seq, heads, dim], g a bf16 log-decay; one token at a time (a Python
loop), all heads at once.
"""
import torch
import torch.nn.functional as F

GATE_NORMALIZER = 16.0   # g = logsigmoid(N(0,1)) / 16


def reference(q, k, v, g, beta):
    acc = torch.promote_types(v.dtype, torch.float32)
    out_dtype = v.dtype
    batch, seq, heads, key_dim = q.shape
    v_heads, value_dim = v.shape[2], v.shape[-1]
    q, k, v, g, beta = (x.to(acc) for x in (q, k, v, g, beta))
    q = F.normalize(q, p=2, dim=-1).repeat_interleave(v_heads // heads, dim=2) * key_dim ** -0.5
    k = F.normalize(k, p=2, dim=-1).repeat_interleave(v_heads // heads, dim=2)
    S = k.new_zeros(batch, v_heads, key_dim, value_dim).to(q)
    o = torch.zeros_like(v)
    for t in range(seq):
        kt = k[:, t]
        S = S * g[:, t][..., None].exp()
        correction = v[:, t] - (kt[..., None] * S).sum(-2)
        S = S + torch.einsum("b h k, b h v -> b h k v", beta[:, t][..., None] * kt, correction)
        o[:, t] = torch.einsum("b h k, b h k v -> b h v", q[:, t], S)
    return o.to(out_dtype)


def make_inputs(batch, seq, heads, v_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)
    q = randn(batch, seq, heads, head_dim)
    k = randn(batch, seq, heads, head_dim)
    v = randn(batch, seq, v_heads, head_dim)
    gate = (F.logsigmoid(randn(batch, seq, v_heads, head_dim, dtype=torch.float32)) / GATE_NORMALIZER).to(torch.bfloat16)
    beta = randn(batch, seq, v_heads).sigmoid()
    return q, k, v, gate, beta
