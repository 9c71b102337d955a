"""Problem 63: a full Mamba2 layer (in_proj -> causal conv -> SSD scan -> gated RMSNorm -> out_proj).

    zxbcdt = x W_in^T                      split into z [d_inner], xBC [d_inner + 2 G N], dt [H]
    xBC    = silu(causal depthwise conv1d(xBC, width 4) + bias)   split into x, B [G, N], C [G, N]
    dt     = softplus(dt + dt_bias);  A = -exp(A_log)
    h_t    = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T        per head: h [head_dim, state]
    y_t    = h_t C_t + D x_t
    y      = RMSNorm_grouped(y * silu(z)) * norm_weight   (norm_before_gate=False, G groups)
    out    = y W_out^T

Head h reads group h // (heads / groups). The scan is written as the plain
per-token recurrence over the sequence (all batch elements and heads at once).
"""
import torch
import torch.nn.functional as F

D_CONV = 4
D_STATE = 128      # Mamba2 default; the groups count follows from the conv width
NORM_EPS = 1e-5


def reference(hidden_states, in_proj_weight, conv_weight, conv_bias, dt_bias, A_log, D,
              norm_weight, out_proj_weight):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    batch, seq, _ = hidden_states.shape
    heads = A_log.shape[0]
    d_inner = norm_weight.shape[0]
    head_dim = d_inner // heads
    conv_dim = conv_weight.shape[0]
    groups_x_state = (conv_dim - d_inner) // 2

    zxbcdt = hidden_states.to(acc) @ in_proj_weight.to(acc).T
    z, xbc, dt = zxbcdt.split([d_inner, conv_dim, heads], dim=-1)

    # causal depthwise convolution over time, then SiLU
    xbc = F.conv1d(xbc.transpose(1, 2), conv_weight.to(acc)[:, None, :], conv_bias.to(acc),
                   padding=D_CONV - 1, groups=conv_dim)[..., :seq].transpose(1, 2)
    xbc = F.silu(xbc)
    x, Bm, Cm = xbc.split([d_inner, groups_x_state, groups_x_state], dim=-1)
    state = D_STATE
    groups = groups_x_state // state
    x = x.reshape(batch, seq, heads, head_dim)
    rep = heads // groups
    Bm = Bm.reshape(batch, seq, groups, state).repeat_interleave(rep, dim=2)   # [b, l, H, N]
    Cm = Cm.reshape(batch, seq, groups, state).repeat_interleave(rep, dim=2)

    dt = F.softplus(dt + dt_bias.to(acc))                  # [b, l, H]
    A = -torch.exp(A_log.to(acc))                          # [H]
    dA = torch.exp(dt * A)                                 # per-step decay in (0, 1)

    h = torch.zeros(batch, heads, head_dim, state, dtype=acc, device=x.device)
    ys = []
    for t in range(seq):
        h = h * dA[:, t, :, None, None] + (dt[:, t, :, None] * x[:, t])[..., None] * Bm[:, t, :, None, :]
        ys.append(h @ Cm[:, t, :, :, None])                # [b, H, P, 1]
    y = torch.stack(ys, dim=1).squeeze(-1)                 # [b, l, H, P]
    y = y + D.to(acc)[:, None] * x
    y = y.reshape(batch, seq, d_inner)

    # gated RMSNorm, normalised over groups of d_inner / G channels
    y = y * F.silu(z)
    yg = y.reshape(batch, seq, groups, d_inner // groups)
    yg = yg * torch.rsqrt(yg.pow(2).mean(-1, keepdim=True) + NORM_EPS)
    y = yg.reshape(batch, seq, d_inner) * norm_weight.to(acc)

    out = y @ out_proj_weight.to(acc).T
    return out.to(hidden_states.dtype)


def make_inputs(batch, seq, hidden, heads, head_dim, groups, state, *, seed, device="cuda"):
    assert state == D_STATE
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    d_inner = heads * head_dim
    conv_dim = d_inner + 2 * groups * state
    bf16 = torch.bfloat16
    hidden_states = randn(batch, seq, hidden).to(bf16)
    in_proj_weight = (hidden ** -0.5 * randn(2 * d_inner + 2 * groups * state + heads, hidden)).to(bf16)
    conv_weight = (0.5 * randn(conv_dim, D_CONV)).to(bf16)
    conv_bias = (0.1 * randn(conv_dim)).to(bf16)
    # Mamba2 initialisation: dt log-uniform in [1e-3, 1e-1] stored as inverse softplus; A in [1, 16]
    dt0 = torch.exp(rand(heads) * (torch.log(torch.tensor(0.1)) - torch.log(torch.tensor(1e-3))).item()
                    + torch.log(torch.tensor(1e-3)).item())
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))
    A_log = torch.log(1.0 + 15.0 * rand(heads))
    D = 1.0 + 0.1 * randn(heads)
    norm_weight = (1.0 + 0.1 * randn(d_inner)).to(bf16)
    out_proj_weight = (d_inner ** -0.5 * randn(hidden, d_inner)).to(bf16)
    return (hidden_states, in_proj_weight, conv_weight, conv_bias, dt_bias, A_log, D,
            norm_weight, out_proj_weight)
