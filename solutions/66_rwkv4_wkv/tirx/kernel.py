"""Problem 66, RWKV-4 WKV recurrence (fp32), written in TIRx (Apache TVM 0.27).

Per (batch, channel), with w = -exp(time_decay), u = time_first, state (a, b, p)
starting at (0, 0, -1e38), for t = 0 .. seq-1:

    ww = u + k_t;  q = max(p, ww);   out_t = (e^(p-q) a + e^(ww-q) v_t) / (e^(p-q) b + e^(ww-q))
    ww = w + p;    q = max(ww, k_t); a = e^(ww-q) a + e^(kt-q) v_t;  b = e^(ww-q) b + e^(kt-q);  p = q

Mapping: one thread per (batch, channel), the state in registers, a sequential
loop over seq. A CTA holds 128 consecutive channels of one batch element, so
every load/store instruction of a warp touches 128 contiguous bytes.

Numerics follow the reference's order of operations exactly, with one saving:
of each pair exp(x - q), exp(y - q) with q = max(x, y), one is exp(0) = 1, the
other exp(-|x - y|) (IEEE subtraction is antisymmetric, so the argument is
bit-identical to the reference's). So 2 exps per element, not 4; the products
with 1 are dropped and the remaining multiply-add is one FMA.
TVM compiles CUDA with --use_fast_math (expf -> __expf, about 30 ulp here, and
approximate division), so:
  * exp(x), x <= 0, is written out in fp32 arithmetic: Cody-Waite reduction
    x = j ln2 + r (j = round(x log2 e), ln2 split in hi/lo, |r| <= ln2/2 + tiny), degree-7 Taylor
    polynomial in Horner form, times 2^j built from the exponent bits; about
    0.9 ulp (checked against fp64 on 1e6 points). x is clamped at -87 (the
    result is then 1.6e-38 instead of a smaller number: it only ever
    multiplies a bounded state that is added to a term of size 1);
  * the division is PTX div.rn.f32 (IEEE, like torch);
  * w = -exp(time_decay) is computed in fp64 (not touched by fast math) and
    rounded once.
The loop is processed in chunks of UNROLL steps: all 2*UNROLL loads of a chunk
first, then the steps, then the stores. Compiled once per channel count
(batch and seq symbolic) and cached. 32-bit offsets: batch*seq*channels < 2**31.
"""
import math

import torch
import tvm
from tvm.script import tirx as T

THREADS = 128   # channels per CTA
UNROLL = 8      # time steps per chunk
P_INIT = -1e38
MAX_ELEMS = 2**31 - 1

L2E = 1.4426950408889634
LN2_HI = 0.693145751953125      # 0x3f317200: j * LN2_HI is exact for |j| < 2**8
LN2_LO = 1.428606765330187e-06  # 0x35bfbe8e
EXP_MIN = -87.0
INV_FACT = [1.0 / math.factorial(i) for i in range(8)]

_CACHE = {}


def _fma(x, y, z):
    """x * y + z; nvcc contracts it into one fma.rn.f32 (checked in the PTX)."""
    return x * y + z


def _exp_neg(x):
    """exp(x) for fp32 x <= 0 (clamped at -87), fp32 arithmetic only."""
    xc = T.max(x, T.float32(EXP_MIN))
    j = T.round(xc * T.float32(L2E))
    r0 = _fma(j, T.float32(-LN2_HI), xc)
    r = _fma(j, T.float32(-LN2_LO), r0)
    p = T.float32(INV_FACT[7])
    for i in range(6, -1, -1):
        p = _fma(p, r, T.float32(INV_FACT[i]))
    scale = T.reinterpret("float32", T.shift_left(T.Cast("int32", j) + 127, 23))
    return p * scale


def make_prim_func(channels):
    """The TIRx kernel for one channel count; batch `nb` and seq `nt` are symbolic."""
    if channels <= 0:
        raise ValueError("channels must be positive")
    nblk = (channels + THREADS - 1) // THREADS

    @T.prim_func
    def rwkv4_wkv(td_ptr: T.handle, tf_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle,
                  o_ptr: T.handle):
        nb = T.int32()
        nt = T.int32()
        TD = T.match_buffer(td_ptr, (channels,), "float32")
        TF = T.match_buffer(tf_ptr, (channels,), "float32")
        K = T.match_buffer(k_ptr, (nb, nt, channels), "float32")
        V = T.match_buffer(v_ptr, (nb, nt, channels), "float32")
        O = T.match_buffer(o_ptr, (nb, nt, channels), "float32")
        T.device_entry()
        bx, bi = T.cta_id([nblk, nb])
        tx = T.thread_id([THREADS])
        kr = T.alloc_local((UNROLL,), "float32")
        vr = T.alloc_local((UNROLL,), "float32")
        orr = T.alloc_local((UNROLL,), "float32")
        c: T.let = bx * THREADS + tx
        if c < channels:
            w: T.f32 = T.float32(-T.exp(T.float64(TD[c])))
            u: T.f32 = TF[c]
            a: T.f32 = T.float32(0)
            b: T.f32 = T.float32(0)
            p: T.f32 = T.float32(P_INIT)
            nfull: T.int32 = nt // UNROLL
            for i in T.serial(nfull):
                for j in T.unroll(UNROLL):
                    kr[j] = K[bi, i * UNROLL + j, c]
                    vr[j] = V[bi, i * UNROLL + j, c]
                for j in T.unroll(UNROLL):
                    # output: past state plus the current token with bonus u
                    ww1: T.f32 = u + kr[j]
                    g1: T.let = p >= ww1
                    e1: T.f32 = _exp_neg(-T.abs(p - ww1))
                    num: T.f32 = T.if_then_else(g1, _fma(e1, vr[j], a), _fma(e1, a, vr[j]))
                    den: T.f32 = T.if_then_else(g1, b + e1, _fma(e1, b, T.float32(1)))
                    T.ptx.div.rn.f32(orr[j], num, den)
                    # state update: decay the past by exp(w), add the current token
                    ww2: T.f32 = w + p
                    g2: T.let = ww2 >= kr[j]
                    e2: T.f32 = _exp_neg(-T.abs(ww2 - kr[j]))
                    a = T.if_then_else(g2, _fma(e2, vr[j], a), _fma(e2, a, vr[j]))
                    b = T.if_then_else(g2, b + e2, _fma(e2, b, T.float32(1)))
                    p = T.if_then_else(g2, ww2, kr[j])
                for j in T.unroll(UNROLL):
                    O[bi, i * UNROLL + j, c] = orr[j]
            for t in T.serial(nfull * UNROLL, nt):
                kt: T.f32 = K[bi, t, c]
                vt: T.f32 = V[bi, t, c]
                tw1: T.f32 = u + kt
                tg1: T.let = p >= tw1
                te1: T.f32 = _exp_neg(-T.abs(p - tw1))
                tnum: T.f32 = T.if_then_else(tg1, _fma(te1, vt, a), _fma(te1, a, vt))
                tden: T.f32 = T.if_then_else(tg1, b + te1, _fma(te1, b, T.float32(1)))
                T.ptx.div.rn.f32(orr[0], tnum, tden)
                O[bi, t, c] = orr[0]
                tw2: T.f32 = w + p
                tg2: T.let = tw2 >= kt
                te2: T.f32 = _exp_neg(-T.abs(tw2 - kt))
                a = T.if_then_else(tg2, _fma(te2, vt, a), _fma(te2, a, vt))
                b = T.if_then_else(tg2, b + te2, _fma(te2, b, T.float32(1)))
                p = T.if_then_else(tg2, tw2, kt)

    return rwkv4_wkv


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(channels, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable."""
    mod = tvm.IRModule({"main": make_prim_func(channels)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(channels, device):
    key = (channels, device.index)
    fn = _CACHE.get(key)
    if fn is None:
        fn = compile_kernel(channels, target_for(device))["main"]
        _CACHE[key] = fn
    return fn


def _prep(t):
    """Dense fp32 storage; copy only if not."""
    if t.dtype != torch.float32:
        t = t.float()
    if not t.is_contiguous():
        t = t.contiguous()
    return t


def solve(time_decay, time_first, k, v):
    batch, seq, channels = k.shape
    if k.dtype != torch.float32 or v.dtype != torch.float32:
        raise TypeError("k and v must be fp32")
    out = torch.empty((batch, seq, channels), dtype=torch.float32, device=k.device)
    if out.numel() == 0:
        return out
    if batch * seq * channels > MAX_ELEMS or batch > 65535:
        raise ValueError("batch * seq * channels must be < 2**31 and batch <= 65535")
    fn = _kernel(channels, k.device)
    # Torch tensors go in through DLPack without copies; tvm-ffi launches on
    # torch's current stream.
    fn(_prep(time_decay), _prep(time_first), _prep(k), _prep(v), out)
    return out
