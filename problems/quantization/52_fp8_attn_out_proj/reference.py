"""Problem 52: FP8 attention output projection (SOL-ExecBench style).

out = attn_out @ W_o^T with both operands stored as blockwise-scaled FP8 E4M3
(DeepSeek-V3 style): activations with one fp32 scale per 1x128 group of a
row, the weight with one fp32 scale per 128x128 tile. 16,384 tokens,
in_features 7680 (60 heads x 128); out_features 7680 (square o_proj).
"""
import torch

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


def reference(x_fp8, x_scale, w_fp8, w_scale):
    acc = torch.promote_types(x_scale.dtype, torch.float32)
    out_dtype = torch.bfloat16 if acc == torch.float32 else acc  # float64 anchor stays float64
    x = fp8_dequantize_groups(x_fp8, x_scale, acc)
    w = fp8_dequantize_tiles(w_fp8, w_scale, acc)
    return (x @ w.T).to(out_dtype)


def make_inputs(tokens, in_features, out_features, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x_fp8, x_scale = fp8_quantize_groups(draw(tokens, in_features), 128)
    w_fp8, w_scale = fp8_quantize_tiles(draw(out_features, in_features, scale=in_features ** -0.5))
    return x_fp8, x_scale, w_fp8, w_scale
