"""Problem 66: RWKV-4 WKV recurrence, fp32.

Per channel c, with decay w = -exp(time_decay) < 0 and bonus u = time_first:

    wkv_t = (sum_{i<t} exp(w (t-1-i) + k_i) v_i + exp(u + k_t) v_t)
          / (sum_{i<t} exp(w (t-1-i) + k_i)      + exp(u + k_t))

computed as the RWKV-4 kernel does: a per-token recurrence over the sequence
on running numerator/denominator (a, b) scaled by a running maximum exponent p,
so nothing overflows. All batch elements and channels advance together.
"""
import torch


def reference(time_decay, time_first, k, v):
    acc = torch.promote_types(k.dtype, torch.float32)
    batch, seq, channels = k.shape
    out_dtype = v.dtype
    w = -torch.exp(time_decay.to(acc))
    u = time_first.to(acc)
    k = k.to(acc)
    v = v.to(acc)

    a = torch.zeros(batch, channels, dtype=acc, device=k.device)       # scaled numerator
    b = torch.zeros(batch, channels, dtype=acc, device=k.device)       # scaled denominator
    p = torch.full((batch, channels), -1e38, dtype=acc, device=k.device)  # running max exponent
    out = []
    for t in range(seq):
        kt, vt = k[:, t], v[:, t]
        # output: past (a, b) plus the current token with its bonus u
        ww = u + kt
        q = torch.maximum(p, ww)
        e1, e2 = torch.exp(p - q), torch.exp(ww - q)
        out.append((e1 * a + e2 * vt) / (e1 * b + e2))
        # state: decay the past by exp(w), add the current token
        ww = w + p
        q = torch.maximum(ww, kt)
        e1, e2 = torch.exp(ww - q), torch.exp(kt - q)
        a = e1 * a + e2 * vt
        b = e1 * b + e2
        p = q
    return torch.stack(out, dim=1).to(out_dtype)


def make_inputs(batch, seq, channels, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    # RWKV-4 initialisation: decay speeds spread from -5 to 3 across channels, bonus ~ log(0.3)
    ratio = torch.arange(channels, device=device, dtype=torch.float32) / max(channels - 1, 1)
    time_decay = -5.0 + 8.0 * ratio ** 1.2 + 0.1 * randn(channels)
    time_first = torch.log(torch.tensor(0.3)).item() + 0.5 * randn(channels)
    k = randn(batch, seq, channels)
    v = randn(batch, seq, channels)
    return time_decay, time_first, k, v
