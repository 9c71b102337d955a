"""Problem 61: NVFP4 SwiGLU MLP with requantisation (SOL-ExecBench style).

Llama-3.1-8B MLP in W4A4 NVFP4 (E2M1 codes, per-16 E4M3 scales along K,
fp32 global scale per tensor):
  h   = silu(x W_gate^T) * (x W_up^T)     x and the merged [gate; up] weight NVFP4
  h_q = NVFP4(h)                           requantised: dynamic per-16 E4M3 block
                                           scales under a static (calibrated)
                                           global scale h_global
  out = h_q @ W_down^T                     W_down NVFP4, out bf16
4096 tokens, hidden 4096, intermediate 14,336.
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


def reference(x_fp4, x_scale, x_global, w_gu_fp4, w_gu_scale, w_gu_global,
              w_down_fp4, w_down_scale, w_down_global, h_global):
    acc = torch.promote_types(x_global.dtype, torch.float32)
    out_dtype = torch.bfloat16 if acc == torch.float32 else acc  # float64 anchor stays float64
    x = nvfp4_dequantize(x_fp4, x_scale, x_global, acc)
    w_gu = nvfp4_dequantize(w_gu_fp4, w_gu_scale, w_gu_global, acc)
    gate, up = (x @ w_gu.T).chunk(2, dim=-1)
    h = torch.nn.functional.silu(gate) * up
    h_fp4, h_scale = nvfp4_quantize(h, h_global.to(acc))
    h_q = nvfp4_dequantize(h_fp4, h_scale, h_global, acc)
    w_down = nvfp4_dequantize(w_down_fp4, w_down_scale, w_down_global, acc)
    return (h_q @ w_down.T).to(out_dtype)


def make_inputs(tokens, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def quantized(t):
        gs = nvfp4_global_scale(t)
        return (*nvfp4_quantize(t, gs), gs)
    x = draw(tokens, hidden)
    # rows [0, intermediate) gate, [intermediate, 2*intermediate) up
    w_gu = draw(2 * intermediate, hidden, scale=hidden ** -0.5)
    w_down = draw(hidden, intermediate, scale=intermediate ** -0.5)
    x_q, w_gu_q, w_down_q = quantized(x), quantized(w_gu), quantized(w_down)
    # static activation global scale, calibrated as an offline pass would: amax of h on these inputs
    acc = torch.float32
    xd = nvfp4_dequantize(*x_q, acc)
    gate, up = (xd @ nvfp4_dequantize(*w_gu_q, acc).T).chunk(2, dim=-1)
    h_global = nvfp4_global_scale(torch.nn.functional.silu(gate) * up)
    return (*x_q, *w_gu_q, *w_down_q, h_global)
