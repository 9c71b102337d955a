"""Problem 49, DeepSeek-V3 group-limited top-k routing, written in CuTe DSL (nvidia-cutlass-dsl 4.7).

    s = sigmoid(logits) (fp32), b = s + bias
    group score = sum of the 2 best b in each of 8 groups; keep the best 4 groups
    top-8 experts by b inside the kept groups; weights = s / sum(s) * 2.5
    returns (ids int32 [T, 8] ascending, weights fp32 [T, 8] in the same order)

One warp per token, 4 warps per CTA. Lane l owns experts [l*epl, (l+1)*epl)
(epl = experts / 32; 8 for 256 experts = one 16-byte bf16 load), so a group of
experts/8 experts is exactly 4 consecutive lanes:
  1. per-lane top-2 of b, merged over the 4 lanes of a group with 2 butterfly
     shuffles -> group score (m1 + m2, the same fp32 sum as the reference);
  2. the 8 group scores are broadcast (8 shuffles); each lane ranks its own
     group (ties -> lower group id) and keeps it if the rank is < 4;
  3. 8 rounds of warp argmax over the kept b (local scan + 5-step butterfly on
     (value, id), ties -> lower id); the winner's unbiased score is fetched
     from its owner lane and the winner is masked to -inf;
  4. every lane ranks the 8 winners by expert id; lane p < 8 writes output
     slot p (ids and (s / sum) * 2.5).
All selection arithmetic is fp32 with precise exp and division (no fast math).
Compiled once per expert count (row count dynamic) and cached.
"""
import importlib.util

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
ROUTED_SCALING = 2.5
WARPS_PER_CTA = 4
MAX_ROWS_PER_LAUNCH = 2**31 // 1024  # keeps row * experts inside 32-bit offsets


@cute.kernel
def _route_kernel(
    p_x: cute.Pointer,
    p_bias: cute.Pointer,
    p_idx: cute.Pointer,
    p_w: cute.Pointer,
    n_rows: Int32,
    experts: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    epl = experts // 32  # experts per lane; a group is 4 lanes
    neg_inf = Float32(float("-inf"))

    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = tidx % 32
    row = bidx * rows + tidx // 32
    row_ld = cutlass.min(row, n_rows - 1)  # tail warps load the last row, store nothing

    g_x = cute.make_tensor(p_x, cute.make_layout((epl, 32, n_rows), stride=(1, epl, experts)))
    g_b = cute.make_tensor(p_bias, cute.make_layout((epl, 32), stride=(1, epl)))
    g_i = cute.make_tensor(p_idx, cute.make_layout((TOP_K, n_rows), stride=(1, TOP_K)))
    g_w = cute.make_tensor(p_w, cute.make_layout((TOP_K, n_rows), stride=(1, TOP_K)))

    r_x = cute.make_rmem_tensor((epl,), BFloat16)
    r_b = cute.make_rmem_tensor((epl,), Float32)
    r_xf = cute.make_rmem_tensor((epl,), Float32)
    cute.autovec_copy(g_x[None, lane, row_ld], r_x)
    cute.autovec_copy(g_b[None, lane], r_b)
    r_xf.store(r_x.load().to(Float32))

    # 1. sigmoid, biased score, per-lane top-2
    s = []
    b = []
    m1 = neg_inf
    m2 = neg_inf
    for i in cutlass.range_constexpr(epl):
        si = Float32(1.0) / (Float32(1.0) + cute.math.exp(-r_xf[i]))
        bi = si + r_b[i]
        s.append(si)
        b.append(bi)
        m2 = cutlass.max(m2, cutlass.min(m1, bi))
        m1 = cutlass.max(m1, bi)
    # merge top-2 over the 4 lanes of the group
    for off in cutlass.range_constexpr(2):
        o1 = cute.arch.shuffle_sync_bfly(m1, offset=1 << off)
        o2 = cute.arch.shuffle_sync_bfly(m2, offset=1 << off)
        m2 = cutlass.max(cutlass.min(m1, o1), cutlass.max(m2, o2))
        m1 = cutlass.max(m1, o1)
    gs = m1 + m2

    # 2. rank of this lane's group among the 8 groups
    grp = lane // 4
    cnt = Int32(0)
    for j in cutlass.range_constexpr(N_GROUP):
        gj = cute.arch.shuffle_sync(gs, offset=4 * j)
        better = (gj > gs) | ((gj == gs) & (grp > j))
        cnt = cnt + (Int32(1) if better else Int32(0))
    kept = cnt < TOPK_GROUP
    c = []
    for i in cutlass.range_constexpr(epl):
        c.append(b[i] if kept else neg_inf)

    # 3. top-8 by iterative warp argmax
    base = lane * epl
    sel_i = []
    sel_s = []
    for r in cutlass.range_constexpr(TOP_K):
        bv = c[0]
        bi = base
        bs = s[0]
        for i in cutlass.range_constexpr(1, epl):
            take = c[i] > bv
            bv = c[i] if take else bv
            bi = (base + i) if take else bi
            bs = s[i] if take else bs
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(bv, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(bi, offset=16 >> k)
            take = (ov > bv) | ((ov == bv) & (oi < bi))
            bv = ov if take else bv
            bi = oi if take else bi
        win = bi
        win_s = cute.arch.shuffle_sync(bs, offset=win // epl)  # owner lane's local best
        sel_i.append(win)
        sel_s.append(win_s)
        for i in cutlass.range_constexpr(epl):
            c[i] = neg_inf if (base + i == win) else c[i]

    # 4. ascending expert id; lane p < 8 writes slot p
    tot = ((sel_s[0] + sel_s[1]) + (sel_s[2] + sel_s[3])) + ((sel_s[4] + sel_s[5]) + (sel_s[6] + sel_s[7]))
    out_i = Int32(0)
    out_s = Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        rank = Int32(0)
        for j in cutlass.range_constexpr(TOP_K):
            if cutlass.const_expr(j != r):
                rank = rank + (Int32(1) if sel_i[j] < sel_i[r] else Int32(0))
        mine = rank == lane
        out_i = sel_i[r] if mine else out_i
        out_s = sel_s[r] if mine else out_s
    w = (out_s / tot) * Float32(ROUTED_SCALING)
    if (row < n_rows) & (lane < TOP_K):
        g_i[lane, row] = out_i
        g_w[lane, row] = w


@cute.jit
def _launch(
    x: cute.Tensor,
    bias: cute.Tensor,
    idx: cute.Tensor,
    w: cute.Tensor,
    stream: cuda.CUstream,
    experts: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    n_rows = x.shape[0]
    grid = (n_rows + (rows - 1)) // rows
    _route_kernel(x.iterator, bias.iterator, idx.iterator, w.iterator, n_rows, experts, rows).launch(
        grid=[grid, 1, 1], block=[32 * rows, 1, 1], stream=stream
    )


# TVM-FFI calling convention (torch tensors in, current torch stream), as in
# solutions/28 and 36; plain from_dlpack + explicit stream when tvm_ffi is absent.
USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None

_compiled = {}


def compile_for(experts):
    """Compile (once) for this expert count; works without a GPU if CUTE_DSL_ARCH is set."""
    key = (experts, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        if experts % 32 != 0 or not (64 <= experts <= 1024):
            raise ValueError(f"experts must be a multiple of 32 in [64, 1024], got {experts}")
        epl = experts // 32
        align = min(16, 2 * epl)
        n = cute.sym_int32()  # shared by logits and outputs
        fn = cute.compile(
            _launch,
            make_fake_compact_tensor(BFloat16, (n, experts), stride_order=(1, 0), assumed_align=align),
            make_fake_compact_tensor(Float32, (experts,), assumed_align=min(16, 4 * epl)),
            make_fake_compact_tensor(Int32, (n, TOP_K), stride_order=(1, 0), assumed_align=16),
            make_fake_compact_tensor(Float32, (n, TOP_K), stride_order=(1, 0), assumed_align=16),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            experts, WARPS_PER_CTA,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
        _compiled[key] = fn
    return fn


def _plain_tensor(t, align):
    return from_dlpack(t, assumed_align=align).mark_compact_shape_dynamic(
        mode=0, stride_order=t.dim_order()
    )


def _call(fn, x, bias, idx, w, experts):
    if USE_TVM_FFI:
        fn(x, bias, idx, w)
    else:
        epl = experts // 32
        stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
        fn(_plain_tensor(x, min(16, 2 * epl)), _plain_tensor(bias, min(16, 4 * epl)),
           _plain_tensor(idx, 16), _plain_tensor(w, 16), stream)


def _prep(t):
    """Dense and 16-byte aligned (the kernel's vector loads assume it); copy only if not."""
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def solve(router_logits, correction_bias):
    assert router_logits.dtype == torch.bfloat16 and correction_bias.dtype == torch.float32
    assert router_logits.is_cuda
    tokens, experts = router_logits.shape
    x = _prep(router_logits)
    bias = _prep(correction_bias)
    idx = torch.empty((tokens, TOP_K), dtype=torch.int32, device=x.device)
    w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=x.device)
    if tokens > 0:
        fn = compile_for(experts)
        for start in range(0, tokens, MAX_ROWS_PER_LAUNCH):
            end = min(start + MAX_ROWS_PER_LAUNCH, tokens)
            if start == 0 and end == tokens:
                _call(fn, x, bias, idx, w, experts)
            else:
                _call(fn, x[start:end], bias, idx[start:end], w[start:end], experts)
    return idx, w
