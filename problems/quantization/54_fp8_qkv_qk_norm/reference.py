"""Problem 54: FP8 QKV projections + per-head q/k RMSNorm, Qwen3-VL (SOL-ExecBench recipe).

Separate q / k / v projections, each a W8A8 blockwise-FP8 GEMM with the
quantisation inside (activation: one scale per 1x128 group of a row; weight:
one per 128x128 tile; scale = block amax / 448), bias added, rounded to the
activation dtype; q and k then RMS-normed per head (eps an input); outputs
q, k, v as [batch, heads, seq, head_dim].
"""
import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn magnitude
BLOCK = 128


def fp8_blockwise(x, block_m, block_k, acc):
    """Quantise x [m, k] to E4M3 with one fp32 scale per block_m x block_k
    block (a last partial row block allowed); dequantised values in acc."""
    m, k = x.shape
    mb = -(-m // block_m)
    padded = torch.zeros(mb * block_m, k, dtype=torch.float32, device=x.device)
    padded[:m] = x.to(torch.float32)
    blocked = padded.reshape(mb, block_m, k // block_k, block_k)
    scale = blocked.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-12) / FP8_MAX
    q = (blocked / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (q.to(acc) * scale.to(acc)).reshape(mb * block_m, k)[:m]


def fp8_linear(x, weight, bias, compute_dtype):
    y = fp8_blockwise(x, 1, BLOCK, compute_dtype) @ fp8_blockwise(weight, BLOCK, BLOCK, compute_dtype).T
    return (y + bias.to(compute_dtype)).to(x.dtype)


def rms_norm(x, weight, eps, compute_dtype):
    input_dtype = x.dtype
    h = x.to(compute_dtype)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(input_dtype)


def reference(hidden_states, q_weight, k_weight, v_weight, q_bias, k_bias, v_bias,
              q_norm_weight, k_norm_weight, eps):
    batch, seq, hidden = hidden_states.shape
    head_dim = q_norm_weight.shape[0]
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    x = hidden_states.reshape(-1, hidden)
    q = fp8_linear(x, q_weight, q_bias, compute_dtype).reshape(batch, seq, -1, head_dim)
    k = fp8_linear(x, k_weight, k_bias, compute_dtype).reshape(batch, seq, -1, head_dim)
    v = fp8_linear(x, v_weight, v_bias, compute_dtype).reshape(batch, seq, -1, head_dim)
    q = rms_norm(q, q_norm_weight, eps, compute_dtype)
    k = rms_norm(k, k_norm_weight, eps, compute_dtype)
    return q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()


def make_inputs(batch, seq, hidden, q_heads, kv_heads, head_dim, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    hidden_states = torch.randn(batch, seq, hidden, generator=g, device=device).to(bf16)

    def weight(rows):
        w = torch.randn(rows, hidden, generator=g, device=device) / hidden ** 0.5
        gain = torch.rand(-(-rows // BLOCK), hidden // BLOCK, generator=g, device=device) * 1.5 + 0.5
        return (w * gain.repeat_interleave(BLOCK, dim=0)[:rows].repeat_interleave(BLOCK, dim=1)).to(bf16)

    q_size, kv_size = q_heads * head_dim, kv_heads * head_dim
    q_weight, k_weight, v_weight = weight(q_size), weight(kv_size), weight(kv_size)
    q_bias, k_bias, v_bias = (torch.randn(n, generator=g, device=device).to(bf16) for n in (q_size, kv_size, kv_size))
    q_norm_weight = (torch.randn(head_dim, generator=g, device=device) * 0.1 + 1.0).to(bf16)
    k_norm_weight = (torch.randn(head_dim, generator=g, device=device) * 0.1 + 1.0).to(bf16)
    return (hidden_states, q_weight, k_weight, v_weight, q_bias, k_bias, v_bias,
            q_norm_weight, k_norm_weight, float(eps))
