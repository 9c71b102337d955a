"""Problem 03, GQA paged decode (32 q heads / 8 kv heads, head_dim 128, page size 64,
kv_last_page_len), written in TIRx (Apache TVM 0.27).

Flash-decoding in two kernels.

Work split (load balance independent of the sequence lengths): the page list
kv_indices is cut into global chunks of CP pages (chunk c = pages [c*CP, (c+1)*CP)).
Sequence b owns the work slots t = c + b for c in [ip[b] // CP, ip[b+1] // CP]
(ip = kv_indptr), i.e. slots [ip[b] // CP + b, ip[b+1] // CP + b + 1): the slot
ranges of consecutive sequences tile [0, ip[batch] // CP + batch) without gaps,
so the host sizes everything from len(kv_indices) without reading the device.
Slot t of sequence b covers pages [max(ip[b], c*CP), min(ip[b+1], (c+1)*CP));
it may be empty (then it reports (0, -1e30)). CP (pages per slot, a power of two
<= 16) is chosen on the host so that the grid has enough CTAs; it is a
compile-time constant (one compilation per value used).

1. `partial`, grid nslots * kv_heads, 128 threads. CTA (t, g) finds its sequence
   b by a binary search over kv_indptr (ip[b] // CP + b <= t), then walks its
   pages. The 128 threads are 8 "streams" of 16 lanes; lane i owns head dims
   [8i, 8i + 8) (one 16-byte load of a K row and of a V row per token). Each page
   (64 tokens, page base in 64-bit arithmetic) is processed in 2 sub-steps; in
   sub-step h stream st takes the G = 4 tokens (h*G + u)*8 + st, u < G, loading
   all 4 K and 4 V rows first. Tokens past the page's length (kv_last_page_len on
   the sequence's last page) are loaded clamped to the last valid token and get
   p = 0. The 4 x G dot products (4 query heads sharing kv head g) are reduced
   over the 16 lanes (`warp_sum`, width 16); each stream keeps an online softmax
   in base 2 (q pre-scaled by head_dim^-0.5 * log2(e); running max m, sum l,
   fp32 accumulator), updated once per G tokens: m' = max(m, s_0..s_{G-1}),
   alpha = exp2(m - m'), p_u = exp2(s_u - m'), l = l*alpha + p_0 + ... ,
   acc = acc*alpha + p_0 v_0 + ... (a clamped token repeats a real score of the
   page, so including it in the max only raises the reference point). The 8
   streams are merged through shared memory; the CTA writes o_part = acc / l
   (fp32) and lse_part = m + log2(l) (base 2), or (0, -1e30) when empty.
2. `merge`, grid batch * q_heads, one warp each (4 dims per lane), over the
   sequence's slots: M = max lse_part, w_s = exp2(lse_part_s - M),
   out = sum w_s o_s / sum w_s (bf16), lse = M + log2(sum w_s).

The sentinel -1e30 (not -inf) keeps every exp2 argument finite. NVRTC compiles with
--use_fast_math (ex2/lg2/division approximations, a few ulp). Compiled once per
(q_heads, kv_heads, head_dim, CP); all sizes symbolic. Offsets: page bases in
64-bit (any pool size); the workspace in 32-bit (nslots * q_heads * head_dim < 2**31,
checked).
"""
import math

import torch
import tvm
from tvm.script import tirx as T

PAGE = 64          # tokens per page
VEC = 8            # bf16 per 16-byte K/V vector
LANES = 16         # lanes per stream; head_dim = VEC * LANES
STREAMS = 8        # streams per CTA
THREADS = LANES * STREAMS
G = 4              # tokens per stream per sub-step
SUBSTEPS = PAGE // (STREAMS * G)
OVEC = 4           # fp32 per 16-byte workspace vector
NEG = -1.0e30
MAX_CP = 16        # pages per work slot
TARGET_CTAS = 132 * 48
SEARCH_STEPS = 31  # binary-search iterations (guarded; enough for any int32 batch)

_CACHE = {}


def make_prim_funcs(hq, hkv, d, cp, sm_scale):
    grp = hq // hkv
    if d != VEC * LANES or hq % hkv or grp * d != THREADS * OVEC:
        raise ValueError("this kernel is specialised for head_dim 128 and 4 q heads per kv head")
    qscale = sm_scale / math.log(2.0)  # baked in: one compiled kernel per scale
    nq = grp * VEC          # q values per lane
    cpr = d // OVEC         # 16-byte fp32 vectors per row (32)
    neg = NEG

    @T.prim_func
    def partial(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, ip_ptr: T.handle,
                idx_ptr: T.handle, last_ptr: T.handle, op_ptr: T.handle, lp_ptr: T.handle):
        nb = T.int32()
        npool = T.int32()
        nip = T.int32()
        npg = T.int32()
        ns = T.int32()
        Q = T.match_buffer(q_ptr, (nb, hq, d), "bfloat16")
        K = T.match_buffer(k_ptr, (npool, PAGE, hkv, d), "bfloat16")
        V = T.match_buffer(v_ptr, (npool, PAGE, hkv, d), "bfloat16")
        IP = T.match_buffer(ip_ptr, (nip,), "int32")
        IDX = T.match_buffer(idx_ptr, (npg,), "int32")
        LAST = T.match_buffer(last_ptr, (nb,), "int32")
        OP = T.match_buffer(op_ptr, (ns, hq, d), "float32")
        LP = T.match_buffer(lp_ptr, (ns, hq), "float32")
        T.device_entry()
        bx = T.cta_id([ns * hkv])   # (slot, kv head)
        tx = T.thread_id([THREADS])
        qv = T.alloc_local((nq,), "bfloat16")
        qf = T.alloc_local((nq,), "float32")
        kb = T.alloc_local((G * VEC,), "bfloat16")
        vb = T.alloc_local((G * VEC,), "bfloat16")
        acc = T.alloc_local((nq,), "float32")
        m = T.alloc_local((grp,), "float32")
        l = T.alloc_local((grp,), "float32")
        sc = T.alloc_local((G,), "float32")
        ps = T.alloc_local((G,), "float32")
        o = T.alloc_local((OVEC,), "float32")
        s_acc = T.alloc_shared((STREAMS * grp * d,), "float32")
        s_m = T.alloc_shared((STREAMS * grp,), "float32")
        s_l = T.alloc_shared((STREAMS * grp,), "float32")
        g: T.let = bx % hkv
        t: T.let = bx // hkv
        li: T.let = tx % LANES
        st: T.let = tx // LANES
        # sequence of this slot: the largest b with ip[b] // cp + b <= t
        lo: T.int32 = 0
        hi: T.int32 = nb
        for it in T.serial(SEARCH_STEPS):
            if hi - lo > 1:
                mid: T.int32 = (lo + hi) // 2
                if IP[mid] // cp + mid <= t:
                    lo = mid
                else:
                    hi = mid
        b: T.int32 = lo
        for j in T.unroll(grp):
            for e in T.vectorized(VEC):
                qv[j * VEC + e] = Q[b, g * grp + j, li * VEC + e]
        for i in T.unroll(nq):
            qf[i] = T.float32(qv[i]) * T.float32(qscale)
            acc[i] = T.float32(0)
        for j in T.unroll(grp):
            m[j] = T.float32(neg)
            l[j] = T.float32(0)
        pstart: T.int32 = IP[b]
        pend: T.int32 = IP[b + 1]
        seqlen: T.int32 = (pend - pstart - 1) * PAGE + LAST[b]
        c: T.int32 = t - b
        p0: T.int32 = T.max(pstart, c * cp)
        p1: T.int32 = T.min(pend, c * cp + cp)
        for i in T.serial(T.max(p1 - p0, 0)):
            page: T.let = T.Cast("int64", IDX[p0 + i])   # 64-bit cache offsets
            plen: T.let = T.min(PAGE, seqlen - (p0 + i - pstart) * PAGE)   # 1..64
            for h in T.unroll(SUBSTEPS):
                for u in T.unroll(G):
                    for e in T.vectorized(VEC):
                        kb[u * VEC + e] = K[page, T.min((h * G + u) * STREAMS + st, plen - 1),
                                            g, li * VEC + e]
                    for e in T.vectorized(VEC):
                        vb[u * VEC + e] = V[page, T.min((h * G + u) * STREAMS + st, plen - 1),
                                            g, li * VEC + e]
                for j in T.unroll(grp):
                    for u in T.unroll(G):
                        dot: T.f32 = T.float32(0)
                        for e in T.unroll(VEC):
                            dot = dot + qf[j * VEC + e] * T.float32(kb[u * VEC + e])
                        sc[u] = T.cuda.warp_sum(dot, width=LANES)
                    m_new: T.f32 = m[j]
                    for u in T.unroll(G):
                        m_new = T.max(m_new, sc[u])
                    alpha: T.f32 = T.exp2(m[j] - m_new)
                    for u in T.unroll(G):
                        ps[u] = T.if_then_else((h * G + u) * STREAMS + st < plen,
                                               T.exp2(sc[u] - m_new), T.float32(0))
                    m[j] = m_new
                    lsum: T.f32 = l[j] * alpha
                    for u in T.unroll(G):
                        lsum = lsum + ps[u]
                    l[j] = lsum
                    for e in T.unroll(VEC):
                        a: T.f32 = acc[j * VEC + e] * alpha
                        for u in T.unroll(G):
                            a = a + ps[u] * T.float32(vb[u * VEC + e])
                        acc[j * VEC + e] = a
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
        for s in T.unroll(1, STREAMS):
            mm = T.max(mm, s_m[s * grp + jj])
        ll: T.f32 = T.float32(0)
        for e in T.unroll(OVEC):
            o[e] = T.float32(0)
        for s in T.unroll(STREAMS):
            w: T.f32 = T.exp2(s_m[s * grp + jj] - mm)
            ll = ll + s_l[s * grp + jj] * w
            for e in T.unroll(OVEC):
                o[e] = o[e] + s_acc[s * (grp * d) + jj * d + cc * OVEC + e] * w
        inv: T.f32 = T.if_then_else(ll > T.float32(0), T.float32(1) / ll, T.float32(0))
        for e in T.vectorized(OVEC):
            OP[t, g * grp + jj, cc * OVEC + e] = o[e] * inv
        if cc == 0:
            LP[t, g * grp + jj] = T.if_then_else(ll > T.float32(0), mm + T.log2(ll),
                                                 T.float32(neg))

    @T.prim_func
    def merge(op_ptr: T.handle, lp_ptr: T.handle, ip_ptr: T.handle, o_ptr: T.handle,
              l_ptr: T.handle):
        nb = T.int32()
        ns = T.int32()
        nip = T.int32()
        OP = T.match_buffer(op_ptr, (ns, hq, d), "float32")
        LP = T.match_buffer(lp_ptr, (ns, hq), "float32")
        IP = T.match_buffer(ip_ptr, (nip,), "int32")
        O = T.match_buffer(o_ptr, (nb, hq, d), "bfloat16")
        L = T.match_buffer(l_ptr, (nb, hq), "float32")
        T.device_entry()
        bx = T.cta_id([nb * hq])
        tx = T.thread_id([cpr])
        o = T.alloc_local((OVEC,), "float32")
        ot = T.alloc_local((OVEC,), "float32")
        b: T.let = bx // hq
        h: T.let = bx % hq
        s0: T.int32 = IP[b] // cp + b
        s1: T.int32 = IP[b + 1] // cp + b + 1
        mx: T.f32 = T.float32(neg)
        for s in T.serial(s1 - s0):
            mx = T.max(mx, LP[s0 + s, h])
        wsum: T.f32 = T.float32(0)
        for e in T.unroll(OVEC):
            o[e] = T.float32(0)
        for s in T.serial(s1 - s0):
            w: T.f32 = T.exp2(LP[s0 + s, h] - mx)
            wsum = wsum + w
            for e in T.vectorized(OVEC):
                ot[e] = OP[s0 + s, h, tx * OVEC + e]
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


def compile_kernel(hq, hkv, d, cp, target, sm_scale):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable (two kernels)."""
    partial, merge = make_prim_funcs(hq, hkv, d, cp, sm_scale)
    mod = tvm.IRModule({"partial": partial, "merge": merge})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernels(hq, hkv, d, cp, device, sm_scale):
    key = (hq, hkv, d, cp, device.index, sm_scale)
    fns = _CACHE.get(key)
    if fns is None:
        ex = compile_kernel(hq, hkv, d, cp, target_for(device), sm_scale)
        fns = _CACHE[key] = (ex["partial"], ex["merge"])
    return fns


def pages_per_slot(batch, npages, hkv):
    """CP: a power of two <= MAX_CP, about TARGET_CTAS CTAs in the partial grid."""
    cp = 1
    while cp < MAX_CP and (npages // (2 * cp) + batch) * hkv >= TARGET_CTAS:
        cp *= 2
    return cp


def solve(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    batch, hq, d = q.shape
    pool, page, hkv, _ = k_cache.shape
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise TypeError("expects bf16 q / k_cache / v_cache")
    if page != PAGE or v_cache.shape != k_cache.shape:
        raise ValueError("expects page size 64 and matching K / V caches")
    out = torch.empty((batch, hq, d), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, hq), dtype=torch.float32, device=q.device)
    if batch == 0:
        return out, lse
    npages = kv_indices.shape[0]
    cp = pages_per_slot(batch, npages, hkv)
    nslots = npages // cp + batch
    if nslots * hq * d >= 2**31 or nslots * hkv >= 2**31:
        raise ValueError("sizes exceed 32-bit indexing")
    partial, merge = _kernels(hq, hkv, d, cp, q.device, float(sm_scale))
    o_part = torch.empty((nslots, hq, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((nslots, hq), dtype=torch.float32, device=q.device)
    ip = kv_indptr.to(torch.int32).contiguous()
    idx = kv_indices.to(torch.int32).contiguous()
    last = kv_last_page_len.to(torch.int32).contiguous()
    if idx.numel() == 0:  # never read (every slot is empty), but keep a valid buffer
        idx = torch.zeros(1, dtype=torch.int32, device=q.device)
    # DLPack, zero copy; tvm-ffi launches on torch's current stream.
    partial(q.contiguous(), k_cache.contiguous(), v_cache.contiguous(), ip, idx, last,
            o_part, lse_part)
    merge(o_part, lse_part, ip, out, lse)
    return out, lse
