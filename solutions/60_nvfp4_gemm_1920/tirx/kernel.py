"""Problem 60, NVFP4 x NVFP4 GEMM (out = A W^T, fp32 [1, M, N]), written in TIRx (Apache TVM 0.27).

Inputs (problem.json): hidden_states / weight as float4_e2m1fn_x2 [1, rows, K/2]
(two E2M1 codes per byte, even column in the low nibble), their E4M3 block
scales [1, rows, K/16] (one per 16 elements along K) and fp32 0-d global decode
scales. The reference dequantises both operands in fp32 and multiplies them.

Hopper has no FP4 tensor cores, so each CTA dequantises tiles of A and W into
bf16 shared memory and multiplies them with warp-level tensor-core MMAs
(`mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`, issued through
`T.ptx[...]`, the same instruction `T.tile.gemm` lowers to).

Arithmetic, chosen so that the only roundings are an fp32 sum of K/16 exact
terms and the final scaling (the output is fp32, so its allowance is a few
fp32 ulps of a K-long sum):
- Decoding is exact. An E2M1 value times two is an integer in
  {0,1,2,3,4,6,8,12}; an E4M3 value times 2**9 is an integer below 2**18 with
  at most 4 significant bits. Their product q = value * 2**10 (at most 6
  significant bits, below 2**22) is exact in fp32 and in bf16. Shared memory
  holds these as bf16, two per 32-bit word (the bf16 bits are the top half of
  the fp32 bits, the bottom half being zero for such values).
- One MMA per 16-wide scale block, started from zero. Its 16 products are
  exact and every partial sum is a multiple of sa * sw * 2**18 (sa, sw the
  block scales, 4 significant bits each) of at most 2304 such units, i.e. at
  most 20 significant bits: the block dot product is exact in fp32 whatever
  order and alignment the tensor core uses.
- The block results are added into the fp32 accumulators with ordinary
  round-to-nearest adds (K/16 = 120 per output for K = 1920) instead of letting
  the tensor core accumulate across blocks (its alignment and truncation of a
  large running sum are not specified).
- Epilogue: out = acc * (global_a * global_w * 2**-20).

Tiles: 128 (M) x 128 (N) x 64 (K), 256 threads = 8 warps as 2 (M) x 4 (N), each
warp a 64 x 32 sub-tile (4 x 4 m16n8 MMAs per 16-wide K step). Each thread
decodes whole 16-element scale blocks (8 packed bytes + 1 scale byte). Rows
past M or N and blocks past K are read at clamped addresses and zeroed, so any
M, N and any K that is a multiple of 16 work. Full tiles store column pairs
with 8-byte stores, edge tiles element by element. Compiled once per (K, N)
with M symbolic, cached.
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
        C = T.match_buffer(c_ptr, (m, n_cols), "float32")
        T.device_entry()
        T.attr({"tirx.launch_bounds_min_blocks_per_sm": 2})
        bx, by = T.cta_id([grid_n, T.ceildiv(m, BM)])
        tx = T.thread_id([THREADS])

        s_a = T.alloc_shared((BM * LDW,), "uint32")
        s_b = T.alloc_shared((BN * LDW,), "uint32")
        acc = T.alloc_local((MT * NT * 4,), "float32")
        blk = T.alloc_local((4,), "float32")  # one m16n8 block dot product
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
                # ks is one scale block: its exact dot product from a zero
                # accumulator, then one rounded fp32 add per output
                for i in T.unroll(MT):
                    for jn in T.unroll(NT):
                        for v in T.unroll(4):
                            blk[v] = T.float32(0)
                        T.ptx[MMA](
                            blk[0], blk[1], blk[2], blk[3],
                            af[i * 4 + 0], af[i * 4 + 1], af[i * 4 + 2], af[i * 4 + 3],
                            bf[jn * 2 + 0], bf[jn * 2 + 1],
                            blk[0], blk[1], blk[2], blk[3])
                        for v in T.unroll(4):
                            acc[(i * NT + jn) * 4 + v] = acc[(i * NT + jn) * 4 + v] + blk[v]
            T.cuda.cta_sync()

        # ---- epilogue: global scales, fp32 stores ----
        scale: T.let = GA[0] * GB[0] * T.float32(OUT_SCALE)
        for i in T.unroll(MT * NT * 4):
            acc[i] = acc[i] * scale
        if by * BM + BM <= m and bx * BN + BN <= n_cols:
            # full tile: each thread's two adjacent columns -> one 8-byte store
            for i in T.unroll(MT):
                for jn in T.unroll(NT):
                    for h in T.unroll(2):
                        for e in T.vectorized(2):
                            C[by * BM + wm * WM + i * 16 + g + h * 8, bx * BN + wn * WN + jn * 8 + t * 2 + e] = \
                                acc[(i * NT + jn) * 4 + h * 2 + e]
        else:
            for i in T.unroll(MT):
                for jn in T.unroll(NT):
                    for h in T.unroll(2):
                        for e in T.unroll(2):
                            row: T.let = by * BM + wm * WM + i * 16 + g + h * 8
                            col: T.let = bx * BN + wn * WN + jn * 8 + t * 2 + e
                            if row < m and col < n_cols:
                                C[row, col] = acc[(i * NT + jn) * 4 + h * 2 + e]

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


def _rows(t):
    """[1, rows, cols] (any 1-byte dtype) -> contiguous, 16-byte aligned uint8 [rows, cols] (a view when possible)."""
    t = t.view(torch.uint8)[0]
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def solve(hidden_states, hidden_states_scale, global_decode_scale_input,
          weight, weight_scale, global_decode_scale_weight):
    assert hidden_states.dtype == torch.float4_e2m1fn_x2 and weight.dtype == torch.float4_e2m1fn_x2
    # compute_dtype = promote_types(global dtype, fp32): fp32 for the problem's fp32 globals
    assert global_decode_scale_input.dtype == torch.float32 and global_decode_scale_weight.dtype == torch.float32
    _, m, k_half = hidden_states.shape
    n = weight.shape[1]
    k = k_half * 2
    if k % QBLK != 0:
        raise ValueError(f"K must be a multiple of {QBLK}, got {k}")
    out = torch.empty((1, m, n), dtype=torch.float32, device=hidden_states.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()
    a_q = _rows(hidden_states).view(torch.int32)  # [m, k/8]: element 8w+e at bits 4e..4e+3 of word w
    b_q = _rows(weight).view(torch.int32)
    a_s = _rows(hidden_states_scale)              # E4M3 bits
    b_s = _rows(weight_scale)
    ga = global_decode_scale_input.reshape(1)
    gb = global_decode_scale_weight.reshape(1)
    c = out[0]
    fn = _kernel(k, n, hidden_states.device)
    # In-kernel index arithmetic is 32-bit: split M so each launch stays below 2**31 elements.
    chunk = max(BM, (MAX_ELEMS_PER_LAUNCH // max(n, k // 8)) // BM * BM)
    for start in range(0, m, chunk):
        end = min(start + chunk, m)
        fn(a_q[start:end], a_s[start:end], b_q, b_s, ga, gb, c[start:end])
    return out
