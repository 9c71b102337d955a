"""Problem 26: staged block-table writes of a hybrid model's three KV-cache
groups, then the slot mapping of every scheduled token (vLLM
v1/worker/gpu/block_table.py BlockTables, test_block_tables_apply_staged_writes_fuses_kv_groups).

Groups 0, 1, 2 allocate blocks of 16, 32 and 8 tokens; the attention kernels
address 16, 16 and 8 tokens, so every allocated id i of group 1 becomes the two
kernel blocks 2i, 2i+1. The staged writes are applied in order, group by group:
write w puts the first staged_counts[g, w] ids of staged_ids[g, w] (expanded)
into row write_requests[w] of block_table_g, at column 0 when overwrite[w]
(a new request) or else after the row's current num_blocks[g, request], and sets
num_blocks[g, request] to the end of what it wrote. Later writes to the same
row see earlier ones.

Then batch entry i is request idx_mapping[i] with the tokens
query_start_loc[i] : query_start_loc[i + 1]; a token at position p gets, per
group, slot = table[request, p // kernel_block] * kernel_block + p % kernel_block.
Tokens past the last request keep -1. The three tables and num_blocks are
updated in place and returned with the int64 slot mappings [3, tokens].
"""
import torch

BLOCK_SIZES = (16, 32, 8)
KERNEL_BLOCK_SIZES = (16, 16, 8)
TABLE_WIDTHS = (512, 1024, 512)
STAGE = 4          # ids per staged write
ID_RANGE = 2048    # block ids and stale table entries are drawn below this


def _apply_writes(table, num_blocks, group, write_requests, overwrite, staged_ids, staged_counts):
    expand = BLOCK_SIZES[group] // KERNEL_BLOCK_SIZES[group]
    for w, (req, count, fresh) in enumerate(zip(write_requests.tolist(), staged_counts[group].tolist(),
                                                overwrite.tolist())):
        ids = staged_ids[group, w, :count].long()
        if expand > 1:
            ids = (ids[:, None] * expand + torch.arange(expand, device=table.device)).reshape(-1)
        start = 0 if fresh else int(num_blocks[group, req])
        table[req, start:start + ids.numel()] = ids.to(table.dtype)
        num_blocks[group, req] = start + ids.numel()


def reference(block_table_0, block_table_1, block_table_2, num_blocks, write_requests, overwrite,
              staged_ids, staged_counts, idx_mapping, query_start_loc, positions):
    tables = (block_table_0, block_table_1, block_table_2)
    for group, table in enumerate(tables):
        _apply_writes(table, num_blocks, group, write_requests, overwrite, staged_ids, staged_counts)
    tokens = positions.shape[0]
    slots = torch.full((len(tables), tokens), -1, dtype=torch.int64, device=positions.device)
    bounds = query_start_loc.tolist()
    for i, req in enumerate(idx_mapping.tolist()):
        pos = positions[bounds[i]:bounds[i + 1]].long()
        for group, table in enumerate(tables):
            size = KERNEL_BLOCK_SIZES[group]
            block = table[req, torch.div(pos, size, rounding_mode="floor")].long()
            slots[group, bounds[i]:bounds[i + 1]] = block * size + torch.remainder(pos, size)
    return block_table_0, block_table_1, block_table_2, num_blocks, slots


def make_inputs(reqs, tokens, writes, *, seed, device="cuda"):
    assert writes % reqs == 0
    g = torch.Generator(device=device).manual_seed(seed)
    def randint(high, shape, dtype=torch.int32):
        return torch.randint(0, high, shape, generator=g, device=device, dtype=dtype)
    tables = [randint(ID_RANGE, (reqs, width)) for width in TABLE_WIDTHS]
    num_blocks = torch.zeros(3, reqs, dtype=torch.int32, device=device)
    # every request is written writes / reqs times, in random order per round
    write_requests = torch.cat([torch.randperm(reqs, generator=g, device=device)
                                for _ in range(writes // reqs)]).to(torch.int32)
    overwrite = randint(2, (writes,), torch.bool)
    staged_counts = randint(STAGE + 1, (3, writes))
    staged_ids = torch.full((3, writes, STAGE), -1, dtype=torch.int32, device=device)
    fill = torch.arange(STAGE, device=device)[None, None, :] < staged_counts[:, :, None]
    staged_ids[fill] = randint(ID_RANGE, staged_ids.shape)[fill]
    idx_mapping = torch.randperm(reqs, generator=g, device=device).to(torch.int32)
    lengths = randint(tokens // reqs + 1, (reqs,), torch.int64)
    ends = lengths.cumsum(0).clamp_(max=tokens)
    query_start_loc = torch.cat([ends.new_zeros(1), ends]).to(torch.int32)
    # positions stay inside what the staged writes can cover: rounds * STAGE * smallest block
    max_position = writes // reqs * STAGE * min(BLOCK_SIZES)
    positions = randint(max_position, (tokens,), torch.int64)
    return (tables[0], tables[1], tables[2], num_blocks, write_requests, overwrite, staged_ids,
            staged_counts, idx_mapping, query_start_loc, positions)
