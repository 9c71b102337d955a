"""Problem 22: MiniMax-M3 main and index Q/K normalisation, RoPE and insertion
into two caches (vLLM tests/kernels/test_fused_minimax_m3_qknorm_rope_kv_insert.py).

qkv [tokens, (q_heads + 2 kv_heads + index_q_heads + 1) * head_dim] splits into
q, k, v, index q and the one index k head. Every q / k head (main and index) is
RMS-normalised with a (1 + weight) gain (fp32 statistics, eps 1e-6, rounded to
the activations' dtype), then its first rotary_dim channels are rotated NeoX
style (halves) in fp32 and rounded back. k and v go to kv_cache [blocks,
kv_heads, 64, 2 * head_dim] (k in the first half, v in the second) at
slot_mapping; the index k goes to index_cache [blocks, 64, head_dim] at
index_slot_mapping (block = slot // 64, offset = slot % 64; no padding).
Returns q, index q and both caches (updated in place).
"""
import torch

BLOCK_SIZE = 64
ROPE_BASE = 5_000_000.0
EPS = 1e-6
WEIGHT_STD = 0.1


def _norm_rope(x, weight, positions, cos_sin_cache):
    acc = torch.promote_types(x.dtype, torch.float32)
    wide = x.to(acc)
    wide = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + EPS)
    normed = (wide * (1.0 + weight.to(acc))).to(x.dtype)
    cos, sin = cos_sin_cache.index_select(0, positions).to(acc).chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    half = cos.shape[-1]
    x1, x2 = normed[..., :half].to(acc), normed[..., half:2 * half].to(acc)
    rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
    return torch.cat((rotated, normed[..., 2 * half:]), dim=-1)


def reference(qkv, q_norm_weight, k_norm_weight, index_q_norm_weight, index_k_norm_weight, positions,
              cos_sin_cache, slot_mapping, index_slot_mapping, kv_cache, index_cache):
    tokens = qkv.shape[0]
    kv_heads, head_dim = kv_cache.shape[1], index_cache.shape[-1]
    heads = qkv.shape[1] // head_dim
    q_heads = (heads - 2 * kv_heads - 1) * 4 // 5        # index q heads = q heads / 4 (16 and 4 published)
    index_q_heads = heads - 2 * kv_heads - 1 - q_heads
    q, k, v, iq, ik = qkv.split([q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim,
                                 index_q_heads * head_dim, head_dim], dim=-1)
    q = _norm_rope(q.view(tokens, q_heads, head_dim), q_norm_weight, positions, cos_sin_cache)
    k = _norm_rope(k.view(tokens, kv_heads, head_dim), k_norm_weight, positions, cos_sin_cache)
    iq = _norm_rope(iq.view(tokens, index_q_heads, head_dim), index_q_norm_weight, positions, cos_sin_cache)
    ik = _norm_rope(ik.view(tokens, 1, head_dim), index_k_norm_weight, positions, cos_sin_cache).squeeze(1)
    block = torch.div(slot_mapping, BLOCK_SIZE, rounding_mode="floor")
    offset = torch.remainder(slot_mapping, BLOCK_SIZE)
    kv_cache[block, :, offset, :head_dim] = k
    kv_cache[block, :, offset, head_dim:] = v.view(tokens, kv_heads, head_dim)
    block = torch.div(index_slot_mapping, BLOCK_SIZE, rounding_mode="floor")
    offset = torch.remainder(index_slot_mapping, BLOCK_SIZE)
    index_cache[block, offset] = ik
    return q, iq, kv_cache, index_cache


def make_inputs(tokens, q_heads, kv_heads, index_q_heads, head_dim, rotary_dim, blocks, max_position, *, seed,
                device="cuda"):
    assert index_q_heads * 4 == q_heads and tokens <= blocks * BLOCK_SIZE
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    qkv = randn(tokens, (q_heads + 2 * kv_heads + index_q_heads + 1) * head_dim)
    weights = [randn(head_dim) * WEIGHT_STD for _ in range(4)]
    positions = torch.randint(0, max_position, (tokens,), generator=g, device=device)
    inv_freq = 1.0 / ROPE_BASE ** (torch.arange(0, rotary_dim, 2, device=device, dtype=torch.float32) / rotary_dim)
    freqs = torch.outer(torch.arange(max_position, device=device, dtype=torch.float32), inv_freq)
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(torch.bfloat16)
    slot_mapping = torch.randperm(blocks * BLOCK_SIZE, generator=g, device=device)[:tokens]
    index_slot_mapping = torch.randperm(blocks * BLOCK_SIZE, generator=g, device=device)[:tokens]
    kv_cache = randn(blocks, kv_heads, BLOCK_SIZE, 2 * head_dim)
    index_cache = randn(blocks, BLOCK_SIZE, head_dim)
    return (qkv, *weights, positions, cos_sin_cache, slot_mapping, index_slot_mapping, kv_cache, index_cache)
