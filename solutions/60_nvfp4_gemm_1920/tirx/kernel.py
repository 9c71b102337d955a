"""Problem 60, NVFP4 x NVFP4 GEMM (out = A B^T, bf16), written in TIRx (Apache TVM 0.27).

Hopper has no FP4 tensor cores, so each CTA dequantises tiles of A and B into
bf16 shared memory and multiplies them with warp-level tensor-core MMAs
(`mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`, issued through
`T.ptx[...]`, the same instruction `T.tile.gemm` lowers to), accumulating in fp32.

Dequantisation is exact in bf16. An E2M1 value times two is an integer in
{0,1,2,3,4,6,8,12} and an E4M3 value times 2**9 is an integer below 2**18 with
at most 4 significant bits, so their product (at most 6 significant bits, below
2**22) is exact in fp32 and in bf16. Shared memory holds these integers
(value * 2**10) as bf16, two per 32-bit word (the bf16 bits are the top half of
the fp32 bits, the bottom half being zero for such values). The epilogue scales
the fp32 accumulators by a_global * b_global * 2**-20 and rounds to bf16.

Tiles: 128 (M) x 128 (N) x 64 (K), 256 threads = 8 warps as 2 (M) x 4 (N), each
warp a 64 x 32 sub-tile (4 x 4 m16n8 MMAs per 16-wide K step). Each thread
decodes whole 16-element scale blocks (8 packed bytes + 1 scale byte). Rows
past M or N and blocks past K are read at clamped addresses and zeroed, so any
M, N and any K that is a multiple of 16 work. Compiled once per (K, N) with M
symbolic, cached.
"""
import torch
import tvm
from tvm.script import tirx as T

BM = 128
BN = 128
BK = 64
THREADS = 256
QBLK = 16
WARPS_M = 2
WARPS_N = 4
WM = BM // WARPS_M  # 64 rows per warp
WN = BN // WARPS_N  # 32 cols per warp
MT = WM // 16  # m16 tiles per warp
NT = WN // 8  # n8 tiles per warp
LDW = BK // 2 + 4  # shared row stride in 32-bit words (36: conflict-free fragment loads, 16-byte rows)
E2M1_X2_LUT = 0xC8643210 - (1 << 32)  # nibble c = 2 * |E2M1 code c| for c = 0..7, as int32
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
OUT_SCALE = 2.0**-20
MAX_ELEMS_PER_LAUNCH = 2**31 - 1

_CACHE = {}


def make_prim_func(k_dim, n_cols):
    assert k_dim % QBLK == 0
    kw = k_dim // 8  # int32 words per packed row
    kb = k_dim // QBLK  # scale blocks per row
    kt_n = (k_dim + BK - 1) // BK
    bpr = BK // QBLK  # scale blocks per tile row
    per_thread_a = BM * bpr // THREADS
    per_thread_b = BN * bpr // THREADS
    grid_n = (n_cols + BN - 1) // BN

    @T.prim_func
    def nvfp4_gemm(a_ptr: T.handle, sa_ptr: T.handle, b_ptr: T.handle, sb_ptr: T.handle,
                   ga_ptr: T.handle, gb_ptr: T.handle, c_ptr: T.handle):
        m = T.int32()
        A = T.match_buffer(a_ptr, (m, kw), "int32")
        SA = T.match_buffer(sa_ptr, (m, kb), "uint8")
        B = T.match_buffer(b_ptr, (n_cols, kw), "int32")
        SB = T.match_buffer(sb_ptr, (n_cols, kb), "uint8")
        GA = T.match_buffer(ga_ptr, (1,), "float32")
        GB = T.match_buffer(gb_ptr, (1,), "float32")
        C = T.match_buffer(c_ptr, (m, n_cols), "bfloat16")
        T.device_entry()
        bx, by = T.cta_id([grid_n, T.ceildiv(m, BM)])
        tx = T.thread_id([THREADS])

        s_a = T.alloc_shared((BM * LDW,), "uint32")
        s_b = T.alloc_shared((BN * LDW,), "uint32")
        acc = T.alloc_local((MT * NT * 4,), "float32")
        af = T.alloc_local((MT * 4,), "uint32")
        bf = T.alloc_local((NT * 2,), "uint32")
        wv = T.alloc_local((2,), "int32")
        pk = T.alloc_local((8,), "uint32")
        fq = T.alloc_local((2,), "float32")

        warp: T.let = tx // 32
        lane: T.let = tx % 32
        g: T.let = lane // 4
        t: T.let = lane % 4
        wm: T.let = warp // WARPS_N
        wn: T.let = warp % WARPS_N

        for i in T.unroll(MT * NT * 4):
            acc[i] = T.float32(0)

        for kt in T.serial(kt_n):
            # ---- dequantise A tile (BM x BK) into s_a ----
            for j in T.unroll(per_thread_a):
                r: T.let = (tx + j * THREADS) // bpr
                blk: T.let = (tx + j * THREADS) % bpr
                grow: T.let = by * BM + r
                kbi: T.let = kt * bpr + blk
                growc: T.let = T.min(grow, m - 1)
                kbc: T.let = T.min(kbi, kb - 1)
                wv[0] = A[growc, kbc * 2]
                wv[1] = A[growc, kbc * 2 + 1]
                sbits: T.let = T.Cast("int32", SA[growc, kbc])
                se: T.let = (sbits >> 3) & 15
                nz: T.let = (se + 15) >> 4
                sv: T.let = (((sbits & 7) | (nz << 3)) << (se - nz)) * (1 - 2 * ((sbits >> 7) & 1)) * T.Select(
                    T.And(grow < m, kbi < kb), 1, 0)
                for p in T.unroll(8):
                    c0: T.let = (wv[p // 4] >> ((p % 4) * 8)) & 15
                    c1: T.let = (wv[p // 4] >> ((p % 4) * 8 + 4)) & 15
                    q0: T.let = ((T.int32(E2M1_X2_LUT) >> ((c0 & 7) * 4)) & 15) * sv * (1 - 2 * (c0 >> 3))
                    q1: T.let = ((T.int32(E2M1_X2_LUT) >> ((c1 & 7) * 4)) & 15) * sv * (1 - 2 * (c1 >> 3))
                    fq[0] = T.Cast("float32", q0)  # exact; reinterpret needs an lvalue
                    fq[1] = T.Cast("float32", q1)
                    pk[p] = (T.reinterpret("uint32", fq[0]) >> T.uint32(16)) | (
                        T.reinterpret("uint32", fq[1]) & T.uint32(0xFFFF0000))
                for p in T.vectorized(8):
                    s_a[r * LDW + blk * 8 + p] = pk[p]
            # ---- dequantise B tile (BN x BK) into s_b ----
            for j in T.unroll(per_thread_b):
                r: T.let = (tx + j * THREADS) // bpr
                blk: T.let = (tx + j * THREADS) % bpr
                grow: T.let = bx * BN + r
                kbi: T.let = kt * bpr + blk
                growc: T.let = T.min(grow, n_cols - 1)
                kbc: T.let = T.min(kbi, kb - 1)
                wv[0] = B[growc, kbc * 2]
                wv[1] = B[growc, kbc * 2 + 1]
                sbits: T.let = T.Cast("int32", SB[growc, kbc])
                se: T.let = (sbits >> 3) & 15
                nz: T.let = (se + 15) >> 4
                sv: T.let = (((sbits & 7) | (nz << 3)) << (se - nz)) * (1 - 2 * ((sbits >> 7) & 1)) * T.Select(
                    T.And(grow < n_cols, kbi < kb), 1, 0)
                for p in T.unroll(8):
                    c0: T.let = (wv[p // 4] >> ((p % 4) * 8)) & 15
                    c1: T.let = (wv[p // 4] >> ((p % 4) * 8 + 4)) & 15
                    q0: T.let = ((T.int32(E2M1_X2_LUT) >> ((c0 & 7) * 4)) & 15) * sv * (1 - 2 * (c0 >> 3))
                    q1: T.let = ((T.int32(E2M1_X2_LUT) >> ((c1 & 7) * 4)) & 15) * sv * (1 - 2 * (c1 >> 3))
                    fq[0] = T.Cast("float32", q0)  # exact; reinterpret needs an lvalue
                    fq[1] = T.Cast("float32", q1)
                    pk[p] = (T.reinterpret("uint32", fq[0]) >> T.uint32(16)) | (
                        T.reinterpret("uint32", fq[1]) & T.uint32(0xFFFF0000))
                for p in T.vectorized(8):
                    s_b[r * LDW + blk * 8 + p] = pk[p]
            T.cuda.cta_sync()
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
                            acc[(i * NT + jn) * 4 + 0], acc[(i * NT + jn) * 4 + 1],
                            acc[(i * NT + jn) * 4 + 2], acc[(i * NT + jn) * 4 + 3],
                            af[i * 4 + 0], af[i * 4 + 1], af[i * 4 + 2], af[i * 4 + 3],
                            bf[jn * 2 + 0], bf[jn * 2 + 1],
                            acc[(i * NT + jn) * 4 + 0], acc[(i * NT + jn) * 4 + 1],
                            acc[(i * NT + jn) * 4 + 2], acc[(i * NT + jn) * 4 + 3])
            T.cuda.cta_sync()

        # ---- epilogue: global scales, bf16, bounds-checked stores ----
        scale: T.let = GA[0] * GB[0] * T.float32(OUT_SCALE)
        for i in T.unroll(MT):
            for jn in T.unroll(NT):
                for h in T.unroll(2):
                    for e in T.unroll(2):
                        row: T.let = by * BM + wm * WM + i * 16 + g + h * 8
                        col: T.let = bx * BN + wn * WN + jn * 8 + t * 2 + e
                        if row < m and col < n_cols:
                            C[row, col] = T.bfloat16(acc[(i * NT + jn) * 4 + h * 2 + e] * scale)

    return nvfp4_gemm


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


def _prep(t):
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def solve(a_fp4, a_scale, a_global, b_fp4, b_scale, b_global):
    assert a_fp4.dtype == torch.uint8 and b_fp4.dtype == torch.uint8
    m, k_half = a_fp4.shape
    n = b_fp4.shape[0]
    k = k_half * 2
    if k % QBLK != 0:
        raise ValueError(f"K must be a multiple of {QBLK}, got {k}")
    out = torch.empty((m, n), dtype=torch.bfloat16, device=a_fp4.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()
    a_q = _prep(a_fp4).view(torch.int32)  # [m, k/8]: element 8w+e at bits 4e..4e+3 of word w
    b_q = _prep(b_fp4).view(torch.int32)
    a_s = _prep(a_scale)
    b_s = _prep(b_scale)
    ga = a_global.to(torch.float32).reshape(1).contiguous()
    gb = b_global.to(torch.float32).reshape(1).contiguous()
    fn = _kernel(k, n, a_fp4.device)
    # In-kernel index arithmetic is 32-bit: split M so each launch stays below 2**31 elements.
    chunk = max(BM, (MAX_ELEMS_PER_LAUNCH // max(n, k // 8)) // BM * BM)
    for start in range(0, m, chunk):
        end = min(start + chunk, m)
        fn(a_q[start:end], a_s[start:end], b_q, b_s, ga, gb, out[start:end])
    return out
