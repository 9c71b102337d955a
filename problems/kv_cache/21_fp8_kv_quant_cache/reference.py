"""Problem 21: per-(token, head) dynamic FP8 quantisation + KV-cache append.

Every new key and value head vector (head_dim elements) gets its own scale
amax / 448 and is quantised to FP8 E4M3; the uint8-packed vectors go into
paged caches [num_blocks, block_size, kv_heads, head_dim] and the fp32 scales
into scale caches [num_blocks, block_size, kv_heads], at slot_mapping
(-1 = padding, skipped). Returns the four updated caches (in place).
"""
import torch

FP8_MAX = 448.0        # largest finite float8_e4m3fn
MIN_AMAX = 1e-12       # guards an all-zero head vector


def _quantize(x):
    """[tokens, heads, head_dim] -> (uint8 e4m3 codes, scales [tokens, heads])."""
    acc = torch.promote_types(x.dtype, torch.float32)
    x = x.to(acc)
    scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=MIN_AMAX) / FP8_MAX
    codes = (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
    return codes, scale.squeeze(-1)


def reference(key, value, slot_mapping, key_cache, value_cache, key_scale_cache, value_scale_cache):
    _, _, heads, head_dim = key_cache.shape
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    for x, cache, scale_cache in ((key, key_cache, key_scale_cache),
                                  (value, value_cache, value_scale_cache)):
        codes, scale = _quantize(x[valid])
        cache.view(-1, heads, head_dim)[slots] = codes
        scale_cache.view(-1, heads)[slots] = scale.to(scale_cache.dtype)
    return key_cache, value_cache, key_scale_cache, value_scale_cache


def _draw_exact(tokens, heads, head_dim, g, device):
    """bf16 vectors whose quantisation is exact: e4m3 grid values with one
    +-448 per vector, times a power-of-two scale in [2^-9, 2^-4]."""
    codes = (112.0 * torch.randn(tokens, heads, head_dim, generator=g, device=device))
    codes = codes.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).to(torch.float32)
    peak = torch.randint(0, head_dim, (tokens, heads, 1), generator=g, device=device)
    sign = torch.randint(0, 2, (tokens, heads, 1), generator=g, device=device) * 2.0 - 1.0
    codes.scatter_(-1, peak, sign * FP8_MAX)
    exponent = torch.randint(4, 10, (tokens, heads, 1), generator=g, device=device)
    return (codes * torch.pow(2.0, -exponent.to(torch.float32))).to(torch.bfloat16)


def make_inputs(tokens, kv_heads, head_dim, block_size, num_blocks, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    key = _draw_exact(tokens, kv_heads, head_dim, g, device)
    value = _draw_exact(tokens, kv_heads, head_dim, g, device)
    slot_mapping = torch.randperm(num_blocks * block_size, generator=g, device=device)[:tokens]
    padding = torch.rand(tokens, generator=g, device=device) < 0.03
    slot_mapping = torch.where(padding, torch.full_like(slot_mapping, -1), slot_mapping)
    cache_shape = (num_blocks, block_size, kv_heads, head_dim)
    key_cache = torch.randint(0, 256, cache_shape, generator=g, device=device, dtype=torch.uint8)
    value_cache = torch.randint(0, 256, cache_shape, generator=g, device=device, dtype=torch.uint8)
    scale_shape = (num_blocks, block_size, kv_heads)
    key_scale_cache = 0.5 + torch.rand(scale_shape, generator=g, device=device)
    value_scale_cache = 0.5 + torch.rand(scale_shape, generator=g, device=device)
    return key, value, slot_mapping, key_cache, value_cache, key_scale_cache, value_scale_cache
