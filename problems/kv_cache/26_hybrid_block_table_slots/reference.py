"""Problem 26: hybrid KV-cache-group block-table writes + slot mapping.

One scheduler step of a hybrid model whose layers form two KV-cache groups
with different block sizes (full attention: 16 tokens per block; linear /
sliding-window layers: 64). Per group g and request r:
  1. block-table append: the request's num_new_blocks[g, r] new block ids are
     written into row r of block_tables[g], after its num_blocks[g, r] current
     blocks, or from column 0 when is_new_request[r] (a new request reuses the
     row; its stale contents stay behind); the new counts are returned.
  2. slot mapping: every scheduled token (request r owns tokens
     query_start_loc[r] .. query_start_loc[r + 1] - 1, at `positions`) gets
     slot = block_tables[g, r, pos // block_size] * block_size + pos % block_size.
Returns the block tables (updated in place), the new per-row block counts
and the int64 slot mapping. The counts come back as a fresh tensor and
num_blocks itself is left alone, so that running the step twice on the same
inputs writes the same entries (the grader's float64 anchor run shares
integer inputs with the candidate).
"""
import torch

BLOCK_SIZES = (16, 64)  # tokens per block of KV-cache group 0 and 1


def reference(block_tables, num_blocks, new_block_ids, num_new_blocks, is_new_request,
              query_start_loc, positions):
    device = block_tables.device
    reqs = block_tables.shape[1]
    # 1. Append the new block ids.
    start = torch.where(is_new_request, torch.zeros_like(num_blocks), num_blocks)   # [groups, reqs]
    j = torch.arange(new_block_ids.shape[-1], device=device)
    write = j < num_new_blocks[..., None]                                            # [groups, reqs, new]
    group, req, _ = write.nonzero(as_tuple=True)
    column = (start[..., None] + j)[write].long()
    block_tables[group, req, column] = new_block_ids[write]
    num_blocks_after = start + num_new_blocks

    # 2. Slot mapping of every scheduled token, per group.
    tokens = positions.shape[0]
    counts = (query_start_loc[1:] - query_start_loc[:-1]).long()
    token_req = torch.repeat_interleave(torch.arange(reqs, device=device), counts, output_size=tokens)
    slots = []
    for g, block_size in enumerate(BLOCK_SIZES):
        block = block_tables[g, token_req, positions // block_size].long()
        slots.append(block * block_size + positions % block_size)
    return block_tables, num_blocks_after, torch.stack(slots)


def make_inputs(reqs, tokens, max_blocks, pool_blocks, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    i32 = torch.int32
    groups = len(BLOCK_SIZES)
    capacity = max_blocks * min(BLOCK_SIZES)          # longest sequence a row can hold
    # Scheduled tokens per request (each >= 1, a few long prefill chunks, many decodes).
    weights = torch.rand(reqs, generator=g, device=device) ** 8 + 1e-3
    extra = torch.multinomial(weights, tokens - reqs, replacement=True, generator=g)
    query_lens = (1 + torch.bincount(extra, minlength=reqs)).clamp(max=capacity)
    query_lens[-1] += tokens - int(query_lens.sum())  # keep the total exact
    is_new_request = torch.rand(reqs, generator=g, device=device) < 0.25
    room = (capacity - query_lens).clamp(min=0)
    context = (torch.rand(reqs, generator=g, device=device) * (room + 1)).long().clamp(max=room)
    context = torch.where(is_new_request, torch.zeros_like(context), context)
    seq_lens = context + query_lens

    query_start_loc = torch.zeros(reqs + 1, device=device, dtype=i32)
    query_start_loc[1:] = torch.cumsum(query_lens, 0)
    token_req = torch.repeat_interleave(torch.arange(reqs, device=device), query_lens, output_size=tokens)
    positions = context[token_req] + torch.arange(tokens, device=device) - (query_start_loc[:-1].long())[token_req]

    sizes = torch.tensor(BLOCK_SIZES, device=device)[:, None]
    have = (context[None, :] + sizes - 1) // sizes                     # [groups, reqs]
    need = (seq_lens[None, :] + sizes - 1) // sizes
    num_new_blocks = (need - have).to(i32)
    # Stale counts for rows that a new request takes over; true counts otherwise.
    stale = torch.randint(0, max_blocks + 1, (groups, reqs), generator=g, device=device)
    num_blocks = torch.where(is_new_request, stale, have).to(i32)
    block_tables = torch.randint(0, pool_blocks, (groups, reqs, max_blocks), generator=g,
                                 device=device, dtype=i32)
    width = max(int(num_new_blocks.max()), 1)
    new_block_ids = torch.randint(0, pool_blocks, (groups, reqs, width), generator=g,
                                  device=device, dtype=i32)
    pad = torch.arange(width, device=device) >= num_new_blocks[..., None]
    new_block_ids[pad] = -1
    return (block_tables, num_blocks, new_block_ids, num_new_blocks, is_new_request,
            query_start_loc, positions)
