"""Problem 56: MLA KV compression with mid-chain requantisation, DeepSeek-V3.1
(SOL-ExecBench recipe).

  c = fp8(x) @ fp8(W_kv_a)^T            [tokens, 640] (512 latent + rope + padding rows)
  c_kv = RMSNorm(c[:, :512]) * w_norm   (eps an input; HF style: normed cast back first)
  kv = fp8(c_kv) @ fp8(W_kv_b)^T        [tokens, heads * (128 + 128)]
  outputs k_nope, value_states          [batch, seq, heads, 128] each
Each GEMM is W8A8 blockwise FP8 with the quantisation inside the reference
(activations: one scale per 1x128 group of a row; weights: one per 128x128
tile; scale = block amax / 448), dequantised in compute_dtype and rounded to
the activation dtype.
"""
import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn magnitude
BLOCK = 128
QK_NOPE_HEAD_DIM = 128
V_HEAD_DIM = 128


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


def fp8_mm(x, weight, compute_dtype):
    return fp8_blockwise(x, 1, BLOCK, compute_dtype) @ fp8_blockwise(weight, BLOCK, BLOCK, compute_dtype).T


def reference(hidden_states, kv_a_proj_weight, kv_a_layernorm_weight, kv_b_proj_weight, eps):
    batch, seq, hidden = hidden_states.shape
    kv_lora_rank = kv_a_layernorm_weight.shape[0]
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    x = hidden_states.reshape(-1, hidden)
    compressed_kv_with_rope = fp8_mm(x, kv_a_proj_weight, compute_dtype).to(hidden_states.dtype)
    compressed_kv = compressed_kv_with_rope[:, :kv_lora_rank].to(compute_dtype)
    variance = compressed_kv.pow(2).mean(-1, keepdim=True)
    compressed_kv = compressed_kv * torch.rsqrt(variance + eps)
    normed = kv_a_layernorm_weight * compressed_kv.to(hidden_states.dtype)
    kv_expanded_flat = fp8_mm(normed, kv_b_proj_weight, compute_dtype).to(hidden_states.dtype)
    kv = kv_expanded_flat.reshape(batch, seq, -1, QK_NOPE_HEAD_DIM + V_HEAD_DIM)
    k_nope, value_states = kv.split([QK_NOPE_HEAD_DIM, V_HEAD_DIM], dim=-1)
    return k_nope.contiguous(), value_states.contiguous()


def make_inputs(batch, seq, hidden, kv_lora_rank, kv_a_out_padded, heads, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16

    def weight(rows, cols):
        w = torch.randn(rows, cols, generator=g, device=device) / cols ** 0.5
        gain = torch.rand(-(-rows // BLOCK), cols // BLOCK, generator=g, device=device) * 1.5 + 0.5
        return (w * gain.repeat_interleave(BLOCK, dim=0)[:rows].repeat_interleave(BLOCK, dim=1)).to(bf16)

    hidden_states = torch.randn(batch, seq, hidden, generator=g, device=device).to(bf16)
    kv_a_proj_weight = weight(kv_a_out_padded, hidden)
    kv_a_layernorm_weight = (torch.randn(kv_lora_rank, generator=g, device=device) * 0.1 + 1.0).to(bf16)
    kv_b_proj_weight = weight(heads * (QK_NOPE_HEAD_DIM + V_HEAD_DIM), kv_lora_rank)
    return [hidden_states, kv_a_proj_weight, kv_a_layernorm_weight, kv_b_proj_weight, float(eps)]
