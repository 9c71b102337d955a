"""Problem 56: FP8 MLA KV compression + FP8 requantisation (SOL-ExecBench style).

DeepSeek-V3 multi-head latent attention, the KV path of one layer:
  [c_kv | k_pe] = x @ W_kv_a^T            (FP8 E4M3 blockwise: 1x128 activation
                                            groups, 128x128 weight tiles; 576 rows)
  c_kv  = RMSNorm(c_kv) * weight           (kv_lora_rank 512)
  k_pe  = RoPE(k_pe, positions)            (64 dims, interleaved pairs)
  c_kv is requantised to E4M3 with one fp32 scale per 128 elements, as an FP8
  MLA cache stores it (512 fp8 + 4 fp32 scales + 64 bf16 rope values per token).
Returns the requantised cache values dequantised (bf16), their scales (fp32)
and k_pe (bf16): see notes on why not the raw FP8 bytes.
"""
import torch

EPS = 1e-6          # DeepSeek-V3 rms_norm_eps
CACHE_GROUP = 128   # requantisation group of the FP8 cache
ROPE_THETA = 10000.0
MAX_POSITION = 16384

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


def rope_interleaved(x, cos, sin):
    """GPT-J style RoPE: pairs (x[2i], x[2i+1]) rotated by angle i."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1).flatten(-2)


def reference(x_fp8, x_scale, w_fp8, w_scale, kv_norm_weight, cos_sin_cache, positions):
    acc = torch.promote_types(kv_norm_weight.dtype, torch.float32)
    out_dtype = kv_norm_weight.dtype
    rank = kv_norm_weight.shape[0]
    x = fp8_dequantize_groups(x_fp8, x_scale, acc)
    w = fp8_dequantize_tiles(w_fp8, w_scale, acc)
    c_kv, k_pe = (x @ w.T).split([rank, w.shape[0] - rank], dim=-1)
    c_kv = c_kv * torch.rsqrt(c_kv.pow(2).mean(dim=-1, keepdim=True) + EPS) * kv_norm_weight.to(acc)
    cos, sin = cos_sin_cache.to(acc)[positions].chunk(2, dim=-1)
    k_pe = rope_interleaved(k_pe, cos, sin)
    # requantise c_kv: scale = amax / 448 per 128-group, values rounded to E4M3
    groups = c_kv.unflatten(-1, (-1, CACHE_GROUP))
    scale = groups.abs().amax(dim=-1).clamp_min(1e-12) / FP8_MAX
    q = (groups / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    c_kv_cache = (q.to(acc) * scale[..., None]).flatten(-2)
    return c_kv_cache.to(out_dtype), scale, k_pe.to(out_dtype)


def make_inputs(tokens, hidden, kv_lora_rank, rope_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x_fp8, x_scale = fp8_quantize_groups(draw(tokens, hidden), 128)
    # rows [0, kv_lora_rank) compress KV, the last rope_dim rows give k_pe (576 rows: 5 tiles, last partial)
    w_fp8, w_scale = fp8_quantize_tiles(draw(kv_lora_rank + rope_dim, hidden, scale=hidden ** -0.5))
    kv_norm_weight = (1.0 + 0.1 * draw(kv_lora_rank)).to(torch.bfloat16)
    inv_freq = ROPE_THETA ** -(torch.arange(0, rope_dim, 2, device=device, dtype=torch.float64) / rope_dim)
    angles = torch.arange(MAX_POSITION, device=device, dtype=torch.float64)[:, None] * inv_freq
    cos_sin_cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(torch.float32)
    positions = torch.randint(0, MAX_POSITION, (tokens,), generator=g, device=device)
    return x_fp8, x_scale, w_fp8, w_scale, kv_norm_weight, cos_sin_cache, positions
