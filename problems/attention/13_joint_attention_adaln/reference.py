"""Problem 13: dual-stream joint attention with AdaLN modulation and 3-D RoPE,
fp32 (SOL-ExecBench style; the attention half of an MMDiT/Flux double block).

Each stream (image, text) has its own weights:
    shift, scale, gate = chunk3( silu(vec) Wmod^T + bmod )          per sample
    h = LayerNorm(x) * (1 + scale) + shift                          (no affine)
    q, k, v = h Wqkv^T + bqkv;  q, k = RMSNorm(q) * wq, RMSNorm(k) * wk   per head
The text tokens are placed before the image tokens, 3-D RoPE (axes t/row/col)
is applied to q and k of the joint sequence, one full bidirectional attention
runs over it, and each stream gets back its part:
    x_out = x + gate * (attn_part Wproj^T + bproj)
"""
import torch

HEAD_DIM = 128
AXES_DIM = (16, 56, 56)   # rotary dims per position axis (sum = HEAD_DIM)
ROPE_THETA = 10000.0
LN_EPS = 1e-6
QK_EPS = 1e-6


def _rope_3d(x, ids):
    # x: [batch, heads, tokens, HEAD_DIM]; ids: [tokens, 3]. Interleaved pairs (2i, 2i+1).
    angles = []
    for axis, dim in enumerate(AXES_DIM):
        omega = ROPE_THETA ** -(torch.arange(0, dim, 2, device=x.device, dtype=x.dtype) / dim)
        angles.append(ids[:, axis].to(x.dtype)[:, None] * omega[None, :])
    angles = torch.cat(angles, dim=-1)             # [tokens, HEAD_DIM/2]
    cos, sin = angles.cos(), angles.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def _rmsnorm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + QK_EPS) * weight


def _pre_attention(x, vec, w_mod, b_mod, w_qkv, b_qkv, q_norm, k_norm, acc):
    batch, tokens, hidden = x.shape
    heads = hidden // HEAD_DIM
    mod = torch.nn.functional.silu(vec.to(acc)) @ w_mod.to(acc).T + b_mod.to(acc)
    shift, scale, gate = mod[:, None, :].chunk(3, dim=-1)
    h = torch.nn.functional.layer_norm(x.to(acc), (hidden,), eps=LN_EPS)
    h = h * (1.0 + scale) + shift
    qkv = (h @ w_qkv.to(acc).T + b_qkv.to(acc)).view(batch, tokens, 3, heads, HEAD_DIM)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)     # [batch, heads, tokens, HEAD_DIM]
    return _rmsnorm(q, q_norm.to(acc)), _rmsnorm(k, k_norm.to(acc)), v, gate


def reference(img, txt, vec, ids,
              img_mod_w, img_mod_b, img_qkv_w, img_qkv_b, img_q_norm, img_k_norm, img_proj_w, img_proj_b,
              txt_mod_w, txt_mod_b, txt_qkv_w, txt_qkv_b, txt_q_norm, txt_k_norm, txt_proj_w, txt_proj_b):
    acc = torch.promote_types(img.dtype, torch.float32)
    batch, n_img, hidden = img.shape
    n_txt = txt.shape[1]
    qi, ki, vi, gate_i = _pre_attention(img, vec, img_mod_w, img_mod_b, img_qkv_w, img_qkv_b,
                                        img_q_norm, img_k_norm, acc)
    qt, kt, vt, gate_t = _pre_attention(txt, vec, txt_mod_w, txt_mod_b, txt_qkv_w, txt_qkv_b,
                                        txt_q_norm, txt_k_norm, acc)
    q = _rope_3d(torch.cat([qt, qi], dim=2), ids)
    k = _rope_3d(torch.cat([kt, ki], dim=2), ids)
    v = torch.cat([vt, vi], dim=2)
    p = torch.softmax((q @ k.transpose(-1, -2)) * HEAD_DIM ** -0.5, dim=-1)
    o = (p @ v).transpose(1, 2).reshape(batch, n_txt + n_img, hidden)
    txt_out = txt.to(acc) + gate_t * (o[:, :n_txt] @ txt_proj_w.to(acc).T + txt_proj_b.to(acc))
    img_out = img.to(acc) + gate_i * (o[:, n_txt:] @ img_proj_w.to(acc).T + img_proj_b.to(acc))
    return img_out.to(img.dtype), txt_out.to(txt.dtype)


def make_inputs(batch, img_h, img_w, txt, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, mean=0.0):
        return mean + scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    n_img = img_h * img_w
    img_x = draw(batch, n_img, hidden)
    txt_x = draw(batch, txt, hidden)
    vec = draw(batch, hidden)
    # Position ids: text tokens all at (0, 0, 0); image patches at (0, row, col).
    rows = torch.arange(img_h, device=device).repeat_interleave(img_w)
    cols = torch.arange(img_w, device=device).repeat(img_h)
    img_ids = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1)
    ids = torch.cat([torch.zeros(txt, 3, dtype=img_ids.dtype, device=device), img_ids]).to(torch.int32)
    streams = []
    for _ in range(2):
        streams += [
            draw(3 * hidden, hidden, scale=0.5 * hidden ** -0.5),  # mod_w: scale/shift/gate stay O(0.5)
            draw(3 * hidden, scale=0.1),                            # mod_b
            draw(3 * hidden, hidden, scale=hidden ** -0.5),         # qkv_w
            draw(3 * hidden, scale=0.1),                            # qkv_b
            draw(HEAD_DIM, scale=0.1, mean=1.0),                    # q_norm
            draw(HEAD_DIM, scale=0.1, mean=1.0),                    # k_norm
            draw(hidden, hidden, scale=hidden ** -0.5),             # proj_w
            draw(hidden, scale=0.1),                                # proj_b
        ]
    return (img_x, txt_x, vec, ids, *streams)
