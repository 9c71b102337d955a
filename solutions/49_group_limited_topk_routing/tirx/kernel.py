"""Problem 49, DeepSeek-V3 group-limited top-k routing, written in TIRx (Apache TVM 0.27).

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
TVM compiles CUDA with --use_fast_math, so the two divisions are written as
PTX div.rn.f32 (IEEE, like torch); exp is the fast __expf, whose error is
damped by the sigmoid and far below the selection margin (1e-3).
Compiled once per expert count (row count `n` symbolic) and cached.
"""
import torch
import tvm
from tvm.script import tirx as T

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
ROUTED_SCALING = 2.5
WARPS_PER_CTA = 4
FULL = 0xFFFFFFFF

_CACHE = {}


def make_prim_func(experts):
    """The TIRx kernel for one expert count; the token count `n` is symbolic."""
    if experts % 32 != 0 or not (64 <= experts <= 1024):
        raise ValueError(f"experts must be a multiple of 32 in [64, 1024], got {experts}")
    epl = experts // 32          # experts per lane; a group of experts/8 is 4 lanes
    bvec = min(epl, 4)           # fp32 bias: 16-byte vectors
    nb = epl // bvec
    rows = WARPS_PER_CTA
    threads = 32 * rows
    neg_inf = float("-inf")

    @T.prim_func
    def group_topk_route(x_ptr: T.handle, b_ptr: T.handle, i_ptr: T.handle, w_ptr: T.handle):
        n = T.int32()
        X = T.match_buffer(x_ptr, (n, experts), "bfloat16")
        Bias = T.match_buffer(b_ptr, (experts,), "float32")
        I = T.match_buffer(i_ptr, (n, TOP_K), "int32")
        W = T.match_buffer(w_ptr, (n, TOP_K), "float32")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(n, rows)])
        tx = T.thread_id([threads])
        xv = T.alloc_local((epl,), "bfloat16")
        bv_ = T.alloc_local((epl,), "float32")
        s = T.alloc_local((epl,), "float32")
        c = T.alloc_local((epl,), "float32")
        sel_i = T.alloc_local((TOP_K,), "int32")
        sel_s = T.alloc_local((TOP_K,), "float32")
        lane: T.let = tx % 32
        row: T.let = bx * rows + tx // 32
        row_ld: T.let = T.min(row, n - 1)  # tail warps load the last row, store nothing
        for k in T.vectorized(epl):
            xv[k] = X[row_ld, lane * epl + k]
        for j in T.unroll(nb):
            for k in T.vectorized(bvec):
                bv_[j * bvec + k] = Bias[lane * epl + j * bvec + k]

        # 1. sigmoid, biased score, per-lane top-2, merged over the group's 4 lanes
        m1: T.f32 = T.float32(neg_inf)
        m2: T.f32 = T.float32(neg_inf)
        for i in T.unroll(epl):
            T.ptx.div.rn.f32(s[i], T.float32(1), T.float32(1) + T.exp(-T.float32(xv[i])))
            c[i] = s[i] + bv_[i]
            m2 = T.max(m2, T.min(m1, c[i]))
            m1 = T.max(m1, c[i])
        for off in T.unroll(2):
            o1: T.f32 = T.cuda.__shfl_xor_sync(T.uint32(FULL), m1, 1 << off, 32)
            o2: T.f32 = T.cuda.__shfl_xor_sync(T.uint32(FULL), m2, 1 << off, 32)
            m2 = T.max(T.min(m1, o1), T.max(m2, o2))
            m1 = T.max(m1, o1)
        gs: T.f32 = m1 + m2

        # 2. rank of this lane's group among the 8 groups; mask the others
        cnt: T.i32 = 0
        for j in T.unroll(N_GROUP):
            gj: T.f32 = T.cuda.__shfl_sync(T.uint32(FULL), gs, j * 4, 32)
            cnt = cnt + T.if_then_else(
                T.Or(gj > gs, T.And(gj == gs, lane // 4 > j)), 1, 0)
        for i in T.unroll(epl):
            c[i] = T.if_then_else(cnt < TOPK_GROUP, c[i], T.float32(neg_inf))

        # 3. top-8 by iterative warp argmax (ties -> lower expert id)
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

        # 4. ascending expert id: lane p < 8 writes output slot p
        tot: T.f32 = ((sel_s[0] + sel_s[1]) + (sel_s[2] + sel_s[3])) + (
            (sel_s[4] + sel_s[5]) + (sel_s[6] + sel_s[7]))
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
            W[row, lane] = q * T.float32(ROUTED_SCALING)

    return group_topk_route


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(experts, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable."""
    mod = tvm.IRModule({"main": make_prim_func(experts)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(experts, device):
    key = (experts, device.index)
    fn = _CACHE.get(key)
    if fn is None:
        fn = compile_kernel(experts, target_for(device))["main"]
        _CACHE[key] = fn
    return fn


def _prep(t):
    """Dense and 16-byte aligned (the kernel's vector loads assume it); copy only if not."""
    if not t.is_contiguous() or t.data_ptr() % 16 != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def solve(router_logits, correction_bias):
    if router_logits.dtype != torch.bfloat16 or correction_bias.dtype != torch.float32:
        raise TypeError("router_logits bf16, correction_bias fp32")
    tokens, experts = router_logits.shape
    if tokens * experts >= 2**31:
        raise ValueError("tokens * experts must be < 2**31 (32-bit indexing)")
    idx = torch.empty((tokens, TOP_K), dtype=torch.int32, device=router_logits.device)
    w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=router_logits.device)
    if tokens == 0:
        return idx, w
    fn = _kernel(experts, router_logits.device)
    # Torch tensors go in through DLPack without copies; tvm-ffi launches on
    # torch's current stream (torch.Tensor.__dlpack_c_exchange_api__).
    fn(_prep(router_logits), _prep(correction_bias), idx, w)
    return idx, w
