"""Problem 13: FIBO dual-stream joint attention block, fp32 (SOL-ExecBench).

Image tokens attend to [text K/V context ; image K/V]; the text stream enters
only as keys and values projected from its 4096-wide encoder states.
  mod  = silu(timestep_embedding) @ W_ada^T + b_ada -> 6 chunks of hidden; the
         attention block uses (shift, scale, gate) = chunks 0, 1, 2
  h    = LayerNorm(hidden_states) * (1 + scale) + shift       (no affine, eps 1e-6)
  q, k, v = h @ W^T + b   (24 heads of 128); q, k get a 3-axis RoPE: for axis
         a the position pos_idx_axis_a selects a row of the (cos, sin) table of
         that axis (HEAD_DIM // 3 rotary dims per axis, pairs interleaved,
         axes in order, trailing dims unrotated)
  k_ctx, v_ctx = encoder_hidden_states @ W_ctx^T + b_ctx
  a    = softmax(q [k_ctx ; k]^T / sqrt(128)) [v_ctx ; v]   (joint block;
         image K/V only when is_joint_block == 0)
  out  = hidden_states + gate * (a @ W_out^T + b_out)
"""
import math

import torch
import torch.nn.functional as F

HEAD_DIM = 128
ROPE_AXIS0_DIM = 16   # rows of each axis' (cos, sin) table (positions 0 .. dim-1)
ROPE_AXIS1_DIM = 56
ROPE_AXIS2_DIM = 56
ROPE_THETA = 10000.0  # reconstructed (hidden in the recipe)
IS_JOINT_BLOCK = 1
LN_EPS = 1e-6         # reconstructed


def _rope(t, cos, sin):
    """t [b, h, s, d]; cos, sin [s, p] for the first 2p dims, pairs (2i, 2i+1)."""
    p = cos.shape[-1]
    rot, rest = t[..., :2 * p], t[..., 2 * p:]
    even, odd = rot[..., 0::2], rot[..., 1::2]
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    return torch.cat((out, rest), dim=-1)


def reference(hidden_states, timestep_embedding, encoder_hidden_states,
              adaln_linear_weight, adaln_linear_bias, to_q_weight, to_q_bias,
              to_k_weight, to_k_bias, to_v_weight, to_v_bias,
              to_k_context_weight, to_k_context_bias, to_v_context_weight, to_v_context_bias,
              to_out_weight, to_out_bias, pos_idx_axis0, pos_idx_axis1, pos_idx_axis2,
              cos_axis0, sin_axis0, cos_axis1, sin_axis1, cos_axis2, sin_axis2, is_joint_block):
    batch, seq, hidden = hidden_states.shape
    heads = hidden // HEAD_DIM
    mod = F.linear(F.silu(timestep_embedding), adaln_linear_weight, adaln_linear_bias)
    shift, scale, gate = mod.chunk(6, dim=-1)[:3]
    h = F.layer_norm(hidden_states, (hidden,), eps=LN_EPS) * (1 + scale[:, None]) + shift[:, None]

    def heads_of(t):
        return t.view(batch, -1, heads, HEAD_DIM).transpose(1, 2)

    q = heads_of(F.linear(h, to_q_weight, to_q_bias))
    k = heads_of(F.linear(h, to_k_weight, to_k_bias))
    v = heads_of(F.linear(h, to_v_weight, to_v_bias))
    cos = torch.cat((cos_axis0[pos_idx_axis0], cos_axis1[pos_idx_axis1], cos_axis2[pos_idx_axis2]), dim=-1)
    sin = torch.cat((sin_axis0[pos_idx_axis0], sin_axis1[pos_idx_axis1], sin_axis2[pos_idx_axis2]), dim=-1)
    q, k = _rope(q, cos, sin), _rope(k, cos, sin)
    if is_joint_block:
        k_ctx = heads_of(F.linear(encoder_hidden_states, to_k_context_weight, to_k_context_bias))
        v_ctx = heads_of(F.linear(encoder_hidden_states, to_v_context_weight, to_v_context_bias))
        k = torch.cat((k_ctx, k), dim=2)
        v = torch.cat((v_ctx, v), dim=2)
    probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM), dim=-1)
    a = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, hidden)
    return hidden_states + gate[:, None] * F.linear(a, to_out_weight, to_out_bias)


def make_inputs(batch, grid0, grid1, grid2, text_seq, hidden, joint_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    seq = grid0 * grid1 * grid2
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def linear(out_f, in_f):
        return draw(out_f, in_f) / math.sqrt(in_f), 0.1 * draw(out_f)
    hidden_states = draw(batch, seq, hidden)
    timestep_embedding = draw(batch, hidden)
    encoder_hidden_states = draw(batch, text_seq, joint_dim)
    weights = []
    for out_f, in_f in ((6 * hidden, hidden), (hidden, hidden), (hidden, hidden), (hidden, hidden),
                        (hidden, joint_dim), (hidden, joint_dim), (hidden, hidden)):
        weights += linear(out_f, in_f)
    token = torch.arange(seq, device=device)
    pos0 = token // (grid1 * grid2)
    pos1 = (token // grid2) % grid1
    pos2 = token % grid2
    per_axis = HEAD_DIM // 3
    steps = torch.arange(0, per_axis, 2, device=device, dtype=torch.float32)
    inv_freq = 1.0 / (ROPE_THETA ** (steps / per_axis))
    tables = []
    for rows in (ROPE_AXIS0_DIM, ROPE_AXIS1_DIM, ROPE_AXIS2_DIM):
        freqs = torch.outer(torch.arange(rows, device=device, dtype=torch.float32), inv_freq)
        tables += [freqs.cos(), freqs.sin()]
    return (hidden_states, timestep_embedding, encoder_hidden_states, *weights,
            pos0, pos1, pos2, *tables, IS_JOINT_BLOCK)
