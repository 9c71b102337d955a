"""Problem 72: gated delta net (GDN) decode step, 8 q/k heads / 16 v heads,
head size 128, state k-last [B, H, V, K]
(FlashInfer-Trace gdn_decode_qk8_v16_d128_k_last, Qwen3-Next 80B A3B).

One token per sequence; for every (sequence, v head h) (q/k head h // 2),
with g = exp(-exp(A_log) * softplus(a + dt_bias)), beta = sigmoid(b) and
S [K, V] the transposed state:

    S' = g S;   old = k S';   new = beta v + (1 - beta) old
    S  = S' - k old^T + k new^T  (outer products);   o = scale * q S

Returns o [B, 1, H, V] (bf16) and the new state [B, H, V, K] (fp32). Written
as a Python loop over sequences and heads, one head at a time.
"""
import torch
import torch.nn.functional as F

SCALE = 0.08838834764831843
# The captured gate parameters of the 16 v heads and capture-measured scales.
A_LOG = (-0.169921875, 2.34375, 1.3359375, 2.1875, -0.9375, -1.09375, 1.765625, -0.443359375, 0.91015625,
         -0.8125, 2.328125, 0.205078125, 1.375, 2.796875, -0.88671875, -1.3046875)
DT_BIAS = (-2.078125, -5.625, -4.3125, -3.421875, -3.796875, -3.296875, -4.375, -6.25, -3.703125, -0.2890625,
           -5.21875, -6.1875, -3.046875, -5.0625, -4.875, -5.34375)
A_MEAN, A_STD, B_MEAN, B_STD = 1.33, 1.56, 0.4, 1.38
Q_STD, K_STD, V_STD, STATE_STD = 0.18, 0.13, 0.073, 0.009


def reference(q, k, v, state, A_log, a, dt_bias, b, scale):
    acc = torch.promote_types(q.dtype, torch.float32)
    batch, _, q_heads, _ = q.shape
    v_heads, head_v = v.shape[2], v.shape[3]
    g = torch.exp(-torch.exp(A_log.to(acc)) * F.softplus(a.to(acc) + dt_bias.to(acc))).squeeze(1)
    beta = torch.sigmoid(b.to(acc)).squeeze(1)
    qx = q.squeeze(1).to(acc).repeat_interleave(v_heads // q_heads, dim=1)
    kx = k.squeeze(1).to(acc).repeat_interleave(v_heads // k.shape[2], dim=1)
    vx = v.squeeze(1).to(acc)
    state = state.to(acc)
    new_state = torch.zeros_like(state)
    out = torch.zeros(batch, v_heads, head_v, dtype=acc, device=q.device)
    for n in range(batch):
        for h in range(v_heads):
            kh = kx[n, h]
            decayed = g[n, h] * state[n, h].clone().transpose(-1, -2)
            old = kh @ decayed
            new = beta[n, h] * vx[n, h] + (1 - beta[n, h]) * old
            S = decayed - kh.unsqueeze(1) @ old.unsqueeze(0) + kh.unsqueeze(1) @ new.unsqueeze(0)
            out[n, h] = scale * (qx[n, h] @ S)
            new_state[n, h] = S.transpose(-1, -2)
    return out.unsqueeze(1).to(q.dtype), new_state


def make_inputs(batch, q_heads, v_heads, head_dim, *, seed, device="cuda"):
    assert v_heads == len(A_LOG)
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)
    bf16 = torch.bfloat16
    q = Q_STD * randn(batch, 1, q_heads, head_dim, dtype=bf16)
    k = K_STD * randn(batch, 1, q_heads, head_dim, dtype=bf16)
    v = V_STD * randn(batch, 1, v_heads, head_dim, dtype=bf16)
    state = STATE_STD * randn(batch, v_heads, head_dim, head_dim)
    A_log = torch.tensor(A_LOG, dtype=torch.float32, device=device)
    a = (A_MEAN + A_STD * randn(batch, 1, v_heads)).to(bf16)
    dt_bias = torch.tensor(DT_BIAS, dtype=torch.float32, device=device)
    b = (B_MEAN + B_STD * randn(batch, 1, v_heads)).to(bf16)
    return q, k, v, state, A_log, a, dt_bias, b, SCALE
