"""Problem 25: uint8 (FP8) KV-cache block copy according to a block remapping.

Copy-on-write / prefix forking in a paged KV cache: for every row (src, dst)
of block_mapping, block dst of the key cache and of the value cache becomes a
copy of block src. The caches hold uint8-packed FP8 codes; the copy is
bit-exact. Sources and destinations are disjoint, so the order of the copies
does not matter. Returns the two updated caches (in place).
"""
import torch


def reference(key_cache, value_cache, block_mapping):
    src, dst = block_mapping[:, 0], block_mapping[:, 1]
    for cache in (key_cache, value_cache):
        cache[dst] = cache[src]
    return key_cache, value_cache


def make_inputs(num_blocks, block_size, kv_heads, head_dim, mappings, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (num_blocks, block_size, kv_heads, head_dim)
    key_cache = torch.randint(0, 256, shape, generator=g, device=device, dtype=torch.uint8)
    value_cache = torch.randint(0, 256, shape, generator=g, device=device, dtype=torch.uint8)
    blocks = torch.randperm(num_blocks, generator=g, device=device)[:2 * mappings]
    block_mapping = torch.stack((blocks[:mappings], blocks[mappings:]), dim=1)
    return key_cache, value_cache, block_mapping
