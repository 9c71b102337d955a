"""Problem 10: Gemma-3 style attention block BACKWARD, fp32 (SOL-ExecBench style).

Forward (one decoder self-attention block, causal, grouped-query):
    q, k, v = x Wq^T, x Wk^T, x Wv^T            split into heads of head_dim
    q, k    = RMSNorm(q) * (1 + wq_n), RMSNorm(k) * (1 + wk_n)   per head (QK-norm)
    q, k    = RoPE(q), RoPE(k)                   rotate-half, positions 0..seq-1
    logits  = SOFTCAP * tanh(q k^T / sqrt(head_dim) / SOFTCAP), causal mask
    out     = softmax(logits) v  (kv heads shared by heads // kv_heads q heads)  -> Wo
The problem is the backward pass: given grad_out = dL/d(out), return the seven
gradients (x, Wq, Wk, Wv, Wo, q-norm weight, k-norm weight), computed here with
torch.autograd.
"""
import torch

EPS = 1e-6          # Gemma-3 RMSNorm eps
SOFTCAP = 50.0      # attention logit soft-cap (Gemma-2's value; the catalog gives none)
ROPE_THETA = 10000.0  # Gemma-3's local-layer RoPE base


def _rmsnorm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * (1.0 + weight)


def _rope(x):
    # x: [batch, heads, seq, head_dim]; rotate-half RoPE at positions 0..seq-1
    seq, dim = x.shape[-2], x.shape[-1]
    inv_freq = ROPE_THETA ** -(torch.arange(0, dim, 2, device=x.device, dtype=x.dtype) / dim)
    angles = torch.arange(seq, device=x.device, dtype=x.dtype)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : dim // 2], x[..., dim // 2:]
    return x * angles.cos() + torch.cat([-x2, x1], dim=-1) * angles.sin()


def _forward(x, w_q, w_k, w_v, w_o, q_norm_weight, k_norm_weight):
    batch, seq, _ = x.shape
    head_dim = q_norm_weight.shape[0]
    heads, kv_heads = w_q.shape[0] // head_dim, w_k.shape[0] // head_dim
    q = (x @ w_q.T).view(batch, seq, heads, head_dim).transpose(1, 2)
    k = (x @ w_k.T).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
    v = (x @ w_v.T).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
    q = _rope(_rmsnorm(q, q_norm_weight))
    k = _rope(_rmsnorm(k, k_norm_weight))
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    logits = (q @ k.transpose(-1, -2)) * head_dim ** -0.5
    logits = SOFTCAP * torch.tanh(logits / SOFTCAP)
    causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
    logits = logits.masked_fill(~causal, float("-inf"))
    attn = torch.softmax(logits, dim=-1) @ v                     # [batch, heads, seq, head_dim]
    attn = attn.transpose(1, 2).reshape(batch, seq, heads * head_dim)
    return attn @ w_o.T


def reference(x, w_q, w_k, w_v, w_o, q_norm_weight, k_norm_weight, grad_out):
    acc = torch.promote_types(x.dtype, torch.float32)
    with torch.enable_grad():
        params = [t.detach().to(acc).requires_grad_(True)
                  for t in (x, w_q, w_k, w_v, w_o, q_norm_weight, k_norm_weight)]
        out = _forward(*params)
        grads = torch.autograd.grad(out, params, grad_out.to(acc))
    return tuple(g.to(x.dtype) for g in grads)


def make_inputs(batch, seq, hidden, heads, kv_heads, head_dim, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    x = draw(batch, seq, hidden)
    w_q = draw(heads * head_dim, hidden, scale=hidden ** -0.5)
    w_k = draw(kv_heads * head_dim, hidden, scale=hidden ** -0.5)
    w_v = draw(kv_heads * head_dim, hidden, scale=hidden ** -0.5)
    w_o = draw(hidden, heads * head_dim, scale=(heads * head_dim) ** -0.5)
    q_norm_weight = draw(head_dim, scale=0.1)
    k_norm_weight = draw(head_dim, scale=0.1)
    grad_out = draw(batch, seq, hidden)
    return x, w_q, w_k, w_v, w_o, q_norm_weight, k_norm_weight, grad_out
