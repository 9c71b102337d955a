"""Problem 47, ERNIE 4.5 MoE block (softmax router + correction bias, routed and shared SwiGLU experts), in TIRx (TVM 0.27).

    logits = x Wg^T (fp32 [T, E], returned), p = softmax(logits), top-8 of p + bias,
    w = p_sel / max(sum p_sel, norm_min)
    out = bf16( shared_swiglu(x) + sum over chosen experts (ascending id) of w * swiglu_e(x) )

Launches, all on torch's current stream (tvm-ffi environment stream):
  1. router kernel (SIMT fp32): logits [T, E] = x (bf16, exact in fp32) . Wg (fp32) with
     fp32 FMAs; 32 tokens x all experts per CTA, 64-wide K tiles staged in shared memory
     (register prefetch of the next tile). Each output is summed in three levels (a
     64-long run per K tile, eight tiles, then the whole row) so the rounding error stays
     near 1e-7 instead of the ~1e-5 of one 8192-long running sum: the logits are an
     output graded against fp32 cuBLAS at eps(fp32) * max|logit| scale.
  2. route kernel: one warp per token; softmax (warp max / sum; __expf under TVM's
     --use_fast_math, IEEE division through PTX div.rn), + bias, 8 rounds of warp argmax
     (ties -> lower id), the 8 winners sorted by expert id, weights = p / max(sum of the
     8 p in selection order, norm_min) kept in fp32 (the reference rounds them to bf16;
     fp32 is closer to the float64 anchor).
  3. bookkeeping in torch on small int32 arrays (no host sync): stable argsort of the
     T*8 (token, slot) pairs by expert, per-expert counts (scatter_add), a tile table
     (expert, first row, end row) of BM-row tiles that never cross an expert boundary
     (upper bound ceil(T*8/BM) + E tiles; unused ones empty), the gathered token of
     each sorted row, its weight, and the inverse permutation pos[t, slot] -> sorted row.
  4. routed gate and up: two grouped GEMMs (mode 0), A rows gathered from x by token,
     B = the tile's expert's [I, H] slab of gate_proj / up_proj -> fp32 [T*8, I] each;
     SwiGLU kernel -> act bf16 [T*8, I].
  5. routed down: grouped GEMM (mode 1), A = act (sorted rows), B = expert's [H, I]
     slab of down_proj, epilogue multiplies by the row's routing weight -> Y fp32 [T*8, H].
  6. shared expert: dense gate and up GEMMs (mode 0) -> fp32 [T, S] each, SwiGLU -> bf16
     [T, S], and the down GEMM (mode 2) whose epilogue adds, per token, the 8 rows
     Y[pos[t, 0..7]] in ascending expert order onto the shared fp32 result and rounds
     once to bf16. Deterministic: no atomics.

GEMM kernel (one source, compiled per (K, N, mode)): CTA tile 128 x 128 x 64, 256
threads = 8 warps as 2 (M) x 4 (N), each warp 64 x 32 = 4 x 4 mma.sync.m16n8k16
(bf16 x bf16 -> fp32, fp32 accumulation). Operands are viewed as 32-bit words
(two bf16). Each thread loads four 16-byte chunks of A and of B per K tile into
registers; the next tile's global loads are issued before the current tile's MMAs
(register prefetch, one shared buffer of 2 x 18 KiB with a 36-word padded row stride,
conflict-free fragment loads). Rows past a tile's end and columns past N read
clamped addresses and are not stored; a K that is not a multiple of 64 (smoke
sizes) is zero-filled (K must be a multiple of 8).

Numerics vs the reference (which rounds every projection, the SiLU, the product,
the weighted expert output and each step of the 8-term expert sum to bf16): here
bf16 products are exact in fp32 and accumulate in fp32; the only roundings are the
SwiGLU activation (fp32 silu(g) * u, __expf + IEEE division) to bf16 before the down
GEMMs, as in the reference, and the final bf16 output, so the error vs the float64
anchor is below the reference's own. Routing: the fp32 probabilities differ from the
reference's by ~1e-6 (fast exp), far inside the 1e-4 selection margin that
make_inputs guarantees.
Limits: hidden and intermediates multiples of 8, experts a multiple of 16 (at most
256); every tensor below 2**31 elements (32-bit indexing: the visible expert weights
are 1.88e9 elements). Kernels compiled once per static shape set and cached; token
count and tile count are symbolic.

Expected speed (not yet measured on a GPU): about 14.4 TFLOP of bf16 MMA work for
the visible workload (plus a few % of partially filled expert tiles); at the ~210
TFLOP/s this mma.sync GEMM reached on the earlier definition of problem 47 that is
roughly 70 ms, against an eager reference of bf16 cuBLAS GEMMs per expert (64
gathers, 192 GEMMs, index_add), likely faster. The router adds about 2 GFMA of
fp32 SIMT work (~0.2-0.5 ms). Memory traffic besides the weights (11.6 GB, read
about once thanks to L2 reuse across a tile column): gate/up fp32 1.9 GB and
Y fp32 2.1 GB, each written and read.
"""
import torch
import tvm
from tvm.script import tirx as T

TOP_K = 8
BM = 128
BN = 128
BK = 64
THREADS = 256
WARPS_M = 2
WARPS_N = 4
WM = BM // WARPS_M  # 64
WN = BN // WARPS_N  # 32
MT = WM // 16  # 4
NT = WN // 8  # 4
LDW = BK // 2 + 4  # 36 words per shared row
CPR = BK // 8  # 16-byte chunks per tile row: 8
CH = BM * CPR // THREADS  # chunks per thread per operand: 4
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
FULL = 0xFFFFFFFF
ROUTE_WARPS = 4
ACT_THREADS = 256
# router (SIMT fp32): RT tokens x all experts per CTA, K tiles of RKT
RT = 32
RKT = 64
RLD = RKT + 1  # fp32 shared row stride: 16 consecutive expert rows hit 16 banks
R_THREADS = 256
R_MID = 8  # K tiles per middle-level partial sum

_CACHE = {}


def make_gemm(k_dim, n_cols, mode):
    """C = A[rows] . B[e*N + n]^T per 128-row tile of one expert.
    mode 0: C fp32 = acc; mode 1: C fp32 = acc * w[row];
    mode 2: C bf16 = bf16(acc + Y[pos[row, 0]] + ... + Y[pos[row, 7]])."""
    assert k_dim % 8 == 0 and n_cols % 2 == 0
    kw = k_dim // 2
    kt_n = (k_dim + BK - 1) // BK
    k_full = k_dim % BK == 0
    grid_n = (n_cols + BN - 1) // BN
    n_full = n_cols % BN == 0
    c_dtype = "bfloat16" if mode == 2 else "float32"

    @T.prim_func
    def gemm(a_ptr: T.handle, ai_ptr: T.handle, b_ptr: T.handle, te_ptr: T.handle, t0_ptr: T.handle,
             t1_ptr: T.handle, c_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle, p_ptr: T.handle):
        a_rows = T.int32()
        n_idx = T.int32()
        b_rows = T.int32()
        n_tiles = T.int32()
        c_rows = T.int32()
        n_w = T.int32()
        y_rows = T.int32()
        n_p = T.int32()
        A = T.match_buffer(a_ptr, (a_rows, kw), "int32")
        AI = T.match_buffer(ai_ptr, (n_idx,), "int32")
        B = T.match_buffer(b_ptr, (b_rows, kw), "int32")
        TE = T.match_buffer(te_ptr, (n_tiles,), "int32")
        T0 = T.match_buffer(t0_ptr, (n_tiles,), "int32")
        T1 = T.match_buffer(t1_ptr, (n_tiles,), "int32")
        C = T.match_buffer(c_ptr, (c_rows, n_cols), c_dtype)
        WR = T.match_buffer(w_ptr, (n_w,), "float32")
        Y = T.match_buffer(y_ptr, (y_rows, n_cols), "float32")
        P = T.match_buffer(p_ptr, (n_p,), "int32")
        T.device_entry()
        bx, by = T.cta_id([grid_n, n_tiles])
        tx = T.thread_id([THREADS])

        s_a = T.alloc_shared((BM * LDW,), "int32")
        s_b = T.alloc_shared((BN * LDW,), "int32")
        acc = T.alloc_local((MT * NT * 4,), "float32")
        af = T.alloc_local((MT * 4,), "uint32")
        bf = T.alloc_local((NT * 2,), "uint32")
        ra = T.alloc_local((CH * 4,), "int32")
        rb = T.alloc_local((CH * 4,), "int32")
        pr = T.alloc_local((TOP_K,), "int32")
        cv = T.alloc_local((1,), "float32")

        warp: T.let = tx // 32
        lane: T.let = tx % 32
        g: T.let = lane // 4
        t: T.let = lane % 4
        wm: T.let = warp // WARPS_N
        wn: T.let = warp % WARPS_N
        e: T.let = TE[by]
        m0: T.let = T0[by]
        m1: T.let = T1[by]

        if m0 < m1:
            for i in T.unroll(MT * NT * 4):
                acc[i] = T.float32(0)
            for kt in T.serial(kt_n + 1):
                # registers hold tile kt-1: publish it to shared memory
                if kt > 0:
                    for j in T.unroll(CH):
                        for p in T.vectorized(4):
                            s_a[((tx + j * THREADS) // CPR) * LDW + ((tx + j * THREADS) % CPR) * 4 + p] = ra[j * 4 + p]
                        for p in T.vectorized(4):
                            s_b[((tx + j * THREADS) // CPR) * LDW + ((tx + j * THREADS) % CPR) * 4 + p] = rb[j * 4 + p]
                    T.cuda.cta_sync()
                # issue the global loads of tile kt (clamped; the last one is redundant)
                for j in T.unroll(CH):
                    arow: T.let = AI[T.min(m0 + (tx + j * THREADS) // CPR, m1 - 1)]
                    brow: T.let = e * n_cols + T.min(bx * BN + (tx + j * THREADS) // CPR, n_cols - 1)
                    if k_full:
                        for p in T.vectorized(4):
                            ra[j * 4 + p] = A[arow, T.min(kt, kt_n - 1) * (BK // 2) + ((tx + j * THREADS) % CPR) * 4 + p]
                        for p in T.vectorized(4):
                            rb[j * 4 + p] = B[brow, T.min(kt, kt_n - 1) * (BK // 2) + ((tx + j * THREADS) % CPR) * 4 + p]
                    else:
                        kc: T.let = T.min(kt, kt_n - 1) * (BK // 2) + ((tx + j * THREADS) % CPR) * 4
                        for p in T.unroll(4):
                            ra[j * 4 + p] = T.Select(kc < kw, A[arow, T.min(kc, kw - 4) + p], 0)
                            rb[j * 4 + p] = T.Select(kc < kw, B[brow, T.min(kc, kw - 4) + p], 0)
                # tensor-core MMAs on tile kt-1
                if kt > 0:
                    for ks in T.unroll(BK // 16):
                        for i in T.unroll(MT):
                            af[i * 4 + 0] = T.reinterpret("uint32", s_a[(wm * WM + i * 16 + g) * LDW + ks * 8 + t])
                            af[i * 4 + 1] = T.reinterpret("uint32", s_a[(wm * WM + i * 16 + g + 8) * LDW + ks * 8 + t])
                            af[i * 4 + 2] = T.reinterpret("uint32", s_a[(wm * WM + i * 16 + g) * LDW + ks * 8 + t + 4])
                            af[i * 4 + 3] = T.reinterpret("uint32", s_a[(wm * WM + i * 16 + g + 8) * LDW + ks * 8 + t + 4])
                        for jn in T.unroll(NT):
                            bf[jn * 2 + 0] = T.reinterpret("uint32", s_b[(wn * WN + jn * 8 + g) * LDW + ks * 8 + t])
                            bf[jn * 2 + 1] = T.reinterpret("uint32", s_b[(wn * WN + jn * 8 + g) * LDW + ks * 8 + t + 4])
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

            # epilogue: rows of this tile only, columns below N
            for i in T.unroll(MT):
                for h in T.unroll(2):
                    row: T.let = m0 + wm * WM + i * 16 + g + h * 8
                    if row < m1:
                        if mode == 2:
                            for s in T.unroll(TOP_K):
                                pr[s] = P[row * TOP_K + s]
                        for jn in T.unroll(NT):
                            col: T.let = bx * BN + wn * WN + jn * 8 + t * 2
                            if n_full or col < n_cols:
                                for q in T.unroll(2):
                                    if mode == 0:
                                        C[row, col + q] = acc[(i * NT + jn) * 4 + h * 2 + q]
                                    elif mode == 1:
                                        C[row, col + q] = acc[(i * NT + jn) * 4 + h * 2 + q] * WR[row]
                                    else:
                                        cv[0] = acc[(i * NT + jn) * 4 + h * 2 + q]
                                        for s in T.unroll(TOP_K):
                                            cv[0] = cv[0] + Y[pr[s], col + q]
                                        C[row, col + q] = T.bfloat16(cv[0])

    return gemm


def make_router(experts, k_dim):
    """logits[t, e] = sum_k x[t, k] * Wg[e, k] in fp32. Thread tx owns tokens
    2 * (tx // 16) + {0, 1} and experts tx % 16 + 16 * j."""
    if experts % 16 or experts > 256 or k_dim % 8:
        raise ValueError("experts must be a multiple of 16 (at most 256) and hidden a multiple of 8")
    ept = experts // 16
    kt_n = (k_dim + RKT - 1) // RKT
    k_full = k_dim % RKT == 0

    @T.prim_func
    def router(x_ptr: T.handle, w_ptr: T.handle, l_ptr: T.handle):
        n = T.int32()
        X = T.match_buffer(x_ptr, (n, k_dim), "bfloat16")
        W = T.match_buffer(w_ptr, (experts, k_dim), "float32")
        L = T.match_buffer(l_ptr, (n, experts), "float32")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(n, RT)])
        tx = T.thread_id([R_THREADS])

        s_x = T.alloc_shared((RT * RLD,), "float32")
        s_w = T.alloc_shared((experts * RLD,), "float32")
        rx = T.alloc_local((8,), "bfloat16")
        rw = T.alloc_local((4 * ept,), "float32")
        acc_t = T.alloc_local((2 * ept,), "float32")  # this K tile
        acc_m = T.alloc_local((2 * ept,), "float32")  # R_MID K tiles
        acc_o = T.alloc_local((2 * ept,), "float32")  # the whole row

        tg: T.let = tx // 16
        eg: T.let = tx % 16
        xrow: T.let = T.min(bx * RT + tx // 8, n - 1)
        for i in T.unroll(2 * ept):
            acc_m[i] = T.float32(0)
            acc_o[i] = T.float32(0)
        for kt in T.serial(kt_n + 1):
            # registers hold tile kt-1: publish it to shared memory
            if kt > 0:
                for q in T.unroll(8):
                    s_x[(tx // 8) * RLD + (tx % 8) * 8 + q] = T.float32(rx[q])
                for j in T.unroll(ept):
                    for q in T.unroll(4):
                        s_w[((tx + j * R_THREADS) // 16) * RLD + ((tx + j * R_THREADS) % 16) * 4 + q] = rw[j * 4 + q]
                T.cuda.cta_sync()
            # issue the global loads of tile kt (clamped; the last one is redundant)
            if k_full:
                for q in T.vectorized(8):
                    rx[q] = X[xrow, T.min(kt, kt_n - 1) * RKT + (tx % 8) * 8 + q]
                for j in T.unroll(ept):
                    for q in T.vectorized(4):
                        rw[j * 4 + q] = W[(tx + j * R_THREADS) // 16,
                                          T.min(kt, kt_n - 1) * RKT + ((tx + j * R_THREADS) % 16) * 4 + q]
            else:
                kc: T.let = T.min(kt, kt_n - 1) * RKT + (tx % 8) * 8
                for q in T.unroll(8):
                    rx[q] = T.Select(kc < k_dim, X[xrow, T.min(kc, k_dim - 8) + q], T.bfloat16(0))
                for j in T.unroll(ept):
                    kw: T.let = T.min(kt, kt_n - 1) * RKT + ((tx + j * R_THREADS) % 16) * 4
                    for q in T.unroll(4):
                        rw[j * 4 + q] = T.Select(kw < k_dim, W[(tx + j * R_THREADS) // 16, T.min(kw, k_dim - 4) + q],
                                                 T.float32(0))
            # FMAs on tile kt-1, then the three-level sums
            if kt > 0:
                for i in T.unroll(2 * ept):
                    acc_t[i] = T.float32(0)
                for kk in T.unroll(RKT):
                    for i in T.unroll(2):
                        for j in T.unroll(ept):
                            acc_t[i * ept + j] = acc_t[i * ept + j] + s_x[(2 * tg + i) * RLD + kk] * s_w[(eg + 16 * j) * RLD + kk]
                for i in T.unroll(2 * ept):
                    acc_m[i] = acc_m[i] + acc_t[i]
                if (kt - 1) % R_MID == R_MID - 1:
                    for i in T.unroll(2 * ept):
                        acc_o[i] = acc_o[i] + acc_m[i]
                        acc_m[i] = T.float32(0)
                T.cuda.cta_sync()

        for i in T.unroll(2):
            if bx * RT + 2 * tg + i < n:
                for j in T.unroll(ept):
                    L[bx * RT + 2 * tg + i, eg + 16 * j] = acc_o[i * ept + j] + acc_m[i * ept + j]

    return router


def make_route(experts, norm_min):
    """One warp per token: softmax, top-8 of p + bias, ascending ids, renormalised weights."""
    if experts % 32 == 0:
        epl = experts // 32
    elif experts < 32:
        epl = 1
    else:
        raise ValueError(f"experts must be < 32 or a multiple of 32, got {experts}")
    if experts <= TOP_K:
        raise ValueError("need more than 8 experts")
    rows = ROUTE_WARPS
    neg_inf = float("-inf")

    @T.prim_func
    def route(l_ptr: T.handle, b_ptr: T.handle, i_ptr: T.handle, w_ptr: T.handle):
        n = T.int32()
        L = T.match_buffer(l_ptr, (n, experts), "float32")
        Bias = T.match_buffer(b_ptr, (experts,), "float32")
        I = T.match_buffer(i_ptr, (n, TOP_K), "int32")
        W = T.match_buffer(w_ptr, (n, TOP_K), "float32")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(n, rows)])
        tx = T.thread_id([32 * rows])
        s = T.alloc_local((epl,), "float32")
        c = T.alloc_local((epl,), "float32")
        sel_i = T.alloc_local((TOP_K,), "int32")
        sel_s = T.alloc_local((TOP_K,), "float32")
        lane: T.let = tx % 32
        row: T.let = bx * rows + tx // 32
        row_ld: T.let = T.min(row, n - 1)
        # softmax over the row: lanes past the experts hold -inf (exp -> 0)
        for i in T.unroll(epl):
            c[i] = T.if_then_else(lane * epl + i < experts, L[row_ld, T.min(lane * epl + i, experts - 1)],
                                  T.float32(neg_inf))
        mx: T.f32 = c[0]
        for i in T.unroll(epl - 1):
            mx = T.max(mx, c[i + 1])
        for k in T.unroll(5):
            mx = T.max(mx, T.cuda.__shfl_xor_sync(T.uint32(FULL), mx, 16 >> k, 32))
        tot_e: T.f32 = T.float32(0)
        for i in T.unroll(epl):
            s[i] = T.exp(c[i] - mx)
            tot_e = tot_e + s[i]
        for k in T.unroll(5):
            tot_e = tot_e + T.cuda.__shfl_xor_sync(T.uint32(FULL), tot_e, 16 >> k, 32)
        for i in T.unroll(epl):
            T.ptx.div.rn.f32(s[i], s[i], tot_e)
            c[i] = T.if_then_else(lane * epl + i < experts, s[i] + Bias[T.min(lane * epl + i, experts - 1)],
                                  T.float32(neg_inf))
        # 8 rounds of warp argmax on p + bias (ties -> lower id)
        for r in T.unroll(TOP_K):
            bv: T.f32 = c[0]
            bi: T.i32 = lane * epl
            bs: T.f32 = s[0]
            for i in T.unroll(epl - 1):
                take: T.let = c[i + 1] > bv
                bi = T.if_then_else(take, lane * epl + i + 1, bi)
                bs = T.if_then_else(take, s[i + 1], bs)
                bv = T.if_then_else(take, c[i + 1], bv)
            for k in T.unroll(5):
                ov: T.f32 = T.cuda.__shfl_xor_sync(T.uint32(FULL), bv, 16 >> k, 32)
                oi: T.i32 = T.cuda.__shfl_xor_sync(T.uint32(FULL), bi, 16 >> k, 32)
                take2: T.let = T.Or(ov > bv, T.And(ov == bv, oi < bi))
                bv = T.if_then_else(take2, ov, bv)
                bi = T.if_then_else(take2, oi, bi)
            sel_i[r] = bi
            sel_s[r] = T.cuda.__shfl_sync(T.uint32(FULL), bs, bi // epl, 32)
            for i in T.unroll(epl):
                c[i] = T.if_then_else(lane * epl + i == bi, T.float32(neg_inf), c[i])
        tot: T.f32 = sel_s[0]
        for r in T.unroll(TOP_K - 1):
            tot = tot + sel_s[r + 1]
        tot = T.max(tot, T.float32(norm_min))
        # lane r writes the r-th smallest chosen id and its weight
        out_i: T.i32 = 0
        out_s: T.f32 = T.float32(0)
        for r in T.unroll(TOP_K):
            rank: T.i32 = 0
            for j in T.unroll(TOP_K):
                rank = rank + T.if_then_else(sel_i[j] < sel_i[r], 1, 0)
            out_i = T.if_then_else(rank == lane, sel_i[r], out_i)
            out_s = T.if_then_else(rank == lane, sel_s[r], out_s)
        q: T.f32 = T.float32(0)
        T.ptx.div.rn.f32(q, out_s, tot)
        if row < n and lane < TOP_K:
            I[row, lane] = out_i
            W[row, lane] = q

    return route


def make_swiglu(inter):
    """act[r, j] = bf16(silu(g[r, j]) * u[r, j]), fp32 math, 8 outputs per thread."""
    assert inter % 8 == 0
    cpr = inter // 8

    @T.prim_func
    def swiglu(g_ptr: T.handle, u_ptr: T.handle, a_ptr: T.handle):
        n = T.int32()
        Hg = T.match_buffer(g_ptr, (n, inter), "float32")
        Hu = T.match_buffer(u_ptr, (n, inter), "float32")
        Aa = T.match_buffer(a_ptr, (n, inter), "bfloat16")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(n * cpr, ACT_THREADS)])
        tx = T.thread_id([ACT_THREADS])
        gv = T.alloc_local((8,), "float32")
        uv = T.alloc_local((8,), "float32")
        ov = T.alloc_local((8,), "bfloat16")
        sg = T.alloc_local((1,), "float32")
        idx: T.let = bx * ACT_THREADS + tx
        if idx < n * cpr:
            for hv in T.unroll(2):
                for p in T.vectorized(4):
                    gv[hv * 4 + p] = Hg[idx // cpr, (idx % cpr) * 8 + hv * 4 + p]
                for p in T.vectorized(4):
                    uv[hv * 4 + p] = Hu[idx // cpr, (idx % cpr) * 8 + hv * 4 + p]
            for p in T.unroll(8):
                T.ptx.div.rn.f32(sg[0], gv[p], T.float32(1) + T.exp(-gv[p]))
                ov[p] = T.bfloat16(sg[0] * uv[p])
            for p in T.vectorized(8):
                Aa[idx // cpr, (idx % cpr) * 8 + p] = ov[p]

    return swiglu


def target_for(device=None):
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_prim(prim, target):
    mod = tvm.IRModule({"main": prim})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(key, maker, device):
    k = key + (device.index,)
    fn = _CACHE.get(k)
    if fn is None:
        fn = compile_prim(maker(), target_for(device))["main"]
        _CACHE[k] = fn
    return fn


def _gemm(k_dim, n_cols, mode, device):
    return _kernel(("gemm", k_dim, n_cols, mode), lambda: make_gemm(k_dim, n_cols, mode), device)


def _prep(t):
    """Dense and 16-byte aligned (the kernels' vector loads assume it); copy only if not."""
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def dense_plan(tokens, device):
    """Tile table (expert 0) and identity row index for the shared-expert GEMMs."""
    key = ("dense", tokens, device)
    plan = _CACHE.get(key)
    if plan is None:
        j = torch.arange((tokens + BM - 1) // BM, device=device, dtype=torch.int64)
        m0 = j * BM
        m1 = torch.clamp(m0 + BM, max=tokens)
        tiles = torch.stack([torch.zeros_like(j), m0, m1]).to(torch.int32).contiguous()
        idx = torch.arange(tokens, device=device, dtype=torch.int32)
        plan = (tiles, idx)
        _CACHE[key] = plan
    return plan


def routed_plan(top_i, top_w, experts):
    """Group the (token, slot) pairs by expert without a host sync.
    Returns tiles [3, n_tiles] (expert, first sorted row, end row), the token of each
    sorted row, its routing weight and pos [T*8] (sorted row of pair t*8+slot)."""
    dev = top_i.device
    rows = top_i.numel()
    flat = top_i.reshape(-1).to(torch.int64)
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(experts, dtype=torch.int64, device=dev).scatter_add_(0, flat, torch.ones_like(flat))
    seg_end = torch.cumsum(counts, 0)
    seg_beg = seg_end - counts
    ntile = (counts + BM - 1) // BM
    tile_end = torch.cumsum(ntile, 0)
    tile_beg = tile_end - ntile
    max_tiles = (rows + BM - 1) // BM + experts
    j = torch.arange(max_tiles, device=dev, dtype=torch.int64)
    ex = torch.searchsorted(tile_end, j, right=True)
    valid = ex < experts
    exc = torch.clamp(ex, max=experts - 1)
    m0 = seg_beg[exc] + (j - tile_beg[exc]) * BM
    m1 = torch.minimum(m0 + BM, seg_end[exc])
    m0 = torch.where(valid, m0, 0)
    m1 = torch.where(valid, m1, 0)
    tiles = torch.stack([exc, m0, m1]).to(torch.int32).contiguous()
    a_idx = (order // TOP_K).to(torch.int32)
    wrow = top_w.reshape(-1)[order].contiguous()
    pos = torch.empty(rows, dtype=torch.int32, device=dev)
    pos[order] = torch.arange(rows, dtype=torch.int32, device=dev)
    return tiles, a_idx, wrow, pos


def solve(hidden_states, gate_weight, e_score_correction_bias, gate_proj, up_proj, down_proj,
          shared_gate_proj, shared_up_proj, shared_down_proj, norm_min):
    shape = hidden_states.shape
    hidden = shape[-1]
    experts = gate_weight.shape[0]
    inter = gate_proj.shape[1]
    sinter = shared_gate_proj.shape[0]
    dev = hidden_states.device
    tokens = hidden_states.numel() // hidden
    f32 = torch.float32
    if hidden % 8 or inter % 8 or sinter % 8:
        raise ValueError("hidden and intermediate sizes must be multiples of 8")
    rows = tokens * TOP_K
    for n in (rows * hidden, rows * inter, gate_proj.numel(), down_proj.numel()):
        if n >= 2**31:
            raise ValueError("tensors must stay below 2**31 elements (32-bit indexing)")
    out = torch.empty((tokens, hidden), dtype=torch.bfloat16, device=dev)
    logits = torch.empty((tokens, experts), dtype=f32, device=dev)
    if tokens == 0:
        return out.reshape(shape), logits
    x = _prep(hidden_states.reshape(tokens, hidden))
    xw = x.view(torch.int32)
    gw = _prep(gate_weight.to(f32))
    bias = _prep(e_score_correction_bias.to(f32).reshape(experts))
    wg = _prep(gate_proj).reshape(experts * inter, hidden).view(torch.int32)
    wu = _prep(up_proj).reshape(experts * inter, hidden).view(torch.int32)
    wd = _prep(down_proj).reshape(experts * hidden, inter).view(torch.int32)
    sg = _prep(shared_gate_proj).view(torch.int32)
    su = _prep(shared_up_proj).view(torch.int32)
    sd = _prep(shared_down_proj).view(torch.int32)
    dummy_f = torch.empty(4, dtype=f32, device=dev)
    dummy_i = torch.empty(4, dtype=torch.int32, device=dev)

    def dummy_y(n_cols):  # Y is [rows, N] in the signature even where unused
        return torch.empty((1, n_cols), dtype=f32, device=dev)

    # 1-2. router logits (an output) and routing
    _kernel(("router", experts, hidden), lambda: make_router(experts, hidden), dev)(x, gw, logits)
    top_i = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    top_w = torch.empty((tokens, TOP_K), dtype=f32, device=dev)
    nm = float(norm_min)
    _kernel(("route", experts, nm), lambda: make_route(experts, nm), dev)(logits, bias, top_i, top_w)
    # 3. grouping
    tiles, a_idx, wrow, pos = routed_plan(top_i, top_w, experts)
    # 4. routed gate and up + SwiGLU
    hg = torch.empty((rows, inter), dtype=f32, device=dev)
    hu = torch.empty((rows, inter), dtype=f32, device=dev)
    _gemm(hidden, inter, 0, dev)(xw, a_idx, wg, tiles[0], tiles[1], tiles[2], hg, dummy_f, dummy_y(inter), dummy_i)
    _gemm(hidden, inter, 0, dev)(xw, a_idx, wu, tiles[0], tiles[1], tiles[2], hu, dummy_f, dummy_y(inter), dummy_i)
    act = torch.empty((rows, inter), dtype=torch.bfloat16, device=dev)
    _kernel(("swiglu", inter), lambda: make_swiglu(inter), dev)(hg, hu, act)
    del hg, hu
    # 5. routed down, weighted
    y = torch.empty((rows, hidden), dtype=f32, device=dev)
    ridx = dense_plan(rows, dev)[1]
    _gemm(inter, hidden, 1, dev)(act.view(torch.int32), ridx, wd, tiles[0], tiles[1], tiles[2], y, wrow,
                                 dummy_y(hidden), dummy_i)
    del act
    # 6. shared expert, combined with the routed rows in the down epilogue
    dtiles, didx = dense_plan(tokens, dev)
    hsg = torch.empty((tokens, sinter), dtype=f32, device=dev)
    hsu = torch.empty((tokens, sinter), dtype=f32, device=dev)
    _gemm(hidden, sinter, 0, dev)(xw, didx, sg, dtiles[0], dtiles[1], dtiles[2], hsg, dummy_f, dummy_y(sinter), dummy_i)
    _gemm(hidden, sinter, 0, dev)(xw, didx, su, dtiles[0], dtiles[1], dtiles[2], hsu, dummy_f, dummy_y(sinter), dummy_i)
    acts = torch.empty((tokens, sinter), dtype=torch.bfloat16, device=dev)
    _kernel(("swiglu", sinter), lambda: make_swiglu(sinter), dev)(hsg, hsu, acts)
    _gemm(sinter, hidden, 2, dev)(acts.view(torch.int32), didx, sd, dtiles[0], dtiles[1], dtiles[2], out, dummy_f,
                                  y, pos)
    return out.reshape(shape), logits
