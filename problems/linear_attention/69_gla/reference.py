"""Problem 69: GLA (gated linear attention), recurrent form
(flash-linear-attention fla/ops/gla/naive.py naive_recurrent_gla).

Per batch and head, a state h [key_dim, value_dim] with a data-dependent decay
per key channel, exp(gk_t) (gk is a log-decay, bf16):

    h <- Diag(exp(gk_t)) h + k_t v_t^T        o_t = h^T (q_t key_dim^-1/2)

Inputs [batch, seq, heads, dim]; the recurrence runs on [batch, heads, seq,
dim] views, one token at a time (a Python loop), all heads at once.
"""
import torch
import torch.nn.functional as F

GATE_NORMALIZER = 16.0   # gk = logsigmoid(N(0,1)) / 16


def reference(q, k, v, gk):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = q.dtype
    q, k, v, gk = (x.transpose(1, 2).to(acc) for x in (q, k, v, gk))
    batch, heads, seq, key_dim = q.shape
    scale = key_dim ** -0.5
    o = torch.zeros_like(v)
    h = q.new_zeros(batch, heads, key_dim, v.shape[-1], dtype=acc)
    for t in range(seq):
        h = h * gk[:, :, t].exp()[..., None] + k[:, :, t, :, None] * v[:, :, t, None, :]
        o[:, :, t] = ((q[:, :, t] * scale)[..., None] * h).sum(-2)
    return o.transpose(1, 2).to(out_dtype)


def make_inputs(batch, seq, heads, key_dim, value_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)
    q = randn(batch, seq, heads, key_dim)
    k = randn(batch, seq, heads, key_dim)
    v = randn(batch, seq, heads, value_dim)
    gk = (F.logsigmoid(randn(batch, seq, heads, key_dim, dtype=torch.float32)) / GATE_NORMALIZER).to(torch.bfloat16)
    return q, k, v, gk
