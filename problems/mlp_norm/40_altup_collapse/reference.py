"""Problem 40: AltUp collapse at the end of a Gemma-3n decoder (SOL-ExecBench).

The model carries several parallel predictions of the hidden state. At the
end, streams 1..n-1 are mapped back by their own unembedding projection,
rescaled to the RMS magnitude of stream 0 (per token), and all n streams are
averaged. Here n = 3, width 3072.
"""
import torch
import torch.nn.functional as F

EPS = 1e-5  # floor on the mean square of a projected stream (Gemma-3n uses 1e-5)


def reference(hidden_states, unembed):
    acc = torch.promote_types(hidden_states.dtype, torch.float32)
    streams = hidden_states.shape[0]
    target = hidden_states[0].to(acc)
    target_rms = target.pow(2).mean(dim=-1, keepdim=True).sqrt()
    total = target
    for i in range(1, streams):
        p = F.linear(hidden_states[i], unembed[i - 1]).to(acc)
        rms = p.pow(2).mean(dim=-1, keepdim=True).clamp_min(EPS).sqrt()
        total = total + p * (target_rms / rms)
    return (total / streams).to(hidden_states.dtype)


def make_inputs(streams, batch, seq, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    # Stream k has standard deviation 2^(1-k), so the rescaling matters.
    mags = torch.tensor([2.0 ** (1 - k) for k in range(streams)], device=device)
    hidden_states = (draw(streams, batch, seq, hidden) * mags.view(-1, 1, 1, 1)).to(torch.bfloat16)
    unembed = (hidden ** -0.5 * draw(streams - 1, hidden, hidden)).to(torch.bfloat16)
    return hidden_states, unembed
