"""Problem 55: multimodal embedding projection with an NVFP4 vision projection,
Qwen3-VL (SOL-ExecBench recipe).

  text = embedding(input_ids, embed_weight)                    [batch, seq, hidden]
  vision features [batch, vision_tokens, vision_hidden] are quantised to NVFP4
  inside the reference (dynamic per-tensor global scale) and multiplied with
  the NVFP4 projection weight (W4A4), rounded to the embedding dtype, + bias;
  each row's vision embeddings then replace the text embeddings at the
  positions its vision_token_mask marks (ascending positions, in order).
The weight comes as codes [1, hidden, vision_hidden/2], E4M3 block scales
[1, hidden, vision_hidden/16] and a global decode scale passed as a float.
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


def _global(value, device):
    return torch.tensor(value, dtype=torch.float32, device=device)


def reference(input_ids, embed_weight, vision_features, vision_proj_weight_fp4,
              vision_proj_weight_scale, global_decode_weight, vision_proj_bias, vision_token_mask):
    batch_size, vision_tokens, vision_hidden = vision_features.shape
    dtype = embed_weight.dtype
    compute_dtype = torch.promote_types(dtype, torch.float32)
    text_embeds = F.embedding(input_ids, embed_weight)
    act_fp4, act_scale, act_global = nvfp4_quantize(
        vision_features.reshape(1, batch_size * vision_tokens, vision_hidden))
    w_global = torch.tensor(global_decode_weight, dtype=torch.float32, device=vision_features.device)
    vision_embeds = nvfp4_matmul(act_fp4, vision_proj_weight_fp4, act_scale, vision_proj_weight_scale,
                                 act_global, w_global, compute_dtype).to(dtype)
    vision_embeds = vision_embeds.reshape(batch_size, vision_tokens, -1) + vision_proj_bias.view(1, 1, -1)
    output = text_embeds.clone()
    for b in range(batch_size):
        positions = vision_token_mask[b].nonzero(as_tuple=True)[0]
        if positions.numel() > 0:
            count = min(positions.numel(), vision_tokens)
            output[b, positions[:count]] = vision_embeds[b, :count]
    return output


def make_inputs(batch, seq, vision_tokens, hidden, vocab, vision_hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    input_ids = torch.randint(0, vocab, (batch, seq), generator=g, device=device)
    embed_weight = torch.randn(vocab, hidden, generator=g, device=device).to(bf16)
    vision_features = torch.randn(batch, vision_tokens, vision_hidden, generator=g, device=device).to(bf16)
    w = torch.randn(hidden, vision_hidden, generator=g, device=device).to(bf16) / vision_hidden ** 0.5
    w_fp4, w_scale, w_global = nvfp4_quantize(w.reshape(1, hidden, vision_hidden))
    vision_proj_bias = torch.randn(hidden, generator=g, device=device).to(bf16)
    vision_token_mask = torch.zeros(batch, seq, dtype=torch.bool, device=device)
    for b in range(batch):
        n = min(vision_tokens, seq)
        positions = torch.randperm(seq, generator=g, device=device)[:n]
        vision_token_mask[b, positions] = True
    return [input_ids, embed_weight, vision_features, w_fp4, w_scale, float(w_global.item()),
            vision_proj_bias, vision_token_mask]
