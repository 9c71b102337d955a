"""Problem 28, fused residual add + RMSNorm, written in TIRx (Apache TVM 0.27).

    x = hidden + residual            (fp32)
    y = x * rsqrt(mean(x^2) + eps) * w  -> bf16

One CTA per row. Each thread owns `iters` 16-byte vectors (8 bf16) of the row,
strided by the CTA width so that every load instruction of a warp is one
contiguous 512-byte segment. Hidden 4096: 512 threads, one vector each. The sum
of squares is reduced with a butterfly warp shuffle, the per-warp partials go
through shared memory (one barrier), and every warp re-reduces the partials
with a narrower butterfly, so no second barrier is needed. x stays in registers
between the reduction and the scaled store.

Supported: any number of rows (symbolic `n`, compiled once per hidden size),
hidden a multiple of 256 (so a row is a whole number of warp-wide vectors).
Index math is 32-bit: rows * hidden must stay below 2**31.
The tuning knobs below are untuned guesses; `mkb validate --problems NN`
times a variant after editing them.
"""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
VEC = 8  # bf16 per 128-bit access
MAX_THREADS = 512

_CACHE = {}


def _plan(hidden):
    """(threads per CTA, 16-byte vectors per thread) for one row per CTA."""
    if hidden <= 0 or hidden % 256:
        raise ValueError(f"hidden must be a positive multiple of 256, got {hidden}")
    nvec = hidden // VEC
    threads = MAX_THREADS
    while nvec % threads:  # largest power of two <= MAX_THREADS dividing nvec (>= 32)
        threads //= 2
    return threads, nvec // threads


def make_prim_func(hidden, eps=EPS):
    """The TIRx kernel for one hidden size; the row count `n` is symbolic."""
    threads, iters = _plan(hidden)
    nwarps = threads // 32
    nval = iters * VEC
    inv_h = 1.0 / hidden

    @T.prim_func
    def fused_add_rmsnorm(h_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
        n = T.int32()
        Hs = T.match_buffer(h_ptr, (n, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (n, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        Y = T.match_buffer(y_ptr, (n, hidden), "bfloat16")
        T.device_entry()
        row = T.cta_id([n])
        tx = T.thread_id([threads])
        partial = T.alloc_shared((nwarps,), "float32")
        hv = T.alloc_local((nval,), "bfloat16")
        rv = T.alloc_local((nval,), "bfloat16")
        wv = T.alloc_local((nval,), "bfloat16")
        yv = T.alloc_local((nval,), "bfloat16")
        xf = T.alloc_local((nval,), "float32")
        # Issue every global load before any arithmetic.
        for it in T.unroll(iters):
            for k in T.vectorized(VEC):
                hv[it * VEC + k] = Hs[row, (it * threads + tx) * VEC + k]
            for k in T.vectorized(VEC):
                rv[it * VEC + k] = R[row, (it * threads + tx) * VEC + k]
        for it in T.unroll(iters):
            for k in T.vectorized(VEC):
                wv[it * VEC + k] = W[(it * threads + tx) * VEC + k]
        acc: T.f32 = T.float32(0)
        for i in T.unroll(nval):
            xf[i] = T.float32(hv[i]) + T.float32(rv[i])
            acc = acc + xf[i] * xf[i]
        acc = T.cuda.warp_sum(acc)
        if nwarps > 1:  # Python constant: resolved while parsing
            if tx % 32 == 0:
                partial[tx // 32] = acc
            T.cuda.cta_sync()
            acc = T.cuda.warp_sum(partial[tx % nwarps], width=nwarps)
        inv: T.f32 = T.rsqrt(acc * T.float32(inv_h) + T.float32(eps))
        for i in T.unroll(nval):
            yv[i] = T.bfloat16(xf[i] * inv * T.float32(wv[i]))
        for it in T.unroll(iters):
            for k in T.vectorized(VEC):
                Y[row, (it * threads + tx) * VEC + k] = yv[it * VEC + k]

    return fused_add_rmsnorm


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(hidden, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable."""
    mod = tvm.IRModule({"main": make_prim_func(hidden)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(hidden, device):
    key = (hidden, device.index)
    fn = _CACHE.get(key)
    if fn is None:
        fn = compile_kernel(hidden, target_for(device))["main"]
        _CACHE[key] = fn
    return fn


def solve(hidden_states, residual, weight):
    if hidden_states.dtype != torch.bfloat16:
        raise TypeError("bf16 only")
    tokens, hidden = hidden_states.shape
    if tokens * hidden >= 2**31:
        raise ValueError("rows * hidden must be < 2**31 (32-bit indexing)")
    out = torch.empty((tokens, hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    if tokens == 0:
        return out
    fn = _kernel(hidden, hidden_states.device)
    # Torch tensors go in through DLPack without copies; tvm-ffi launches on
    # torch's current stream (torch.Tensor.__dlpack_c_exchange_api__).
    fn(hidden_states.contiguous(), residual.contiguous(), weight.contiguous(), out)
    return out
