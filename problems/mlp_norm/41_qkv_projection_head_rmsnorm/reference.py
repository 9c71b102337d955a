"""Problem 41: QKV projection + per-head RMSNorm of q and k, fp32
(Gemma-3n E4B audio attention input, SOL-ExecBench).

x [batch, seq, hidden] is projected by three separate [heads * head_dim,
hidden] weights (no bias) into q, k and v of `heads` heads of head_dim; q and
k are RMS-normalised per head (mean square + eps) and scaled by their own
[head_dim] weights; v is returned unnormalised. eps is an input (a Python
float), as in the public problem.
"""
import torch
import torch.nn.functional as F


def rmsnorm(t, weight, eps):
    return t * torch.rsqrt(t.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def reference(x, w_q, w_k, w_v, q_norm_weight, k_norm_weight, eps):
    batch, seq, _ = x.shape
    head_dim = q_norm_weight.shape[0]
    q = F.linear(x, w_q).reshape(batch, seq, -1, head_dim)
    k = F.linear(x, w_k).reshape(batch, seq, -1, head_dim)
    v = F.linear(x, w_v).reshape(batch, seq, -1, head_dim)
    return rmsnorm(q, q_norm_weight, eps), rmsnorm(k, k_norm_weight, eps), v


def make_inputs(batch, seq, hidden, heads, head_dim, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    out = heads * head_dim
    x = draw(batch, seq, hidden)
    w_q = draw(out, hidden) / hidden ** 0.5
    w_k = draw(out, hidden) / hidden ** 0.5
    w_v = draw(out, hidden) / hidden ** 0.5
    q_norm_weight = draw(head_dim) * 0.1 + 1.0
    k_norm_weight = draw(head_dim) * 0.1 + 1.0
    return x, w_q, w_k, w_v, q_norm_weight, k_norm_weight, float(eps)
