"""Problem 71: gated delta net (GDN) prefill over variable-length sequences,
8 q/k heads / 16 v heads, head size 128, state stored k-last [H, V, K]
(FlashInfer-Trace gdn_prefill_qk8_v16_d128_k_last, Qwen3-Next 80B A3B).

Per token t and v head h (q/k head h // 2), with g = exp(-exp(A_log) *
softplus(a + dt_bias)) and beta = sigmoid(b), the state S [K, V] of the
sequence (from state[seq], transposed) takes

    S' = g S;   old = k S';   new = beta v + (1 - beta) old
    S  = S' - k^T old + k^T new;   o_t = scale * q S

Returns o (bf16) and the final state of every sequence ([seqs, H, V, K], fp32).
A Python loop over sequences and tokens, all heads at once.
"""
import torch
import torch.nn.functional as F

SCALE = 0.08838834764831843
LAYOUT_SEED = 71
# The captured workload: sequence boundaries and the gate parameters of the 16 v heads.
CAPTURED_CU_SEQLENS = (0, 19, 50, 940, 959)
A_LOG = (1.3984375, 1.203125, 2.203125, 0.1474609375, 1.46875, -0.6171875, 1.8125, -1.359375, 0.50390625,
         1.03125, 2.953125, 1.2890625, 1.3203125, 2.109375, 3.34375, 1.78125)
DT_BIAS = (-2.34375, -3.421875, -4.03125, -1.65625, -3.25, 2.046875, -5.625, -2.65625, -2.375, -2.984375,
           -2.328125, -4.09375, -4.25, -3.71875, -4.96875, -3.578125)
A_MEAN, A_STD, B_MEAN, B_STD, V_STD = -0.12, 1.26, 1.47, 2.01, 0.041   # capture-measured scales


def reference(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    tokens, q_heads, head = q.shape
    v_heads = v.shape[1]
    g = torch.exp(-torch.exp(A_log.to(acc)) * F.softplus(a.to(acc) + dt_bias.to(acc)))   # [T, Hv]
    beta = torch.sigmoid(b.to(acc))
    qx = q.repeat_interleave(v_heads // q_heads, dim=1)
    kx = k.repeat_interleave(v_heads // k.shape[1], dim=1)
    out = torch.zeros(tokens, v_heads, head, dtype=q.dtype, device=q.device)
    bounds = cu_seqlens.tolist()
    final = torch.zeros(len(bounds) - 1, v_heads, head, head, dtype=acc, device=q.device)
    for n in range(len(bounds) - 1):
        S = state[n].clone().to(acc).transpose(-1, -2)                  # [Hv, K, V]
        for t in range(bounds[n], bounds[n + 1]):
            qt, kt = qx[t].unsqueeze(1).to(acc), kx[t].unsqueeze(1).to(acc)   # [Hv, 1, K]
            vt = v[t].unsqueeze(1).to(acc)
            gt, bt = g[t][:, None, None], beta[t][:, None, None]
            decayed = gt * S
            old = kt @ decayed
            new = bt * vt + (1 - bt) * old
            S = (decayed - torch.einsum("hkl,hlv->hkv", kt.transpose(-1, -2), old)
                 + torch.einsum("hkl,hlv->hkv", kt.transpose(-1, -2), new))
            out[t] = (scale * (qt @ S)).squeeze(1).to(q.dtype)
        final[n] = S.transpose(-1, -2)
    return out, final


def layout(tokens, seqs, captured):
    if captured:
        return list(CAPTURED_CU_SEQLENS)
    gen = torch.Generator().manual_seed(LAYOUT_SEED)
    cuts = torch.randperm(tokens - 1, generator=gen)[:seqs - 1].sort().values + 1
    return [0] + cuts.tolist() + [tokens]


def make_inputs(tokens, seqs, q_heads, v_heads, head_dim, captured, *, seed, device="cuda"):
    bounds = layout(tokens, seqs, captured)
    assert (len(bounds) - 1, bounds[-1], v_heads) == (seqs, tokens, len(A_LOG))
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)
    bf16 = torch.bfloat16
    q = F.normalize(randn(tokens, q_heads, head_dim), p=2, dim=-1).to(bf16)
    k = F.normalize(randn(tokens, q_heads, head_dim), p=2, dim=-1).to(bf16)
    v = V_STD * randn(tokens, v_heads, head_dim, dtype=bf16)
    state = head_dim ** -0.5 * randn(seqs, v_heads, head_dim, head_dim)
    A_log = torch.tensor(A_LOG, dtype=torch.float32, device=device)
    a = (A_MEAN + A_STD * randn(tokens, v_heads)).to(bf16)
    dt_bias = torch.tensor(DT_BIAS, dtype=torch.float32, device=device)
    b = (B_MEAN + B_STD * randn(tokens, v_heads)).to(bf16)
    cu_seqlens = torch.tensor(bounds, dtype=torch.int64, device=device)
    return q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, SCALE
