"""Problem 21: per-(token, head) dynamic FP8 quantisation and paged KV-cache
append (vLLM tests/quantization/test_per_token_kv_cache.py,
triton_reshape_and_cache_flash).

Each [head_dim] vector x of key and value gets scale = max(amax|x| / 448,
1e-6) and codes e4m3(clamp(x * (1 / scale), -448, 448)). The codes (as bytes)
go to key_cache / value_cache [blocks, 16, heads, head_dim] and the scales to
k_scale_cache / v_scale_cache [blocks, 16, heads] at slot slot_mapping[t]
(block = slot // 16, offset = slot % 16); slot -1 is padding and skipped. The
four caches are updated in place and returned.
"""
import torch

BLOCK_SIZE = 16
FP8_MAX = 448.0


def _quantize(x):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    scale = (wide.abs().amax(dim=-1) / FP8_MAX).clamp(min=1e-6)
    codes = (wide * (1.0 / scale.unsqueeze(-1))).clamp(-FP8_MAX, FP8_MAX)
    return codes.to(torch.float32).to(torch.float8_e4m3fn), scale


def reference(key, value, slot_mapping, key_cache, value_cache, k_scale_cache, v_scale_cache):
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    block, offset = torch.div(slots, BLOCK_SIZE, rounding_mode="floor"), torch.remainder(slots, BLOCK_SIZE)
    k_codes, k_scale = _quantize(key)
    v_codes, v_scale = _quantize(value)
    key_cache[block, offset] = k_codes[keep].view(torch.uint8)
    value_cache[block, offset] = v_codes[keep].view(torch.uint8)
    k_scale_cache[block, offset] = k_scale[keep]
    v_scale_cache[block, offset] = v_scale[keep]
    return key_cache, value_cache, k_scale_cache, v_scale_cache


def make_inputs(tokens, max_pad, heads, head_dim, blocks, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    key = torch.randn(tokens, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    value = torch.randn(tokens, heads, head_dim, generator=g, device=device, dtype=torch.bfloat16)
    slot_mapping = torch.randperm(blocks * BLOCK_SIZE, generator=g, device=device)[:tokens]
    pads = int(torch.randint(1, max_pad + 1, (1,), generator=g, device=device))
    slot_mapping[tokens - pads:] = -1
    shape = (blocks, BLOCK_SIZE, heads, head_dim)
    key_cache = torch.randint(0, 256, shape, generator=g, device=device, dtype=torch.uint8)
    value_cache = torch.randint(0, 256, shape, generator=g, device=device, dtype=torch.uint8)
    k_scale_cache = torch.rand(shape[:3], generator=g, device=device) + 0.5
    v_scale_cache = torch.rand(shape[:3], generator=g, device=device) + 0.5
    return key, value, slot_mapping, key_cache, value_cache, k_scale_cache, v_scale_cache
