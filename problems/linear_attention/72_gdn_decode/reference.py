"""Problem 72: GDN (gated delta net) decode step.

One new token per sequence. Per value head, with state S [head_dim_v, head_dim_k]
("k-last" layout):

    g      = -exp(A_log) * softplus(a + dt_bias)         decay exp(g) in (0, 1)
    beta   = sigmoid(b)
    S'     = exp(g) S + beta (v - exp(g) S k) k^T
    o      = S' q * head_dim^-1/2

with q and k L2-normalised per head; value head h reads q/k head
h // (v_heads / qk_heads). Returns (out, new state); the input state is not modified.
"""
import torch
import torch.nn.functional as F

L2_EPS = 1e-6


def _l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def reference(q, k, v, state, A_log, a, dt_bias, b):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = v.dtype
    batch, _, qk_heads, dk = q.shape
    v_heads = v.shape[2]
    rep = v_heads // qk_heads
    q = (_l2norm(q[:, 0].to(acc)) * dk ** -0.5).repeat_interleave(rep, dim=1)   # [B, Hv, K]
    k = _l2norm(k[:, 0].to(acc)).repeat_interleave(rep, dim=1)
    v = v[:, 0].to(acc)                                                          # [B, Hv, V]
    decay = torch.exp(-torch.exp(A_log.to(acc)) * F.softplus(a[:, 0].to(acc) + dt_bias.to(acc)))
    beta = torch.sigmoid(b[:, 0].to(acc))                                        # [B, Hv]

    S = state.to(acc) * decay[..., None, None]                                   # [B, Hv, V, K]
    pred = (S @ k[..., None])[..., 0]
    u = beta[..., None] * (v - pred)
    S = S + u[..., :, None] * k[..., None, :]
    out = (S @ q[..., None])[..., 0]
    return out[:, None].to(out_dtype), S


def make_inputs(batch, qk_heads, v_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    q = randn(batch, 1, qk_heads, head_dim).to(bf16)
    k = randn(batch, 1, qk_heads, head_dim).to(bf16)
    v = randn(batch, 1, v_heads, head_dim).to(bf16)
    state = head_dim ** -0.5 * randn(batch, v_heads, head_dim, head_dim)
    A_log = torch.log(0.5 + 3.5 * rand(v_heads))
    dt0 = torch.exp(torch.log(torch.tensor(1e-3)).item() + rand(v_heads) * torch.log(torch.tensor(100.0)).item())
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))                                # inverse softplus
    a = randn(batch, 1, v_heads).to(bf16)
    b = randn(batch, 1, v_heads).to(bf16)
    return q, k, v, state, A_log, a, dt_bias, b
