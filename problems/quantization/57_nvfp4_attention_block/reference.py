"""Problem 57: NVFP4 (W4A4) Q/K/V/O projections with RoPE around an
unquantised causal GQA attention core (SOL-ExecBench, 64 q / 8 kv heads).

  every projection: its input is quantised to NVFP4 inside the reference, then
  NVFP4 x NVFP4 GEMM (separate q, k, v, o weights), result rounded to the
  activation dtype;
  q, k  rotate-half RoPE with the given cos / sin [batch, seq, head_dim];
  a     causal softmax attention (scale head_dim^-1/2, kv heads shared by
        groups of 8 q heads), softmax in the accumulation dtype;
  out   = o projection of a, [batch, seq, hidden].
"""
import math

import torch
import torch.nn.functional as F

# NVFP4 as the SOL-ExecBench Quant problems define it (1 x 16 blocks along K):
#   global_decode = amax(|t|) / (448 * 6)                      (fp32 scalar)
#   block scale   = clamp(block_amax / 6 / global_decode, +-448) rounded to E4M3
#   element code  = E2M1 of clamp(t / (block scale * global_decode), +-6)
# E2M1 codes: bit 3 sign, magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 for codes 0..7;
# two codes per byte (even column in the low nibble), stored as float4_e2m1fn_x2.
# Rounding to E2M1: nearest value, exact midpoints go to the even code
# (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4).
SF_VEC = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0
E2M1_TABLE = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _e2m1_codes(v):
    """v fp32, already inside [-6, 6] -> uint8 codes 0..15."""
    a = v.abs()
    mag = ((a > 0.25).to(torch.uint8) + (a >= 0.75).to(torch.uint8) + (a > 1.25).to(torch.uint8)
           + (a >= 1.75).to(torch.uint8) + (a > 2.5).to(torch.uint8) + (a >= 3.5).to(torch.uint8)
           + (a > 5.0).to(torch.uint8))
    return mag | ((v < 0).to(torch.uint8) << 3)


def nvfp4_quantize(t):
    """t [b, rows, cols] (cols % 16 == 0), any float dtype; quantised in fp32.
    Returns (codes float4_e2m1fn_x2 [b, rows, cols/2], block scales
    float8_e4m3fn [b, rows, cols/16], global decode scale fp32 0-d tensor)."""
    t = t.to(torch.float32)
    b, rows, cols = t.shape
    blocks = t.reshape(b, rows, cols // SF_VEC, SF_VEC)
    block_scale = (blocks.abs().amax(dim=-1) / E2M1_MAX).to(torch.float32)
    fmax = torch.finfo(torch.float32).max
    global_encode = torch.clamp((E4M3_MAX * E2M1_MAX) / t.abs().amax(), max=fmax)
    if global_encode == 0:
        global_encode = torch.ones((), dtype=torch.float32, device=t.device)
    global_decode = 1.0 / global_encode
    scales = torch.clamp(block_scale * global_encode, -E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    encode = torch.clamp(1.0 / (scales.to(torch.float32) * global_decode), max=fmax)
    v = torch.clamp(blocks * encode[..., None], -E2M1_MAX, E2M1_MAX).reshape(b, rows, cols)
    codes = _e2m1_codes(v)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.view(torch.float4_e2m1fn_x2), scales, global_decode


def nvfp4_dequantize(codes, scales, global_decode, dtype):
    """Inverse of nvfp4_quantize, values in dtype (lookup table, bit operations)."""
    b, rows, half = codes.shape
    c = codes.view(torch.uint8).to(torch.int64)
    table = torch.tensor(E2M1_TABLE, dtype=dtype, device=codes.device)
    vals = torch.stack((table[c & 15], table[c >> 4]), dim=-1).reshape(b, rows, 2 * half)
    step = scales.to(dtype) * global_decode.to(dtype)
    return (vals.reshape(b, rows, 2 * half // SF_VEC, SF_VEC) * step[..., None]).reshape(b, rows, 2 * half)


def nvfp4_matmul(a_codes, b_codes, a_scales, b_scales, a_global, b_global, dtype):
    """[n, m, k] x [n, p, k] (both NVFP4) -> [n, m, p] in dtype: A @ B^T."""
    a = nvfp4_dequantize(a_codes, a_scales, a_global, dtype)
    w = nvfp4_dequantize(b_codes, b_scales, b_global, dtype)
    return torch.bmm(a, w.transpose(1, 2))


def _project(x, codes, scales, global_decode, acc):
    """x [batch, seq, k] -> NVFP4(x) @ W^T, rounded to x.dtype."""
    batch, seq, k = x.shape
    x_codes, x_scales, x_global = nvfp4_quantize(x.reshape(1, batch * seq, k))
    w_global = torch.tensor(global_decode, dtype=torch.float32, device=x.device)
    y = nvfp4_matmul(x_codes, codes, x_scales, scales, x_global, w_global, acc)
    return y.reshape(batch, seq, -1).to(x.dtype)


def _rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def reference(hidden_states, cos, sin,
              q_weight_fp4, q_weight_scale, q_weight_global,
              k_weight_fp4, k_weight_scale, k_weight_global,
              v_weight_fp4, v_weight_scale, v_weight_global,
              o_weight_fp4, o_weight_scale, o_weight_global):
    batch, seq, _ = hidden_states.shape
    head_dim = cos.shape[-1]
    dtype = hidden_states.dtype
    acc = torch.promote_types(dtype, torch.float32)
    q = _project(hidden_states, q_weight_fp4, q_weight_scale, q_weight_global, acc)
    k = _project(hidden_states, k_weight_fp4, k_weight_scale, k_weight_global, acc)
    v = _project(hidden_states, v_weight_fp4, v_weight_scale, v_weight_global, acc)
    q = q.view(batch, seq, -1, head_dim).transpose(1, 2)
    k = k.view(batch, seq, -1, head_dim).transpose(1, 2)
    v = v.view(batch, seq, -1, head_dim).transpose(1, 2)
    heads, kv_heads = q.shape[1], k.shape[1]
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    q = q * c + _rotate_half(q) * s
    k = k * c + _rotate_half(k) * s
    groups = heads // kv_heads
    k = k[:, :, None].expand(batch, kv_heads, groups, seq, head_dim).reshape(batch, heads, seq, head_dim)
    v = v[:, :, None].expand(batch, kv_heads, groups, seq, head_dim).reshape(batch, heads, seq, head_dim)
    scores = torch.matmul(q, k.transpose(2, 3)) * head_dim ** -0.5
    future = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=q.device), diagonal=1)
    scores = scores.masked_fill(future, -float("inf"))
    probs = F.softmax(scores, dim=-1, dtype=acc).to(dtype)
    a = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, heads * head_dim)
    return _project(a, o_weight_fp4, o_weight_scale, o_weight_global, acc)


def make_inputs(batch, seq, hidden, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    hidden_states = draw(batch, seq, hidden).to(torch.bfloat16)
    cos = draw(batch, seq, head_dim).to(torch.bfloat16)
    sin = draw(batch, seq, head_dim).to(torch.bfloat16)
    q_out, kv_out = q_heads * head_dim, kv_heads * head_dim
    std_qkv, std_o = 1.0 / math.sqrt(hidden), 1.0 / math.sqrt(q_out)
    weights = []
    for rows, cols, std in ((q_out, hidden, std_qkv), (kv_out, hidden, std_qkv),
                            (kv_out, hidden, std_qkv), (hidden, q_out, std_o)):
        codes, scales, global_decode = nvfp4_quantize(draw(1, rows, cols) * std)
        weights += [codes, scales, global_decode.item()]
    return (hidden_states, cos, sin, *weights)
