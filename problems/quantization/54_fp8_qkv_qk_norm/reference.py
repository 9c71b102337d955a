"""Problem 54: FP8 QKV projection + per-head QK RMSNorm (SOL-ExecBench style).

qkv = x @ W_qkv^T with blockwise-scaled FP8 E4M3 operands (1x128 activation
groups, 128x128 weight tiles), split into q/k/v heads; q and k are
RMS-normalised per head over head_dim with learned weights (Qwen3 QK-norm).
Qwen3-8B attention shape: hidden 4096, 32 q heads / 8 kv heads of 128.
"""
import torch

EPS = 1e-6            # Qwen3's rms_norm_eps
QUERIES_PER_KV = 4    # GQA group size (32 q heads / 8 kv heads); fixes the q/k/v split of W_qkv

FP8_MAX = 448.0  # largest finite float8_e4m3fn magnitude


def fp8_quantize_groups(x, group):
    """Quantise x [rows, cols] to E4M3 with one fp32 scale per `group`
    consecutive elements of a row (x ~= e4m3 * scale). Returns (uint8 bits
    [rows, cols], fp32 scales [rows, cols / group])."""
    rows, cols = x.shape
    blocks = x.to(torch.float32).reshape(rows, cols // group, group)
    scale = blocks.abs().amax(dim=-1).clamp_min(1e-12) / FP8_MAX
    q = (blocks / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(torch.uint8).reshape(rows, cols), scale


def fp8_dequantize_groups(bits, scale, acc):
    """Inverse of fp8_quantize_groups, in dtype acc."""
    rows, cols = bits.shape
    group = cols // scale.shape[-1]
    vals = bits.view(torch.float8_e4m3fn).to(acc).reshape(rows, cols // group, group)
    return (vals * scale.to(acc)[..., None]).reshape(rows, cols)


def fp8_quantize_tiles(w, tile=128):
    """Quantise a weight w [n, k] to E4M3 with one fp32 scale per tile x tile
    block (the last row block may be partial: n need not divide by tile).
    Returns (uint8 bits [n, k], fp32 scales [ceil(n / tile), k / tile])."""
    n, k = w.shape
    nb = -(-n // tile)
    padded = torch.zeros(nb * tile, k, dtype=torch.float32, device=w.device)
    padded[:n] = w
    amax = padded.reshape(nb, tile, k // tile, tile).abs().amax(dim=(1, 3))
    scale = amax.clamp_min(1e-12) / FP8_MAX
    full = scale.repeat_interleave(tile, 0)[:n].repeat_interleave(tile, 1)
    q = (w.to(torch.float32) / full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(torch.uint8), scale


def fp8_dequantize_tiles(bits, scale, acc, tile=128):
    """Inverse of fp8_quantize_tiles, in dtype acc."""
    n = bits.shape[0]
    full = scale.to(acc).repeat_interleave(tile, 0)[:n].repeat_interleave(tile, 1)
    return bits.view(torch.float8_e4m3fn).to(acc) * full


def rms_norm(x, weight, acc):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.to(acc)


def reference(x_fp8, x_scale, w_fp8, w_scale, q_norm_weight, k_norm_weight):
    acc = torch.promote_types(q_norm_weight.dtype, torch.float32)
    out_dtype = q_norm_weight.dtype
    head_dim = q_norm_weight.shape[0]
    x = fp8_dequantize_groups(x_fp8, x_scale, acc)
    w = fp8_dequantize_tiles(w_fp8, w_scale, acc)
    qkv = (x @ w.T).view(x.shape[0], -1, head_dim)      # [tokens, q_heads + 2 kv_heads, head_dim]
    kv_heads = qkv.shape[1] // (QUERIES_PER_KV + 2)
    q, k, v = qkv.split([QUERIES_PER_KV * kv_heads, kv_heads, kv_heads], dim=1)
    q = rms_norm(q, q_norm_weight, acc)
    k = rms_norm(k, k_norm_weight, acc)
    return q.to(out_dtype), k.to(out_dtype), v.contiguous().to(out_dtype)


def make_inputs(tokens, hidden, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    assert q_heads == QUERIES_PER_KV * kv_heads
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x_fp8, x_scale = fp8_quantize_groups(draw(tokens, hidden), 128)
    # rows: q heads, then k heads, then v heads, head_dim rows each
    w_fp8, w_scale = fp8_quantize_tiles(draw((q_heads + 2 * kv_heads) * head_dim, hidden,
                                             scale=hidden ** -0.5))
    q_norm_weight = (1.0 + 0.1 * draw(head_dim)).to(torch.bfloat16)
    k_norm_weight = (1.0 + 0.1 * draw(head_dim)).to(torch.bfloat16)
    return x_fp8, x_scale, w_fp8, w_scale, q_norm_weight, k_norm_weight
