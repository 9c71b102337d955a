"""Problem 67: Hyena operator block (order 2) with FFT long convolution, fp32.

    z          = u W_in^T + b_in                        [batch, seq, 3 dim]
    z          = causal depthwise conv1d(z, width 3) + b_short  (short filter)
    x0, x1, v  = split(z, dim)
    v          = v * x1
    v          = causal long convolution of v with a per-channel filter h [dim, seq]
                 (via FFT, zero-padded to 2 seq) + filter_bias * v
    y          = (v * x0) W_out^T + b_out

The long filter h is given explicitly (in Hyena it comes from an implicit MLP
over positions with exponential decay; that is parameter generation, done in
make_inputs).
"""
import torch
import torch.nn.functional as F

SHORT = 3


def reference(u, in_weight, in_bias, short_weight, short_bias, filt, filt_bias, out_weight, out_bias):
    acc = torch.promote_types(u.dtype, torch.float32)
    out_dtype = u.dtype
    batch, seq, dim = u.shape

    z = u.to(acc) @ in_weight.to(acc).T + in_bias.to(acc)           # [b, l, 3d]
    z = z.transpose(1, 2)                                            # [b, 3d, l]
    z = F.conv1d(z, short_weight.to(acc)[:, None, :], short_bias.to(acc),
                 padding=SHORT - 1, groups=3 * dim)[..., :seq]
    x0, x1, v = z.split(dim, dim=1)

    v = v * x1
    n = 2 * seq                                                      # no circular wrap-around
    v_f = torch.fft.rfft(v, n=n)
    h_f = torch.fft.rfft(filt.to(acc), n=n)
    conv = torch.fft.irfft(v_f * h_f, n=n)[..., :seq]
    v = conv + v * filt_bias.to(acc)[:, None]

    y = (v * x0).transpose(1, 2)                                     # [b, l, d]
    out = y @ out_weight.to(acc).T + out_bias.to(acc)
    return out.to(out_dtype)


def make_inputs(batch, seq, dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    u = randn(batch, seq, dim)
    in_weight = dim ** -0.5 * randn(3 * dim, dim)
    in_bias = 0.1 * randn(3 * dim)
    short_weight = SHORT ** -0.5 * randn(3 * dim, SHORT)
    short_bias = 0.1 * randn(3 * dim)
    # long filters: noise under an exponential decay (rate per channel log-uniform in [0.3, 30]
    # over the sequence), each normalised to unit L2 norm so the convolution keeps O(1) values
    t = torch.arange(seq, device=device, dtype=torch.float32) / seq
    rate = torch.exp(torch.log(torch.tensor(0.3)).item() + rand(dim, 1) * torch.log(torch.tensor(100.0)).item())
    filt = randn(dim, seq) * torch.exp(-rate * t)
    filt = filt / filt.norm(dim=-1, keepdim=True)
    filt_bias = randn(dim)
    out_weight = dim ** -0.5 * randn(dim, dim)
    out_bias = 0.1 * randn(dim)
    return u, in_weight, in_bias, short_weight, short_bias, filt, filt_bias, out_weight, out_bias
