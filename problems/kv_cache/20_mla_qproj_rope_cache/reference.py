"""Problem 20: MLA q_b projection + RoPE + compressed KV-cache write.

The query/KV prologue of DeepSeek-V3 multi-head latent attention at tensor
parallel 8 (16 local heads): the normalised query latent q_c [tokens, 1536] is
projected by W_q_b to 16 heads x (128 nope + 64 rope) = 3072; the rope part of
every head and the shared k_pe are rotated with GPT-J style (interleaved
pairs) RoPE; the compressed entry [kv_c_normed (512) | rotated k_pe (64)] of
every token is written into the paged MLA cache [num_blocks, block_size, 576]
at slot_mapping (-1 = padding, skipped). Returns q and the updated cache.
"""
import torch

QK_NOPE_HEAD_DIM = 128  # DeepSeek-V3; the rope dim comes from k_pe
ROPE_BASE = 10000.0


def _rope_interleaved(x, cos, sin):
    # x [..., rope_dim], rotating pairs (x[2i], x[2i+1]) by cos[i], sin[i]
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x_even * cos - x_odd * sin, x_odd * cos + x_even * sin), dim=-1)
    return out.flatten(-2)


def reference(q_c, w_q_b, kv_c_normed, k_pe, cos_sin_cache, positions, slot_mapping, kv_cache):
    tokens = q_c.shape[0]
    rope_dim = k_pe.shape[-1]
    acc = torch.promote_types(q_c.dtype, torch.float32)
    # The model's own projection GEMM: bf16 operands, fp32 accumulation, bf16 result.
    q = (q_c @ w_q_b.T).view(tokens, -1, QK_NOPE_HEAD_DIM + rope_dim)
    q_nope, q_pe = q.split([QK_NOPE_HEAD_DIM, rope_dim], dim=-1)

    cos, sin = cos_sin_cache[positions].to(acc).chunk(2, dim=-1)   # [tokens, rope_dim / 2]
    q_pe = _rope_interleaved(q_pe.to(acc), cos[:, None, :], sin[:, None, :])
    k_pe = _rope_interleaved(k_pe.to(acc), cos, sin)
    q = torch.cat((q_nope.to(acc), q_pe), dim=-1).to(q_c.dtype)

    valid = slot_mapping >= 0
    entry = torch.cat((kv_c_normed.to(acc), k_pe), dim=-1)[valid]
    kv_cache.view(-1, kv_cache.shape[-1])[slot_mapping[valid]] = entry.to(kv_cache.dtype)
    return q, kv_cache


def make_inputs(tokens, heads, q_lora_rank, kv_lora_rank, rope_dim, block_size, num_blocks,
                max_position, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    q_c = draw(tokens, q_lora_rank).to(bf16)
    w_q_b = draw(heads * (QK_NOPE_HEAD_DIM + rope_dim), q_lora_rank, scale=q_lora_rank ** -0.5).to(bf16)
    kv_c_normed = draw(tokens, kv_lora_rank).to(bf16)
    k_pe = draw(tokens, rope_dim).to(bf16)
    inv_freq = ROPE_BASE ** -(torch.arange(0, rope_dim, 2, device=device, dtype=torch.float32) / rope_dim)
    freqs = torch.arange(max_position, device=device, dtype=torch.float32)[:, None] * inv_freq
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
    positions = torch.randint(0, max_position, (tokens,), generator=g, device=device)
    slot_mapping = torch.randperm(num_blocks * block_size, generator=g, device=device)[:tokens]
    padding = torch.rand(tokens, generator=g, device=device) < 0.03
    slot_mapping = torch.where(padding, torch.full_like(slot_mapping, -1), slot_mapping)
    kv_cache = draw(num_blocks, block_size, kv_lora_rank + rope_dim).to(bf16)
    return q_c, w_q_b, kv_c_normed, k_pe, cos_sin_cache, positions, slot_mapping, kv_cache
