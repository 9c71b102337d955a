"""Problem 53: FP8 MLP gate/up projection + SiLU gating, Qwen3-VL (SOL-ExecBench recipe).

h = silu(x W_gate^T) * (x W_up^T) with x, W_gate and W_up given as blockwise
FP8 E4M3 (activation: one fp32 scale per 1x128 group of a row; weights: one
per 128x128 tile). 8704 tokens, hidden 3584, intermediate 18,944.
"""
import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn magnitude
BLOCK = 128


def fp8_quantize(x, block_m, block_k):
    """E4M3 codes [m, k] and fp32 scales [ceil(m / block_m), k / block_k]
    (x ~= code * scale per block_m x block_k block)."""
    m, k = x.shape
    mb = -(-m // block_m)
    padded = torch.zeros(mb * block_m, k, dtype=torch.float32, device=x.device)
    padded[:m] = x
    blocked = padded.reshape(mb, block_m, k // block_k, block_k)
    scale = blocked.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-12) / FP8_MAX
    q = (blocked / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(mb * block_m, k)[:m].contiguous(), scale.reshape(mb, k // block_k)


def fp8_dequantize(q, scale, acc):
    """Inverse of fp8_quantize, in dtype acc (block shape from the scale grid)."""
    m, k = q.shape
    block_m = 1 if scale.shape[0] == m else BLOCK
    block_k = k // scale.shape[1]
    full = scale.to(acc).repeat_interleave(block_m, 0)[:m].repeat_interleave(block_k, 1)
    return q.to(acc) * full


def reference(x, scale_x, gate_proj_weight, scale_gate, up_proj_weight, scale_up):
    compute_dtype = torch.promote_types(scale_x.dtype, torch.float32)
    out_dtype = torch.bfloat16 if compute_dtype == torch.float32 else compute_dtype  # float64 anchor stays float64
    a = fp8_dequantize(x, scale_x, compute_dtype)
    gate_output = a @ fp8_dequantize(gate_proj_weight, scale_gate, compute_dtype).T
    up_output = a @ fp8_dequantize(up_proj_weight, scale_up, compute_dtype).T
    return (torch.nn.functional.silu(gate_output) * up_output).to(out_dtype)


def make_inputs(tokens, hidden, intermediate, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    weight_std = hidden ** -0.5
    x = torch.randn(tokens, hidden, generator=g, device=device)

    def weight():
        w = torch.randn(intermediate, hidden, generator=g, device=device) * weight_std
        gain = torch.rand(-(-intermediate // BLOCK), hidden // BLOCK, generator=g, device=device) * 1.5 + 0.5
        return w * gain.repeat_interleave(BLOCK, dim=0)[:intermediate].repeat_interleave(BLOCK, dim=1)

    gate_w, up_w = weight(), weight()
    qx, sx = fp8_quantize(x, 1, BLOCK)
    qg, sg = fp8_quantize(gate_w, BLOCK, BLOCK)
    qu, su = fp8_quantize(up_w, BLOCK, BLOCK)
    return qx, sx, qg, sg, qu, su
