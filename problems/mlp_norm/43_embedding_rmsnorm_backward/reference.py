"""Problem 43: backward of embedding lookup + RMSNorm (SOL-ExecBench).

Forward: e = table[ids]; out = e / rms(e) * weight (in fp32). Given
grad_out = dL/d(out), returns
    (grad_table [vocab, hidden], grad_weight [hidden])
computed with torch.autograd: grad_table is dense, rows of repeated ids
accumulate, rows of absent ids are zero. Vocabulary 65,536, 64 x 256 tokens,
width 4096.
"""
import torch
import torch.nn.functional as F

EPS = 1e-6  # chosen: the catalog does not give it


def forward(input_ids, table, weight):
    acc = torch.promote_types(table.dtype, torch.float32)
    e = F.embedding(input_ids, table).to(acc)
    out = e * torch.rsqrt(e.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.to(acc)
    return out.to(table.dtype)


def reference(input_ids, table, weight, grad_out):
    with torch.enable_grad():
        table_, weight_ = (t.detach().requires_grad_(True) for t in (table, weight))
        out = forward(input_ids, table_, weight_)
        grad_table, grad_weight = torch.autograd.grad(out, (table_, weight_), grad_out)
    return grad_table, grad_weight


def make_inputs(batch, seq, vocab, hidden, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    def draw(*shape, scale=1.0, shift=0.0):
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return (shift + scale * t).to(torch.bfloat16)
    # Uniform ids: 16,384 tokens over 65,536 rows give ~2,000 repeated ids per
    # draw, whose gradient rows accumulate, while the largest gradient stays
    # O(1) so that the bf16 allowance stays tight.
    input_ids = torch.randint(0, vocab, (batch, seq), generator=g, device=device, dtype=torch.int64)
    table = draw(vocab, hidden)
    weight = draw(hidden, scale=0.1, shift=1.0)
    grad_out = draw(batch, seq, hidden)
    return input_ids, table, weight, grad_out
