"""Problem 43: backward of embedding lookup + RMSNorm, Jamba shape
(SOL-ExecBench), bf16 gradients with fp32 saved activations.

Forward (not computed here): h = table[input_ids] (kept in fp32),
normalized = h * rstd, out = normalized * norm_weight. From grad_output, the
ids and the saved fp32 hidden states and rstd, returns
    (grad_embedding [VOCAB_SIZE, hidden], grad_weight [hidden])
grad_embedding is dense: rows of repeated ids accumulate, rows of absent ids
are zero. The vocabulary size is a module constant (65,536), as published.
"""
import torch

VOCAB_SIZE = 65536


def reference(grad_output, input_ids, hidden_states_fp32, rstd, norm_weight):
    acc = torch.promote_types(grad_output.dtype, torch.float32)
    hidden = grad_output.shape[-1]
    dy = grad_output.to(acc)
    normalized = hidden_states_fp32.to(acc) * rstd.to(acc)
    grad_weight = (dy * normalized).sum(dim=(0, 1))
    g = dy * norm_weight.to(acc)
    proj = (g * normalized).mean(dim=-1, keepdim=True)
    grad_hidden = rstd.to(acc) * (g - normalized * proj)
    grad_embedding = torch.zeros(VOCAB_SIZE, hidden, dtype=acc, device=grad_output.device)
    grad_embedding.index_add_(0, input_ids.reshape(-1), grad_hidden.reshape(-1, hidden))
    return grad_embedding.to(grad_output.dtype), grad_weight.to(grad_output.dtype)


def make_inputs(batch, seq, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    grad_output = torch.randn((batch, seq, hidden), generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    input_ids = torch.randint(0, VOCAB_SIZE, (batch, seq), generator=g, device=device, dtype=torch.int64)
    hidden_states_fp32 = torch.randn((batch, seq, hidden), generator=g, device=device, dtype=torch.float32)
    rstd = torch.rand((batch, seq, 1), generator=g, device=device, dtype=torch.float32) * 0.5 + 0.5
    norm_weight = (torch.randn((hidden,), generator=g, device=device, dtype=torch.float32) * 0.1 + 1.0).to(torch.bfloat16)
    return grad_output, input_ids, hidden_states_fp32, rstd, norm_weight
