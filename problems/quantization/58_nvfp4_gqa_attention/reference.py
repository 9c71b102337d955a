"""Problem 58: NVFP4-quantised attention score and probability-value GEMMs in a
GQA core, Qwen3-14B (SOL-ExecBench recipe).

bf16 query [B, 40, S, 128], key / value [B, 8, S, 128] and an additive bf16
mask [B, 1, S, S] (dtype-min above the diagonal). K and V are repeated to
the query heads; Q and K are quantised to NVFP4 inside (dynamic per-tensor
global scales, 1 x 16 blocks along head_dim) and multiplied (rounded to the
query dtype), scaled by head_dim^-1/2, masked, softmaxed in compute_dtype and
rounded; the probabilities and V^T (blocks along the key axis) are quantised
again and multiplied. Outputs: attention output [B, 40, S, 128] and the
probabilities [B, 40, S, S], both in the query dtype.
"""
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


def repeat_kv(x, n_rep):
    b, h, s, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)


def reference(query_states, key_states, value_states, attention_mask):
    batch, heads, seq, head_dim = query_states.shape
    n_rep = heads // key_states.shape[1]
    scaling = head_dim ** -0.5
    compute_dtype = torch.promote_types(query_states.dtype, torch.float32)
    key_states = repeat_kv(key_states, n_rep)
    value_states = repeat_kv(value_states, n_rep)
    q = query_states.reshape(batch * heads, seq, head_dim)
    k = key_states.reshape(batch * heads, seq, head_dim)
    v = value_states.reshape(batch * heads, seq, head_dim)
    q_fp4, q_scale, q_global = nvfp4_quantize(q)
    k_fp4, k_scale, k_global = nvfp4_quantize(k)
    attn_scores = nvfp4_matmul(q_fp4, k_fp4, q_scale, k_scale, q_global, k_global,
                               compute_dtype).to(query_states.dtype)
    attn_scores = attn_scores * scaling
    attn_scores = attn_scores.view(batch, heads, seq, seq)
    attn_scores = attn_scores + attention_mask
    attn_weights = F.softmax(attn_scores, dim=-1, dtype=compute_dtype).to(query_states.dtype)
    attn_fp4, attn_scale, attn_global = nvfp4_quantize(attn_weights.reshape(batch * heads, seq, seq))
    v_t = v.transpose(1, 2).contiguous()
    v_fp4_t, v_scale, v_global = nvfp4_quantize(v_t)
    attn_output = nvfp4_matmul(attn_fp4, v_fp4_t, attn_scale, v_scale, attn_global, v_global,
                               compute_dtype).to(query_states.dtype)
    attn_output = attn_output.view(batch, heads, seq, head_dim)
    return attn_output, attn_weights


def make_inputs(batch, seq, q_heads, kv_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    query_states = torch.randn(batch, q_heads, seq, head_dim, generator=g, device=device).to(bf16)
    key_states = torch.randn(batch, kv_heads, seq, head_dim, generator=g, device=device).to(bf16)
    value_states = torch.randn(batch, kv_heads, seq, head_dim, generator=g, device=device).to(bf16)
    attention_mask = torch.zeros(batch, 1, seq, seq, dtype=bf16, device=device)
    causal = torch.triu(torch.ones(seq, seq, device=device), diagonal=1).bool()
    attention_mask[:, :, causal] = torch.finfo(bf16).min
    return [query_states, key_states, value_states, attention_mask]
