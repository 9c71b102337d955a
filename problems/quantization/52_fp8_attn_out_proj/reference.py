"""Problem 52: FP8 attention output projection, Qwen3-VL (SOL-ExecBench recipe).

out = attn_output @ W_o^T + b_o, computed as a W8A8 blockwise-FP8 GEMM: both
operands are quantised to E4M3 inside the reference (activations with one
scale per 1x128 group of a row, the weight with one scale per 128x128 tile,
scale = block amax / 448), dequantised in compute_dtype, multiplied, the bias
added in compute_dtype, and the result cast back to attn_output's dtype.
"""
import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn magnitude
BLOCK = 128


def fp8_blockwise(x, block_m, block_k, acc):
    """Quantise x [m, k] to E4M3 with one fp32 scale per block_m x block_k
    block (a last partial row block allowed), and return the dequantised
    values in dtype acc."""
    m, k = x.shape
    mb = -(-m // block_m)
    padded = torch.zeros(mb * block_m, k, dtype=torch.float32, device=x.device)
    padded[:m] = x.to(torch.float32)
    blocked = padded.reshape(mb, block_m, k // block_k, block_k)
    scale = blocked.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-12) / FP8_MAX
    q = (blocked / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (q.to(acc) * scale.to(acc)).reshape(mb * block_m, k)[:m]


def reference(attn_output, o_proj_weight, o_proj_bias):
    compute_dtype = torch.promote_types(attn_output.dtype, torch.float32)
    x = fp8_blockwise(attn_output, 1, BLOCK, compute_dtype)
    w = fp8_blockwise(o_proj_weight, BLOCK, BLOCK, compute_dtype)
    y = x @ w.T + o_proj_bias.to(compute_dtype)
    return y.to(attn_output.dtype)


def make_inputs(batch, seq, input_dim, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    tokens = batch * seq
    attn_output = torch.randn(tokens, input_dim, generator=g, device=device).to(torch.bfloat16)
    w = torch.randn(hidden, input_dim, generator=g, device=device) / input_dim ** 0.5
    gain = torch.rand(-(-hidden // BLOCK), input_dim // BLOCK, generator=g, device=device) * 1.5 + 0.5
    w = w * gain.repeat_interleave(BLOCK, dim=0)[:hidden].repeat_interleave(BLOCK, dim=1)
    o_proj_bias = torch.randn(hidden, generator=g, device=device).to(torch.bfloat16)
    return attn_output, w.to(torch.bfloat16), o_proj_bias
