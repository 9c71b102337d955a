"""Problem 55: NVFP4 multimodal embedding projection (SOL-ExecBench style).

Gemma-3n style soft-token embedder: vision-tower features are RMS-normalised
(learned weight), projected to the text hidden size by an NVFP4 weight
(W4A16: bf16 activations, E2M1 weight codes with per-16 E4M3 scales and an
fp32 global scale), then RMS-normalised again without a weight.
Shape: 64 images x 256 soft tokens, vision 2048 -> text hidden 2560 (Gemma-3n E4B).
"""
import torch

EPS = 1e-6  # Gemma's rms_norm_eps

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


def rms_norm(x):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)


def reference(features, norm_weight, w_fp4, w_scale, w_global):
    acc = torch.promote_types(features.dtype, torch.float32)
    x = rms_norm(features.to(acc)) * norm_weight.to(acc)
    w = nvfp4_dequantize(w_fp4, w_scale, w_global, acc)      # [text_hidden, vision_hidden]
    return rms_norm(x @ w.T).to(features.dtype)


def make_inputs(tokens, vision_hidden, text_hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    features = (3.0 * draw(tokens, vision_hidden)).to(torch.bfloat16)
    norm_weight = (1.0 + 0.1 * draw(vision_hidden)).to(torch.bfloat16)
    w = draw(text_hidden, vision_hidden, scale=vision_hidden ** -0.5)
    w_global = nvfp4_global_scale(w)
    w_fp4, w_scale = nvfp4_quantize(w, w_global)
    return features, norm_weight, w_fp4, w_scale, w_global
