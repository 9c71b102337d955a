"""Problem 23: paged MLA cache gather + FP8 dequantisation + compaction.

Before an MLA prefill over cached context, the compressed entries (576 wide:
512 latent + 64 rope) of every sequence are gathered from the paged FP8 cache
[num_blocks, block_size, 576] (uint8-packed e4m3, one per-tensor fp32 scale)
through the block table, dequantised, and packed contiguously: sequence b's
tokens land at rows cu_seq_lens[b] .. cu_seq_lens[b + 1] - 1 of an fp32
[total_tokens, 576] workspace.
"""
import torch


def reference(kv_cache, scale, block_table, cu_seq_lens):
    block_size, width = kv_cache.shape[1], kv_cache.shape[2]
    acc = torch.promote_types(scale.dtype, torch.float32)
    cu = cu_seq_lens.long()
    total = int(cu[-1])
    row = torch.arange(total, device=kv_cache.device)
    seq = torch.searchsorted(cu[1:], row, right=True)      # sequence of each output row
    pos = row - cu[seq]                                      # position inside its sequence
    block = block_table[seq, pos // block_size].long()
    slot = block * block_size + pos % block_size
    codes = kv_cache.view(-1, width)[slot]
    return codes.view(torch.float8_e4m3fn).to(acc) * scale.to(acc)


def make_inputs(tokens, batch, width, block_size, num_blocks, max_blocks, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    # The pool holds valid e4m3 codes only (no NaN encodings): N(0, 64^2) rounded to e4m3.
    values = 64.0 * torch.randn(num_blocks, block_size, width, generator=g, device=device)
    kv_cache = values.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    scale = (1.0 + torch.rand(1, generator=g, device=device)) / 64.0
    # Split `tokens` into `batch` sequences of at least one token each.
    weights = torch.rand(batch, generator=g, device=device) + 0.1
    extra = torch.multinomial(weights, tokens - batch, replacement=True, generator=g)
    seq_lens = 1 + torch.bincount(extra, minlength=batch)
    cu_seq_lens = torch.zeros(batch + 1, device=device, dtype=torch.int32)
    cu_seq_lens[1:] = torch.cumsum(seq_lens, 0)
    # Every sequence gets distinct blocks of the pool; unused table entries hold stale ids.
    block_table = torch.randint(0, num_blocks, (batch, max_blocks), generator=g, device=device,
                                dtype=torch.int32)
    blocks_needed = (seq_lens + block_size - 1) // block_size
    pool = torch.randperm(num_blocks, generator=g, device=device).to(torch.int32)
    used = (torch.arange(max_blocks, device=device) < blocks_needed[:, None])
    block_table[used] = pool[:int(blocks_needed.sum())]
    return kv_cache, scale, block_table, cu_seq_lens
