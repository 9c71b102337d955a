"""Problem 20: MLA q_b projection, RoPE and compressed paged-cache update (vLLM
tests/compile/passes/test_mla_rope_kvcache_cat_fusion.py).

qkv_lora [tokens, q_lora_rank + kv_lora_rank + rope_dim] splits into q_c,
kv_c and k_pe. q = q_c W^T (F.linear, in the activations' dtype) viewed as
[tokens, heads, 128 + rope_dim]; its rope part and k_pe are rotated NeoX style
(halves) in the activations' dtype with the cos / sin rows of each token's
position. Returns q (nope part then rotated part) and kv_cache with
[kv_c | rotated k_pe] written at slot slot_mapping[t] (block = slot // 16,
offset = slot % 16; slot -1 skipped).
"""
import torch
import torch.nn.functional as F

BLOCK_SIZE = 16
NOPE_DIM = 128
ROPE_BASE = 10000.0
WEIGHT_STD = 0.02


def _rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def reference(qkv_lora, q_b_weight, positions, cos_sin_cache, slot_mapping, kv_cache):
    tokens = qkv_lora.shape[0]
    rope_dim = cos_sin_cache.shape[-1]
    kv_lora_rank = kv_cache.shape[-1] - rope_dim
    q_lora_rank = qkv_lora.shape[1] - kv_cache.shape[-1]
    q_c, kv_c, k_pe = qkv_lora.split([q_lora_rank, kv_lora_rank, rope_dim], dim=-1)
    q = F.linear(q_c, q_b_weight).view(tokens, -1, NOPE_DIM + rope_dim)
    q_nope, q_pe = q.split([NOPE_DIM, rope_dim], dim=-1)
    cos, sin = cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q = torch.cat((q_nope, _rope(q_pe, cos, sin)), dim=-1)
    k_pe = _rope(k_pe.unsqueeze(1), cos, sin).squeeze(1)
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    block, offset = torch.div(slots, BLOCK_SIZE, rounding_mode="floor"), torch.remainder(slots, BLOCK_SIZE)
    kv_cache[block, offset, 0, :kv_lora_rank] = kv_c[keep]
    kv_cache[block, offset, 0, kv_lora_rank:] = k_pe[keep]
    return q, kv_cache


def make_inputs(tokens, max_pad, heads, q_lora_rank, kv_lora_rank, nope_dim, rope_dim, blocks, max_position,
                *, seed, device="cuda"):
    assert nope_dim == NOPE_DIM
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.bfloat16)
    qkv_lora = randn(tokens, q_lora_rank + kv_lora_rank + rope_dim)
    q_b_weight = randn(heads * (nope_dim + rope_dim), q_lora_rank) * WEIGHT_STD
    positions = torch.randint(0, max_position, (tokens,), generator=g, device=device)
    inv_freq = 1.0 / ROPE_BASE ** (torch.arange(0, rope_dim, 2, device=device, dtype=torch.float32) / rope_dim)
    freqs = torch.outer(torch.arange(max_position, device=device, dtype=torch.float32), inv_freq)
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(torch.bfloat16)
    slot_mapping = torch.randperm(blocks * BLOCK_SIZE, generator=g, device=device)[:tokens]
    pads = int(torch.randint(1, max_pad + 1, (1,), generator=g, device=device))
    slot_mapping[tokens - pads:] = -1
    kv_cache = randn(blocks, BLOCK_SIZE, 1, kv_lora_rank + rope_dim)
    return qkv_lora, q_b_weight, positions, cos_sin_cache, slot_mapping, kv_cache
