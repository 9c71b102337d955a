"""Problem 24: context-parallel paged gather with mixed-layout FP8 / bf16
up-conversion (vLLM cp_gather_and_upconvert_fp8_kv_cache,
tests/kernels/test_cp_gather_fp8.py).

Each cache entry is 656 bytes: 512 e4m3 values, four fp32 scales (one per
128 values), then 64 bf16 rope values. Request r's token p lives in block
block_table[r, p // 64] at offset p % 64. The output stacks every request's
tokens, in order, as bf16 [sum(seq_lens), 576]: each 128-value group of the
nope part dequantised in fp32 (value * its scale) and rounded to bf16, then
the rope part as stored.
"""
import math

import torch

NOPE, ROPE, GROUP = 512, 64, 128
ENTRY_BYTES = NOPE + 4 * (NOPE // GROUP) + 2 * ROPE   # 656
BLOCK_SIZE = 64


def reference(cache, block_table, seq_lens):
    parts = []
    for r, length in enumerate(seq_lens.tolist()):
        pos = torch.arange(length, device=cache.device)
        block = block_table[r, torch.div(pos, BLOCK_SIZE, rounding_mode="floor")].long()
        entry = cache[block, torch.remainder(pos, BLOCK_SIZE)]
        values = entry[:, :NOPE].contiguous().view(torch.float8_e4m3fn)
        scales = entry[:, NOPE:NOPE + 16].contiguous().view(torch.float32)
        nope = [(values[:, i * GROUP:(i + 1) * GROUP].float() * scales[:, i:i + 1]).to(torch.bfloat16)
                for i in range(NOPE // GROUP)]
        rope = entry[:, NOPE + 16:].contiguous().view(torch.bfloat16)
        parts.append(torch.cat((torch.cat(nope, dim=-1), rope), dim=-1))
    return torch.cat(parts, dim=0)


def make_inputs(requests, tokens, blocks, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    cuts = torch.randperm(tokens - 1, generator=g, device=device)[:requests - 1].sort().values + 1
    lengths = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), tokens)]).diff().tolist()
    per_request = [math.ceil(n / BLOCK_SIZE) for n in lengths]
    assert sum(per_request) <= blocks
    block_table = torch.zeros(requests, max(per_request), dtype=torch.int32, device=device)
    order = torch.randperm(blocks, generator=g, device=device).to(torch.int32)
    used = 0
    for r, n in enumerate(per_request):
        block_table[r, :n] = order[used:used + n]
        used += n
    cache = torch.zeros(blocks, BLOCK_SIZE, ENTRY_BYTES, dtype=torch.uint8, device=device)
    flat = cache.view(-1, ENTRY_BYTES)
    rows = flat.shape[0]
    flat[:, :NOPE] = torch.randn(rows, NOPE, generator=g, device=device).to(torch.float8_e4m3fn).view(torch.uint8)
    scales = torch.rand(rows, NOPE // GROUP, generator=g, device=device) * 2.0 + 0.1
    flat[:, NOPE:NOPE + 16] = scales.view(torch.uint8)
    flat[:, NOPE + 16:] = torch.randn(rows, ROPE, generator=g, device=device, dtype=torch.bfloat16).view(torch.uint8)
    return cache, block_table, torch.tensor(lengths, dtype=torch.int32, device=device)
