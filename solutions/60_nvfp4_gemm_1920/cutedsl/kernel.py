"""Problem 60, NVFP4 x NVFP4 GEMM (out = A W^T, fp32 [1, M, N]), written in CuTe DSL (nvidia-cutlass-dsl 4.7).

Inputs (problem.json): hidden_states / weight as float4_e2m1fn_x2 [1, rows, K/2]
(two E2M1 codes per byte, even column in the low nibble), their E4M3 block
scales [1, rows, K/16] (one per 16 elements along K) and fp32 0-d global decode
scales. The reference dequantises both operands in fp32 and multiplies them.

Hopper has no FP4 tensor cores, so each CTA dequantises tiles of A and W into
bf16 shared memory and multiplies them with warp-level tensor-core MMAs
(`mma.sync.m16n8k16` bf16 x bf16 -> fp32, `cute.nvgpu.warp.MmaF16BF16Op`).

Arithmetic, chosen so that the only roundings are an fp32 sum of K/16 exact
terms and the final scaling (the output is fp32, so its allowance is a few
fp32 ulps of a K-long sum):
- Decoding is exact. An E2M1 value times two is an integer in
  {0,1,2,3,4,6,8,12}; an E4M3 value times 2**9 is an integer below 2**18 with
  at most 4 significant bits. Their product q = value * 2**10 (at most 6
  significant bits, below 2**22) is exact in bf16.
- One MMA per 16-wide scale block, started from a zero accumulator. Its 16
  products qa * qw are exact, and every partial sum is a multiple of
  sa * sw * 2**18 (sa, sw the two block scales, 4 significant bits each) no
  larger than 2304 such units, i.e. at most 20 significant bits: the block
  dot product is exact in fp32 whatever order and alignment the tensor core
  uses.
- The block results are added into the fp32 accumulators with ordinary
  round-to-nearest adds (K/16 = 120 adds per output for K = 1920), instead of
  letting the tensor core accumulate across blocks (its internal alignment
  and truncation of a large running sum are not specified).
- Epilogue: out = acc * (global_a * global_w * 2**-20).

Tiles: 128 (M) x 128 (N) x 64 (K), 256 threads (8 warps as 4 x 2 MMA atoms);
each thread decodes whole 16-element scale blocks (8 packed bytes + 1 scale
byte). Rows past M or N and scale blocks past K read clamped addresses and are
zeroed, so any M, N and any K that is a multiple of 16 work. Full tiles store
with 8-byte vector stores, edge tiles element by element. Compiled once per
(K, N) and cached; M is a runtime value.
"""
import importlib.util

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Uint8
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

BM = 128
BN = 128
BK = 64
THREADS = 256
QBLK = 16  # NVFP4 elements per E4M3 scale (= the MMA's K)
LDS = BK + 8  # padded shared-memory row (elements): 144 bytes, 16-byte aligned rows
# E2M1 magnitude * 2 for codes 0..7, one nibble each: 0,1,2,3,4,6,8,12
E2M1_X2_LUT = 0xC8643210 - (1 << 32)  # as a signed 32-bit constant
OUT_SCALE = 2.0**-20  # undoes the 2**10 carried by each decoded operand
MAX_ELEMS_PER_LAUNCH = 2**31 - 1


@cute.jit
def _dequant_tile(g_q: cute.Tensor, g_s: cute.Tensor, s_blk: cute.Tensor, r_v: cute.Tensor,
                  row0: Int32, n_rows: Int32, kt: Int32, tidx: Int32,
                  rows: cutlass.Constexpr, kblocks: cutlass.Constexpr):
    """Decode a (rows x BK) tile starting at (row0, kt*BK) into shared memory as
    exact integers value*2**10 stored in bf16; out-of-range entries become 0."""
    bpr = BK // QBLK  # scale blocks per tile row
    for j in cutlass.range_constexpr(rows * bpr // THREADS):
        idx = tidx + j * THREADS
        r = idx // bpr
        blk = idx % bpr
        grow = row0 + r
        kb = kt * bpr + blk
        valid = Int32(1)
        if grow >= n_rows:
            valid = Int32(0)
        if kb >= kblocks:
            valid = Int32(0)
        grow_c = cutlass.min(grow, n_rows - 1)
        kb_c = cutlass.min(kb, kblocks - 1)
        w0 = g_q[grow_c, kb_c * 2]
        w1 = g_q[grow_c, kb_c * 2 + 1]
        sb = Int32(g_s[grow_c, kb_c])
        # E4M3 scale * 2**9 as an integer: e==0 -> m, else (8+m) << (e-1)
        se = (sb >> 3) & 15
        sm = sb & 7
        nz = (se + 15) >> 4  # 0 if se == 0 else 1
        sv = (sm | (nz << 3)) << (se - nz)
        sv = sv * (1 - 2 * ((sb >> 7) & 1)) * valid
        for e in cutlass.range_constexpr(QBLK):
            w = w0
            if cutlass.const_expr(e >= 8):
                w = w1
            c = (w >> ((e % 8) * 4)) & 15
            mag2 = (Int32(E2M1_X2_LUT) >> ((c & 7) * 4)) & 15
            q = mag2 * sv * (1 - 2 * (c >> 3))
            r_v[e] = BFloat16(Float32(q))
        cute.autovec_copy(r_v, s_blk[None, blk, r])


@cute.kernel
def _nvfp4_gemm_kernel(
    g_a: cute.Tensor,    # Int32 [M, K/8]  (packed E2M1, 8 codes per word)
    g_sa: cute.Tensor,   # Uint8 [M, K/16] (E4M3 bits)
    g_b: cute.Tensor,    # Int32 [N, K/8]
    g_sb: cute.Tensor,   # Uint8 [N, K/16]
    g_ga: cute.Tensor,   # Float32 [1]
    g_gb: cute.Tensor,   # Float32 [1]
    g_c: cute.Tensor,    # Float32 [M, N]
    m_rows: Int32,
    tiled_mma: cute.TiledMma,
    n_cols: cutlass.Constexpr,
    k_dim: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bn, bm, _ = cute.arch.block_idx()
    m0 = bm * BM
    n0 = bn * BN
    kblocks = k_dim // QBLK
    ktiles = (k_dim + BK - 1) // BK

    smem = cutlass.utils.SmemAllocator()
    s_a = smem.allocate_tensor(BFloat16, cute.make_layout((BM, BK), stride=(LDS, 1)), byte_alignment=16)
    s_b = smem.allocate_tensor(BFloat16, cute.make_layout((BN, BK), stride=(LDS, 1)), byte_alignment=16)
    # (element in block, block in tile row, tile row) views for the dequantising stores
    s_a_blk = cute.make_tensor(s_a.iterator, cute.make_layout((QBLK, BK // QBLK, BM), stride=(1, QBLK, LDS)))
    s_b_blk = cute.make_tensor(s_b.iterator, cute.make_layout((QBLK, BK // QBLK, BN), stride=(1, QBLK, LDS)))

    thr_mma = tiled_mma.get_slice(tidx)
    t_sa = thr_mma.partition_A(s_a)   # (atom values, M atoms, K blocks)
    t_sb = thr_mma.partition_B(s_b)   # (atom values, N atoms, K blocks)
    t_ra = tiled_mma.make_fragment_A(t_sa)
    t_rb = tiled_mma.make_fragment_B(t_sb)
    acc_shape = tiled_mma.partition_shape_C((BM, BN))
    acc = tiled_mma.make_fragment_C(acc_shape)  # (atom values, M atoms, N atoms)
    acc.fill(0.0)
    blk = tiled_mma.make_fragment_C(acc_shape)   # one scale block's exact dot products

    r_v = cute.make_rmem_tensor((QBLK,), BFloat16)

    for kt in cutlass.range(ktiles, unroll=1):
        _dequant_tile(g_a, g_sa, s_a_blk, r_v, m0, m_rows, kt, tidx, BM, kblocks)
        _dequant_tile(g_b, g_sb, s_b_blk, r_v, n0, Int32(n_cols), kt, tidx, BN, kblocks)
        cute.arch.sync_threads()
        for kb in cutlass.range_constexpr(BK // QBLK):
            cute.autovec_copy(t_sa[None, None, kb], t_ra[None, None, kb])
            cute.autovec_copy(t_sb[None, None, kb], t_rb[None, None, kb])
            # exact block dot products from a zero accumulator, then one rounded add each
            # (blk is both C and D: with a separate zero C the DSL dropped the MMA results)
            blk.fill(0.0)
            cute.gemm(tiled_mma, blk, t_ra[None, None, kb], t_rb[None, None, kb], blk)
            for i in cutlass.range_constexpr(cute.size(acc)):
                acc[i] = acc[i] + blk[i]
        cute.arch.sync_threads()

    scale = g_ga[0] * g_gb[0] * Float32(OUT_SCALE)
    for i in cutlass.range_constexpr(cute.size(acc)):
        acc[i] = acc[i] * scale
    full = Int32(0)
    if m0 + BM <= m_rows:
        if n0 + BN <= n_cols:
            full = Int32(1)
    if full == 1:
        # full tile: each thread's column pairs are contiguous -> 8-byte stores
        t_gc = thr_mma.partition_C(cute.local_tile(g_c, (BM, BN), (bm, bn)))
        cute.autovec_copy(acc, t_gc)
    else:
        t_cc = thr_mma.partition_C(cute.make_identity_tensor((BM, BN)))
        for i in cutlass.range_constexpr(cute.size(acc)):
            mi, ni = t_cc[i]
            gm = m0 + mi
            gn = n0 + ni
            if gm < m_rows:
                if gn < n_cols:
                    g_c[gm, gn] = acc[i]


@cute.jit
def _launch(
    a: cute.Tensor, sa: cute.Tensor, b: cute.Tensor, sb: cute.Tensor,
    ga: cute.Tensor, gb: cute.Tensor, c: cute.Tensor,
    stream: cuda.CUstream,
    n_cols: cutlass.Constexpr, k_dim: cutlass.Constexpr,
):
    m_rows = a.shape[0]
    op = cute.nvgpu.warp.MmaF16BF16Op(BFloat16, Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(op, (4, 2, 1))
    grid_n = (n_cols + BN - 1) // BN
    grid_m = (m_rows + (BM - 1)) // BM
    # Two CTAs per SM (125 registers, 2 accumulators spilled around the K loop;
    # without the bound ptxas used 167 registers, one CTA per SM). A preferred
    # carveout must be given with min_blocks_per_mp > 1, or the DSL asks the
    # driver for the SM's shared memory at compile time (no GPU on the CPU
    # build machine); 100 (% shared) leaves room for 2 x 36 KB.
    _nvfp4_gemm_kernel(a, sa, b, sb, ga, gb, c, m_rows, tiled_mma, n_cols, k_dim).launch(
        grid=[grid_n, grid_m, 1], block=[THREADS, 1, 1], stream=stream,
        min_blocks_per_mp=2, preferred_smem_carveout=100,
    )


USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None
_compiled = {}


def compile_for(k_dim, n_cols):
    """Compile (once) for this (K, N); works without a GPU if CUTE_DSL_ARCH is set."""
    key = (k_dim, n_cols, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        if k_dim % QBLK != 0:
            raise ValueError(f"K must be a multiple of {QBLK}, got {k_dim}")
        m = cute.sym_int32()
        fn = cute.compile(
            _launch,
            make_fake_compact_tensor(Int32, (m, k_dim // 8), stride_order=(1, 0), assumed_align=16),
            make_fake_compact_tensor(Uint8, (m, k_dim // QBLK), stride_order=(1, 0), assumed_align=16),
            make_fake_compact_tensor(Int32, (n_cols, k_dim // 8), stride_order=(1, 0), assumed_align=16),
            make_fake_compact_tensor(Uint8, (n_cols, k_dim // QBLK), stride_order=(1, 0), assumed_align=16),
            make_fake_compact_tensor(Float32, (1,), assumed_align=4),
            make_fake_compact_tensor(Float32, (1,), assumed_align=4),
            make_fake_compact_tensor(Float32, (m, n_cols), stride_order=(1, 0), assumed_align=16),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            n_cols, k_dim,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
        _compiled[key] = fn
    return fn


def _call(fn, tensors):
    if USE_TVM_FFI:
        fn(*tensors)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(tensors[0].device).cuda_stream)
        aligns = (16, 16, 16, 16, 4, 4, 16)
        dynamic_rows = (True, True, False, False, False, False, True)  # the M-sized tensors
        args = []
        for t, al, dyn in zip(tensors, aligns, dynamic_rows):
            ct = from_dlpack(t, assumed_align=al)
            if dyn:
                ct = ct.mark_compact_shape_dynamic(mode=0, stride_order=t.dim_order())
            args.append(ct)
        fn(*args, stream)


def _rows(t):
    """[1, rows, cols] (any 1-byte dtype) -> contiguous, 16-byte aligned uint8 [rows, cols] (a view when possible)."""
    t = t.view(torch.uint8)[0]
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def solve(hidden_states, hidden_states_scale, global_decode_scale_input,
          weight, weight_scale, global_decode_scale_weight):
    assert hidden_states.is_cuda and hidden_states.dtype == torch.float4_e2m1fn_x2
    assert weight.dtype == torch.float4_e2m1fn_x2
    # compute_dtype = promote_types(global dtype, fp32): fp32 for the problem's fp32 globals
    assert global_decode_scale_input.dtype == torch.float32 and global_decode_scale_weight.dtype == torch.float32
    _, m, k_half = hidden_states.shape
    n = weight.shape[1]
    k = k_half * 2
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
    fn = compile_for(k, n)
    # 32-bit in-kernel offsets: split M so that each launch's tensors stay below 2**31 elements.
    chunk = max(BM, (MAX_ELEMS_PER_LAUNCH // max(n, k // 8)) // BM * BM)
    for start in range(0, m, chunk):
        end = min(start + chunk, m)
        _call(fn, (a_q[start:end], a_s[start:end], b_q, b_s, ga, gb, c[start:end]))
    return out
