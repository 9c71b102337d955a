"""Problem 74: DeltaNet (delta-rule linear attention), recurrent form
(flash-linear-attention fla/ops/delta_rule/naive.py delta_rule_recurrence).

Per batch and head, a state S [key_dim, value_dim] starts at initial_state and
takes one rank-one correction per token, without decay:

    u_t = beta_t (v_t - S^T k_t)      S <- S + k_t u_t^T      o_t = S^T q_t

with q and k L2-normalised (torch's F.normalize) and q scaled by key_dim^-1/2.
Layout [batch, heads, seq, dim]. Returns o (bf16) and the final state (fp32,
float64 for the anchor). A plain Python loop over time, all heads at once.
"""
import torch
import torch.nn.functional as F


def reference(q, k, v, beta, initial_state):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = q.dtype
    key_dim = q.shape[-1]
    q = F.normalize(q.to(acc), p=2, dim=-1) * key_dim ** -0.5
    k = F.normalize(k.to(acc), p=2, dim=-1)
    v, beta = v.to(acc), beta.to(acc)[..., None]
    batch, heads, seq, _ = q.shape
    o = torch.zeros_like(v)
    S = torch.zeros(batch, heads, key_dim, v.shape[-1], dtype=acc, device=q.device)
    S += initial_state.to(acc)
    for t in range(seq):
        kt = k[:, :, t]
        u = (v[:, :, t] - (S * kt[..., None]).sum(-2)) * beta[:, :, t]
        S = S + kt.unsqueeze(-1) * u.unsqueeze(-2)
        o[:, :, t] = torch.einsum("bhd,bhdm->bhm", q[:, :, t], S)
    return o.to(out_dtype), S


def make_inputs(batch, heads, seq, key_dim, value_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)
    q = randn(batch, heads, seq, key_dim)
    k = randn(batch, heads, seq, key_dim)
    v = randn(batch, heads, seq, value_dim)
    beta = randn(batch, heads, seq).sigmoid()
    initial_state = randn(batch, heads, key_dim, value_dim, dtype=torch.float32)
    return q, k, v, beta, initial_state
