"""Problem 12: Gemma-3n audio-encoder local attention, fp32 (SOL-ExecBench style).

Streaming conformer self-attention: every frame t attends to itself and the
PAST_FRAMES frames before it (a causal band), with a Transformer-XL style
relative-position term and a logit soft-cap:
    q = (x Wq^T) * head_dim^-0.5 / softplus(0) * softplus(per_dim_scale)
    k, v = x Wk^T, x Wv^T
    rel[r] = sinusoid(r) Wpos^T                  r = t - s = 0 .. PAST_FRAMES
    logit[t, r] = q_t . (k_{t-r} + rel[r])       (only where t - r >= 0)
    logit = SOFTCAP * tanh(logit / SOFTCAP);  p = softmax over r
    out = (sum_r p[t, r] v_{t-r}) Wo^T
"""
import math

import torch

PAST_FRAMES = 12        # Gemma-3n audio: 13 frames of left context including the frame itself, none to the right
SOFTCAP = 50.0          # Gemma-3n audio attention logit cap
MIN_TIMESCALE, MAX_TIMESCALE = 1.0, 1.0e4


def _relative_signal(hidden, dtype, device):
    # sinusoidal embedding of the distances 0..PAST_FRAMES: [PAST_FRAMES+1, hidden]
    n = hidden // 2
    inc = math.log(MAX_TIMESCALE / MIN_TIMESCALE) / max(n - 1, 1)
    inv = MIN_TIMESCALE * torch.exp(-inc * torch.arange(n, device=device, dtype=dtype))
    r = torch.arange(PAST_FRAMES + 1, device=device, dtype=dtype)[:, None] * inv[None, :]
    return torch.cat([r.sin(), r.cos()], dim=-1)


def reference(x, w_q, w_k, w_v, w_pos, per_dim_scale, w_o):
    acc = torch.promote_types(x.dtype, torch.float32)
    batch, seq, hidden = x.shape
    head_dim = per_dim_scale.shape[0]
    heads = w_q.shape[0] // head_dim
    xa = x.to(acc)
    sp = torch.nn.functional.softplus
    q_scale = head_dim ** -0.5 / math.log(2.0) * sp(per_dim_scale.to(acc))  # 1/softplus(0) = 1/ln 2
    q = (xa @ w_q.to(acc).T).view(batch, seq, heads, head_dim) * q_scale
    k = (xa @ w_k.to(acc).T).view(batch, seq, heads, head_dim)
    v = (xa @ w_v.to(acc).T).view(batch, seq, heads, head_dim)
    rel = (_relative_signal(hidden, acc, x.device) @ w_pos.to(acc).T).view(-1, heads, head_dim)

    # Frame t - r sits at padded position PAST_FRAMES + t - r.
    pad = (0, 0, 0, 0, PAST_FRAMES, 0)
    k_pad = torch.nn.functional.pad(k, pad)
    v_pad = torch.nn.functional.pad(v, pad)
    logits = torch.stack([
        (q * (k_pad[:, PAST_FRAMES - r: PAST_FRAMES - r + seq] + rel[r])).sum(dim=-1)
        for r in range(PAST_FRAMES + 1)], dim=-1)                     # [batch, seq, heads, 13]
    logits = SOFTCAP * torch.tanh(logits / SOFTCAP)
    t = torch.arange(seq, device=x.device)[:, None]
    r = torch.arange(PAST_FRAMES + 1, device=x.device)[None, :]
    logits = logits.masked_fill((t < r)[None, :, None, :], float("-inf"))
    p = torch.softmax(logits, dim=-1)
    ctx = sum(p[..., r, None] * v_pad[:, PAST_FRAMES - r: PAST_FRAMES - r + seq]
              for r in range(PAST_FRAMES + 1))
    out = ctx.reshape(batch, seq, heads * head_dim) @ w_o.to(acc).T
    return out.to(x.dtype)


def make_inputs(batch, seq, hidden, heads, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    head_dim = hidden // heads
    x = draw(batch, seq, hidden)
    w_q = draw(hidden, hidden, scale=hidden ** -0.5)
    w_k = draw(hidden, hidden, scale=hidden ** -0.5)
    w_v = draw(hidden, hidden, scale=hidden ** -0.5)
    w_pos = draw(hidden, hidden, scale=hidden ** -0.5)
    per_dim_scale = draw(head_dim, scale=0.5)
    w_o = draw(hidden, hidden, scale=hidden ** -0.5)
    return x, w_q, w_k, w_v, w_pos, per_dim_scale, w_o
