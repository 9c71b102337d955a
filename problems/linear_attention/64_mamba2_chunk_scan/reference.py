"""Problem 64: Mamba2 chunked scan (SSD) with segment-sum decay, inter-chunk
state recurrence from a given initial state, and D residual (Granite shape,
SOL-ExecBench). bf16 in and out.

Inputs are already discretised: A [batch, heads, seq] is the per-step log
decay (dt * A, negative), hidden_states [batch, seq, heads, head_dim] the
per-step input (x * dt). Returns (y, final state); the sequence is cut in
chunks of CHUNK_SIZE steps (the tail padded with zeros) and computed in the
HF-transformers Mamba2 torch_forward form: intra-chunk (diagonal blocks)
through exp(segment sums), chunk states, a recurrence over chunks seeded by
initial_states, and the off-diagonal contribution.
"""
import torch
import torch.nn.functional as F

CHUNK_SIZE = 256


def _segment_sum(t):
    """t [..., l] -> [..., l, l] with out[i, j] = sum(t[j+1 .. i]) for j <= i, -inf above."""
    length = t.size(-1)
    t = t[..., None].expand(*t.size(), length)
    below = torch.tril(torch.ones(length, length, dtype=torch.bool, device=t.device), diagonal=-1)
    t = t.masked_fill(~below, 0)
    sums = torch.cumsum(t, dim=-2)
    keep = torch.tril(torch.ones(length, length, dtype=torch.bool, device=t.device), diagonal=0)
    return sums.masked_fill(~keep, -torch.inf)


def _pad_seq(t, pad):
    """Zero-pad dim 1 (the sequence) of a 3-D or 4-D tensor by pad steps."""
    widths = (0, 0, 0, 0, 0, pad, 0, 0) if t.dim() == 4 else (0, 0, 0, pad, 0, 0)
    return F.pad(t, widths, mode="constant", value=0)


def _chunks(t, pad, chunk):
    """[b, s, ...] -> [b, s / chunk, chunk, ...] after padding."""
    t = _pad_seq(t, pad)
    return t.reshape(t.shape[0], -1, chunk, *t.shape[2:])


def reference(hidden_states, A, B, C, D, initial_states):
    chunk = CHUNK_SIZE
    dtype = hidden_states.dtype
    acc = torch.promote_types(dtype, torch.float32)
    batch, seq, heads, head_dim = hidden_states.shape
    pad = (chunk - seq % chunk) % chunk

    x = hidden_states.to(acc)
    a = A.to(acc).transpose(1, 2)                          # [b, s, h]
    B = B.to(acc).repeat_interleave(heads // B.shape[2], dim=2)   # groups -> heads
    C = C.to(acc).repeat_interleave(heads // C.shape[2], dim=2)
    D = D.to(acc)
    state0 = initial_states.to(acc)

    D_residual = D[..., None] * _pad_seq(x, pad)
    x, a, B, C = (_chunks(t, pad, chunk) for t in (x, a, B, C))
    a = a.permute(0, 3, 1, 2)                               # [b, h, c, l]
    a_cumsum = torch.cumsum(a, dim=-1)

    # 1. diagonal blocks
    L = torch.exp(_segment_sum(a))
    G = (C[:, :, :, None, :, :] * B[:, :, None, :, :, :]).sum(dim=-1)
    M = (G[..., None] * L.permute(0, 2, 3, 4, 1)[..., None]).sum(dim=-1)
    y_diag = (M[..., None] * x[:, :, None]).sum(dim=3)

    # 2. state of every chunk
    decay_states = torch.exp(a_cumsum[:, :, :, -1:] - a_cumsum)
    B_decay = B * decay_states.permute(0, -2, -1, 1)[..., None]
    states = (B_decay[..., None, :] * x[..., None]).sum(dim=2)

    # 3. recurrence over chunks, from the initial state
    states = torch.cat([state0[:, None], states], dim=1)
    decay_chunk = torch.exp(_segment_sum(F.pad(a_cumsum[:, :, :, -1], (1, 0)))).transpose(1, 3)
    new_states = (decay_chunk[..., None, None] * states[:, :, None, ...]).sum(dim=1)
    states, final_state = new_states[:, :-1], new_states[:, -1]

    # 4. state -> output
    state_decay_out = torch.exp(a_cumsum)
    y_off = (C[..., None, :] * states[:, :, None, ...]).sum(dim=-1) * state_decay_out.permute(0, 2, 3, 1)[..., None]

    y = (y_diag + y_off).reshape(batch, -1, heads, head_dim) + D_residual
    y = y[:, :seq]
    return y.to(dtype), final_state.to(dtype)


def make_inputs(batch, seq, heads, head_dim, state, groups, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    hidden_states = draw(batch, seq, heads, head_dim)
    A = (torch.rand(batch, heads, seq, generator=g, device=device, dtype=torch.float32)
         * (-0.0005 + 0.02) - 0.02).to(torch.bfloat16)     # uniform(-0.02, -0.0005)
    B = draw(batch, seq, groups, state)
    C = draw(batch, seq, groups, state)
    D = draw(heads)
    initial_states = draw(batch, heads, head_dim, state)
    return hidden_states, A, B, C, D, initial_states
