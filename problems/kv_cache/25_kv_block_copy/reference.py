"""Problem 25: batched K/V cache block copy under one block remapping (vLLM
swap_blocks, tests/kernels/attention/test_cache.py::test_swap_blocks).

For every row (src, dst) of block_mapping, block src of the source caches is
copied into block dst of the destination caches, for keys and values alike:

    dst_k[dst] = src_k[src];   dst_v[dst] = src_v[src]

The caches are raw bytes (uint8) [num_blocks, block_size, kv_heads, head_dim];
the destination caches are updated in place and returned. Sources and
destinations are distinct blocks, so the copy order does not matter.
"""
import torch


def reference(src_k, src_v, dst_k, dst_v, block_mapping):
    src, dst = block_mapping[:, 0].long(), block_mapping[:, 1].long()
    dst_k[dst] = src_k[src]
    dst_v[dst] = src_v[src]
    return dst_k, dst_v


def make_inputs(num_blocks, block_size, kv_heads, head_dim, mappings, *, seed, device="cuda"):
    assert 2 * mappings <= num_blocks
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (num_blocks, block_size, kv_heads, head_dim)
    src_k, src_v, dst_k, dst_v = (torch.randint(0, 256, shape, generator=g, device=device, dtype=torch.uint8)
                                  for _ in range(4))
    blocks = torch.randperm(num_blocks, generator=g, device=device)
    block_mapping = torch.stack((blocks[:mappings], blocks[mappings:2 * mappings]), dim=1)
    return src_k, src_v, dst_k, dst_v, block_mapping
