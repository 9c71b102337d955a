"""Problem 65: Mamba2 SSD intra-chunk diagonal block, Nemotron Nano (SOL-ExecBench recipe).

Within each chunk: L = exp(segsum(a)) (a: per-step log decay [b, H, c, l];
segsum_ij = sum_{j<k<=i} a_k for j <= i, -inf above the diagonal), B and C
repeated from groups to heads, G_ij = C_i . B_j, M = G * L, and
Y_i = sum_j M_ij x_j with x = hidden_states [b, c, l, H, D]. Computed in
compute_dtype = promote_types(hidden_states.dtype, fp32), returned in the
input dtype.
"""
import torch

CHUNK_SIZE = 128   # hidden in the recipe (one token); Nemotron Nano 2 chunk size, reconstructed
NUM_HEADS = 128    # hidden in the recipe (one token); Nemotron Nano 2 Mamba heads, reconstructed
N_GROUPS = 8       # hidden in the recipe (one token); Nemotron Nano 2 groups, reconstructed


def segment_sum(a, chunk_size):
    """a [..., l] -> [..., l, l]: sum of a over (j, i] for j <= i, -inf elsewhere."""
    x = a[..., None].expand(*a.shape, chunk_size)
    mask = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=a.device), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    segsum = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=a.device), diagonal=0)
    return segsum.masked_fill(~mask, -torch.inf)


def reference(hidden_states, a_cumsum, B, C):
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    chunk_size = hidden_states.shape[2]
    num_heads = hidden_states.shape[3]
    n_groups = B.shape[3]
    L = torch.exp(segment_sum(a_cumsum.to(compute_dtype), chunk_size))      # [b, H, c, l, l]
    C = C.to(compute_dtype).repeat_interleave(num_heads // n_groups, dim=3)  # [b, c, l, H, N]
    B = B.to(compute_dtype).repeat_interleave(num_heads // n_groups, dim=3)
    G = torch.einsum("bcihn,bcjhn->bcijh", C, B)                            # [b, c, l, l, H]
    M = G * L.permute(0, 2, 3, 4, 1)
    y = torch.einsum("bcijh,bcjhp->bcihp", M, hidden_states.to(compute_dtype))
    return y.to(hidden_states.dtype).contiguous()


def make_inputs(batch, chunks, chunk, heads, head_dim, groups, state, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    a_cumsum = torch.empty(batch, heads, chunks, chunk, device=device).uniform_(-0.02, 0.0, generator=g).to(bf16)
    return [
        torch.randn(batch, chunks, chunk, heads, head_dim, generator=g, device=device).to(bf16),
        a_cumsum,
        torch.randn(batch, chunks, chunk, groups, state, generator=g, device=device).to(bf16),
        torch.randn(batch, chunks, chunk, groups, state, generator=g, device=device).to(bf16),
    ]
