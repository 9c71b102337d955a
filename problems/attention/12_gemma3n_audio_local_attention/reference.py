"""Problem 12: Gemma 3n audio-encoder attention with a relative-position
term, local causal windows, a padding mask and a logit soft-cap, fp32
(SOL-ExecBench recipe).

Streaming conformer self-attention in blocks of CHUNK_SIZE query frames, each
attending a context of MAX_BACKWARD frames before the block up to the block's
end (frame t sees frames t-12 .. t), written after the transformers Gemma 3n
audio attention:
    q = (x Wq^T) * head_dim^-1/2 / softplus(0) * softplus(per_dim_scale)   per head
    k, v = x Wk^T, x Wv^T
    rel[f] = [sin(p_f * inv_timescales), cos(p_f * inv_timescales)] Wpos^T,  p_f = 12, 11, .., 0
    logits[t, s] = q_t . k_s + q_t . rel[t - s]      (relative shift of the q . rel product)
    logits = cap * tanh(logits / cap); invalid (padding mask, or outside the window) -> finfo.min
    out[t] = softmax_s(logits[t, s]) v_s             [batch, seq, heads, head_dim]
mask is True at padded frames. compute_dtype = promote_types(dtype, fp32).
"""
import torch
import torch.nn.functional as F

HEAD_DIM = 64       # hidden in the recipe (one token): 512 / 8 heads (Gemma 3n audio: 8 heads), reconstructed
MAX_BACKWARD = 12   # hidden in the recipe (one token): Gemma 3n audio context_left 13 - 1, reconstructed
MAX_FORWARD = 0     # Gemma 3n audio context_right
CHUNK_SIZE = 12     # Gemma 3n audio attention chunk size
CONTEXT_SIZE = CHUNK_SIZE + MAX_BACKWARD + MAX_FORWARD


def _pad_dim1(x, left, right):
    pad = [0, 0] * (x.ndim - 2) + [left, right]
    return F.pad(x, pad)


def _to_blocks(x):
    """[b, t, ...] -> [b, blocks, CHUNK_SIZE, ...] (zero-padded at the end)."""
    b, t = x.shape[:2]
    blocks = (t + CHUNK_SIZE - 1) // CHUNK_SIZE
    x = _pad_dim1(x, 0, blocks * CHUNK_SIZE - t)
    return x.reshape(b, blocks, CHUNK_SIZE, *x.shape[2:]).contiguous()


def _block_context(x):
    """[b, t, ...] -> [b, blocks, CONTEXT_SIZE, ...]: each block's key frames."""
    x = _pad_dim1(x, MAX_BACKWARD, MAX_FORWARD + CHUNK_SIZE - 1)
    x = x.unfold(1, CONTEXT_SIZE, CHUNK_SIZE)
    if x.ndim > 3:
        x = torch.movedim(x, -1, 2)
    return x.contiguous()


def _local_causal_mask(device):
    lower = torch.tril(torch.ones(CONTEXT_SIZE, CHUNK_SIZE, dtype=torch.bool, device=device)).T
    upper = torch.tril(torch.ones(CHUNK_SIZE, CONTEXT_SIZE, dtype=torch.bool, device=device),
                       diagonal=MAX_BACKWARD + MAX_FORWARD)
    return lower & upper                                                     # [chunk, context]


def _relative_logits(q_blocks, k_blocks, pos_proj_weight, inv_timescales):
    b, u, w, n, d = q_blocks.shape
    c = k_blocks.shape[2]
    positions = torch.arange(MAX_BACKWARD, -MAX_FORWARD - 1, -1, device=q_blocks.device)
    span = positions.shape[0]
    scaled = positions.to(inv_timescales.dtype)[:, None] * inv_timescales[None, :]
    timing = torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=-1).to(q_blocks.dtype)   # [span, hidden]
    rel = F.linear(timing, pos_proj_weight).reshape(span, n, d)
    qp = q_blocks.permute(0, 3, 1, 2, 4)                                     # [b, n, u, w, d]
    term_ac = torch.matmul(qp, k_blocks.permute(0, 3, 1, 4, 2))              # [b, n, u, w, c]
    term_bd = torch.matmul(qp.reshape(b, n, u * w, d), rel.permute(1, 2, 0)).reshape(b, n, u, w, span)
    # relative shift: [.., w, f] -> [.., w, c] with c = w + f
    term_bd = F.pad(term_bd, (0, c + 1 - span)).reshape(b, n, u, w * (c + 1))[..., : w * c].reshape(b, n, u, w, c)
    return term_ac + term_bd


def reference(hidden_states, mask, q_proj_weight, k_proj_weight, v_proj_weight, pos_proj_weight,
              per_dim_scale, inv_timescales, attention_logits_soft_cap):
    dtype = hidden_states.dtype
    compute_dtype = torch.promote_types(dtype, torch.float32)
    x = hidden_states.to(compute_dtype)
    batch, seq, _ = x.shape
    head_dim = per_dim_scale.shape[0]
    heads = q_proj_weight.shape[0] // head_dim
    q = F.linear(x, q_proj_weight.to(compute_dtype)).reshape(batch, seq, heads, head_dim)
    k = F.linear(x, k_proj_weight.to(compute_dtype)).reshape(batch, seq, heads, head_dim)
    v = F.linear(x, v_proj_weight.to(compute_dtype)).reshape(batch, seq, heads, head_dim)
    r_softplus_0 = 1.0 / F.softplus(torch.tensor(0.0, dtype=compute_dtype, device=x.device))
    q = q * (head_dim ** -0.5 * r_softplus_0) * F.softplus(per_dim_scale.to(compute_dtype))

    q_blocks = _to_blocks(q)                                                 # [b, u, w, n, d]
    k_blocks, v_blocks = _block_context(k), _block_context(v)               # [b, u, c, n, d]
    valid = _block_context(~mask)                                            # [b, u, c]
    allowed = valid[:, None, :, None, :] & _local_causal_mask(x.device)[None, None, None]

    logits = _relative_logits(q_blocks, k_blocks, pos_proj_weight.to(compute_dtype),
                              inv_timescales.to(compute_dtype))             # [b, n, u, w, c]
    cap = attention_logits_soft_cap
    logits = torch.tanh(logits / cap) * cap
    logits = torch.where(allowed, logits, torch.finfo(logits.dtype).min)
    probs = torch.softmax(logits, dim=-1, dtype=compute_dtype).to(v_blocks.dtype)
    b, n, u, w, c = probs.shape
    out = torch.matmul(probs.permute(0, 2, 1, 3, 4).reshape(-1, w, c),
                       v_blocks.permute(0, 1, 3, 2, 4).reshape(-1, c, head_dim))
    out = out.reshape(b, u, n, w, head_dim).permute(0, 1, 3, 2, 4).reshape(b, u * w, n, head_dim)
    return out[:, :seq].to(dtype).contiguous()


def make_inputs(batch, seq, hidden, heads, num_timescales, min_timescale, max_timescale, soft_cap,
                *, seed, device="cuda"):
    import math
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    head_dim = hidden // heads
    hidden_states = draw(batch, seq, hidden)
    valid_lens = torch.randint(seq - MAX_BACKWARD, seq + 1, (batch,), generator=g, device=device)
    mask = torch.arange(seq, device=device)[None, :] >= valid_lens[:, None]
    q_proj_weight = draw(hidden, hidden) / math.sqrt(hidden)
    k_proj_weight = draw(hidden, hidden) / math.sqrt(hidden)
    v_proj_weight = draw(hidden, hidden) / math.sqrt(hidden)
    pos_proj_weight = draw(hidden, hidden) / math.sqrt(hidden)
    per_dim_scale = 0.1 * draw(head_dim)
    log_timescale_increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * torch.exp(
        torch.arange(num_timescales, device=device, dtype=torch.float32) * -log_timescale_increment)
    return [hidden_states, mask, q_proj_weight, k_proj_weight, v_proj_weight, pos_proj_weight,
            per_dim_scale, inv_timescales, float(soft_cap)]
