"""Problem 42: multi-token-prediction (MTP) layer input, Ling-2.0 shape
(SOL-ExecBench), bf16.

The MTP module predicts one token further ahead: it embeds the token ids
shifted left by one (the last position of each sequence gets id 0), RMS-
normalises that embedding and the main model's hidden state separately (each
with its own weight), concatenates [embedding, hidden] and projects
2 * hidden -> hidden. Vocabulary 157,184, width 4096. eps is an input (a
Python float), as in the public problem.
"""
import torch
import torch.nn.functional as F


def rmsnorm(t, weight, eps, acc):
    # Llama-style: normalise in fp32, round to the input dtype, then scale.
    x = t.to(acc)
    x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return weight * x.to(t.dtype)


def reference(input_ids, hidden_states, word_embeddings, enorm_weight, hnorm_weight, eh_proj_weight, eps):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    shifted = torch.roll(input_ids, shifts=-1, dims=-1)
    shifted[:, -1] = 0
    e = rmsnorm(F.embedding(shifted, word_embeddings), enorm_weight, eps, acc)
    h = rmsnorm(hidden_states, hnorm_weight, eps, acc)
    return F.linear(torch.cat([e, h], dim=-1), eh_proj_weight)


def make_inputs(batch, seq, vocab, hidden, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    input_ids = torch.randint(0, vocab, (batch, seq), generator=g, device=device, dtype=torch.int64)
    hidden_states = draw(batch, seq, hidden)
    word_embeddings = draw(vocab, hidden)
    enorm_weight = draw(hidden) * 0.1 + 1.0
    hnorm_weight = draw(hidden) * 0.1 + 1.0
    eh_proj_weight = draw(hidden, 2 * hidden) * 0.02
    return input_ids, hidden_states, word_embeddings, enorm_weight, hnorm_weight, eh_proj_weight, float(eps)
