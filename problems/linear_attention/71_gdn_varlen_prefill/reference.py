"""Problem 71: GDN (gated delta net) variable-length prefill.

Sequences of different lengths are packed along the token axis (cu_seqlens
marks their boundaries); each starts from its own initial state. Per value
head, with state S [head_dim_v, head_dim_k] ("k-last" layout):

    g_t    = -exp(A_log) * softplus(a_t + dt_bias)       decay exp(g_t) in (0, 1)
    beta_t = sigmoid(b_t)
    S_t    = exp(g_t) S_{t-1} + beta_t (v_t - exp(g_t) S_{t-1} k_t) k_t^T
    o_t    = S_t q_t * head_dim^-1/2

with q and k L2-normalised per head; value head h reads q/k head
h // (v_heads / qk_heads). Returns (out, final state of each sequence).
Written as the plain per-token recurrence, one sequence after another.
"""
import torch
import torch.nn.functional as F

L2_EPS = 1e-6


def _l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def reference(q, k, v, A_log, a, dt_bias, b, initial_state, cu_seqlens):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = v.dtype
    tokens, qk_heads, dk = q.shape
    v_heads = v.shape[1]
    rep = v_heads // qk_heads
    q = (_l2norm(q.to(acc)) * dk ** -0.5).repeat_interleave(rep, dim=1)   # [T, Hv, K]
    k = _l2norm(k.to(acc)).repeat_interleave(rep, dim=1)
    v = v.to(acc)
    decay = torch.exp(-torch.exp(A_log.to(acc)) * F.softplus(a.to(acc) + dt_bias.to(acc)))  # [T, Hv]
    beta = torch.sigmoid(b.to(acc))

    out = torch.empty(tokens, v_heads, v.shape[-1], dtype=acc, device=q.device)
    final = []
    bounds = cu_seqlens.tolist()
    for n in range(len(bounds) - 1):
        S = initial_state[n].to(acc)                                   # [Hv, V, K]
        for t in range(bounds[n], bounds[n + 1]):
            S = S * decay[t, :, None, None]
            pred = (S @ k[t, :, :, None])[..., 0]                      # [Hv, V]
            u = beta[t, :, None] * (v[t] - pred)
            S = S + u[:, :, None] * k[t, :, None, :]
            out[t] = (S @ q[t, :, :, None])[..., 0]
        final.append(S)
    return out.to(out_dtype), torch.stack(final)


def make_inputs(tokens, seqs, qk_heads, v_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    # sequence boundaries: seqs - 1 distinct cut points in 1 .. tokens - 1
    cuts = torch.randperm(tokens - 1, generator=g, device=device)[: seqs - 1] + 1
    zero = torch.zeros(1, dtype=cuts.dtype, device=device)
    end = torch.full((1,), tokens, dtype=cuts.dtype, device=device)
    cu_seqlens = torch.cat([zero, cuts.sort().values, end]).to(torch.int32)
    q = randn(tokens, qk_heads, head_dim).to(bf16)
    k = randn(tokens, qk_heads, head_dim).to(bf16)
    v = randn(tokens, v_heads, head_dim).to(bf16)
    A_log = torch.log(0.5 + 3.5 * rand(v_heads))
    dt0 = torch.exp(torch.log(torch.tensor(1e-3)).item() + rand(v_heads) * torch.log(torch.tensor(100.0)).item())
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))                     # inverse softplus
    a = randn(tokens, v_heads).to(bf16)
    b = randn(tokens, v_heads).to(bf16)
    initial_state = head_dim ** -0.5 * randn(seqs, v_heads, head_dim, head_dim)
    return q, k, v, A_log, a, dt_bias, b, initial_state, cu_seqlens
