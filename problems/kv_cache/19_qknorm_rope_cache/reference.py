"""Problem 19: GLM-4.5 per-head Q/K RMSNorm, partial NeoX RoPE and paged KV-cache
update (vLLM tests/compile/passes/test_rocm_aiter_qk_norm_rope_kvcache_fusion.py).

qkv [tokens, (q_heads + 2 kv_heads) * head_dim] splits into q, k, v. q and k
are RMS-normalised per head (fp32 statistics, eps an input; the normalised
value is rounded to the weight's dtype before the weight multiplies it), then
the first rotary_dim channels of every head are rotated NeoX style (halves
x1, x2) in the activations' dtype with cos / sin rows of cos_sin_cache at each
token's position. k and v are written to kv_cache[0] / kv_cache[1] at slot
slot_mapping[t] (block = slot // 16, offset = slot % 16); slot -1 is padding
and is skipped. Returns q [tokens, q_heads, head_dim] and the updated cache.
"""
import torch

BLOCK_SIZE = 16
ROPE_BASE = 10000.0
EPS = 1e-5


def _rms_norm(x, weight, eps):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    normed = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (normed.to(weight.dtype) * weight).to(x.dtype)


def _rope(x, cos, sin, rotary_dim):
    x1, x2 = x[..., :rotary_dim].chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(1).to(x.dtype), sin.unsqueeze(1).to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., rotary_dim:]), dim=-1)


def reference(qkv, positions, q_norm_weight, k_norm_weight, cos_sin_cache, slot_mapping, kv_cache, eps):
    tokens = qkv.shape[0]
    kv_heads, head_dim = kv_cache.shape[3], kv_cache.shape[4]
    q_heads = qkv.shape[1] // head_dim - 2 * kv_heads
    q, k, v = qkv.split([q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q = _rms_norm(q.view(tokens, q_heads, head_dim), q_norm_weight, eps)
    k = _rms_norm(k.view(tokens, kv_heads, head_dim), k_norm_weight, eps)
    cos, sin = cos_sin_cache.index_select(0, positions.flatten()).chunk(2, dim=-1)
    rotary_dim = cos_sin_cache.shape[-1]
    q, k = _rope(q, cos, sin, rotary_dim), _rope(k, cos, sin, rotary_dim)
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    block, offset = torch.div(slots, BLOCK_SIZE, rounding_mode="floor"), torch.remainder(slots, BLOCK_SIZE)
    kv_cache[0, block, offset] = k[keep]
    kv_cache[1, block, offset] = v.view(tokens, kv_heads, head_dim)[keep]
    return q, kv_cache


def make_inputs(tokens, max_pad, q_heads, kv_heads, head_dim, rotary_dim, blocks, max_position, *, seed,
                device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    qkv = randn(tokens, (q_heads + 2 * kv_heads) * head_dim)
    positions = torch.randint(0, max_position, (tokens,), generator=g, device=device)
    q_norm_weight, k_norm_weight = randn(head_dim), randn(head_dim)
    inv_freq = 1.0 / ROPE_BASE ** (torch.arange(0, rotary_dim, 2, device=device, dtype=torch.float32) / rotary_dim)
    freqs = torch.outer(torch.arange(max_position, device=device, dtype=torch.float32), inv_freq)
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(torch.bfloat16)
    slot_mapping = torch.randperm(blocks * BLOCK_SIZE, generator=g, device=device)[:tokens]
    pads = int(torch.randint(1, max_pad + 1, (1,), generator=g, device=device))
    slot_mapping[tokens - pads:] = -1
    kv_cache = randn(2, blocks, BLOCK_SIZE, kv_heads, head_dim)
    return qkv, positions, q_norm_weight, k_norm_weight, cos_sin_cache, slot_mapping, kv_cache, EPS
