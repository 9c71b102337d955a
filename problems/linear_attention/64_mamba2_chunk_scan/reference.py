"""Problem 64: Mamba2 chunked SSD scan (mamba_chunk_scan_combined, forward).

Per head h (head_dim P, state N, B/C group h // (heads / groups)):

    dt_t = softplus(dt_raw_t + dt_bias);  a_t = exp(dt_t A),  A = -exp(A_log) < 0
    h_t  = a_t h_{t-1} + dt_t x_t B_t^T ,   y_t = h_t C_t + D x_t

evaluated the way the SSD algorithm does, in chunks of 256 tokens:
  1. intra-chunk (diagonal blocks): y_i += sum_{j<=i} (C_i . B_j) exp(cumA_i - cumA_j) dt_j x_j
  2. each chunk's own end state, from its tokens only
  3. a short recurrence over chunks carries the state across chunk boundaries
  4. inter-chunk (off-diagonal): y_i += exp(cumA_i) C_i . (state entering the chunk)
"""
import torch
import torch.nn.functional as F

CHUNK = 256


def reference(x, dt, A_log, B, C, D, dt_bias):
    acc = torch.promote_types(x.dtype, torch.float32)
    batch, seq, heads, head_dim = x.shape
    groups, state = B.shape[2], B.shape[3]
    rep = heads // groups
    out_dtype = x.dtype

    x = x.to(acc)
    dt = F.softplus(dt.to(acc) + dt_bias.to(acc))                  # [b, l, H]
    a = dt * -torch.exp(A_log.to(acc))                             # log decay per step
    B = B.to(acc)
    C = C.to(acc)

    # pad the tail to a whole chunk with dt = 0 (decay 1, no input)
    pad = (-seq) % CHUNK
    xp = F.pad(x, (0, 0, 0, 0, 0, pad))
    dtp, ap = F.pad(dt, (0, 0, 0, pad)), F.pad(a, (0, 0, 0, pad))
    Bp, Cp = F.pad(B, (0, 0, 0, 0, 0, pad)), F.pad(C, (0, 0, 0, 0, 0, pad))
    n = (seq + pad) // CHUNK

    # [b, chunk index, position in chunk, ...]; heads of a group read the same B/C
    xc = xp.reshape(batch, n, CHUNK, heads, head_dim)
    dtc = dtp.reshape(batch, n, CHUNK, heads)
    Bc = Bp.reshape(batch, n, CHUNK, groups, state).repeat_interleave(rep, dim=3)
    Cc = Cp.reshape(batch, n, CHUNK, groups, state).repeat_interleave(rep, dim=3)
    cum = ap.reshape(batch, n, CHUNK, heads).cumsum(dim=2)          # [b, n, l, H]
    cum_h = cum.permute(0, 1, 3, 2)                                 # [b, n, H, l]

    # 1. diagonal blocks
    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=x.device).tril()
    decay = torch.exp((cum_h[..., :, None] - cum_h[..., None, :]).masked_fill(~causal, float("-inf")))
    CB = torch.einsum("bcihn,bcjhn->bchij", Cc, Bc)                 # [b, n, H, l, l]
    W = CB * decay * dtc.permute(0, 1, 3, 2)[..., None, :]
    y = torch.einsum("bchij,bcjhp->bcihp", W, xc)

    # 2. state of each chunk from its own tokens, decayed to the chunk end
    to_end = torch.exp(cum[:, :, -1:, :] - cum) * dtc               # [b, n, l, H]
    chunk_states = torch.einsum("bclhp,bclhn->bchpn", xc * to_end[..., None], Bc)

    # 3. states entering each chunk
    chunk_decay = torch.exp(cum[:, :, -1, :])                       # [b, n, H]
    h = torch.zeros(batch, heads, head_dim, state, dtype=acc, device=x.device)
    entering = []
    for c in range(n):
        entering.append(h)
        h = chunk_decay[:, c, :, None, None] * h + chunk_states[:, c]
    entering = torch.stack(entering, dim=1)                         # [b, n, H, P, N]

    # 4. contribution of the entering state
    y = y + torch.einsum("bclhn,bchpn->bclhp", Cc * torch.exp(cum)[..., None], entering)

    y = y.reshape(batch, n * CHUNK, heads, head_dim)[:, :seq]
    y = y + D.to(acc)[:, None] * x
    return y.to(out_dtype).contiguous()


def make_inputs(batch, seq, heads, head_dim, groups, state, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    x = randn(batch, seq, heads, head_dim).to(bf16)
    dt = randn(batch, seq, heads).to(bf16)
    # Mamba2 initialisation: dt log-uniform in [1e-3, 1e-1] stored as inverse softplus; A in [1, 16]
    dt0 = torch.exp(torch.log(torch.tensor(1e-3)).item() + rand(heads) * torch.log(torch.tensor(100.0)).item())
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))
    A_log = torch.log(1.0 + 15.0 * rand(heads))
    B = randn(batch, seq, groups, state).to(bf16)
    C = (state ** -0.5 * randn(batch, seq, groups, state)).to(bf16)
    D = 1.0 + 0.1 * randn(heads)
    return x, dt, A_log, B, C, D, dt_bias
