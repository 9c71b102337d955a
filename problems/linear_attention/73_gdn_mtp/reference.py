"""Problem 73: GDN (gated delta net) multi-token prediction (speculative verify) step.

T draft tokens per sequence are scored from the cached state without
committing them: the recurrence runs over the T tokens from `state`, the
outputs of every token are returned, and the state comes back unchanged
(the caller commits only the accepted prefix later). Per value head, with
state S [head_dim_v, head_dim_k] ("k-last" layout):

    g_t    = -exp(A_log) * softplus(a_t + dt_bias)       decay exp(g_t) in (0, 1)
    beta_t = sigmoid(b_t)
    S_t    = exp(g_t) S_{t-1} + beta_t (v_t - exp(g_t) S_{t-1} k_t) k_t^T
    o_t    = S_t q_t * head_dim^-1/2

with q and k L2-normalised per head; value head h reads q/k head
h // (v_heads / qk_heads). Returns (out, initial state unchanged).
"""
import torch
import torch.nn.functional as F

L2_EPS = 1e-6


def _l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def reference(q, k, v, state, A_log, a, dt_bias, b):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = v.dtype
    batch, steps, qk_heads, dk = q.shape
    v_heads = v.shape[2]
    rep = v_heads // qk_heads
    q = (_l2norm(q.to(acc)) * dk ** -0.5).repeat_interleave(rep, dim=2)   # [B, T, Hv, K]
    k = _l2norm(k.to(acc)).repeat_interleave(rep, dim=2)
    v = v.to(acc)
    decay = torch.exp(-torch.exp(A_log.to(acc)) * F.softplus(a.to(acc) + dt_bias.to(acc)))  # [B, T, Hv]
    beta = torch.sigmoid(b.to(acc))

    S = state.to(acc)                                                      # working copy
    out = []
    for t in range(steps):
        S = S * decay[:, t, :, None, None]
        pred = (S @ k[:, t, :, :, None])[..., 0]                           # [B, Hv, V]
        u = beta[:, t, :, None] * (v[:, t] - pred)
        S = S + u[..., :, None] * k[:, t, :, None, :]
        out.append((S @ q[:, t, :, :, None])[..., 0])
    return torch.stack(out, dim=1).to(out_dtype), state.clone()


def make_inputs(batch, steps, qk_heads, v_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    q = randn(batch, steps, qk_heads, head_dim).to(bf16)
    k = randn(batch, steps, qk_heads, head_dim).to(bf16)
    v = randn(batch, steps, v_heads, head_dim).to(bf16)
    state = head_dim ** -0.5 * randn(batch, v_heads, head_dim, head_dim)
    A_log = torch.log(0.5 + 3.5 * rand(v_heads))
    dt0 = torch.exp(torch.log(torch.tensor(1e-3)).item() + rand(v_heads) * torch.log(torch.tensor(100.0)).item())
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))                          # inverse softplus
    a = randn(batch, steps, v_heads).to(bf16)
    b = randn(batch, steps, v_heads).to(bf16)
    return q, k, v, state, A_log, a, dt_bias, b
