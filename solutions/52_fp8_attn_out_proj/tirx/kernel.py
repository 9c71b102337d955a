"""Problem 52, FP8 E4M3 block-scaled GEMM (attention output projection), TIRx (Apache TVM 0.27).

out[t, o] = bf16( sum_kb  xs[t, kb] * ws[o // 128, kb] * sum_{k in block kb} qx[t, k] * qw[o, k] )
with qx, qw the E4M3 values, xs the 1x128 activation scales and ws the 128x128 weight scales.

Algorithm (DeepSeek-V3 style promotion, on Hopper's warp-level tensor cores):
- Each CTA computes a 128 (tokens) x 128 (out features) tile, so one weight scale covers it per
  K block. 256 threads = 8 warps as 2 (M) x 4 (N), each warp a 64 x 32 sub-tile (4 x 4
  `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` per 16-wide K step, through `T.ptx[...]`).
- E4M3 converts to f16 exactly (3 mantissa bits; the smallest E4M3 subnormal 2**-9 is a normal
  f16). The conversion is the hardware `cvt.rn.f16x2.e4m3x2` (two values per instruction), so
  shared memory holds the exact values as f16 pairs and every product is exact in fp32.
- K is walked in 64-wide tiles (two per 128-wide scale block). Per tile each thread loads 2 x 16
  bytes of x and 2 x 16 bytes of w (128-bit loads, issued one tile ahead into registers so they
  overlap the MMAs), converts and stores them to padded shared memory (row stride 36 words:
  conflict-free fragment loads), then the MMAs accumulate into an fp32 partial sum. After the
  second tile of each scale block the partial is promoted: acc += part * (xs[row, kb] * ws[n_tile, kb])
  and reset. The block's 128 x scales go through shared memory; the weight scale is one scalar.
- Epilogue: acc -> bf16 (round to nearest even), bounds-checked stores.

Compiled once per (K, N) with M symbolic, cached per device. Rows past M and columns past N read
clamped addresses and are not stored (N need not be a multiple of 128: the last tile's weight-scale row
covers the partial tile, as in the reference). K must be a multiple of 128. In-kernel index arithmetic is 32-bit:
M is split into launches of < 2**31 elements per tensor. Inputs that are not contiguous or not
16-byte aligned are copied first. Note: NVRTC runs with --use_fast_math; nothing here depends
on it (no division, no transcendental; fp32 mul/add/FMA are IEEE either way; only denormal results
would flush, i.e. scale products below 1e-38).
Speed (estimate, not measured): 1.93 TFLOP on the visible workload; warp-level mma.sync on Hopper
tops out well below wgmma, and one 8-warp CTA per SM (172 registers) with a single-buffered
tile and two barriers per 64-wide K step should reach roughly 150-300 TFLOP/s, i.e. about 6-13 ms
against the eager reference's 38.4 ms (it converts both operands to fp32, multiplies by the scales
(repeat_interleave expands the weight scales to a full [out, in] fp32 tensor), runs one strict-fp32
GEMM at ~50 TFLOP/s (38 ms of the 38.4), and converts to bf16); heldout (4999 tokens) ~2-4 ms vs 13.1 ms.
"""
import torch
import tvm
from tvm.script import tirx as T

BM = 128
BN = 128
BK = 64          # K per shared-memory tile
QB = 128         # scale block along K
THREADS = 256
WARPS_M = 2
WARPS_N = 4
WM = BM // WARPS_M  # 64 rows per warp
WN = BN // WARPS_N  # 32 cols per warp
MT = WM // 16  # m16 tiles per warp
NT = WN // 8  # n8 tiles per warp
LDW = BK // 2 + 4  # shared row stride in 32-bit words (f16 pairs): 36
CH = BK // 16  # 16-byte chunks per tile row (4)
CPT = BM * CH // THREADS  # chunks per thread per operand tile (2)
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
CVT = "cvt.rn.f16x2.e4m3x2"
MAX_ELEMS_PER_LAUNCH = 2**31 - 1

_CACHE = {}


def make_prim_func(k_dim, n_cols):
    assert k_dim % QB == 0
    kw = k_dim // 4  # int32 words per fp8 row
    kb = k_dim // QB  # scale blocks per row
    nb = (n_cols + QB - 1) // QB
    kt_n = k_dim // BK
    grid_n = (n_cols + BN - 1) // BN

    @T.prim_func
    def fp8_gemm(x_ptr: T.handle, xs_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle, c_ptr: T.handle):
        m = T.int32()
        X = T.match_buffer(x_ptr, (m, kw), "int32")
        XS = T.match_buffer(xs_ptr, (m, kb), "float32")
        W = T.match_buffer(w_ptr, (n_cols, kw), "int32")
        WS = T.match_buffer(ws_ptr, (nb, kb), "float32")
        C = T.match_buffer(c_ptr, (m, n_cols), "bfloat16")
        T.device_entry()
        bx, by = T.cta_id([grid_n, T.ceildiv(m, BM)])
        tx = T.thread_id([THREADS])

        s_a = T.alloc_shared((BM * LDW,), "uint32")
        s_b = T.alloc_shared((BN * LDW,), "uint32")
        s_xs = T.alloc_shared((BM,), "float32")
        acc = T.alloc_local((MT * NT * 4,), "float32")
        part = T.alloc_local((MT * NT * 4,), "float32")
        af = T.alloc_local((MT * 4,), "uint32")
        bf = T.alloc_local((NT * 2,), "uint32")
        qa = T.alloc_local((CPT * 4,), "int32")
        qb = T.alloc_local((CPT * 4,), "int32")
        hv = T.alloc_local((8,), "uint32")
        xsn: T.f32 = T.float32(0)

        warp: T.let = tx // 32
        lane: T.let = tx % 32
        g: T.let = lane // 4
        t: T.let = lane % 4
        wm: T.let = warp // WARPS_N
        wn: T.let = warp % WARPS_N
        xrow: T.let = T.min(by * BM + tx, m - 1)

        for i in T.unroll(MT * NT * 4):
            acc[i] = T.float32(0)
            part[i] = T.float32(0)

        # prologue: tile 0 and the first block's x scales into registers
        for j in T.unroll(CPT):
            for p in T.vectorized(4):
                qa[j * 4 + p] = X[T.min(by * BM + (tx + j * THREADS) // CH, m - 1), ((tx + j * THREADS) % CH) * 4 + p]
            for p in T.vectorized(4):
                qb[j * 4 + p] = W[T.min(bx * BN + (tx + j * THREADS) // CH, n_cols - 1), ((tx + j * THREADS) % CH) * 4 + p]
        xsn = XS[xrow, 0]

        for kt in T.serial(kt_n):
            T.cuda.cta_sync()
            # ---- exact e4m3 -> f16 conversion of the prefetched chunks into shared memory ----
            for j in T.unroll(CPT):
                for p in T.unroll(4):
                    T.ptx[CVT](hv[p * 2], T.Cast("uint16", qa[j * 4 + p] & 0xFFFF))
                    T.ptx[CVT](hv[p * 2 + 1], T.Cast("uint16", (qa[j * 4 + p] >> 16) & 0xFFFF))
                for p in T.vectorized(4):
                    s_a[((tx + j * THREADS) // CH) * LDW + ((tx + j * THREADS) % CH) * 8 + p] = hv[p]
                for p in T.vectorized(4):
                    s_a[((tx + j * THREADS) // CH) * LDW + ((tx + j * THREADS) % CH) * 8 + 4 + p] = hv[4 + p]
                for p in T.unroll(4):
                    T.ptx[CVT](hv[p * 2], T.Cast("uint16", qb[j * 4 + p] & 0xFFFF))
                    T.ptx[CVT](hv[p * 2 + 1], T.Cast("uint16", (qb[j * 4 + p] >> 16) & 0xFFFF))
                for p in T.vectorized(4):
                    s_b[((tx + j * THREADS) // CH) * LDW + ((tx + j * THREADS) % CH) * 8 + p] = hv[p]
                for p in T.vectorized(4):
                    s_b[((tx + j * THREADS) // CH) * LDW + ((tx + j * THREADS) % CH) * 8 + 4 + p] = hv[4 + p]
            if kt % 2 == 0:
                if tx < BM:
                    s_xs[tx] = xsn
            T.cuda.cta_sync()
            # ---- prefetch the next tile (clamped: a harmless duplicate load at the end) ----
            for j in T.unroll(CPT):
                for p in T.vectorized(4):
                    qa[j * 4 + p] = X[T.min(by * BM + (tx + j * THREADS) // CH, m - 1),
                                      T.min(kt + 1, kt_n - 1) * (BK // 4) + ((tx + j * THREADS) % CH) * 4 + p]
                for p in T.vectorized(4):
                    qb[j * 4 + p] = W[T.min(bx * BN + (tx + j * THREADS) // CH, n_cols - 1),
                                      T.min(kt + 1, kt_n - 1) * (BK // 4) + ((tx + j * THREADS) % CH) * 4 + p]
            if kt % 2 == 1:
                xsn = XS[xrow, T.min(kt // 2 + 1, kb - 1)]
            # ---- tensor-core MMAs over the tile's four 16-wide K steps ----
            for ks in T.unroll(BK // 16):
                for i in T.unroll(MT):
                    af[i * 4 + 0] = s_a[(wm * WM + i * 16 + g) * LDW + ks * 8 + t]
                    af[i * 4 + 1] = s_a[(wm * WM + i * 16 + g + 8) * LDW + ks * 8 + t]
                    af[i * 4 + 2] = s_a[(wm * WM + i * 16 + g) * LDW + ks * 8 + t + 4]
                    af[i * 4 + 3] = s_a[(wm * WM + i * 16 + g + 8) * LDW + ks * 8 + t + 4]
                for jn in T.unroll(NT):
                    bf[jn * 2 + 0] = s_b[(wn * WN + jn * 8 + g) * LDW + ks * 8 + t]
                    bf[jn * 2 + 1] = s_b[(wn * WN + jn * 8 + g) * LDW + ks * 8 + t + 4]
                for i in T.unroll(MT):
                    for jn in T.unroll(NT):
                        T.ptx[MMA](
                            part[(i * NT + jn) * 4 + 0], part[(i * NT + jn) * 4 + 1],
                            part[(i * NT + jn) * 4 + 2], part[(i * NT + jn) * 4 + 3],
                            af[i * 4 + 0], af[i * 4 + 1], af[i * 4 + 2], af[i * 4 + 3],
                            bf[jn * 2 + 0], bf[jn * 2 + 1],
                            part[(i * NT + jn) * 4 + 0], part[(i * NT + jn) * 4 + 1],
                            part[(i * NT + jn) * 4 + 2], part[(i * NT + jn) * 4 + 3])
            # ---- promote the block's partial sum with its two scales ----
            if kt % 2 == 1:
                wsc: T.let = WS[bx, kt // 2]
                for i in T.unroll(MT):
                    for h in T.unroll(2):
                        sc: T.let = s_xs[wm * WM + i * 16 + g + h * 8] * wsc
                        for jn in T.unroll(NT):
                            for e in T.unroll(2):
                                acc[(i * NT + jn) * 4 + h * 2 + e] = acc[(i * NT + jn) * 4 + h * 2 + e] + part[
                                    (i * NT + jn) * 4 + h * 2 + e] * sc
                                part[(i * NT + jn) * 4 + h * 2 + e] = T.float32(0)

        # ---- epilogue: bf16, bounds-checked stores ----
        for i in T.unroll(MT):
            for jn in T.unroll(NT):
                for h in T.unroll(2):
                    for e in T.unroll(2):
                        row: T.let = by * BM + wm * WM + i * 16 + g + h * 8
                        col: T.let = bx * BN + wn * WN + jn * 8 + t * 2 + e
                        if row < m and col < n_cols:
                            C[row, col] = T.bfloat16(acc[(i * NT + jn) * 4 + h * 2 + e])

    return fp8_gemm


def target_for(device=None):
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(k_dim, n_cols, target):
    mod = tvm.IRModule({"main": make_prim_func(k_dim, n_cols)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(k_dim, n_cols, device):
    key = (k_dim, n_cols, device.index)
    fn = _CACHE.get(key)
    if fn is None:
        fn = compile_kernel(k_dim, n_cols, target_for(device))["main"]
        _CACHE[key] = fn
    return fn


def _prep(t, align=16):
    if not t.is_contiguous() or t.data_ptr() % align != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def solve(x_fp8, x_scale, w_fp8, w_scale):
    assert x_fp8.dtype == torch.uint8 and w_fp8.dtype == torch.uint8
    m, k = x_fp8.shape
    n = w_fp8.shape[0]
    if k % QB != 0:
        raise ValueError(f"in_features must be a multiple of {QB}, got {k}")
    out = torch.empty((m, n), dtype=torch.bfloat16, device=x_fp8.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()
    x_q = _prep(x_fp8).view(torch.int32)  # [m, k/4]: element 4w+e in byte e of word w
    w_q = _prep(w_fp8).view(torch.int32)
    x_s = _prep(x_scale.to(torch.float32), 4)
    w_s = _prep(w_scale.to(torch.float32), 4)
    fn = _kernel(k, n, x_fp8.device)
    # In-kernel index arithmetic is 32-bit: split M so each launch stays below 2**31 elements.
    chunk = max(BM, (MAX_ELEMS_PER_LAUNCH // max(n, k)) // BM * BM)
    for start in range(0, m, chunk):
        end = min(start + chunk, m)
        fn(x_q[start:end], x_s[start:end], w_q, w_s, out[start:end])
    return out
