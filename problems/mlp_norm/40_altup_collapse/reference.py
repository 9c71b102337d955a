"""Problem 40: AltUp collapse at the end of a Gemma-3n E2B decoder
(SOL-ExecBench), bf16.

The model carries ALTUP_NUM_INPUTS = 3 parallel predictions of the hidden
state. At the end, streams 1 and 2 are mapped back by their own [H, H]
unembedding projection, rescaled per token to the RMS magnitude of stream 0
(the mean square of a projected stream floored at eps), and the three streams
are averaged. eps is an input (a Python float), as in the public problem.
"""
import torch
import torch.nn.functional as F


def reference(hidden_states, unembed_1, unembed_2, eps):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    target = hidden_states[0].to(acc)
    target_rms = target.pow(2).mean(dim=-1, keepdim=True).sqrt()
    streams = [target]
    for i, w in ((1, unembed_1), (2, unembed_2)):
        p = F.linear(hidden_states[i].to(acc), w.to(acc))
        ms = p.pow(2).mean(dim=-1, keepdim=True)
        p = p * target_rms / torch.sqrt(torch.clamp_min(ms, eps))
        streams.append(p)
    return torch.stack(streams).mean(dim=0).to(hidden_states.dtype)


def make_inputs(batch, seq, hidden, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    hidden_states = draw(3, batch, seq, hidden)
    unembed_1 = draw(hidden, hidden)
    unembed_2 = draw(hidden, hidden)
    return hidden_states, unembed_1, unembed_2, float(eps)
