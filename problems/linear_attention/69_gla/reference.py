"""Problem 69: GLA (gated linear attention), recurrent form.

Per head, state S [head_dim_k, head_dim_v], data-dependent per-key-channel
decay exp(gk_t):

    S_t = Diag(exp(gk_t)) S_{t-1} + k_t v_t^T
    o_t = S_t^T q_t * head_dim_k^-1/2

Written as the plain per-token recurrence (a Python loop over time, all batch
elements and heads at once).
"""
import torch


def reference(q, k, v, gk):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = v.dtype
    batch, seq, heads, dk = q.shape
    dv = v.shape[-1]
    q = q.to(acc) * dk ** -0.5
    k = k.to(acc)
    v = v.to(acc)
    decay = torch.exp(gk.to(acc))                                     # [b, l, H, K] in (0, 1)

    S = torch.zeros(batch, heads, dk, dv, dtype=acc, device=q.device)
    out = []
    for t in range(seq):
        S = S * decay[:, t, :, :, None] + k[:, t, :, :, None] * v[:, t, :, None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(out, dim=1).to(out_dtype)


def make_inputs(batch, seq, heads, head_k, head_v, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    q = randn(batch, seq, heads, head_k).to(bf16)
    k = randn(batch, seq, heads, head_k).to(bf16)
    v = (0.4 * randn(batch, seq, heads, head_v)).to(bf16)           # keeps outputs O(1)
    gk = torch.log(0.9 + 0.09 * rand(batch, seq, heads, head_k))      # decay in [0.9, 0.99)
    return q, k, v, gk
