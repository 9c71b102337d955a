"""Problem 11: variable-length vision attention with rotary embeddings, Qwen
Image Edit 2509 vision encoder, bf16 (SOL-ExecBench recipe).

Images of different sizes are packed into one token stream; cu_seqlens holds
the cumulative END offsets of the sequences (cumsum of their lengths, no
leading zero) and attention is bidirectional within a sequence only:
    qkv     = F.linear(hidden_states, qkv_weight, qkv_bias)   (input dtype)
    q, k, v = qkv as [tokens, 3, heads, head_dim]
    q, k    = q * cos + rotate_half(q) * sin  (cos/sin [tokens, heads, head_dim] inputs; input dtype)
    o_s     = softmax(q_s k_s^T * head_dim^-1/2 in compute_dtype).to(q dtype) v_s   per sequence s
    out     = F.linear(o, proj_weight, proj_bias)
compute_dtype = promote_types(hidden_states.dtype, fp32). The rotary tables
are built from per-sequence positions (restarting at 0 in every sequence).
"""
import torch
import torch.nn.functional as F

# The captured sequence lengths of the public visible workload (fixed, authored splits).
SEQ_SPLITS = (255, 85, 425, 170, 680, 85, 170, 340, 85, 510, 170, 255, 85, 340, 170, 425, 85, 255, 170, 85, 170, 510,
              340, 170, 255, 170, 85, 623)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def reference(hidden_states, cu_seqlens, cos, sin, qkv_weight, qkv_bias, proj_weight, proj_bias):
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    tokens = hidden_states.shape[0]
    heads, head_dim = cos.shape[1], cos.shape[2]
    qkv = F.linear(hidden_states, qkv_weight, qkv_bias)
    q, k, v = qkv.reshape(tokens, 3, heads, head_dim).permute(1, 0, 2, 3).unbind(0)
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))                 # [heads, tokens, head_dim]
    ends = cu_seqlens.tolist()
    starts = [0] + ends[:-1]
    scale = head_dim ** -0.5
    outputs = []
    for start, end in zip(starts, ends):
        qs, ks, vs = q[:, start:end], k[:, start:end], v[:, start:end]
        scores = torch.matmul(qs, ks.transpose(1, 2)) * scale
        probs = torch.softmax(scores, dim=-1, dtype=compute_dtype).to(qs.dtype)
        outputs.append(torch.matmul(probs, vs))
    attn = torch.cat(outputs, dim=1).transpose(0, 1).reshape(tokens, heads * head_dim)
    return F.linear(attn, proj_weight, proj_bias)


def seq_splits(tokens, sequences, unit, captured):
    """Sequence lengths: the captured SEQ_SPLITS, or fixed (seed-independent)
    authored splits of the same kind: multiples of unit, the last one taking
    the remainder."""
    if captured:
        assert sum(SEQ_SPLITS) == tokens and len(SEQ_SPLITS) == sequences
        return list(SEQ_SPLITS)
    g = torch.Generator().manual_seed(1000003 * tokens + sequences)
    units = tokens // unit
    w = 1.0 + 7.0 * torch.rand(sequences, generator=g, dtype=torch.float64)
    counts = [1 + int(c) for c in (w / w.sum() * (units - sequences)).floor().tolist()]
    for i in range(units - sum(counts)):
        counts[i % sequences] += 1
    lengths = [c * unit for c in counts]
    lengths[-1] += tokens - sum(lengths)
    return lengths


def make_inputs(tokens, sequences, embed_dim, heads, head_dim, rope_theta, unit, captured, sq_tokens,
                *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    lengths = torch.tensor(seq_splits(tokens, sequences, unit, captured), device=device, dtype=torch.int64)
    cu_seqlens = lengths.cumsum(0)
    starts = cu_seqlens - lengths
    positions = (torch.arange(tokens, device=device, dtype=torch.int64)
                 - torch.repeat_interleave(starts, lengths)).to(torch.float32)
    half_dim = head_dim // 2
    freq_seq = torch.arange(0, half_dim, device=device, dtype=torch.float32)
    inv_freq = 1.0 / (rope_theta ** (freq_seq / half_dim))
    freqs = torch.outer(positions, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos = emb.cos().to(bf16)[:, None, :].expand(tokens, heads, head_dim).contiguous()
    sin = emb.sin().to(bf16)[:, None, :].expand(tokens, heads, head_dim).contiguous()
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    hidden_states = draw(tokens, embed_dim).to(bf16)
    qkv_weight = (draw(3 * embed_dim, embed_dim) / embed_dim ** 0.5).to(bf16)
    qkv_bias = (0.1 * draw(3 * embed_dim)).to(bf16)
    proj_weight = (draw(embed_dim, embed_dim) / embed_dim ** 0.5).to(bf16)
    proj_bias = (0.1 * draw(embed_dim)).to(bf16)
    return [hidden_states, cu_seqlens, cos, sin, qkv_weight, qkv_bias, proj_weight, proj_bias]
