"""Problem 67: complete Hyena block (Hyena small), fp32 (SOL-ExecBench recipe).

Pre-norm residual block, written after the Hyena (safari) HyenaOperator /
HyenaFilter / ExponentialModulation and its block:
    h = LayerNorm1(x)                                    (eps an input)
    z = in_proj(h) -> [b, 3d, l];  z = causal depthwise conv1d(z, 3) (short filter)
    x0, x1, v = split(z, d)
    implicit long filter: positions z_pos = [t, cos(f w), -sin(f w)] (EMB_DIM 5),
        k = Linear(sin(freq * Linear(sin(freq * Linear(sin(freq * Linear(z_pos)))))))   (shared Sin freq)
        k = k * (exp(-t * |exp_mod_deltas|) + exp_mod_shift)                            [l, d]
    v = v * x1;  v = irfft(rfft(v, 2l) * rfft(k, 2l) / 2l, norm="forward")[:l] + v * filter_bias
    x = x + out_proj((v * x0))
    out = x + fc2(gelu_tanh(fc1(LayerNorm2(x))))
All in compute_dtype = promote_types(hidden_states.dtype, fp32).
"""
import math

import torch
import torch.nn.functional as F

ORDER = 2
SHORT_FILTER_ORDER = 3
EMB_DIM = 5


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def reference(hidden_states, norm1_weight, norm1_bias, norm2_weight, norm2_bias,
              in_proj_weight, in_proj_bias, short_filter_weight, short_filter_bias,
              filter_in_weight, filter_in_bias, sin_freq, filter_mid1_weight, filter_mid1_bias,
              filter_mid2_weight, filter_mid2_bias, filter_out_weight, filter_bias, exp_mod_deltas,
              out_proj_weight, out_proj_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias,
              layer_norm_eps, exp_mod_shift):
    batch, seq_len, d_model = hidden_states.shape
    emb_dim = filter_in_weight.shape[1]
    device = hidden_states.device
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    c = lambda t: t.to(compute_dtype)

    x = c(hidden_states)
    h = _layer_norm(x, c(norm1_weight), c(norm1_bias), layer_norm_eps)

    # Hyena operator: projections and short depthwise filter
    u = F.linear(h, c(in_proj_weight), c(in_proj_bias)).transpose(1, 2)           # [b, 3d, l]
    uc = F.conv1d(u, c(short_filter_weight), c(short_filter_bias),
                  padding=SHORT_FILTER_ORDER - 1, groups=u.shape[1])[..., :seq_len]
    x0, x1, v = uc.split(d_model, dim=1)

    # implicit long filter
    t = torch.linspace(0, 1, seq_len, dtype=compute_dtype, device=device)[None, :, None]
    bands = (emb_dim - 1) // 2
    t_rescaled = torch.linspace(0, seq_len - 1, seq_len, dtype=compute_dtype, device=device)[None, :, None]
    w = 2 * math.pi * t_rescaled / seq_len
    f = torch.linspace(1e-4, bands - 1, bands, dtype=compute_dtype, device=device)[None, None]
    z = torch.cat([t, torch.cos(f * w), -torch.sin(f * w)], dim=-1)                # [1, l, EMB_DIM]
    freq = c(sin_freq)
    k = torch.sin(freq * F.linear(z, c(filter_in_weight), c(filter_in_bias)))
    k = torch.sin(freq * F.linear(k, c(filter_mid1_weight), c(filter_mid1_bias)))
    k = torch.sin(freq * F.linear(k, c(filter_mid2_weight), c(filter_mid2_bias)))
    k = F.linear(k, c(filter_out_weight))                                          # [1, l, d]
    decay = torch.exp(-t * c(exp_mod_deltas).abs())
    k = (k * (decay + exp_mod_shift))[0].transpose(0, 1)                           # [d, l]

    # order 2: one long convolution
    v = v * x1
    fft_size = 2 * seq_len
    k_f = torch.fft.rfft(k, n=fft_size) / fft_size
    u_f = torch.fft.rfft(v, n=fft_size)
    y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seq_len]
    v = y + v * c(filter_bias).unsqueeze(-1)
    y = (v * x0).transpose(1, 2)                                                   # [b, l, d]
    x = x + F.linear(y, c(out_proj_weight), c(out_proj_bias))

    # MLP
    h = _layer_norm(x, c(norm2_weight), c(norm2_bias), layer_norm_eps)
    h = F.gelu(F.linear(h, c(fc1_weight), c(fc1_bias)), approximate="tanh")
    out = x + F.linear(h, c(fc2_weight), c(fc2_bias))
    return out.to(hidden_states.dtype)


def make_inputs(batch, seq, d_model, d_inner, filter_order, eps, exp_mod_shift, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, dtype=torch.float32, device=device, generator=g)
    scale = 0.02   # hidden three-token factor on every weight / bias draw, reconstructed
    inner_width = d_model * (ORDER + 1)
    inputs = [
        randn(batch, seq, d_model),
        1 + 0.1 * randn(d_model), 0.1 * randn(d_model),
        1 + 0.1 * randn(d_model), 0.1 * randn(d_model),
        randn(inner_width, d_model) * scale, randn(inner_width) * scale,
        randn(inner_width, 1, SHORT_FILTER_ORDER) * scale, randn(inner_width) * scale,
        randn(filter_order, EMB_DIM) * scale, randn(filter_order) * scale,
        1 + 0.1 * randn(1, filter_order),
        randn(filter_order, filter_order) * scale, randn(filter_order) * scale,
        randn(filter_order, filter_order) * scale, randn(filter_order) * scale,
        randn(d_model, filter_order) * scale, randn(d_model) * scale,
    ]
    max_decay = math.log(0.01) / 0.3
    min_decay = math.log(0.01) / 1.5
    exp_mod_deltas = torch.linspace(min_decay, max_decay, d_model, dtype=torch.float32, device=device).view(1, 1, -1)
    inputs.append(exp_mod_deltas)
    inputs += [
        randn(d_model, d_model) * scale, randn(d_model) * scale,
        randn(d_inner, d_model) * scale, randn(d_inner) * scale,
        randn(d_model, d_inner) * scale, randn(d_model) * scale,
    ]
    return inputs + [float(eps), float(exp_mod_shift)]
