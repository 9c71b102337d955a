"""Problem 72, gated-delta-net (GDN) decode step, written in TIRx (Apache TVM 0.27).

Per (batch b, value head h), with the state S [V, K] in the k-last layout and
q, k the (unnormalised) q/k head h // rep:

    decay = exp(-exp(A_log[h]) * softplus(a[b, h] + dt_bias[h])),  beta = sigmoid(b[b, h])
    Sd  = decay * S
    u   = beta * (v - Sd k)                 (one value per state row)
    S'  = Sd + u k^T
    out = scale * (S' q)

This is the reference's old = k Sd, new = beta v + (1 - beta) old,
S' = Sd - k old^T + k new^T, since new - old = beta (v - old); it rounds
less (one FMA per state element).

Mapping: one state row (D fp32 = D/4 16-byte vectors) is held in registers by a
group of `tpr` consecutive lanes; lane j of the group owns vectors j, j+tpr,
j+2*tpr, ... so each load instruction of a group reads one contiguous segment.
A CTA covers `rows` state rows of one (b, h); the grid is B * Hv * (D / rows).
D = 128: tpr = 8 lanes per row (16 floats per thread), 16 rows per CTA
(128 threads), 8 CTAs per (b, h). Each lane also loads its own columns of q
and k (bf16); S k and S' q are reduced with butterfly shuffles inside the row
group: no shared memory, no barrier.

NVRTC compiles with --use_fast_math (approximate fp32 exp/log/div/rsqrt), so
the per-(b, h) gating scalars are computed in fp64 (fast-math does not touch
double precision) and rounded to fp32; the per-element state math is fp32
multiply/add (FMA), like the fp32 reference. scale is a run-time fp32 kernel
argument.

Compiled once per (qk_heads, v_heads, head_dim); the batch size is symbolic.
32-bit index math: batch * v_heads * D * D < 2**31.
"""
import torch
import tvm
from tvm.script import tirx as T

VEC = 4  # fp32 per 16-byte state vector (and bf16 per 8-byte q/k vector)
MAX_TPR = 8  # lanes per state row
MAX_THREADS = 128

_CACHE = {}


def _plan(d):
    """(lanes per row, vectors per lane, rows per CTA) for head_dim d."""
    if d % VEC or d <= 0:
        raise ValueError(f"head_dim must be a positive multiple of {VEC}, got {d}")
    nvec = d // VEC
    tpr = 1
    while tpr * 2 <= MAX_TPR and nvec % (tpr * 2) == 0:
        tpr *= 2
    vpt = nvec // tpr
    rows = MAX_THREADS // tpr
    while d % rows:  # rows per CTA must divide d
        rows //= 2
    return tpr, vpt, rows


def make_prim_func(hqk, hv, d):
    """The TIRx kernel for one (qk_heads, v_heads, head_dim); the batch is symbolic."""
    tpr, vpt, rows = _plan(d)
    rep = hv // hqk
    nchunk = d // rows
    threads = tpr * rows
    nval = vpt * VEC

    @T.prim_func
    def gdn_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, s_ptr: T.handle,
                   alog_ptr: T.handle, a_ptr: T.handle, dt_ptr: T.handle, b_ptr: T.handle,
                   o_ptr: T.handle, ns_ptr: T.handle, scale: T.float32):
        n = T.int32()
        Q = T.match_buffer(q_ptr, (n, 1, hqk, d), "bfloat16")
        K = T.match_buffer(k_ptr, (n, 1, hqk, d), "bfloat16")
        V = T.match_buffer(v_ptr, (n, 1, hv, d), "bfloat16")
        S = T.match_buffer(s_ptr, (n, hv, d, d), "float32")
        ALOG = T.match_buffer(alog_ptr, (hv,), "float32")
        A = T.match_buffer(a_ptr, (n, 1, hv), "bfloat16")
        DT = T.match_buffer(dt_ptr, (hv,), "float32")
        B = T.match_buffer(b_ptr, (n, 1, hv), "bfloat16")
        O = T.match_buffer(o_ptr, (n, 1, hv, d), "bfloat16")
        NS = T.match_buffer(ns_ptr, (n, hv, d, d), "float32")
        T.device_entry()
        bx = T.cta_id([n * (hv * nchunk)])
        tx = T.thread_id([threads])
        sv = T.alloc_local((nval,), "float32")
        qv = T.alloc_local((nval,), "bfloat16")
        kv = T.alloc_local((nval,), "bfloat16")
        qf = T.alloc_local((nval,), "float32")
        kf = T.alloc_local((nval,), "float32")
        bi: T.let = bx // (hv * nchunk)
        h: T.let = bx // nchunk % hv
        vrow: T.let = bx % nchunk * rows + tx // tpr
        lane: T.let = tx % tpr
        # All global loads first.
        for i in T.unroll(vpt):
            for e in T.vectorized(VEC):
                sv[i * VEC + e] = S[bi, h, vrow, (i * tpr + lane) * VEC + e]
        for i in T.unroll(vpt):
            for e in T.vectorized(VEC):
                qv[i * VEC + e] = Q[bi, 0, h // rep, (i * tpr + lane) * VEC + e]
            for e in T.vectorized(VEC):
                kv[i * VEC + e] = K[bi, 0, h // rep, (i * tpr + lane) * VEC + e]
        v_val: T.f32 = T.float32(V[bi, 0, h, vrow])
        x: T.f64 = T.float64(A[bi, 0, h]) + T.float64(DT[h])
        b_val: T.f64 = T.float64(B[bi, 0, h])
        alog: T.f64 = T.float64(ALOG[h])

        for i in T.unroll(nval):
            qf[i] = T.float32(qv[i])
            kf[i] = T.float32(kv[i])

        # Gating in fp64 (torch softplus: threshold 20).
        sp: T.f64 = T.if_then_else(x > T.float64(20), x, T.log1p(T.exp(x)))
        decay: T.f32 = T.float32(T.exp(-T.exp(alog) * sp))
        beta: T.f32 = T.float32(T.float64(1) / (T.float64(1) + T.exp(-b_val)))

        pred: T.f32 = T.float32(0)
        for i in T.unroll(nval):
            sv[i] = sv[i] * decay
            pred = pred + sv[i] * kf[i]
        if tpr > 1:  # Python constant: resolved while parsing
            pred = T.cuda.warp_sum(pred, width=tpr)
        u: T.f32 = beta * (v_val - pred)
        o: T.f32 = T.float32(0)
        for i in T.unroll(nval):
            sv[i] = sv[i] + kf[i] * u
            o = o + sv[i] * qf[i]
        if tpr > 1:
            o = T.cuda.warp_sum(o, width=tpr)
        for i in T.unroll(vpt):
            for e in T.vectorized(VEC):
                NS[bi, h, vrow, (i * tpr + lane) * VEC + e] = sv[i * VEC + e]
        if lane == 0:
            O[bi, 0, h, vrow] = T.bfloat16(scale * o)

    return gdn_decode


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(hqk, hv, d, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable."""
    if hv % hqk:
        raise ValueError("v_heads must be a multiple of qk_heads")
    mod = tvm.IRModule({"main": make_prim_func(hqk, hv, d)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(hqk, hv, d, device):
    key = (hqk, hv, d, device.index)
    fn = _CACHE.get(key)
    if fn is None:
        fn = compile_kernel(hqk, hv, d, target_for(device))["main"]
        _CACHE[key] = fn
    return fn


def solve(q, k, v, state, A_log, a, dt_bias, b, scale):
    batch, _, hqk, d = q.shape
    hv = v.shape[2]
    if q.dtype != torch.bfloat16 or state.dtype != torch.float32:
        raise TypeError("expects bf16 q/k/v/a/b and fp32 state/A_log/dt_bias")
    if batch * hv * d * d >= 2**31:
        raise ValueError("batch * v_heads * head_dim^2 must be < 2**31 (32-bit indexing)")
    out = torch.empty((batch, 1, hv, d), dtype=torch.bfloat16, device=q.device)
    new_state = torch.empty((batch, hv, d, d), dtype=torch.float32, device=q.device)
    if batch == 0:
        return out, new_state
    fn = _kernel(hqk, hv, d, q.device)
    # DLPack, zero copy; tvm-ffi launches on torch's current stream.
    fn(q.contiguous(), k.contiguous(), v.contiguous(), state.contiguous(),
       A_log.float().contiguous(), a.contiguous(), dt_bias.float().contiguous(),
       b.contiguous(), out, new_state, float(scale))
    return out, new_state
