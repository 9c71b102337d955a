"""Problem 66: RWKV-4 WKV recurrence with exponential time decay and running-
maximum stabilisation, resuming from a carried-in state (SOL-ExecBench recipe).

Per channel: w = -exp(time_decay), u = time_first. For each token t:
  out_t   = (e^(p-q) a + e^(u+k_t-q) v_t) / (e^(p-q) b + e^(u+k_t-q)),  q = max(p, u+k_t)
  (a, b, p) <- (e^(w+p-q') a + e^(k_t-q') v_t, e^(w+p-q') b + e^(k_t-q'), q'),  q' = max(w+p, k_t)
starting from the given (num_state, den_state, max_state). Returns the
outputs and the final (num_state, den_state, max_state).
"""
import torch


def reference(time_decay, key, time_first, value, num_state, den_state, max_state):
    compute_dtype = torch.promote_types(key.dtype, torch.float32)
    batch, seq_len, channels = key.shape
    num_state = num_state.to(compute_dtype)
    den_state = den_state.to(compute_dtype)
    max_state = max_state.to(compute_dtype)
    time_decay = -torch.exp(time_decay.to(compute_dtype))
    time_first = time_first.to(compute_dtype)
    output = torch.zeros_like(key, dtype=compute_dtype)
    for t in range(seq_len):
        current_key = key[:, t].to(compute_dtype)
        current_value = value[:, t].to(compute_dtype)
        max_for_output = torch.maximum(max_state, current_key + time_first)
        e1 = torch.exp(max_state - max_for_output)
        e2 = torch.exp(current_key + time_first - max_for_output)
        numerator = e1 * num_state + e2 * current_value
        denominator = e1 * den_state + e2
        output[:, t] = numerator / denominator
        max_for_state = torch.maximum(max_state + time_decay, current_key)
        e1 = torch.exp(max_state + time_decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        num_state = e1 * num_state + e2 * current_value
        den_state = e1 * den_state + e2
        max_state = max_for_state
    return output, num_state, den_state, max_state


def make_inputs(batch, seq, channels, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    f32 = torch.float32
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=f32)
    def uniform(lo, hi, *shape):
        return torch.empty(*shape, device=device, dtype=f32).uniform_(lo, hi, generator=g)
    return [
        uniform(-6.0, -1.0, channels),
        randn(batch, seq, channels),
        randn(channels) * 0.5,
        randn(batch, seq, channels),
        randn(batch, channels),
        randn(batch, channels),
        uniform(-2.0, 2.0, batch, channels),
    ]
