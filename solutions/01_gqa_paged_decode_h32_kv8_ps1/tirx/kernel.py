"""Problem 01, GQA paged decode (32 q heads / 8 kv heads, head_dim 128, page size 1),
written in TIRx (Apache TVM 0.27).

Flash-decoding in two kernels:

1. `partial`, grid (batch * kv_heads, S) (S splits per sequence, chosen on the host
   from the average sequence length; symbolic, bound from the workspace shape).
   CTA (b, g, s) takes the 4 query heads that share kv head g and the token range
   [c0, c1) of sequence b, where chunk = ceil(len / S), c0 = start + s * chunk,
   c1 = min(end, c0 + chunk). 128 threads = 8 "streams" of 16 lanes (two per
   warp); stream t handles tokens c0 + t, c0 + t + 8, ...  Lane i of a stream owns
   head dims [8i, 8i + 8): one 16-byte load of the K row and one of the V row per
   token. The 4 dot products are reduced over the 16 lanes (`warp_sum`, width 16);
   each stream keeps an online softmax in base 2 (q pre-scaled by
   sm_scale * log2(e), a run-time fp32 kernel argument computed on the host from
   the sm_scale input; running max m, sum l, fp32 accumulator). The streams
   are merged through shared memory; the CTA writes o_part = acc / l (fp32) and
   lse_part = m + log2(l) (base 2), or (0, -1e30) for an empty range.
2. `merge`, grid batch * q_heads, one warp each (4 dims per lane):
   M = max_s lse_part, w_s = exp2(lse_part_s - M), out = sum_s w_s o_s / sum_s w_s,
   lse = M + log2(sum_s w_s).

The sentinel -1e30 (not -inf) keeps every exp2 argument finite. NVRTC compiles with
--use_fast_math (ex2/lg2/rcp approximations, a few ulp; the fp32 lse tolerance is
about 4e-6 and the emulated error 1e-6). lse = logsumexp(scores) / ln 2 is the
log2-sum-exp2 of the log2(e)-scaled scores, what the base-2 online softmax computes
directly. Compiled once per (q_heads, kv_heads, head_dim); all sizes and the scale
are run-time values. 32-bit indexing: pool_pages * kv_heads * head_dim
< 2**31.
"""
import math

import torch
import tvm
from tvm.script import tirx as T

VEC = 8            # bf16 per 16-byte K/V vector
LANES = 16         # lanes per stream; head_dim = VEC * LANES
STREAMS = 8        # streams per CTA
THREADS = LANES * STREAMS
OVEC = 4           # fp32 per 16-byte workspace vector
NEG = -1.0e30
TOKENS_PER_SPLIT = 128
MAX_SPLITS = 32

_CACHE = {}


def make_prim_funcs(hq, hkv, d):
    grp = hq // hkv
    if d != VEC * LANES or hq % hkv or grp * d != THREADS * OVEC:
        raise ValueError("this kernel is specialised for head_dim 128 and 4 q heads per kv head")
    nq = grp * VEC          # q values per lane
    cpr = d // OVEC         # 16-byte fp32 vectors per row (32)
    neg = NEG

    @T.prim_func
    def partial(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, ip_ptr: T.handle,
                idx_ptr: T.handle, op_ptr: T.handle, lp_ptr: T.handle, qscale: T.float32):
        nb = T.int32()
        npool = T.int32()
        nip = T.int32()
        ntok = T.int32()
        ns = T.int32()
        Q = T.match_buffer(q_ptr, (nb, hq, d), "bfloat16")
        K = T.match_buffer(k_ptr, (npool, 1, hkv, d), "bfloat16")
        V = T.match_buffer(v_ptr, (npool, 1, hkv, d), "bfloat16")
        IP = T.match_buffer(ip_ptr, (nip,), "int32")
        IDX = T.match_buffer(idx_ptr, (ntok,), "int32")
        OP = T.match_buffer(op_ptr, (nb, hq, ns, d), "float32")
        LP = T.match_buffer(lp_ptr, (nb, hq, ns), "float32")
        T.device_entry()
        bx, s = T.cta_id([nb * hkv, ns])   # (batch, kv head), split
        tx = T.thread_id([THREADS])
        qv = T.alloc_local((nq,), "bfloat16")
        qf = T.alloc_local((nq,), "float32")
        kb = T.alloc_local((VEC,), "bfloat16")
        vb = T.alloc_local((VEC,), "bfloat16")
        acc = T.alloc_local((nq,), "float32")
        m = T.alloc_local((grp,), "float32")
        l = T.alloc_local((grp,), "float32")
        sc = T.alloc_local((grp,), "float32")
        o = T.alloc_local((OVEC,), "float32")
        s_acc = T.alloc_shared((STREAMS * grp * d,), "float32")
        s_m = T.alloc_shared((STREAMS * grp,), "float32")
        s_l = T.alloc_shared((STREAMS * grp,), "float32")
        g: T.let = bx % hkv
        b: T.let = bx // hkv
        li: T.let = tx % LANES
        st: T.let = tx // LANES
        for j in T.unroll(grp):
            for e in T.vectorized(VEC):
                qv[j * VEC + e] = Q[b, g * grp + j, li * VEC + e]
        for i in T.unroll(nq):
            qf[i] = T.float32(qv[i]) * qscale
            acc[i] = T.float32(0)
        for j in T.unroll(grp):
            m[j] = T.float32(neg)
            l[j] = T.float32(0)
        # token range of this split; mutable scalars (registers), so the loop below
        # does not re-expand the divisions by ns
        start: T.int32 = IP[b]
        end: T.int32 = IP[b + 1]
        chunk: T.int32 = (end - start + ns - 1) // ns
        c0: T.int32 = start + s * chunk
        c1: T.int32 = T.min(end, c0 + chunk)
        nsteps: T.int32 = (T.max(c1 - c0, 0) + (STREAMS - 1)) // STREAMS
        for i in T.serial(nsteps):
            pos: T.let = c0 + st + i * STREAMS
            page: T.let = IDX[T.min(pos, c1 - 1)]
            for e in T.vectorized(VEC):
                kb[e] = K[page, 0, g, li * VEC + e]
            for e in T.vectorized(VEC):
                vb[e] = V[page, 0, g, li * VEC + e]
            for j in T.unroll(grp):
                dot: T.f32 = T.float32(0)
                for e in T.unroll(VEC):
                    dot = dot + qf[j * VEC + e] * T.float32(kb[e])
                sc[j] = T.cuda.warp_sum(dot, width=LANES)
            if pos < c1:
                for j in T.unroll(grp):
                    m_new: T.f32 = T.max(m[j], sc[j])
                    alpha: T.f32 = T.exp2(m[j] - m_new)
                    p: T.f32 = T.exp2(sc[j] - m_new)
                    m[j] = m_new
                    l[j] = l[j] * alpha + p
                    for e in T.unroll(VEC):
                        acc[j * VEC + e] = acc[j * VEC + e] * alpha + p * T.float32(vb[e])
        # merge the 8 streams through shared memory
        for j in T.unroll(grp):
            for e in T.vectorized(VEC):
                s_acc[st * (grp * d) + j * d + li * VEC + e] = acc[j * VEC + e]
        if li == 0:
            for j in T.unroll(grp):
                s_m[st * grp + j] = m[j]
                s_l[st * grp + j] = l[j]
        T.cuda.cta_sync()
        jj: T.let = tx // cpr
        cc: T.let = tx % cpr
        mm: T.f32 = s_m[jj]
        for t in T.unroll(1, STREAMS):
            mm = T.max(mm, s_m[t * grp + jj])
        ll: T.f32 = T.float32(0)
        for e in T.unroll(OVEC):
            o[e] = T.float32(0)
        for t in T.unroll(STREAMS):
            w: T.f32 = T.exp2(s_m[t * grp + jj] - mm)
            ll = ll + s_l[t * grp + jj] * w
            for e in T.unroll(OVEC):
                o[e] = o[e] + s_acc[t * (grp * d) + jj * d + cc * OVEC + e] * w
        inv: T.f32 = T.if_then_else(ll > T.float32(0), T.float32(1) / ll, T.float32(0))
        for e in T.vectorized(OVEC):
            OP[b, g * grp + jj, s, cc * OVEC + e] = o[e] * inv
        if cc == 0:
            LP[b, g * grp + jj, s] = T.if_then_else(ll > T.float32(0), mm + T.log2(ll),
                                                    T.float32(neg))

    @T.prim_func
    def merge(op_ptr: T.handle, lp_ptr: T.handle, o_ptr: T.handle, l_ptr: T.handle):
        nb = T.int32()
        ns = T.int32()
        OP = T.match_buffer(op_ptr, (nb, hq, ns, d), "float32")
        LP = T.match_buffer(lp_ptr, (nb, hq, ns), "float32")
        O = T.match_buffer(o_ptr, (nb, hq, d), "bfloat16")
        L = T.match_buffer(l_ptr, (nb, hq), "float32")
        T.device_entry()
        bx = T.cta_id([nb * hq])
        tx = T.thread_id([cpr])
        o = T.alloc_local((OVEC,), "float32")
        ot = T.alloc_local((OVEC,), "float32")
        b: T.let = bx // hq
        h: T.let = bx % hq
        mx: T.f32 = T.float32(neg)
        for s in T.serial(ns):
            mx = T.max(mx, LP[b, h, s])
        wsum: T.f32 = T.float32(0)
        for e in T.unroll(OVEC):
            o[e] = T.float32(0)
        for s in T.serial(ns):
            w: T.f32 = T.exp2(LP[b, h, s] - mx)
            wsum = wsum + w
            for e in T.vectorized(OVEC):
                ot[e] = OP[b, h, s, tx * OVEC + e]
            for e in T.unroll(OVEC):
                o[e] = o[e] + ot[e] * w
        inv: T.f32 = T.float32(1) / wsum
        for e in T.unroll(OVEC):
            O[b, h, tx * OVEC + e] = T.bfloat16(o[e] * inv)
        if tx == 0:
            L[b, h] = mx + T.log2(wsum)

    return partial, merge


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(hq, hkv, d, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable (two kernels)."""
    partial, merge = make_prim_funcs(hq, hkv, d)
    mod = tvm.IRModule({"partial": partial, "merge": merge})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernels(hq, hkv, d, device):
    key = (hq, hkv, d, device.index)
    fns = _CACHE.get(key)
    if fns is None:
        ex = compile_kernel(hq, hkv, d, target_for(device))
        fns = _CACHE[key] = (ex["partial"], ex["merge"])
    return fns


def num_splits(batch, kv_tokens):
    """Splits per sequence: about TOKENS_PER_SPLIT tokens of an average sequence."""
    avg = kv_tokens / max(batch, 1)
    return max(1, min(MAX_SPLITS, math.ceil(avg / TOKENS_PER_SPLIT)))


def solve(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, hq, d = q.shape
    pool, _, hkv, _ = k_cache.shape
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16:
        raise TypeError("expects bf16 q / k_cache / v_cache")
    out = torch.empty((batch, hq, d), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, hq), dtype=torch.float32, device=q.device)
    if batch == 0:
        return out, lse
    ntok = kv_indices.shape[0]
    nsplit = num_splits(batch, ntok)
    if pool * hkv * d >= 2**31 or batch * hq * nsplit * d >= 2**31:
        raise ValueError("sizes exceed 32-bit indexing")
    partial, merge = _kernels(hq, hkv, d, q.device)
    o_part = torch.empty((batch, hq, nsplit, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((batch, hq, nsplit), dtype=torch.float32, device=q.device)
    ip = kv_indptr.to(torch.int32).contiguous()
    idx = kv_indices.to(torch.int32).contiguous()
    if idx.numel() == 0:  # never read (every chunk is empty), but keep a valid buffer
        idx = torch.zeros(1, dtype=torch.int32, device=q.device)
    # DLPack, zero copy; tvm-ffi launches on torch's current stream.
    qscale = float(sm_scale) / math.log(2.0)  # scores in base 2: exp(x) = exp2(x * log2(e))
    partial(q.contiguous(), k_cache.contiguous(), v_cache.contiguous(), ip, idx, o_part, lse_part,
            qscale)
    merge(o_part, lse_part, out, lse)
    return out, lse
