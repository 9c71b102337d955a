"""Problem 24: context gather of mixed-format 656-byte MLA entries into bf16.

DeepSeek-V3.2-style FP8 MLA cache: every token's entry is 656 bytes,
  bytes   0..511  512 latent values as e4m3 codes,
  bytes 512..527  4 fp32 scales, one per 128 latent values,
  bytes 528..655  64 rope values in bf16.
For each sequence b, its seq_lens[b] tokens are read through block_table[b]
(token t sits in block block_table[b, t // block_size] at offset
t % block_size), up-converted to bf16 [latent * scale | rope] (576 values) and
written to rows workspace_starts[b] .. + seq_lens[b] - 1 of the workspace.
"""
import torch

LATENT = 512
SCALE_GROUP = 128
ROPE = 64
ENTRY_BYTES = LATENT + 4 * (LATENT // SCALE_GROUP) + 2 * ROPE  # 656


def reference(kv_cache, block_table, seq_lens, workspace_starts):
    block_size = kv_cache.shape[1]
    lens = seq_lens.long()
    starts = workspace_starts.long()
    total = int((starts + lens).max())
    batch = lens.shape[0]
    seq = torch.repeat_interleave(torch.arange(batch, device=kv_cache.device), lens)
    pos = torch.arange(seq.shape[0], device=kv_cache.device) - torch.repeat_interleave(
        torch.cumsum(lens, 0) - lens, lens)                                   # position in sequence
    block = block_table[seq, pos // block_size].long()
    entries = kv_cache.view(-1, ENTRY_BYTES)[block * block_size + pos % block_size]

    latent = entries[:, :LATENT].view(torch.float8_e4m3fn).to(torch.float32)
    scales = entries[:, LATENT:LATENT + 16].contiguous().view(torch.float32)   # [n, 4]
    latent = latent * scales.repeat_interleave(SCALE_GROUP, dim=1)
    rope = entries[:, LATENT + 16:].contiguous().view(torch.bfloat16)           # [n, 64]

    out = torch.empty(total, LATENT + ROPE, device=kv_cache.device, dtype=torch.bfloat16)
    rows = starts[seq] + pos
    out[rows] = torch.cat((latent.to(torch.bfloat16), rope), dim=-1)
    return out


def _entries(n, g, device):
    """n valid 656-byte entries: per-128 scales amax / 448, e4m3 codes, bf16 rope."""
    latent = torch.randn(n, LATENT // SCALE_GROUP, SCALE_GROUP, generator=g, device=device)
    latent = latent * torch.exp(torch.randn(n, LATENT // SCALE_GROUP, 1, generator=g, device=device) * 0.25)
    scales = latent.abs().amax(dim=-1, keepdim=True) / 448.0
    codes = (latent / scales).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    rope = torch.randn(n, ROPE, generator=g, device=device).to(torch.bfloat16)
    return torch.cat((codes.reshape(n, LATENT),
                      scales.reshape(n, -1).contiguous().view(torch.uint8),
                      rope.view(torch.uint8)), dim=-1)


def make_inputs(tokens, batch, block_size, num_blocks, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    kv_cache = _entries(num_blocks * block_size, g, device).view(num_blocks, block_size, ENTRY_BYTES)
    # Split `tokens` into `batch` sequences (each >= 1, skewed); the table width is the
    # longest sequence's block count, so it changes from draw to draw.
    weights = torch.rand(batch, generator=g, device=device) ** 2 + 0.05
    extra = torch.multinomial(weights, tokens - batch, replacement=True, generator=g)
    seq_lens = (1 + torch.bincount(extra, minlength=batch)).to(torch.int32)
    workspace_starts = (torch.cumsum(seq_lens, 0) - seq_lens).to(torch.int32)
    blocks_needed = (seq_lens + block_size - 1) // block_size
    width = int(blocks_needed.max())
    block_table = torch.randint(0, num_blocks, (batch, width), generator=g, device=device,
                                dtype=torch.int32)
    pool = torch.randperm(num_blocks, generator=g, device=device).to(torch.int32)
    used = torch.arange(width, device=device) < blocks_needed[:, None]
    block_table[used] = pool[:int(blocks_needed.sum())]
    return kv_cache, block_table, seq_lens, workspace_starts
