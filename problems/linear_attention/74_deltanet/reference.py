"""Problem 74: DeltaNet (delta-rule linear attention), recurrent form.

Per head, state S [head_dim_k, head_dim_v], no decay:

    S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
    o_t = S_t^T q_t * head_dim^-1/2

with q and k L2-normalised per head (so I - beta k k^T is a contraction and
the state stays bounded). Written as the plain per-token recurrence (a Python
loop over time, all batch elements and heads at once).
"""
import torch

L2_EPS = 1e-6


def _l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def reference(q, k, v, beta):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = v.dtype
    batch, seq, heads, dk = q.shape
    dv = v.shape[-1]
    q = _l2norm(q.to(acc)) * dk ** -0.5
    k = _l2norm(k.to(acc))
    v = v.to(acc)
    beta = beta.to(acc)

    S = torch.zeros(batch, heads, dk, dv, dtype=acc, device=q.device)
    out = []
    for t in range(seq):
        kt = k[:, t]
        pred = torch.einsum("bhk,bhkv->bhv", kt, S)                  # what S recalls for k_t
        u = beta[:, t, :, None] * (v[:, t] - pred)
        S = S + kt[..., None] * u[..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(out, dim=1).to(out_dtype)


def make_inputs(batch, seq, heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    q = randn(batch, seq, heads, head_dim).to(bf16)
    k = randn(batch, seq, heads, head_dim).to(bf16)
    v = randn(batch, seq, heads, head_dim).to(bf16)
    beta = torch.sigmoid(randn(batch, seq, heads)).to(bf16)
    return q, k, v, beta
