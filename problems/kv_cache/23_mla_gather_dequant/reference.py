"""Problem 23: paged MLA-cache gather with FP8 dequantisation and sequence
compaction (vLLM gather_and_maybe_dequant_cache,
tests/kernels/attention/test_cache.py::test_gather_and_maybe_dequant_cache_mla).

src_cache holds e4m3 bytes [blocks, 16, entry]. Request r's token p lives in
block block_table[r, p // 16] at offset p % 16; the output stacks every
request's tokens, in order, as fp32 e4m3(byte) * scale: [sum(seq_lens), entry].
"""
import torch

BLOCK_SIZE = 16
SCALE = 0.1


def reference(src_cache, block_table, seq_lens, scale):
    cache = src_cache.view(torch.float8_e4m3fn)
    parts = []
    for r, length in enumerate(seq_lens.tolist()):
        pos = torch.arange(length, device=src_cache.device)
        block = block_table[r, torch.div(pos, BLOCK_SIZE, rounding_mode="floor")].long()
        parts.append(cache[block, torch.remainder(pos, BLOCK_SIZE)].float() * scale)
    return torch.cat(parts, dim=0)


def make_inputs(requests, tokens, blocks, entry, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    values = torch.randn(blocks, BLOCK_SIZE, entry, generator=g, device=device, dtype=torch.float16)
    src_cache = (values / SCALE).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    block_table = torch.stack([torch.randperm(blocks, generator=g, device=device)
                               for _ in range(requests)]).to(torch.int32)
    cuts = torch.randperm(tokens - 1, generator=g, device=device)[:requests - 1].sort().values + 1
    ends = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), tokens)])
    return src_cache, block_table, ends.diff().to(torch.int32), SCALE
