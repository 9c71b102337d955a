"""Problem 01, GQA paged decode (32 q heads / 8 kv heads, head_dim 128, page size 1),
written in CuTe DSL (nvidia-cutlass-dsl 4.7).

Flash-decoding in two launches from one compiled host function:

1. Partial kernel, grid batch * kv_heads * S (S splits per sequence, chosen on the host
   from the average sequence length; a runtime value). CTA (b, g, s) takes the 4 query
   heads that share kv head g and the token range [c0, c1) of sequence b, where
   chunk = ceil(len / S), c0 = start + s * chunk, c1 = min(end, c0 + chunk).
   128 threads = 8 "streams" of 16 lanes (two per warp); stream t handles tokens
   c0 + t, c0 + t + 8, ...  Lane i of a stream owns head dims [8i, 8i + 8): one
   16-byte load of the K row and one of the V row per token. The 4 dot products
   are reduced over the 16 lanes with butterfly shuffles; each stream keeps an
   online softmax in base 2 (q pre-scaled by sm_scale * log2(e), a run-time fp32
   argument computed on the host from the sm_scale input; running max
   m, sum l, fp32 accumulator). Streams are merged through shared memory; the CTA
   writes o_part = acc / l (fp32) and lse_part = m + log2(l) (base 2) to a
   workspace, or (0, -1e30) for an empty range.
2. Merge kernel, grid batch * q_heads, one warp each (4 dims per lane):
   M = max_s lse_part, w_s = exp2(lse_part_s - M), out = sum_s w_s o_s / sum_s w_s,
   lse = M + log2(sum_s w_s).

The sentinel -1e30 (not -inf) keeps every exp2 argument finite. exp2 in the token
loop is ex2.approx.ftz; everything else is IEEE fp32. Compiled once per
(q_heads, kv_heads, head_dim); batch, pool size, token count, S and sm_scale are
dynamic. lse = logsumexp(scores) / ln 2 = log2-sum-exp2 of the log2(e)-scaled
scores, which is what the base-2 online softmax computes directly.
32-bit offsets: pool_pages * kv_heads * head_dim < 2**31.
"""
import importlib.util
import math

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

VEC = 8            # bf16 per 16-byte K/V vector
LANES = 16         # lanes per stream (one token at a time); head_dim = VEC * LANES
STREAMS = 8        # streams per CTA (128 threads)
THREADS = LANES * STREAMS
OVEC = 4           # fp32 per 16-byte workspace vector
NEG = -1.0e30
LOG2E = 1.0 / math.log(2.0)
TOKENS_PER_SPLIT = 128
MAX_SPLITS = 32
MAX_ELEMS = 2**31 - 1


@cute.kernel
def _partial_kernel(
    p_q: cute.Pointer,
    p_k: cute.Pointer,
    p_v: cute.Pointer,
    p_ip: cute.Pointer,
    p_idx: cute.Pointer,
    p_o: cute.Pointer,
    p_lse: cute.Pointer,
    batch: Int32,
    pool: Int32,
    ntok: Int32,
    nsplit: Int32,
    qscale: Float32,
    hq: cutlass.Constexpr,
    hkv: cutlass.Constexpr,
    d: cutlass.Constexpr,
):
    grp = hq // hkv
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    s = bidx % nsplit
    bg = bidx // nsplit
    g = bg % hkv
    b = bg // hkv
    li = tidx % LANES          # lane within the stream
    st = tidx // LANES         # stream id

    g_q = cute.make_tensor(p_q, cute.make_layout(
        (VEC, LANES, grp, hkv, batch), stride=(1, VEC, d, grp * d, hq * d)))
    kv_layout = cute.make_layout((VEC, LANES, hkv, pool), stride=(1, VEC, d, hkv * d))
    g_k = cute.make_tensor(p_k, kv_layout)
    g_v = cute.make_tensor(p_v, kv_layout)
    g_ip = cute.make_tensor(p_ip, cute.make_layout(batch + 1))
    g_idx = cute.make_tensor(p_idx, cute.make_layout(ntok))
    nrows = batch * hq * nsplit
    g_o = cute.make_tensor(p_o, cute.make_layout((OVEC, d // OVEC, nrows), stride=(1, OVEC, d)))
    g_lse = cute.make_tensor(p_lse, cute.make_layout(nrows))

    # q, pre-scaled by head_dim^-0.5 * log2(e)
    r_qb = cute.make_rmem_tensor((VEC, grp), BFloat16)
    for j in cutlass.range_constexpr(grp):
        cute.autovec_copy(g_q[None, li, j, g, b], r_qb[None, j])
    r_q = cute.make_rmem_tensor((VEC, grp), Float32)
    r_q.store(r_qb.load().to(Float32) * qscale)

    start = g_ip[b]
    end = g_ip[b + 1]
    chunk = (end - start + nsplit - 1) // nsplit
    c0 = start + s * chunk
    c1 = cutlass.min(end, c0 + chunk)
    n = cutlass.max(c1 - c0, 0)
    nsteps = (n + (STREAMS - 1)) // STREAMS

    r_m = cute.make_rmem_tensor((grp,), Float32)
    r_l = cute.make_rmem_tensor((grp,), Float32)
    r_acc = cute.make_rmem_tensor((VEC, grp), Float32)
    r_m.fill(NEG)
    r_l.fill(0.0)
    r_acc.fill(0.0)
    r_kb = cute.make_rmem_tensor((VEC,), BFloat16)
    r_vb = cute.make_rmem_tensor((VEC,), BFloat16)
    r_kf = cute.make_rmem_tensor((VEC,), Float32)
    r_vf = cute.make_rmem_tensor((VEC,), Float32)

    for i in cutlass.range(nsteps):
        pos = c0 + st + i * STREAMS
        page = g_idx[cutlass.min(pos, c1 - 1)]
        cute.autovec_copy(g_k[None, li, g, page], r_kb)
        cute.autovec_copy(g_v[None, li, g, page], r_vb)
        r_kf.store(r_kb.load().to(Float32))
        r_vf.store(r_vb.load().to(Float32))
        sc = []
        for j in cutlass.range_constexpr(grp):
            dot = Float32(0.0)
            for e in cutlass.range_constexpr(VEC):
                dot = dot + r_q[e, j] * r_kf[e]
            for k in cutlass.range_constexpr(4):
                dot = dot + cute.arch.shuffle_sync_bfly(dot, offset=(LANES // 2) >> k)
            sc.append(dot)
        if pos < c1:
            for j in cutlass.range_constexpr(grp):
                m_old = r_m[j]
                m_new = cutlass.max(m_old, sc[j])
                alpha = cute.math.exp2(m_old - m_new, approx=True, ftz=True)
                p = cute.math.exp2(sc[j] - m_new, approx=True, ftz=True)
                r_m[j] = m_new
                r_l[j] = r_l[j] * alpha + p
                for e in cutlass.range_constexpr(VEC):
                    r_acc[e, j] = r_acc[e, j] * alpha + p * r_vf[e]

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

    # thread -> (head j, dims [4c, 4c + 4)); 32 threads per head
    s_accv = cute.make_tensor(s_acc.iterator, cute.make_layout(
        (OVEC, d // OVEC, grp, STREAMS), stride=(1, OVEC, d, grp * d)))
    jj = tidx // (d // OVEC)
    cc = tidx % (d // OVEC)
    mm = s_m[jj, 0]
    for t in cutlass.range_constexpr(1, STREAMS):
        mm = cutlass.max(mm, s_m[jj, t])
    ll = Float32(0.0)
    r_o = cute.make_rmem_tensor((OVEC,), Float32)
    r_o.fill(0.0)
    r_t = cute.make_rmem_tensor((OVEC,), Float32)
    for t in cutlass.range_constexpr(STREAMS):
        w = cute.math.exp2(s_m[jj, t] - mm, approx=True, ftz=True)
        ll = ll + s_l[jj, t] * w
        cute.autovec_copy(s_accv[None, cc, jj, t], r_t)
        r_o.store(r_o.load() + r_t.load() * w)
    inv = Float32(0.0)
    lse_v = Float32(NEG)
    if ll > Float32(0.0):
        inv = Float32(1.0) / ll
        lse_v = mm + cute.math.log2(ll)
    r_o.store(r_o.load() * inv)
    row = (b * hq + g * grp + jj) * nsplit + s
    cute.autovec_copy(r_o, g_o[None, cc, row])
    if cc == 0:
        g_lse[row] = lse_v


@cute.kernel
def _merge_kernel(
    p_o: cute.Pointer,
    p_lse: cute.Pointer,
    p_out: cute.Pointer,
    p_olse: cute.Pointer,
    batch: Int32,
    nsplit: Int32,
    hq: cutlass.Constexpr,
    d: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()   # = b * hq + head
    nrows = batch * hq * nsplit
    g_o = cute.make_tensor(p_o, cute.make_layout((OVEC, d // OVEC, nrows), stride=(1, OVEC, d)))
    g_lse = cute.make_tensor(p_lse, cute.make_layout(nrows))
    g_out = cute.make_tensor(p_out, cute.make_layout((OVEC, d // OVEC, batch * hq),
                                                     stride=(1, OVEC, d)))
    g_olse = cute.make_tensor(p_olse, cute.make_layout(batch * hq))
    base = bidx * nsplit

    r_mx = cute.make_rmem_tensor((1,), Float32)
    r_w = cute.make_rmem_tensor((1,), Float32)
    r_mx[0] = Float32(NEG)
    r_w[0] = Float32(0.0)
    for s in cutlass.range(nsplit):
        r_mx[0] = cutlass.max(r_mx[0], g_lse[base + s])
    mx = r_mx[0]
    r_o = cute.make_rmem_tensor((OVEC,), Float32)
    r_o.fill(0.0)
    r_t = cute.make_rmem_tensor((OVEC,), Float32)
    for s in cutlass.range(nsplit):
        w = cute.math.exp2(g_lse[base + s] - mx, approx=True, ftz=True)
        r_w[0] = r_w[0] + w
        cute.autovec_copy(g_o[None, tidx, base + s], r_t)
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
    o_part: cute.Tensor,
    lse_part: cute.Tensor,
    out: cute.Tensor,
    lse: cute.Tensor,
    nsplit: Int32,
    qscale: Float32,
    stream: cuda.CUstream,
    hq: cutlass.Constexpr,
    hkv: cutlass.Constexpr,
    d: cutlass.Constexpr,
):
    batch = q.shape[0]
    pool = k_cache.shape[0]
    ntok = kv_indices.shape[0]
    _partial_kernel(
        q.iterator, k_cache.iterator, v_cache.iterator, kv_indptr.iterator, kv_indices.iterator,
        o_part.iterator, lse_part.iterator, batch, pool, ntok, nsplit, qscale, hq, hkv, d,
    ).launch(grid=[batch * hkv * nsplit, 1, 1], block=[THREADS, 1, 1], stream=stream)
    _merge_kernel(
        o_part.iterator, lse_part.iterator, out.iterator, lse.iterator, batch, nsplit, hq, d,
    ).launch(grid=[batch * hq, 1, 1], block=[d // OVEC, 1, 1], stream=stream)


USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None

_compiled = {}


def _fake(dtype, shape, align=16):
    return make_fake_compact_tensor(dtype, shape, stride_order=tuple(reversed(range(len(shape)))),
                                    assumed_align=align)


def compile_for(hq, hkv, d):
    """Compile (once) for these head counts and head_dim; the sizes are dynamic.
    Works without a GPU when CUTE_DSL_ARCH is set."""
    key = (hq, hkv, d, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        if d != VEC * LANES or hq % hkv or (hq // hkv) * d != THREADS * OVEC:
            raise ValueError("this kernel is specialised for head_dim 128 and 4 q heads per kv head")
        nb = cute.sym_int32()     # batch
        npool = cute.sym_int32()  # pool pages
        nrow = cute.sym_int32()   # batch * q_heads * splits
        fn = cute.compile(
            _launch,
            _fake(BFloat16, (nb, hq, d)),
            _fake(BFloat16, (npool, 1, hkv, d)),
            _fake(BFloat16, (npool, 1, hkv, d)),
            _fake(Int32, (cute.sym_int32(),), 4),
            _fake(Int32, (cute.sym_int32(),), 4),
            _fake(Float32, (nrow, d)),
            _fake(Float32, (nrow,), 4),
            _fake(BFloat16, (nb, hq, d)),
            _fake(Float32, (nb, hq), 4),
            Int32(1),
            Float32(1.0),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            hq, hkv, d,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
        _compiled[key] = fn
    return fn


def num_splits(batch, kv_tokens):
    """Splits per sequence: about TOKENS_PER_SPLIT tokens of an average sequence."""
    avg = kv_tokens / max(batch, 1)
    return max(1, min(MAX_SPLITS, math.ceil(avg / TOKENS_PER_SPLIT)))


def _prep(t):
    """Dense, 16-byte aligned storage (copies only if the input is not)."""
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


# assumed alignment of each tensor argument, as compiled (fallback path only)
_ALIGNS = (16, 16, 16, 4, 4, 16, 4, 16, 4)


def _plain_tensor(t, align):
    return from_dlpack(t, assumed_align=align).mark_compact_shape_dynamic(
        mode=0, stride_order=t.dim_order())


def solve(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, hq, d = q.shape
    pool, _, hkv, _ = k_cache.shape
    assert q.dtype == torch.bfloat16 and k_cache.dtype == torch.bfloat16 and q.is_cuda
    out = torch.empty((batch, hq, d), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, hq), dtype=torch.float32, device=q.device)
    if batch == 0:
        return out, lse
    ntok = kv_indices.shape[0]
    nsplit = num_splits(batch, ntok)
    if pool * hkv * d > MAX_ELEMS or batch * hq * nsplit * d > MAX_ELEMS:
        raise ValueError("sizes exceed 32-bit offsets")
    fn = compile_for(hq, hkv, d)
    qscale = float(sm_scale) * LOG2E  # scores in base 2: exp(x) = exp2(x * log2(e))
    o_part = torch.empty((batch * hq * nsplit, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((batch * hq * nsplit,), dtype=torch.float32, device=q.device)
    ip = kv_indptr.to(torch.int32).contiguous()
    idx = kv_indices.to(torch.int32).contiguous()
    if idx.numel() == 0:  # never read (every chunk is empty), but keep a valid tensor
        idx = torch.zeros(1, dtype=torch.int32, device=q.device)
    args = [_prep(q), _prep(k_cache), _prep(v_cache), ip, idx, o_part, lse_part, out, lse]
    if USE_TVM_FFI:
        fn(*args, nsplit, qscale)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(q.device).cuda_stream)
        fn(*[_plain_tensor(t, a) for t, a in zip(args, _ALIGNS)], nsplit, qscale, stream)
    return out, lse
