"""Problem 03, GQA paged decode (32 q heads / 8 kv heads, head_dim 128, page size 64,
kv_last_page_len), written in CuTe DSL (nvidia-cutlass-dsl 4.7).

Flash-decoding in two launches from one compiled host function.

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

1. Partial kernel, grid nslots * kv_heads, 128 threads. CTA (t, g) finds its
   sequence b by a binary search over kv_indptr (ip[b] // CP + b <= t), then
   walks its pages. The 128 threads are 8 "streams" of 16 lanes; lane i owns head
   dims [8i, 8i + 8) (one 16-byte load of a K row and of a V row per token).
   Each page (64 tokens, base address in 64-bit arithmetic) is processed in
   2 sub-steps; in sub-step h stream st takes the G = 4 tokens (h*G + u)*8 + st,
   u < G, loading all 4 K and 4 V rows first (8 x 16-byte loads in flight per
   thread). Tokens past the page's length (kv_last_page_len on the sequence's
   last page) are loaded clamped to the last valid token and get p = 0.
   The 4 x G dot products (4 query heads sharing kv head g) are reduced over the
   16 lanes with butterfly shuffles; each stream keeps an online softmax in base
   2 (q pre-scaled by head_dim^-0.5 * log2(e); running max m, sum l, fp32
   accumulator), updated once per G tokens: m' = max(m, s_0..s_{G-1}),
   alpha = exp2(m - m'), p_u = exp2(s_u - m'), l = l*alpha + p_0 + ... + p_{G-1},
   acc = acc*alpha + p_0 v_0 + ... + p_{G-1} v_{G-1}. (A clamped token repeats a
   real score of the page, so including it in the max only raises the reference
   point.) The 8 streams are merged through shared memory; the CTA writes
   o_part = acc / l (fp32) and lse_part = m + log2(l), or (0, -1e30) when empty.
2. Merge kernel, grid batch * q_heads, one warp each (4 dims per lane), over the
   sequence's slots: M = max lse_part, w_s = exp2(lse_part_s - M),
   out = sum w_s o_s / sum w_s (bf16), lse = M + log2(sum w_s) (base 2).

The sentinel -1e30 (not -inf) keeps every exp2 argument finite. exp2 is
ex2.approx.ftz; everything else is IEEE fp32. Compiled once per (q_heads,
kv_heads, head_dim, CP); batch, pool size, page count and slot count are dynamic.
Offsets: page bases in 64-bit (any pool size); inside a page and in the
workspace 32-bit (nslots * q_heads * head_dim < 2**31, checked).
"""
import importlib.util
import math

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Int64
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

PAGE = 64          # tokens per page
VEC = 8            # bf16 per 16-byte K/V vector
LANES = 16         # lanes per stream; head_dim = VEC * LANES
STREAMS = 8        # streams per CTA (128 threads)
THREADS = LANES * STREAMS
G = 4              # tokens per stream per sub-step
SUBSTEPS = PAGE // (STREAMS * G)
OVEC = 4           # fp32 per 16-byte workspace vector
NEG = -1.0e30
LOG2E = 1.0 / math.log(2.0)
MAX_CP = 16        # pages per work slot
TARGET_CTAS = 132 * 48
MAX_ELEMS = 2**31 - 1


@cute.kernel
def _partial_kernel(
    p_q: cute.Pointer,
    p_k: cute.Pointer,
    p_v: cute.Pointer,
    p_ip: cute.Pointer,
    p_idx: cute.Pointer,
    p_last: cute.Pointer,
    p_o: cute.Pointer,
    p_lse: cute.Pointer,
    batch: Int32,
    npages: Int32,
    nslots: Int32,
    nsearch: Int32,
    qscale: Float32,
    hq: cutlass.Constexpr,
    hkv: cutlass.Constexpr,
    d: cutlass.Constexpr,
    cp: cutlass.Constexpr,
):
    grp = hq // hkv
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    g = bidx % hkv
    t = bidx // hkv            # work slot
    li = tidx % LANES          # lane within the stream
    st = tidx // LANES         # stream id

    g_q = cute.make_tensor(p_q, cute.make_layout(
        (VEC, LANES, grp, hkv, batch), stride=(1, VEC, d, grp * d, hq * d)))
    g_ip = cute.make_tensor(p_ip, cute.make_layout(batch + 1))
    g_idx = cute.make_tensor(p_idx, cute.make_layout(npages))
    g_last = cute.make_tensor(p_last, cute.make_layout(batch))
    nrows = nslots * hq
    g_o = cute.make_tensor(p_o, cute.make_layout((OVEC, d // OVEC, nrows), stride=(1, OVEC, d)))
    g_lse = cute.make_tensor(p_lse, cute.make_layout(nrows))

    # sequence of this slot: the largest b with ip[b] // cp + b <= t
    lo = Int32(0)
    hi = batch
    for _ in cutlass.range(nsearch):
        mid = (lo + hi) // 2
        if g_ip[mid] // cp + mid <= t:
            lo = mid
        else:
            hi = mid
    b = lo

    # q, pre-scaled by head_dim^-0.5 * log2(e)
    r_qb = cute.make_rmem_tensor((VEC, grp), BFloat16)
    for j in cutlass.range_constexpr(grp):
        cute.autovec_copy(g_q[None, li, j, g, b], r_qb[None, j])
    r_q = cute.make_rmem_tensor((VEC, grp), Float32)
    r_q.store(r_qb.load().to(Float32) * qscale)

    pstart = g_ip[b]
    pend = g_ip[b + 1]
    seqlen = (pend - pstart - 1) * PAGE + g_last[b]
    c = t - b
    p0 = cutlass.max(pstart, c * cp)
    p1 = cutlass.min(pend, c * cp + cp)
    n = cutlass.max(p1 - p0, 0)

    r_m = cute.make_rmem_tensor((grp,), Float32)
    r_l = cute.make_rmem_tensor((grp,), Float32)
    r_acc = cute.make_rmem_tensor((VEC, grp), Float32)
    r_m.fill(NEG)
    r_l.fill(0.0)
    r_acc.fill(0.0)
    r_kb = cute.make_rmem_tensor((VEC, G), BFloat16)
    r_vb = cute.make_rmem_tensor((VEC, G), BFloat16)
    r_kf = cute.make_rmem_tensor((VEC, G), Float32)
    r_vf = cute.make_rmem_tensor((VEC, G), Float32)
    lane_off = g * d + li * VEC

    for i in cutlass.range(n):
        p = p0 + i
        page = g_idx[p]
        plen = cutlass.min(PAGE, seqlen - (p - pstart) * PAGE)   # 1..64
        base = Int64(page) * (PAGE * hkv * d) + Int64(lane_off)  # 64-bit page base
        g_kp = cute.make_tensor(p_k + cute.assume(base, divby=VEC),
                                cute.make_layout((VEC, PAGE), stride=(1, hkv * d)))
        g_vp = cute.make_tensor(p_v + cute.assume(base, divby=VEC),
                                cute.make_layout((VEC, PAGE), stride=(1, hkv * d)))
        for h in cutlass.range_constexpr(SUBSTEPS):
            for u in cutlass.range_constexpr(G):
                tk = (h * G + u) * STREAMS + st
                tkc = cutlass.min(tk, plen - 1)
                cute.autovec_copy(g_kp[None, tkc], r_kb[None, u])
                cute.autovec_copy(g_vp[None, tkc], r_vb[None, u])
            r_kf.store(r_kb.load().to(Float32))
            r_vf.store(r_vb.load().to(Float32))
            for j in cutlass.range_constexpr(grp):
                sc = []
                for u in cutlass.range_constexpr(G):
                    dot = Float32(0.0)
                    for e in cutlass.range_constexpr(VEC):
                        dot = dot + r_q[e, j] * r_kf[e, u]
                    for k in cutlass.range_constexpr(4):
                        dot = dot + cute.arch.shuffle_sync_bfly(dot, offset=(LANES // 2) >> k)
                    sc.append(dot)
                m_old = r_m[j]
                m_new = m_old
                for u in cutlass.range_constexpr(G):
                    m_new = cutlass.max(m_new, sc[u])
                alpha = cute.math.exp2(m_old - m_new, approx=True, ftz=True)
                ps = []
                for u in cutlass.range_constexpr(G):
                    tk = (h * G + u) * STREAMS + st
                    pu = cute.math.exp2(sc[u] - m_new, approx=True, ftz=True)
                    ps.append(pu if tk < plen else Float32(0.0))
                r_m[j] = m_new
                lsum = r_l[j] * alpha
                for u in cutlass.range_constexpr(G):
                    lsum = lsum + ps[u]
                r_l[j] = lsum
                for e in cutlass.range_constexpr(VEC):
                    a = r_acc[e, j] * alpha
                    for u in cutlass.range_constexpr(G):
                        a = a + ps[u] * r_vf[e, u]
                    r_acc[e, j] = a

    # merge the 8 streams through shared memory
    smem = cutlass.utils.SmemAllocator()
    s_acc = smem.allocate_tensor(
        Float32, cute.make_layout((VEC, LANES, grp, STREAMS), stride=(1, VEC, d, grp * d)),
        byte_alignment=16)
    s_m = smem.allocate_tensor(Float32, cute.make_layout((grp, STREAMS), stride=(1, grp)),
                               byte_alignment=16)
    s_l = smem.allocate_tensor(Float32, cute.make_layout((grp, STREAMS), stride=(1, grp)),
                               byte_alignment=16)
    for j in cutlass.range_constexpr(grp):
        cute.autovec_copy(r_acc[None, j], s_acc[None, li, j, st])
    if li == 0:
        for j in cutlass.range_constexpr(grp):
            s_m[j, st] = r_m[j]
            s_l[j, st] = r_l[j]
    cute.arch.sync_threads()

    # thread -> (head jj, dims [4cc, 4cc + 4)); 32 threads per head
    s_accv = cute.make_tensor(s_acc.iterator, cute.make_layout(
        (OVEC, d // OVEC, grp, STREAMS), stride=(1, OVEC, d, grp * d)))
    jj = tidx // (d // OVEC)
    cc = tidx % (d // OVEC)
    mm = s_m[jj, 0]
    for s in cutlass.range_constexpr(1, STREAMS):
        mm = cutlass.max(mm, s_m[jj, s])
    ll = Float32(0.0)
    r_o = cute.make_rmem_tensor((OVEC,), Float32)
    r_o.fill(0.0)
    r_t = cute.make_rmem_tensor((OVEC,), Float32)
    for s in cutlass.range_constexpr(STREAMS):
        w = cute.math.exp2(s_m[jj, s] - mm, approx=True, ftz=True)
        ll = ll + s_l[jj, s] * w
        cute.autovec_copy(s_accv[None, cc, jj, s], r_t)
        r_o.store(r_o.load() + r_t.load() * w)
    inv = Float32(0.0)
    lse_v = Float32(NEG)
    if ll > Float32(0.0):
        inv = Float32(1.0) / ll
        lse_v = mm + cute.math.log2(ll)
    r_o.store(r_o.load() * inv)
    row = t * hq + g * grp + jj
    cute.autovec_copy(r_o, g_o[None, cc, row])
    if cc == 0:
        g_lse[row] = lse_v


@cute.kernel
def _merge_kernel(
    p_o: cute.Pointer,
    p_lse: cute.Pointer,
    p_ip: cute.Pointer,
    p_out: cute.Pointer,
    p_olse: cute.Pointer,
    batch: Int32,
    nslots: Int32,
    hq: cutlass.Constexpr,
    d: cutlass.Constexpr,
    cp: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()   # = b * hq + head
    b = bidx // hq
    h = bidx % hq
    nrows = nslots * hq
    g_o = cute.make_tensor(p_o, cute.make_layout((OVEC, d // OVEC, nrows), stride=(1, OVEC, d)))
    g_lse = cute.make_tensor(p_lse, cute.make_layout(nrows))
    g_ip = cute.make_tensor(p_ip, cute.make_layout(batch + 1))
    g_out = cute.make_tensor(p_out, cute.make_layout((OVEC, d // OVEC, batch * hq),
                                                     stride=(1, OVEC, d)))
    g_olse = cute.make_tensor(p_olse, cute.make_layout(batch * hq))
    s0 = g_ip[b] // cp + b
    ns = g_ip[b + 1] // cp + b + 1 - s0

    r_mx = cute.make_rmem_tensor((1,), Float32)
    r_w = cute.make_rmem_tensor((1,), Float32)
    r_mx[0] = Float32(NEG)
    r_w[0] = Float32(0.0)
    for s in cutlass.range(ns):
        r_mx[0] = cutlass.max(r_mx[0], g_lse[(s0 + s) * hq + h])
    mx = r_mx[0]
    r_o = cute.make_rmem_tensor((OVEC,), Float32)
    r_o.fill(0.0)
    r_t = cute.make_rmem_tensor((OVEC,), Float32)
    for s in cutlass.range(ns):
        row = (s0 + s) * hq + h
        w = cute.math.exp2(g_lse[row] - mx, approx=True, ftz=True)
        r_w[0] = r_w[0] + w
        cute.autovec_copy(g_o[None, tidx, row], r_t)
        r_o.store(r_o.load() + r_t.load() * w)
    inv = Float32(1.0) / r_w[0]
    r_ob = cute.make_rmem_tensor((OVEC,), BFloat16)
    r_ob.store((r_o.load() * inv).to(BFloat16))
    cute.autovec_copy(r_ob, g_out[None, tidx, bidx])
    if tidx == 0:
        g_olse[bidx] = mx + cute.math.log2(r_w[0])


@cute.jit
def _launch(
    q: cute.Tensor,
    k_cache: cute.Tensor,
    v_cache: cute.Tensor,
    kv_indptr: cute.Tensor,
    kv_indices: cute.Tensor,
    kv_last: cute.Tensor,
    o_part: cute.Tensor,
    lse_part: cute.Tensor,
    out: cute.Tensor,
    lse: cute.Tensor,
    nsearch: Int32,
    stream: cuda.CUstream,
    hq: cutlass.Constexpr,
    hkv: cutlass.Constexpr,
    d: cutlass.Constexpr,
    cp: cutlass.Constexpr,
    qs: cutlass.Constexpr,
):
    batch = q.shape[0]
    npages = kv_indices.shape[0]
    nslots = lse_part.shape[0]
    qscale = Float32(qs)  # sm_scale * log2(e), fixed per compiled kernel
    _partial_kernel(
        q.iterator, k_cache.iterator, v_cache.iterator, kv_indptr.iterator, kv_indices.iterator,
        kv_last.iterator, o_part.iterator, lse_part.iterator, batch, npages, nslots, nsearch,
        qscale, hq, hkv, d, cp,
    ).launch(grid=[nslots * hkv, 1, 1], block=[THREADS, 1, 1], stream=stream)
    _merge_kernel(
        o_part.iterator, lse_part.iterator, kv_indptr.iterator, out.iterator, lse.iterator,
        batch, nslots, hq, d, cp,
    ).launch(grid=[batch * hq, 1, 1], block=[d // OVEC, 1, 1], stream=stream)


USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None

_compiled = {}


def _fake(dtype, shape, align=16):
    return make_fake_compact_tensor(dtype, shape, stride_order=tuple(reversed(range(len(shape)))),
                                    assumed_align=align)


def compile_for(hq, hkv, d, cp, qs):
    """Compile (once) for these head counts, head_dim, pages per slot and q scale
    (sm_scale * log2(e)); the sizes are dynamic. Works without a GPU when
    CUTE_DSL_ARCH is set."""
    key = (hq, hkv, d, cp, qs, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        if d != VEC * LANES or hq % hkv or (hq // hkv) * d != THREADS * OVEC:
            raise ValueError("this kernel is specialised for head_dim 128 and 4 q heads per kv head")
        nb = cute.sym_int32()     # batch
        npool = cute.sym_int32()  # pool pages
        nslot = cute.sym_int32()  # work slots
        fn = cute.compile(
            _launch,
            _fake(BFloat16, (nb, hq, d)),
            _fake(BFloat16, (npool, PAGE, hkv, d)),
            _fake(BFloat16, (npool, PAGE, hkv, d)),
            _fake(Int32, (cute.sym_int32(),), 4),
            _fake(Int32, (cute.sym_int32(),), 4),
            _fake(Int32, (nb,), 4),
            _fake(Float32, (nslot, hq, d)),
            _fake(Float32, (nslot, hq), 4),
            _fake(BFloat16, (nb, hq, d)),
            _fake(Float32, (nb, hq), 4),
            Int32(1),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            hq, hkv, d, cp, qs,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
        _compiled[key] = fn
    return fn


def pages_per_slot(batch, npages, hkv):
    """CP: a power of two <= MAX_CP, about TARGET_CTAS CTAs in the partial grid."""
    cp = 1
    while cp < MAX_CP and (npages // (2 * cp) + batch) * hkv >= TARGET_CTAS:
        cp *= 2
    return cp


def _prep(t):
    """Dense, 16-byte aligned storage (copies only if the input is not)."""
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


# assumed alignment of each tensor argument, as compiled (fallback path only)
_ALIGNS = (16, 16, 16, 4, 4, 4, 16, 4, 16, 4)


def _plain_tensor(t, align):
    return from_dlpack(t, assumed_align=align).mark_compact_shape_dynamic(
        mode=0, stride_order=t.dim_order())


def solve(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    batch, hq, d = q.shape
    pool, page, hkv, _ = k_cache.shape
    assert q.dtype == torch.bfloat16 and k_cache.dtype == torch.bfloat16 and q.is_cuda
    assert page == PAGE and v_cache.shape == k_cache.shape
    out = torch.empty((batch, hq, d), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, hq), dtype=torch.float32, device=q.device)
    if batch == 0:
        return out, lse
    npages = kv_indices.shape[0]
    cp = pages_per_slot(batch, npages, hkv)
    nslots = npages // cp + batch
    if nslots * hq * d > MAX_ELEMS or nslots * hkv > MAX_ELEMS:
        raise ValueError("sizes exceed 32-bit offsets")
    fn = compile_for(hq, hkv, d, cp, float(sm_scale) * LOG2E)
    o_part = torch.empty((nslots, hq, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((nslots, hq), dtype=torch.float32, device=q.device)
    ip = kv_indptr.to(torch.int32).contiguous()
    idx = kv_indices.to(torch.int32).contiguous()
    last = kv_last_page_len.to(torch.int32).contiguous()
    if idx.numel() == 0:  # never read (every slot is empty), but keep a valid tensor
        idx = torch.zeros(1, dtype=torch.int32, device=q.device)
    args = [_prep(q), _prep(k_cache), _prep(v_cache), ip, idx, last, o_part, lse_part, out, lse]
    nsearch = batch.bit_length()   # binary search steps over [0, batch)
    if USE_TVM_FFI:
        fn(*args, nsearch)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(q.device).cuda_stream)
        fn(*[_plain_tensor(t, a) for t, a in zip(args, _ALIGNS)], nsearch, stream)
    return out, lse
