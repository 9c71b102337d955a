"""Problem 11: variable-length vision attention with 2-D RoPE and QKV/output
projections (SOL-ExecBench style; a SigLIP/Qwen-VL vision-encoder layer).

Images of different sizes are packed into one token stream; cu_seqlens marks the
segments (one image each) and attention is bidirectional within a segment only:
    qkv = x Wqkv^T + b                      heads of HEAD_DIM
    q, k = RoPE2D(q, pos), RoPE2D(k, pos)   pos = (row, col) of the patch in its image
    o_s = softmax(q_s k_s^T / sqrt(HEAD_DIM)) v_s      for every segment s
    out = o Wo^T + b_o
"""
import torch

HEAD_DIM = 72          # 1152 / 16 heads
ROPE_THETA = 10000.0


def _rope_2d(x, pos):
    # x: [tokens, heads, HEAD_DIM]; pos: [tokens, 2] (row, col).
    # Half of the rotary frequencies follow the row, half the column; rotate-half layout.
    dim = x.shape[-1]
    half = dim // 2
    inv_freq = ROPE_THETA ** -(torch.arange(0, half, 2, device=x.device, dtype=x.dtype) / half)
    pos = pos.to(x.dtype)
    freqs = torch.cat([pos[:, :1] * inv_freq, pos[:, 1:] * inv_freq], dim=-1)  # [tokens, half]
    angles = torch.cat([freqs, freqs], dim=-1)[:, None, :]                     # [tokens, 1, dim]
    x1, x2 = x[..., :half], x[..., half:]
    return x * angles.cos() + torch.cat([-x2, x1], dim=-1) * angles.sin()


def reference(x, cu_seqlens, positions, w_qkv, b_qkv, w_o, b_o):
    acc = torch.promote_types(x.dtype, torch.float32)
    tokens, dim = x.shape
    heads = dim // HEAD_DIM
    qkv = x.to(acc) @ w_qkv.to(acc).T + b_qkv.to(acc)
    q, k, v = qkv.view(tokens, 3, heads, HEAD_DIM).unbind(dim=1)
    q, k = _rope_2d(q, positions), _rope_2d(k, positions)
    o = torch.empty(tokens, heads, HEAD_DIM, dtype=acc, device=x.device)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        qs, ks, vs = (t[start:end].transpose(0, 1) for t in (q, k, v))   # [heads, len, HEAD_DIM]
        p = torch.softmax((qs @ ks.transpose(-1, -2)) * HEAD_DIM ** -0.5, dim=-1)
        o[start:end] = (p @ vs).transpose(0, 1)
    out = o.reshape(tokens, dim) @ w_o.to(acc).T + b_o.to(acc)
    return out.to(x.dtype)


def _split(total, parts, g, device, minimum):
    """parts integer lengths >= minimum summing to total, drawn from g."""
    w = 0.25 + torch.rand(parts, generator=g, device=device, dtype=torch.float64)
    extra = total - parts * minimum
    lens = (w / w.sum() * extra).floor().long().tolist()
    for i in range(extra - sum(lens)):
        lens[i % parts] += 1
    return [n + minimum for n in lens]


def make_inputs(tokens, segments, dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    lens = _split(tokens, segments, g, device, minimum=4)
    cu = [0]
    rows, cols = [], []
    for n in lens:
        cu.append(cu[-1] + n)
        width = max(1, int(round(n ** 0.5)))   # patches laid out row-major on a ~square grid
        idx = torch.arange(n, device=device)
        rows.append(idx // width)
        cols.append(idx % width)
    cu_seqlens = torch.tensor(cu, dtype=torch.int32, device=device)
    positions = torch.stack([torch.cat(rows), torch.cat(cols)], dim=-1).to(torch.int32)
    x = draw(tokens, dim).to(torch.bfloat16)
    w_qkv = draw(3 * dim, dim, scale=dim ** -0.5).to(torch.bfloat16)
    b_qkv = draw(3 * dim, scale=0.1).to(torch.bfloat16)
    w_o = draw(dim, dim, scale=dim ** -0.5).to(torch.bfloat16)
    b_o = draw(dim, scale=0.1).to(torch.bfloat16)
    return x, cu_seqlens, positions, w_qkv, b_qkv, w_o, b_o
