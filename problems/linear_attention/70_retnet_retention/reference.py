"""Problem 70: RetNet multi-scale retention, parallel form.

Head h has a fixed decay gamma_h = 1 - 2^(-5 - h). With D[n, m] = gamma_h^(n - m)
for m <= n and 0 otherwise:

    out = ((q k^T) * head_dim_k^-1/2 * D) v

equivalent to the recurrence S_n = gamma S_{n-1} + k_n v_n^T, o_n = S_n^T q_n * scale.
"""
import torch


def reference(q, k, v):
    acc = torch.promote_types(q.dtype, torch.float32)
    out_dtype = v.dtype
    batch, seq, heads, dk = q.shape
    q = q.to(acc).transpose(1, 2) * dk ** -0.5                        # [b, H, l, K]
    k = k.to(acc).transpose(1, 2)
    v = v.to(acc).transpose(1, 2)

    gamma = 1.0 - 2.0 ** (-5.0 - torch.arange(heads, dtype=acc, device=q.device))
    pos = torch.arange(seq, dtype=acc, device=q.device)
    dist = pos[:, None] - pos[None, :]                                # n - m
    causal = dist >= 0
    decay = torch.exp(dist.clamp(min=0) * torch.log(gamma)[:, None, None]) * causal   # [H, l, l]

    scores = (q @ k.transpose(-1, -2)) * decay
    out = scores @ v                                                  # [b, H, l, V]
    return out.transpose(1, 2).to(out_dtype).contiguous()


def make_inputs(batch, seq, heads, head_k, head_v, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    q = randn(batch, seq, heads, head_k).to(bf16)
    k = randn(batch, seq, heads, head_k).to(bf16)
    v = randn(batch, seq, heads, head_v, scale=0.1).to(bf16)
    return q, k, v
