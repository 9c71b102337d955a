"""CPU emulation of the arithmetic of solutions/47 (cutedsl and tirx share it) against
the problem's reference and its float64 anchor, with the grading rule of PROTOCOL.md:

    max|kernel - anchor| <= 3 * max(max|expected - anchor|, eps(dtype) * max|anchor|)

    build/python solutions/47_bias_routing_shared_expert/emulate_cpu.py [--batch 4 --seq 128 ...] [--fast-exp]

What is emulated, in the kernels' order:
  router  x (bf16) . Wg (fp32) as fp32 FMAs, k ascending, summed in three levels: a
          64-long run per K tile, then the tile sums over 8 tiles, then those over the
          row (each FMA and each add rounded to fp32);
  route   fp32 softmax, top-8 of p + bias, w = p / max(sum of the 8 p, norm_min) in fp32;
  experts gate / up / down GEMMs as exact bf16 products accumulated in fp32 (emulated
          as float64 sums rounded to fp32; the tensor cores' own fp32 accumulation order
          is not reproduced, its effect is ~1e-7 relative), SwiGLU silu(g) * u in fp32
          rounded to bf16, the down result times w in fp32;
  combine the shared expert's fp32 down result plus the 8 weighted rows in ascending
          expert order, in fp32, rounded once to bf16.
--fast-exp models the tirx build (TVM compiles with --use_fast_math: __expf =
ex2.approx(x * log2 e), relative error up to ~2**-22) by a random relative
perturbation of 2**-21 on every exp in the route and SwiGLU kernels.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "problems", "moe", "47_bias_routing_shared_expert"))
import reference as R  # noqa: E402

RKT, R_MID = 64, 8


def fexp(x, fast, g):
    y = torch.exp(x)
    if fast:
        y = y * (1 + 2.0**-21 * (torch.randint(0, 2, y.shape, generator=g).to(y.dtype) * 2 - 1))
    return y


def router_logits(x, w):
    """fp32 FMAs (each rounded to fp32) in the kernels' three-level order."""
    xd, wd = x.double(), w.double()
    tokens, hidden = x.shape
    acc_m = torch.zeros(tokens, w.shape[0], dtype=torch.float32)
    acc_o = torch.zeros_like(acc_m)
    for kt in range((hidden + RKT - 1) // RKT):
        acc_t = torch.zeros_like(acc_m)
        for k in range(kt * RKT, min(hidden, (kt + 1) * RKT)):
            acc_t = (acc_t.double() + xd[:, k, None] * wd[None, :, k]).float()   # fma: one rounding
        acc_m = acc_m + acc_t
        if kt % R_MID == R_MID - 1:
            acc_o = acc_o + acc_m
            acc_m = torch.zeros_like(acc_m)
    return acc_o + acc_m


def mm32(a, b):
    """Exact bf16 products summed in (about) fp32: float64 sum rounded to fp32."""
    return (a.double() @ b.double().T).float()


def swiglu_act(hg, hu, fast, g):
    return (hg / (1 + fexp(-hg, fast, g)) * hu).to(torch.bfloat16)


def kernel_emulation(inputs, fast, g):
    (hidden_states, gate_weight, bias, gate_proj, up_proj, down_proj, sg, su, sd, norm_min) = inputs
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    logits = router_logits(x, gate_weight)
    m = logits.max(dim=-1, keepdim=True).values
    e = fexp(logits - m, fast, g)
    p = e / e.sum(dim=-1, keepdim=True)
    top_i = (p + bias.float()).topk(R.TOP_K, dim=-1).indices
    top_p = p.gather(1, top_i)
    top_w = top_p / top_p.sum(dim=-1, keepdim=True).clamp(min=norm_min)
    acts = swiglu_act(mm32(x, sg), mm32(x, su), fast, g)
    out = mm32(acts, sd)                                          # shared expert, fp32
    for ex in range(gate_weight.shape[0]):                        # ascending expert id
        tok, slot = (top_i == ex).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        act = swiglu_act(mm32(x[tok], gate_proj[ex]), mm32(x[tok], up_proj[ex]), fast, g)
        out[tok] = out[tok] + mm32(act, down_proj[ex]) * top_w[tok, slot].unsqueeze(1)
    return out.to(torch.bfloat16).reshape(shape), logits, top_i


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--intermediate", type=int, default=256)
    ap.add_argument("--shared-intermediate", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fast-exp", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    inputs = R.make_inputs(a.batch, a.seq, a.hidden, a.experts, a.intermediate, a.shared_intermediate,
                           seed=a.seed, device="cpu")
    assert R.inputs_ok(*inputs)
    expected = R.reference(*inputs)
    anchor = R.reference(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                           for t in inputs])
    g = torch.Generator().manual_seed(0)
    got, logits, top_i = kernel_emulation(inputs, a.fast_exp, g)
    x = inputs[0].reshape(-1, a.hidden)
    _, _, s64 = R._router(x.double(), inputs[1].double(), inputs[2].double())
    same = torch.equal(top_i.sort(dim=-1).values, s64.topk(R.TOP_K, dim=-1).indices.sort(dim=-1).values)
    print(f"workload batch {a.batch} seq {a.seq} hidden {a.hidden} experts {a.experts} inter {a.intermediate} "
          f"shared {a.shared_intermediate} seed {a.seed} fast_exp {a.fast_exp}; selection == float64: {same}")
    ok = same
    for name, k, e, an in (("out", got, expected[0], anchor[0]), ("router_logits", logits, expected[1], anchor[1])):
        an = an.double()
        ref_err = float((e.double() - an).abs().max())
        floor = torch.finfo(e.dtype).eps * float(an.abs().max())
        allow = 3.0 * max(ref_err, floor)
        err = float((k.double() - an).abs().max())
        ok = ok and err <= allow
        print(f"  {name:14s} kernel err {err:.4g}  reference err {ref_err:.4g}  eps*max|anchor| {floor:.4g}  "
              f"allowance {allow:.4g}  ratio {err / allow:.3f}  (vs the eps floor alone: {err / (3 * floor):.3f})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
