"""Problem 42: multi-token-prediction (MTP) layer input (DeepSeek-V3 / Ling-2.0
style, SOL-ExecBench).

The MTP module predicts one token further ahead: it embeds the token ids
shifted left by one (the last position of each sequence gets id 0), RMS-
normalises that embedding and the main model's hidden state separately,
concatenates [embedding, hidden] and projects 2 * hidden -> hidden.
Vocabulary 157,184, width 4096.
"""
import torch
import torch.nn.functional as F

EPS = 1e-6  # Ling-2.0's rms_norm_eps


def rmsnorm(t, weight, acc):
    t = t.to(acc)
    return t * torch.rsqrt(t.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.to(acc)


def reference(input_ids, hidden_states, embed_table, enorm_weight, hnorm_weight, eh_proj):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    shifted = torch.zeros_like(input_ids)
    shifted[:, :-1] = input_ids[:, 1:]
    e = rmsnorm(F.embedding(shifted, embed_table), enorm_weight, acc)
    h = rmsnorm(hidden_states, hnorm_weight, acc)
    eh = torch.cat([e, h], dim=-1).to(hidden_states.dtype)
    return F.linear(eh, eh_proj)


def make_inputs(batch, seq, vocab, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return (shift + scale * t).to(torch.bfloat16)
    input_ids = torch.randint(0, vocab, (batch, seq), generator=g, device=device, dtype=torch.int64)
    hidden_states = draw(batch, seq, hidden, scale=3.0)
    embed_table = draw(vocab, hidden, scale=0.5)
    enorm_weight = draw(hidden, scale=0.1, shift=1.0)
    hnorm_weight = draw(hidden, scale=0.1, shift=1.0)
    eh_proj = draw(hidden, 2 * hidden, scale=(2 * hidden) ** -0.5)
    return input_ids, hidden_states, embed_table, enorm_weight, hnorm_weight, eh_proj
