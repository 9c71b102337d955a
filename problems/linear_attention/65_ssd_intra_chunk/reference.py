"""Problem 65: SSD intra-chunk diagonal block (Mamba2).

The state-space dual form splits the sequence into chunks; inside each chunk
the output is a masked, decayed "attention" of C against B:

    y[i] = sum_{j <= i} (C_i . B_j) * exp(sum_{j < s <= i} dt_s A) * dt_j * x_j

for every (batch, chunk, head); head h reads B/C group h // (heads / groups).
Inputs arrive already split into chunks; dt is positive (after softplus) and
A negative, so every decay factor lies in (0, 1]. Only this diagonal-block term
is computed: no state enters from earlier chunks and no D skip.
"""
import torch


def reference(x, dt, A, B, C):
    acc = torch.promote_types(x.dtype, torch.float32)
    chunk = x.shape[2]
    heads, groups = x.shape[3], B.shape[3]
    rep = heads // groups
    out_dtype = x.dtype

    x = x.to(acc)
    dt = dt.to(acc)                                                   # [b, c, l, H]
    B = B.to(acc).repeat_interleave(rep, dim=3)                       # [b, c, l, H, N]
    C = C.to(acc).repeat_interleave(rep, dim=3)

    cum = (dt * A.to(acc)).cumsum(dim=2).permute(0, 1, 3, 2)          # [b, c, H, l]
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    decay = torch.exp((cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, float("-inf")))
    scores = torch.einsum("bcihn,bcjhn->bchij", C, B) * decay          # [b, c, H, l, l]
    y = torch.einsum("bchij,bcjhp->bcihp", scores, x * dt[..., None])
    return y.to(out_dtype).contiguous()


def make_inputs(batch, chunks, chunk, heads, head_dim, groups, state, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32)
    bf16 = torch.bfloat16
    x = randn(batch, chunks, chunk, heads, head_dim).to(bf16)
    # dt = softplus(N(0,1) + dt_bias), dt_bias the inverse softplus of a log-uniform [1e-3, 1e-1] draw
    dt0 = torch.exp(torch.log(torch.tensor(1e-3)).item() + rand(heads) * torch.log(torch.tensor(100.0)).item())
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))
    dt = torch.nn.functional.softplus(randn(batch, chunks, chunk, heads) + dt_bias)
    A = -(1.0 + 15.0 * rand(heads))
    B = randn(batch, chunks, chunk, groups, state).to(bf16)
    C = (state ** -0.5 * randn(batch, chunks, chunk, groups, state)).to(bf16)
    return x, dt, A, B, C
