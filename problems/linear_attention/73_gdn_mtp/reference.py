"""Problem 73: gated delta net (GDN) multi-token (speculative) verification over
a pooled state, 8 q/k heads / 16 v heads, head size 128, state k-last
(FlashInfer-Trace gdn_mtp_qk8_v16_d128_k_last, Qwen3-Next 80B A3B).

Sequence n starts from pool entry initial_state[initial_state_indices[n]]
(transposed to S [H, K, V]) and runs seq tokens of the decode step of problem
72, head by head:

    S' = g S;   old = k S';   new = beta v + (1 - beta) o_old
    S  = S' - k old^T + k new^T;   o_t = scale * q S

Returns o [B, T, H, V] (bf16) and a copy of the pool, unchanged (the
published definition does not write the states back).
"""
import torch
import torch.nn.functional as F

SCALE = 0.08838834764831843
# The captured gate parameters of the 16 v heads and capture-measured scales.
A_LOG = (-1.046875, -0.5234375, -1.828125, -1.15625, -0.0244140625, 0.28515625, -1.9921875, -2.0, 0.11962890625,
         0.3671875, -1.59375, -1.34375, 0.333984375, -1.640625, -0.5234375, -0.2890625)
DT_BIAS = (-5.25, -5.75, -2.015625, -3.3125, -6.25, -6.65625, -0.88671875, -0.6328125, -4.8125, -5.28125,
           -1.7578125, -3.484375, 2.3125, -6.40625, -6.34375, -6.75)
A_MEAN, A_STD, B_MEAN, B_STD = 0.82, 2.24, 0.45, 2.02
Q_STD, K_STD, V_STD, STATE_STD = 0.63, 0.26, 0.13, 0.0215


def reference(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    batch, seq, q_heads, head = q.shape
    v_heads = v.shape[2]
    g = torch.exp(-torch.exp(A_log.to(acc)) * F.softplus(a.to(acc) + dt_bias.to(acc)))
    beta = torch.sigmoid(b.to(acc))
    qx = q.repeat_interleave(v_heads // q_heads, dim=2)
    kx = k.repeat_interleave(v_heads // k.shape[2], dim=2)
    out = torch.zeros(batch, seq, v_heads, head, dtype=q.dtype, device=q.device)
    for n, slot in enumerate(initial_state_indices.tolist()):
        S = initial_state[slot].clone().to(acc).transpose(-1, -2)
        for t in range(seq):
            qt, kt, vt = qx[n, t].to(acc), kx[n, t].to(acc), v[n, t].to(acc)
            for h in range(v_heads):
                kh = kt[h]
                decayed = g[n, t, h] * S[h]
                old = kh @ decayed
                new = beta[n, t, h] * vt[h] + (1 - beta[n, t, h]) * old
                Sh = decayed - kh.unsqueeze(1) @ old.unsqueeze(0) + kh.unsqueeze(1) @ new.unsqueeze(0)
                out[n, t, h] = (scale * (qt[h] @ Sh)).to(q.dtype)
                S[h] = Sh
    return out, initial_state.clone()


def make_inputs(batch, seq, pool, q_heads, v_heads, head_dim, *, seed, device="cuda"):
    assert v_heads == len(A_LOG) and batch <= pool and seq > 1
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)
    bf16 = torch.bfloat16
    q = Q_STD * randn(batch, seq, q_heads, head_dim, dtype=bf16)
    k = K_STD * randn(batch, seq, q_heads, head_dim, dtype=bf16)
    v = V_STD * randn(batch, seq, v_heads, head_dim, dtype=bf16)
    initial_state = STATE_STD * randn(pool, v_heads, head_dim, head_dim)
    indices = torch.randperm(pool, generator=g, device=device)[:batch].to(torch.int32)
    A_log = torch.tensor(A_LOG, dtype=torch.float32, device=device)
    a = (A_MEAN + A_STD * randn(batch, seq, v_heads)).to(bf16)
    dt_bias = torch.tensor(DT_BIAS, dtype=torch.float32, device=device)
    b = (B_MEAN + B_STD * randn(batch, seq, v_heads)).to(bf16)
    return q, k, v, initial_state, indices, A_log, a, dt_bias, b, SCALE
