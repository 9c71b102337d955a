"""Problem 70: RetNet multi-scale retention, parallel form
(flash-linear-attention fla/ops/retention/naive.py naive_retention).

Head h decays with gamma_h = 1 - 2^(-5-h); with D[h, n, m] = gamma_h^(n-m)
for m <= n and 0 above the diagonal (computed as 2^((n-m) log2 gamma_h)),

    o = ((q k^T / sqrt(key_dim)) * D) v

for every batch and head, layout [batch, heads, seq, dim]. The three-operand
einsum that applies q, k and D is kept as published (torch picks its
contraction order).
"""
import torch


def reference(q, k, v):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = q.dtype
    q, k, v = q.to(acc), k.to(acc), v.to(acc)
    heads, seq, key_dim = q.shape[1], q.shape[2], q.shape[3]
    log2_gamma = (1 - torch.tensor(2.0, dtype=acc, device=q.device)
                  .pow(-5.0 - torch.arange(heads, dtype=acc, device=q.device))).log2()
    pos = torch.arange(seq, dtype=acc, device=q.device)
    decay = torch.exp2((pos[:, None] - pos) * log2_gamma.view(-1, 1, 1)) * pos[:, None].ge(pos)
    scores = torch.einsum("bhqd,bhkd,hqk->bhqk", q * key_dim ** -0.5, k, decay.to(q.dtype))
    return torch.einsum("bhqk,bhkd->bhqd", scores, v).to(out_dtype)


def make_inputs(batch, heads, seq, key_dim, value_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    return randn(batch, heads, seq, key_dim), randn(batch, heads, seq, key_dim), randn(batch, heads, seq, value_dim)
