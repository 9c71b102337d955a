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
N_GROUPS = 8       # module constant, as in the recipe


def reference(hidden_states, in_proj_weight, conv_weight, conv_bias, dt_bias, A_log, D,
              norm_weight, out_proj_weight, time_step_limit_min, time_step_limit_max, layer_norm_epsilon):
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
    xbc = F.conv1d(xbc.transpose(1, 2), conv_weight.to(acc), conv_bias.to(acc),
                   padding=D_CONV - 1, groups=conv_dim)[..., :seq].transpose(1, 2)
    xbc = F.silu(xbc)
    x, Bm, Cm = xbc.split([d_inner, groups_x_state, groups_x_state], dim=-1)
    groups = N_GROUPS
    state = groups_x_state // groups
    x = x.reshape(batch, seq, heads, head_dim)
    rep = heads // groups
    Bm = Bm.reshape(batch, seq, groups, state).repeat_interleave(rep, dim=2)   # [b, l, H, N]
    Cm = Cm.reshape(batch, seq, groups, state).repeat_interleave(rep, dim=2)

    dt = F.softplus(dt + dt_bias.to(acc))                  # [b, l, H]
    dt = torch.clamp(dt, time_step_limit_min, time_step_limit_max)
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
    yg = yg * torch.rsqrt(yg.pow(2).mean(-1, keepdim=True) + layer_norm_epsilon)
    y = yg.reshape(batch, seq, d_inner) * norm_weight.to(acc)

    out = y @ out_proj_weight.to(acc).T
    return out.to(hidden_states.dtype)


def make_inputs(batch, seq, hidden, heads, head_dim, groups, state, time_step_limit_min,
                time_step_limit_max, layer_norm_epsilon, *, seed, device="cuda"):
    assert groups == N_GROUPS
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    d_inner = heads * head_dim
    conv_dim = d_inner + 2 * groups * state
    projection = d_inner + conv_dim + heads
    return [
        randn(batch, seq, hidden).to(bf16),
        (randn(projection, hidden) / hidden ** 0.5).to(bf16),
        (randn(conv_dim, 1, D_CONV) / D_CONV ** 0.5).to(bf16),
        randn(conv_dim).to(bf16),
        randn(heads).to(bf16),
        torch.empty(heads, device=device).uniform_(-5.0, -1.0, generator=g).to(bf16),
        randn(heads).to(bf16),
        (1.0 + 0.1 * randn(d_inner)).to(bf16),
        (randn(hidden, d_inner) / d_inner ** 0.5).to(bf16),
        float(time_step_limit_min),
        float(time_step_limit_max),
        float(layer_norm_epsilon),
    ]
