"""Problem 62: chunked gated delta rule (Qwen3-Next style linear attention).

Per value head, with state S [head_dim_k, head_dim_v], decay a_t = exp(g_t) and
write strength beta_t, over the sequence:

    S_t = a_t * S_{t-1} + beta_t * k_t (v_t - a_t * S_{t-1}^T k_t)^T
    o_t = S_t^T q_t * scale

q and k are L2-normalised per head first; the 4 q/k heads are shared by the 16
value heads (v head h reads q/k head h // 4). The reference evaluates the
recurrence chunk by chunk (64 tokens): inside a chunk the delta-rule updates
are resolved by one unit lower-triangular solve, and the state crosses chunk
boundaries once per chunk. Inputs are head-first ([batch, heads, seq, dim],
g and beta [batch, v_heads, seq]) with the softmax-style scale an input;
returns out [batch, seq, v_heads, head_dim] in the value dtype.
"""
import torch

CHUNK = 64
L2_EPS = 1e-6


def _l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def reference(query, key, value, g, beta, scale):
    acc = torch.promote_types(query.dtype, torch.float32)
    out_dtype = value.dtype
    batch, qk_heads, seq, dk = query.shape
    v_heads, dv = value.shape[1], value.shape[3]
    rep = v_heads // qk_heads

    # [batch, heads, seq, dim], q/k heads repeated onto the v heads
    q = (_l2norm(query.to(acc)) * scale).repeat_interleave(rep, dim=1)
    k = _l2norm(key.to(acc)).repeat_interleave(rep, dim=1)
    v = value.to(acc)
    g = g.to(acc)
    beta = beta.to(acc)

    # Pad to whole chunks: padded steps have decay 1 and beta 0, so they leave the state alone.
    pad = (-seq) % CHUNK
    if pad:
        q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (torch.nn.functional.pad(x, (0, pad)) for x in (g, beta))

    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device).tril()
    strict = causal.tril(-1)
    eye = torch.eye(CHUNK, dtype=acc, device=q.device)
    S = torch.zeros(batch, v_heads, dk, dv, dtype=acc, device=q.device)
    outs = []
    for c0 in range(0, seq + pad, CHUNK):
        sl = slice(c0, c0 + CHUNK)
        qc, kc, vc, bc = q[:, :, sl], k[:, :, sl], v[:, :, sl], beta[:, :, sl]
        G = g[:, :, sl].cumsum(-1)                                     # log of cumulative decay
        # decay[i, j] = prod_{j < s <= i} a_s for j <= i, 0 above the diagonal
        decay = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")))
        # pseudo-values u_i = beta_i (v_i - (decayed state before i)^T k_i):
        # (I + A) U = beta * (V - gamma * K S0), A strictly lower triangular
        A = (bc[..., :, None] * decay * (kc @ kc.transpose(-1, -2))).masked_fill(~strict, 0.0)
        rhs = bc[..., None] * (vc - G.exp()[..., None] * (kc @ S))
        U = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        # outputs: decayed incoming state plus causal intra-chunk part
        o = (qc * G.exp()[..., None]) @ S + ((qc @ kc.transpose(-1, -2)) * decay) @ U
        outs.append(o)
        # state leaving the chunk
        to_end = torch.exp(G[..., -1:] - G)                            # [b, h, chunk]
        S = G[..., -1, None, None].exp() * S + (kc * to_end[..., None]).transpose(-1, -2) @ U
    out = torch.cat(outs, dim=2)[:, :, :seq].transpose(1, 2)
    return out.to(out_dtype).contiguous()


def make_inputs(batch, seq, qk_heads, v_heads, head_dim, scale, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    return [
        randn(batch, qk_heads, seq, head_dim).to(bf16),
        randn(batch, qk_heads, seq, head_dim).to(bf16),
        randn(batch, v_heads, seq, head_dim).to(bf16),
        torch.empty(batch, v_heads, seq, device=device).uniform_(-0.05, 0.0, generator=g).to(bf16),
        randn(batch, v_heads, seq).to(bf16).sigmoid(),
        float(scale),
    ]
