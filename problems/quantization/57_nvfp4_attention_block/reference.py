"""Problem 57: NVFP4 QKV/O projections + RoPE around a bf16 attention core
(SOL-ExecBench style).

One Llama-3.1-8B attention layer on bf16 activations with NVFP4 weights
(W4A16: E2M1 codes, per-16 E4M3 scales, fp32 global scale per weight):
  q, k, v = split(x @ W_qkv^T)            32 q heads / 8 kv heads of 128
  q, k    = RoPE (NeoX rotate-half) from a cos/sin table
  a       = causal GQA softmax attention, scale head_dim^-1/2
  out     = a @ W_o^T
Batch 4 x 2048 tokens, hidden 4096.
"""
import torch

QUERIES_PER_KV = 4  # GQA group size (32 q heads / 8 kv heads); fixes the q/k/v split of W_qkv
ROPE_THETA = 500000.0  # Llama-3.1 base (its long-context frequency scaling is left out)

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


def rope_neox(x, cos, sin):
    """x [batch, heads, seq, head_dim]; cos, sin [seq, head_dim / 2]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def causal_gqa_attention(q, k, v):
    """q [b, hq, s, d]; k, v [b, hkv, s, d] -> [b, hq, s, d]."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    seq = q.shape[2]
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def reference(x, cos_sin, w_qkv_fp4, w_qkv_scale, w_qkv_global, w_o_fp4, w_o_scale, w_o_global):
    acc = torch.promote_types(x.dtype, torch.float32)
    batch, seq, hidden = x.shape
    head_dim = cos_sin.shape[-1]
    w_qkv = nvfp4_dequantize(w_qkv_fp4, w_qkv_scale, w_qkv_global, acc)
    w_o = nvfp4_dequantize(w_o_fp4, w_o_scale, w_o_global, acc)
    qkv = (x.to(acc) @ w_qkv.T).view(batch, seq, -1, head_dim).transpose(1, 2)
    kv_heads = qkv.shape[1] // (QUERIES_PER_KV + 2)
    q, k, v = qkv.split([QUERIES_PER_KV * kv_heads, kv_heads, kv_heads], dim=1)
    cos, sin = cos_sin.to(acc).chunk(2, dim=-1)
    q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
    a = causal_gqa_attention(q, k, v).transpose(1, 2).reshape(batch, seq, -1)
    return (a @ w_o.T).to(x.dtype)


def make_inputs(batch, seq, hidden, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    assert q_heads == QUERIES_PER_KV * kv_heads
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden).to(torch.bfloat16)
    inv_freq = ROPE_THETA ** -(torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim)
    angles = torch.arange(seq, device=device, dtype=torch.float64)[:, None] * inv_freq
    cos_sin = torch.cat((angles.cos(), angles.sin()), dim=-1).to(torch.float32)
    # W_qkv rows: q heads, then k heads, then v heads (head_dim rows each)
    w_qkv = draw((q_heads + 2 * kv_heads) * head_dim, hidden, scale=hidden ** -0.5)
    w_qkv_global = nvfp4_global_scale(w_qkv)
    w_qkv_fp4, w_qkv_scale = nvfp4_quantize(w_qkv, w_qkv_global)
    w_o = draw(hidden, q_heads * head_dim, scale=(q_heads * head_dim) ** -0.5)
    w_o_global = nvfp4_global_scale(w_o)
    w_o_fp4, w_o_scale = nvfp4_quantize(w_o, w_o_global)
    return x, cos_sin, w_qkv_fp4, w_qkv_scale, w_qkv_global, w_o_fp4, w_o_scale, w_o_global
