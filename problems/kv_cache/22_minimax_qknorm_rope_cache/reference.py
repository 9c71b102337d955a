"""Problem 22: MiniMax-style QK-norm + partial RoPE + insertion into the K and V caches.

MiniMax-M2 normalises q and k over the whole projection (all heads at once,
"per-layer" QK-norm: one RMS over heads * head_dim, one learned weight of that
length), unlike the per-head norm of problem 19. Then NeoX-style RoPE on the
first rotary_dim dims of every head, and k / v are inserted into the two paged
caches [num_blocks, block_size, kv_heads, head_dim] at slot_mapping
(-1 = padding, skipped). Returns q and the two updated caches (in place).
"""
import torch

EPS = 1e-6  # MiniMax-M2's rms_norm_eps
ROPE_BASE = 5000000.0  # MiniMax-M2's rope_theta


def _rms_norm(x, weight, acc):
    x = x.to(acc)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return x * inv_rms * weight.to(acc)


def _rope_neox(x, cos, sin):
    # x [tokens, heads, head_dim]; rotate-half on the first 2 * cos.shape[-1] dims
    half = cos.shape[-1]
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s, rest), dim=-1)


def reference(qkv, q_norm_weight, k_norm_weight, cos_sin_cache, positions, slot_mapping,
              key_cache, value_cache):
    _, _, kv_heads, head_dim = key_cache.shape
    tokens = qkv.shape[0]
    acc = torch.promote_types(qkv.dtype, torch.float32)
    q_size, kv_size = q_norm_weight.shape[0], k_norm_weight.shape[0]
    q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
    q = _rms_norm(q, q_norm_weight, acc).view(tokens, -1, head_dim)
    k = _rms_norm(k, k_norm_weight, acc).view(tokens, kv_heads, head_dim)

    cos, sin = cos_sin_cache[positions].to(acc).chunk(2, dim=-1)
    q = _rope_neox(q, cos, sin)
    k = _rope_neox(k, cos, sin)

    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    key_cache.view(-1, kv_heads, head_dim)[slots] = k[valid].to(key_cache.dtype)
    value_cache.view(-1, kv_heads, head_dim)[slots] = v.reshape(tokens, kv_heads, head_dim)[valid].to(value_cache.dtype)
    return q.to(qkv.dtype), key_cache, value_cache


def make_inputs(tokens, q_heads, kv_heads, head_dim, rotary_dim, block_size, num_blocks,
                max_position, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    qkv = (2.0 * draw(tokens, (q_heads + 2 * kv_heads) * head_dim)).to(torch.bfloat16)
    q_norm_weight = (1.0 + 0.1 * draw(q_heads * head_dim)).to(torch.bfloat16)
    k_norm_weight = (1.0 + 0.1 * draw(kv_heads * head_dim)).to(torch.bfloat16)
    inv_freq = ROPE_BASE ** -(torch.arange(0, rotary_dim, 2, device=device, dtype=torch.float32) / rotary_dim)
    freqs = torch.arange(max_position, device=device, dtype=torch.float32)[:, None] * inv_freq
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
    positions = torch.randint(0, max_position, (tokens,), generator=g, device=device)
    slot_mapping = torch.randperm(num_blocks * block_size, generator=g, device=device)[:tokens]
    padding = torch.rand(tokens, generator=g, device=device) < 0.03
    slot_mapping = torch.where(padding, torch.full_like(slot_mapping, -1), slot_mapping)
    key_cache = draw(num_blocks, block_size, kv_heads, head_dim).to(torch.bfloat16)
    value_cache = draw(num_blocks, block_size, kv_heads, head_dim).to(torch.bfloat16)
    return (qkv, q_norm_weight, k_norm_weight, cos_sin_cache, positions, slot_mapping,
            key_cache, value_cache)
