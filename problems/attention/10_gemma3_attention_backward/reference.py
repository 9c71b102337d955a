"""Problem 10: Gemma 3 attention core BACKWARD (QK RMS norm, RoPE, logit
soft-cap, causal GQA, output projection), fp32 (SOL-ExecBench recipe).

Forward, in compute_dtype = promote_types(hidden_states.dtype, fp32):
    q, k, v = hidden_states Wq^T, Wk^T, Wv^T        heads of head_dim
    q, k    = RMSNorm(q) * (1 + q_norm_weight), RMSNorm(k) * (1 + k_norm_weight)
              (Gemma RMSNorm per head, eps = rms_norm_eps)
    q, k    = q * cos + rotate_half(q) * sin         cos/sin [batch, seq, head_dim] inputs
    logits  = softcap * tanh(q k^T * scaling / softcap), causal mask (-inf)
    out     = softmax(logits) v   (kv heads shared by heads // kv_heads q heads), then Wo
Given grad_output = dL/d(out), returns the seven gradients (hidden_states,
Wq, Wk, Wv, Wo, q_norm_weight, k_norm_weight), computed here with autograd.
scaling, softcap and eps are inputs (Python floats), as in the public problem.
"""
import torch


def _rmsnorm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * (1.0 + weight)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _forward(hidden_states, q_weight, k_weight, v_weight, o_weight, q_norm_weight, k_norm_weight,
             cos, sin, scaling, softcap, eps):
    batch, seq, _ = hidden_states.shape
    head_dim = q_norm_weight.shape[0]
    heads, kv_heads = q_weight.shape[0] // head_dim, k_weight.shape[0] // head_dim
    q = (hidden_states @ q_weight.T).view(batch, seq, heads, head_dim)
    k = (hidden_states @ k_weight.T).view(batch, seq, kv_heads, head_dim)
    v = (hidden_states @ v_weight.T).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
    q = _rmsnorm(q, q_norm_weight, eps).transpose(1, 2)
    k = _rmsnorm(k, k_norm_weight, eps).transpose(1, 2)
    cos, sin = cos[:, None], sin[:, None]                        # [batch, 1, seq, head_dim]
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    logits = (q @ k.transpose(-1, -2)) * scaling
    logits = torch.tanh(logits / softcap) * softcap
    causal = torch.ones(seq, seq, dtype=torch.bool, device=hidden_states.device).tril()
    logits = logits.masked_fill(~causal, float("-inf"))
    probs = torch.softmax(logits, dim=-1, dtype=logits.dtype)
    attn = (probs @ v).transpose(1, 2).reshape(batch, seq, heads * head_dim)
    return attn @ o_weight.T


def reference(grad_output, hidden_states, cos, sin, q_weight, k_weight, v_weight, o_weight,
              q_norm_weight, k_norm_weight, scaling, attn_logit_softcapping, rms_norm_eps):
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    with torch.enable_grad():
        params = [t.detach().to(compute_dtype).requires_grad_(True)
                  for t in (hidden_states, q_weight, k_weight, v_weight, o_weight, q_norm_weight, k_norm_weight)]
        out = _forward(*params, cos.to(compute_dtype), sin.to(compute_dtype),
                       scaling, attn_logit_softcapping, rms_norm_eps)
        grads = torch.autograd.grad(out, params, grad_output.to(compute_dtype))
    return tuple(g.to(hidden_states.dtype) for g in grads)


def rotary_tables(batch, seq, head_dim, rope_theta, device):
    """cos, sin [batch, seq, head_dim] at positions 0..seq-1 (rotate-half layout)."""
    half_dim = head_dim // 2
    inv_freq = 1.0 / (rope_theta ** (torch.arange(half_dim, device=device, dtype=torch.float32) / half_dim))
    positions = torch.arange(seq, device=device, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos = emb.cos()[None].expand(batch, seq, head_dim).contiguous()
    sin = emb.sin()[None].expand(batch, seq, head_dim).contiguous()
    return cos, sin


def make_inputs(batch, seq, hidden, heads, kv_heads, head_dim, rope_theta, scaling, softcap, eps,
                *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    hidden_states = draw(batch, seq, hidden)
    grad_output = draw(batch, seq, hidden)
    q_weight = draw(heads * head_dim, hidden) / hidden ** 0.5
    k_weight = draw(kv_heads * head_dim, hidden) / hidden ** 0.5
    v_weight = draw(kv_heads * head_dim, hidden) / hidden ** 0.5
    o_weight = draw(hidden, heads * head_dim) / (heads * head_dim) ** 0.5
    q_norm_weight = 0.1 * draw(head_dim)
    k_norm_weight = 0.1 * draw(head_dim)
    cos, sin = rotary_tables(batch, seq, head_dim, rope_theta, device)
    return [grad_output, hidden_states, cos, sin, q_weight, k_weight, v_weight, o_weight,
            q_norm_weight, k_norm_weight, float(scaling), float(softcap), float(eps)]
