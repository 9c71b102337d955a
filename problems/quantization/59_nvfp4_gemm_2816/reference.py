"""Problem 59: NVFP4 GEMM, 32,768 x 4096 -> 2816 (SOL-ExecBench style).

out = A @ B^T with both operands NVFP4 (W4A4): E2M1 codes, one E4M3 scale
per 16 elements along K, one fp32 global scale per tensor.
"""
import torch

# NVFP4: E2M1 codes (bit 3 sign, bits 2-1 exponent, bit 0 mantissa), two per
# uint8 (element 2j in the LOW nibble, element 2j+1 in the HIGH nibble), one
# E4M3 scale (uint8 bits) per 16 consecutive elements along the last (K) axis,
# one fp32 global scale per tensor: x ~= e2m1 * e4m3_scale * global_scale.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # codes 0..7; 8..15 negative
NVFP4_BLOCK = 16
E4M3_MAX = 448.0
E2M1_MAX = 6.0


def nvfp4_dequantize(packed, scale_bits, global_scale, acc):
    """packed uint8 [..., K/2], scale_bits uint8 [..., K/16], global_scale [1]
    -> values [..., K] in dtype acc (lookup table and bit operations only)."""
    lut = torch.tensor(E2M1_MAGNITUDES + tuple(-m for m in E2M1_MAGNITUDES),
                       dtype=acc, device=packed.device)
    codes = torch.stack((packed & 0x0F, packed >> 4), dim=-1).flatten(-2)
    vals = lut[codes.long()]
    vals = vals.unflatten(-1, (-1, NVFP4_BLOCK))
    vals = vals * scale_bits.view(torch.float8_e4m3fn).to(acc)[..., None]
    return vals.flatten(-2) * global_scale.to(acc)


def nvfp4_quantize(x, global_scale):
    """x float [..., K] (K % 16 == 0), global_scale [1] (same dtype family)
    -> (packed uint8 [..., K/2], scale_bits uint8 [..., K/16]).
    Block scale = amax/6/global rounded to E4M3; elements rounded to the
    nearest E2M1 value, ties to the even code, saturating at 6."""
    blocks = x.unflatten(-1, (-1, NVFP4_BLOCK))
    amax = blocks.abs().amax(dim=-1)
    scale = (amax / E2M1_MAX / global_scale).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    step = scale.to(x.dtype) * global_scale
    step = torch.where(step == 0, torch.ones_like(step), step)
    a = (blocks / step[..., None]).abs()
    # thresholds between neighbouring magnitudes; ">=" where the tie goes up to an even code
    code = ((a > 0.25).to(torch.uint8) + (a >= 0.75).to(torch.uint8) + (a > 1.25).to(torch.uint8)
            + (a >= 1.75).to(torch.uint8) + (a > 2.5).to(torch.uint8) + (a >= 3.5).to(torch.uint8)
            + (a > 5.0).to(torch.uint8))
    code = code | ((blocks < 0).to(torch.uint8) << 3)
    code = code.flatten(-2)
    packed = code[..., 0::2] | (code[..., 1::2] << 4)
    return packed, scale.view(torch.uint8)


def nvfp4_global_scale(x):
    """Per-tensor fp32 global scale so that the largest block scale is 448."""
    return (x.abs().amax().to(torch.float32) / (E4M3_MAX * E2M1_MAX)).clamp_min(1e-12).reshape(1)


def reference(a_fp4, a_scale, a_global, b_fp4, b_scale, b_global):
    acc = torch.promote_types(a_global.dtype, torch.float32)
    out_dtype = torch.bfloat16 if acc == torch.float32 else acc  # float64 anchor stays float64
    a = nvfp4_dequantize(a_fp4, a_scale, a_global, acc)      # [m, k]
    b = nvfp4_dequantize(b_fp4, b_scale, b_global, acc)      # [n, k]
    return (a @ b.T).to(out_dtype)


def make_inputs(m, k, n, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def quantized(rows, scale):
        t = scale * torch.randn(rows, k, generator=g, device=device, dtype=torch.float32)
        gs = nvfp4_global_scale(t)
        packed, block_scale = nvfp4_quantize(t, gs)
        return packed, block_scale, gs
    return (*quantized(m, 1.0), *quantized(n, k ** -0.5))
