"""CPU emulation of the arithmetic of problem 52's validation kernels (cutedsl/ and tirx/ share
it), against the problem's reference and the grader's correctness rule. Not a kernel; run with
the project's Python:  build/python solutions/52_fp8_attn_out_proj/emulate_cpu.py

What it models, kernel step by kernel step:
- quantisation: amax of |x| per 1 x 128 group / 128 x 128 tile (the weight tile's rows past N
  replaced by copies of row N - 1, as the kernel's clamped loads do), scale = fp32(max(amax,
  1e-12) * fl32(1/448)), code = e4m3 round-to-nearest-even of clamp(fp32 x / scale, +-448). The
  e4m3 rounding is done twice: with torch's cast and with an independent table-based encoder
  (the PTX `cvt.rn.satfinite.e4m3x2.f32` semantics), which must agree.
- the GEMM: per 128-wide K block, exact products summed per 16-wide MMA step and added to an
  fp32 partial; acc = fp32(acc + part * fp32(xs * ws)); out = bf16(fp32(acc + bias)).
The reference quantises with `blocked / 448.0`; on CUDA torch computes that as a multiply by
the fp32 reciprocal (BinaryDivTrueKernel.cu, CPU-scalar divisor), on the CPU as a division.
The GPU reference is therefore emulated too (`reference_cuda`), and codes/scales are compared
with both.
"""
import importlib.util
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "grader"))
from mkb_grader.correctness import allowance  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "ref52", os.path.join(ROOT, "problems/quantization/52_fp8_attn_out_proj/reference.py"))
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

QB = 128
FP8_MAX = 448.0
INV = struct.unpack("<f", struct.pack("<f", 1.0 / FP8_MAX))[0]
FLOOR = struct.unpack("<f", struct.pack("<f", 1e-12))[0]
F32 = torch.float32


# ---- an independent e4m3fn encoder (round to nearest even, saturate to +-448) ---------------
def _e4m3_table():
    vals = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float64)
    codes = torch.arange(128)  # non-negative codes 0..0x7e are finite, 0x7f is NaN
    pos = vals[:127]
    return pos, codes[:127]


_POS, _CODES = _e4m3_table()


def e4m3_rne(v):
    """fp32 tensor -> uint8 e4m3fn codes, RNE with satfinite, by table search (not torch's cast)."""
    a = v.abs().to(torch.float64).clamp(max=FP8_MAX)
    hi = torch.bucketize(a, _POS).clamp(max=126)          # first table value >= a
    lo = (hi - 1).clamp(min=0)
    d_lo = a - _POS[lo]
    d_hi = _POS[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (_CODES[hi] % 2 == 0))
    code = torch.where(pick_hi, _CODES[hi], _CODES[lo]).to(torch.int32)
    code = torch.where(a == 0, torch.zeros_like(code), code)
    code = code | ((v < 0).to(torch.int32) << 7)
    return code.to(torch.uint8)


# ---- the kernels' quantisation ------------------------------------------------------------
def _quant_blocks(blocked):
    """blocked [nb_m, bm, nb_k, bk] fp32 -> (codes uint8, scale fp32 [nb_m, 1, nb_k, 1])."""
    amax = blocked.abs().amax(dim=(1, 3), keepdim=True)      # exact, order-free
    scale = torch.maximum(amax, torch.tensor(FLOOR, dtype=F32)) * torch.tensor(INV, dtype=F32)
    qf = torch.clamp(blocked / scale, -FP8_MAX, FP8_MAX)         # IEEE fp32 division
    codes = qf.to(torch.float8_e4m3fn).view(torch.uint8)
    alt = e4m3_rne(qf)
    assert torch.equal(codes, alt), "torch's e4m3 cast and the RNE table encoder disagree"
    return codes, scale


def kernel_quant_x(x):
    m, k = x.shape
    codes, scale = _quant_blocks(x.to(F32).reshape(m, 1, k // QB, QB))
    return codes.reshape(m, k), scale.reshape(m, k // QB)


def kernel_quant_w(w):
    n, k = w.shape
    nb = -(-n // QB)
    rows = torch.arange(nb * QB).clamp(max=n - 1)             # clamped row loads
    codes, scale = _quant_blocks(w.to(F32)[rows].reshape(nb, QB, k // QB, QB))
    return codes.reshape(nb * QB, k)[:n], scale.reshape(nb, k // QB)


# ---- the reference's quantisation, as torch runs it on CUDA and on the CPU -------------------
def ref_quant(x, bm, divide):
    m, k = x.shape
    mb = -(-m // bm)
    padded = torch.zeros(mb * bm, k, dtype=F32)
    padded[:m] = x.to(F32)
    blocked = padded.reshape(mb, bm, k // QB, QB)
    amax = blocked.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-12)
    scale = amax / FP8_MAX if divide else amax * torch.tensor(INV, dtype=F32)
    q = (blocked / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(torch.uint8).reshape(mb * bm, k)[:m], scale.reshape(mb, k // QB)


def reference_cuda(x, w, b):
    """The reference with torch-on-CUDA's `/ 448.0` (multiply by fl32(1/448))."""
    acc = torch.promote_types(x.dtype, F32)

    def deq(t, bm):
        q, s = ref_quant(t, bm, divide=False)
        sf = s.repeat_interleave(bm, 0)[: t.shape[0]].repeat_interleave(QB, 1)
        return q.view(torch.float8_e4m3fn).to(acc) * sf.to(acc)

    return (deq(x, 1) @ deq(w, QB).T + b.to(acc)).to(x.dtype)


# ---- the kernels' GEMM ----------------------------------------------------------------------
def kernel_gemm(qx, xs, qw, ws, bias):
    m, k = qx.shape
    n = qw.shape[0]
    fx = qx.view(torch.float8_e4m3fn).to(torch.float64)
    fw = qw.view(torch.float8_e4m3fn).to(torch.float64)
    wsn = ws.repeat_interleave(QB, 0)[:n]                        # [n, kb]
    acc = torch.zeros(m, n, dtype=F32)
    for kb in range(k // QB):
        part = torch.zeros(m, n, dtype=F32)
        for ks in range(QB // 16):                               # one mma.sync K step: exact sum of 16 products
            sl = slice(kb * QB + ks * 16, kb * QB + ks * 16 + 16)
            part = (part.to(torch.float64) + fx[:, sl] @ fw[:, sl].T).to(F32)
        s = xs[:, kb:kb + 1] * wsn[:, kb][None, :]               # fp32 scale product
        acc = (acc + part * s).to(F32)
    return (acc + bias.to(F32)).to(torch.bfloat16)


def run(batch, seq, k, n, seed):
    x, w, b = ref.make_inputs(batch, seq, k, n, seed=seed, device="cpu")
    qx, xs = kernel_quant_x(x)
    qw, ws = kernel_quant_w(w)
    line = [f"tokens {batch * seq:5d} K {k:5d} N {n:5d}:"]
    # codes and scales vs the CUDA reference (must be identical) and the CPU reference (may differ)
    for name, divide in (("cuda-ref", False), ("cpu-ref", True)):
        rqx, rxs = ref_quant(x, 1, divide)
        rqw, rws = ref_quant(w, QB, divide)
        dq = int((rqx != qx).sum() + (rqw != qw).sum())
        ds = int((rxs != xs).sum() + (rws != ws).sum())
        line.append(f"{name}: {dq} codes / {ds} scales differ;")
        if not divide:
            assert dq == 0 and ds == 0
    out = kernel_gemm(qx, xs, qw, ws, b)
    for name, fn in (("cuda-ref", reference_cuda), ("cpu-ref", ref.reference)):
        with torch.no_grad():
            expected = fn(x, w, b)
            anchor = fn(x.double(), w.double(), b.double())
        err = (out.double() - anchor).abs().max().item()
        allowed = allowance(expected, anchor)
        ref_err = (expected.double() - anchor).abs().max().item()
        line.append(f"{name}: max err {err:.4g} (reference's own {ref_err:.4g}), allowance {allowed:.4g};")
        assert err <= allowed
    print(" ".join(line))


if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(f"fl32(1/448) = {INV.hex()}, fl32(1e-12) = {FLOOR.hex()}, "
          f"torch fp32 1/448 = {(torch.ones((), dtype=F32) / FP8_MAX).item().hex()}")
    run(1, 6, 256, 384, seed=1)           # smoke sizes
    run(3, 100, 512, 320, seed=2)         # partial last weight tile (320 = 2.5 tiles)
    run(1, 509, 7680, 256, seed=3)        # held-out K, a 509-token slice
    run(2, 128, 7680, 384, seed=4)        # visible K and N tile count multiple
    print("all emulated cases pass")
