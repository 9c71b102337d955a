"""Problem 41: fused QKV projection + per-head RMSNorm of q and k, fp32
(Qwen3-0.6B attention input, SOL-ExecBench).

x [batch, seq, 1024] @ W_qkv^T -> q (16 heads), k (8 heads), v (8 heads) of
128; q and k are RMS-normalised per head with their own [128] weights.
"""
import torch
import torch.nn.functional as F

Q_HEADS, KV_HEADS = 16, 8  # Qwen3-0.6B
EPS = 1e-6                 # Qwen3's rms_norm_eps


def rmsnorm(t, weight):
    return t * torch.rsqrt(t.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight


def reference(x, w_qkv, q_norm_weight, k_norm_weight):
    batch, seq, _ = x.shape
    head_dim = q_norm_weight.shape[0]
    qkv = F.linear(x, w_qkv)
    q, k, v = qkv.split([Q_HEADS * head_dim, KV_HEADS * head_dim, KV_HEADS * head_dim], dim=-1)
    q = rmsnorm(q.reshape(batch, seq, Q_HEADS, head_dim), q_norm_weight)
    k = rmsnorm(k.reshape(batch, seq, KV_HEADS, head_dim), k_norm_weight)
    v = v.reshape(batch, seq, KV_HEADS, head_dim)
    return q, k, v


def make_inputs(batch, seq, hidden, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        return shift + scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden)
    w_qkv = draw((Q_HEADS + 2 * KV_HEADS) * head_dim, hidden, scale=hidden ** -0.5)
    q_norm_weight = draw(head_dim, scale=0.1, shift=1.0)
    k_norm_weight = draw(head_dim, scale=0.1, shift=1.0)
    return x, w_qkv, q_norm_weight, k_norm_weight
