"""Problem 73, gated-delta-net (GDN) multi-token prediction (speculative verify)
step, written in CuTe DSL (nvidia-cutlass-dsl 4.7).

Sequence b starts from pool entry S = initial_state[idx[b]] (idx =
initial_state_indices). Per (batch b, value head h), with the state S [V, K] in
the k-last layout and q_t, k_t the (unnormalised) q/k head h // rep, for
t = 0 .. T-1:

    decay_t = exp(-exp(A_log[h]) * softplus(a[b, t, h] + dt_bias[h])),  beta_t = sigmoid(b[b, t, h])
    Sd  = decay_t * S
    u   = beta_t * (v_t - Sd k_t)             (one value per state row)
    S   = Sd + u k_t^T
    out[b, t, h] = scale * (S q_t)

(the reference's old = k Sd, new = beta v + (1 - beta) old,
S = Sd - k old^T + k new^T, since new - old = beta (v - old); fewer roundings).

The state output is a copy of the whole pool, unchanged (the reference returns
`initial_state.clone()`). One launch does both: the first B * Hv * (D / rows)
CTAs run the recurrence and write the state row slice they loaded straight
back to final_state[idx[b]] (duplicate indices write identical data); the
other pool * Hv * (D / rows) CTAs copy the slices of pool entries that no
sequence uses (each scans the B indices), so every pool entry is read once
and written once.

Mapping (same as problem 72): one state row (D fp32 = D/4 16-byte vectors) is
held in registers by a group of `tpr` consecutive lanes; lane j of the group
owns vectors j, j+tpr, j+2*tpr, ... A CTA covers `rows` state rows of one
(b, h); D = 128: tpr = 8 lanes per row (16 floats per thread), 16 rows per CTA
(128 threads), 8 CTAs per (b, h). The T-token loop is unrolled (T is a
compile-time value); the state stays in registers across tokens. Each lane
loads its own columns of q and k for all T tokens up front; S k and S q are
reduced with butterfly shuffles inside the row group: no shared memory, no
barrier.

The per-token gating scalars are computed in fp64 and rounded to fp32; all
per-element state math is fp32, like the reference. scale is a run-time fp32
argument.

Compiled once per (steps, qk_heads, v_heads, head_dim) with `cute.compile`;
batch and pool size are runtime values. 32-bit offsets:
pool * v_heads * D * D < 2**31.
"""
import importlib.util
import math

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Float64, Int32
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

VEC = 4  # fp32 per 16-byte state vector (and bf16 per 8-byte q/k vector)
ALIGN = 16
MAX_TPR = 8  # lanes per state row
MAX_THREADS = 128
MAX_ELEMS = 2**31 - 1


def _plan(d):
    """(lanes per row, vectors per lane, rows per CTA) for head_dim d."""
    if d % VEC or d <= 0:
        raise ValueError(f"head_dim must be a positive multiple of {VEC}, got {d}")
    nvec = d // VEC
    tpr = 1
    while tpr * 2 <= MAX_TPR and nvec % (tpr * 2) == 0:
        tpr *= 2
    vpt = nvec // tpr
    rows = MAX_THREADS // tpr
    while d % rows:  # rows per CTA must divide d
        rows //= 2
    return tpr, vpt, rows


@cute.kernel
def _gdn_mtp_kernel(
    p_q: cute.Pointer,
    p_k: cute.Pointer,
    p_v: cute.Pointer,
    p_s: cute.Pointer,
    p_idx: cute.Pointer,
    p_alog: cute.Pointer,
    p_a: cute.Pointer,
    p_dt: cute.Pointer,
    p_b: cute.Pointer,
    p_o: cute.Pointer,
    p_ns: cute.Pointer,
    batch: Int32,
    pool: Int32,
    scale: Float32,
    steps: cutlass.Constexpr,
    d: cutlass.Constexpr,
    hqk: cutlass.Constexpr,
    hv: cutlass.Constexpr,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    rep = hv // hqk
    nchunk = d // rows
    nstage = int(math.log2(tpr))
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    chunk = bidx % nchunk
    bh = bidx // nchunk  # (b, h) for the first batch * hv * nchunk CTAs, then (pool entry, h)
    h = bh % hv
    hk = h // rep
    if cutlass.const_expr(tpr == 1):
        j = 0
        r = tidx
    else:
        j = tidx % tpr
        r = tidx // tpr
    vrow = chunk * rows + r

    # Thread views. Element (e, j, i, ...) of a row sits at column (j + i*tpr)*VEC + e.
    s_layout = cute.make_layout(
        (VEC, tpr, vpt, d, pool * hv), stride=(1, VEC, VEC * tpr, d, d * d)
    )
    g_s = cute.make_tensor(p_s, s_layout)
    g_ns = cute.make_tensor(p_ns, s_layout)
    g_idx = cute.make_tensor(p_idx, cute.make_layout(batch))
    r_s = cute.make_rmem_tensor((VEC, vpt), Float32)

    if bh < batch * hv:
        bi = bh // hv
        slot = g_idx[bi]
        qk_layout = cute.make_layout(
            (VEC, tpr, vpt, hqk, steps, batch),
            stride=(1, VEC, VEC * tpr, d, hqk * d, steps * hqk * d),
        )
        g_q = cute.make_tensor(p_q, qk_layout)
        g_k = cute.make_tensor(p_k, qk_layout)
        vo_layout = cute.make_layout((d, hv, steps, batch), stride=(1, d, hv * d, steps * hv * d))
        g_v = cute.make_tensor(p_v, vo_layout)
        g_o = cute.make_tensor(p_o, vo_layout)
        hb_layout = cute.make_layout((hv, steps, batch), stride=(1, hv, steps * hv))
        g_a = cute.make_tensor(p_a, hb_layout)
        g_b = cute.make_tensor(p_b, hb_layout)
        g_alog = cute.make_tensor(p_alog, cute.make_layout(hv))
        g_dt = cute.make_tensor(p_dt, cute.make_layout(hv))

        r_q = cute.make_rmem_tensor((VEC, vpt, steps), BFloat16)
        r_k = cute.make_rmem_tensor((VEC, vpt, steps), BFloat16)
        r_v = cute.make_rmem_tensor((steps,), Float32)
        r_a = cute.make_rmem_tensor((steps,), Float64)
        r_b = cute.make_rmem_tensor((steps,), Float64)

        # All global loads first: the state row slice (16-byte vectors), q/k columns
        # of every token (8 bytes), the per-token scalars.
        for i in cutlass.range_constexpr(vpt):
            cute.autovec_copy(g_s[None, j, i, vrow, slot * hv + h], r_s[None, i])
        for t in cutlass.range_constexpr(steps):
            for i in cutlass.range_constexpr(vpt):
                cute.autovec_copy(g_q[None, j, i, hk, t, bi], r_q[None, i, t])
                cute.autovec_copy(g_k[None, j, i, hk, t, bi], r_k[None, i, t])
        for t in cutlass.range_constexpr(steps):
            r_v[t] = g_v[vrow, h, t, bi].to(Float32)
            r_a[t] = g_a[h, t, bi].to(Float64)
            r_b[t] = g_b[h, t, bi].to(Float64)
        alog = g_alog[h].to(Float64)
        dtb = g_dt[h].to(Float64)
        neg_gain = -cute.math.exp(alog)

        # The state output is the pool unchanged: write the loaded slice back.
        for i in cutlass.range_constexpr(vpt):
            cute.autovec_copy(r_s[None, i], g_ns[None, j, i, vrow, slot * hv + h])

        s = r_s.load()
        for t in cutlass.range_constexpr(steps):
            qf = r_q[None, None, t].load().to(Float32)
            kf = r_k[None, None, t].load().to(Float32)

            # Scalars in fp64, rounded once to fp32.
            x = r_a[t] + dtb
            sp = x
            if x <= 20.0:  # torch softplus threshold
                sp = cute.math.log1p(cute.math.exp(x))
            decay = cute.math.exp(neg_gain * sp).to(Float32)
            beta = (1.0 / (1.0 + cute.math.exp(-r_b[t]))).to(Float32)

            sd = s * decay
            pred = (sd * kf).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
            for st in cutlass.range_constexpr(nstage):
                pred = pred + cute.arch.shuffle_sync_bfly(pred, offset=tpr >> (st + 1))
            u = beta * (r_v[t] - pred)
            s = sd + kf * u
            o = (s * qf).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
            for st in cutlass.range_constexpr(nstage):
                o = o + cute.arch.shuffle_sync_bfly(o, offset=tpr >> (st + 1))
            if j == 0:
                g_o[vrow, h, t, bi] = (scale * o).to(BFloat16)
    else:
        # Copy CTA: pool entry p, head h, rows of this chunk, unless a sequence uses p
        # (then its recurrence CTA writes the slice).
        p = bh // hv - batch
        used = Int32(0)
        for i in cutlass.range(batch, unroll=4):
            if g_idx[i] == p:
                used = Int32(1)
        if used == 0:
            for i in cutlass.range_constexpr(vpt):
                cute.autovec_copy(g_s[None, j, i, vrow, p * hv + h], r_s[None, i])
            for i in cutlass.range_constexpr(vpt):
                cute.autovec_copy(r_s[None, i], g_ns[None, j, i, vrow, p * hv + h])


@cute.jit
def _launch(
    q: cute.Tensor,
    k: cute.Tensor,
    v: cute.Tensor,
    state: cute.Tensor,
    indices: cute.Tensor,
    a_log: cute.Tensor,
    a: cute.Tensor,
    dt_bias: cute.Tensor,
    b: cute.Tensor,
    out: cute.Tensor,
    new_state: cute.Tensor,
    scale: Float32,
    stream: cuda.CUstream,
    steps: cutlass.Constexpr,
    d: cutlass.Constexpr,
    hqk: cutlass.Constexpr,
    hv: cutlass.Constexpr,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    batch = q.shape[0]
    pool = state.shape[0]
    grid = (batch + pool) * (hv * (d // rows))
    _gdn_mtp_kernel(
        q.iterator, k.iterator, v.iterator, state.iterator, indices.iterator, a_log.iterator,
        a.iterator, dt_bias.iterator, b.iterator, out.iterator, new_state.iterator,
        batch, pool, scale, steps, d, hqk, hv, tpr, vpt, rows,
    ).launch(grid=[grid, 1, 1], block=[tpr * rows, 1, 1], stream=stream)


USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None

_compiled = {}


def _fake(dtype, shape):
    return make_fake_compact_tensor(dtype, shape, stride_order=tuple(reversed(range(len(shape)))),
                                    assumed_align=ALIGN)


def compile_for(steps, hqk, hv, d):
    """Compile (once) for these token count, head counts and head_dim; the batch
    and pool size are dynamic. Works without a GPU when CUTE_DSL_ARCH is set."""
    key = (steps, hqk, hv, d, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        if hv % hqk:
            raise ValueError("v_heads must be a multiple of qk_heads")
        tpr, vpt, rows = _plan(d)
        n = cute.sym_int32()  # batch, shared by every batched tensor
        npool = cute.sym_int32()  # pool entries, shared by the two state tensors
        fn = cute.compile(
            _launch,
            _fake(BFloat16, (n, steps, hqk, d)),
            _fake(BFloat16, (n, steps, hqk, d)),
            _fake(BFloat16, (n, steps, hv, d)),
            _fake(Float32, (npool, hv, d, d)),
            make_fake_compact_tensor(Int32, (n,), assumed_align=4),
            _fake(Float32, (hv,)),
            _fake(BFloat16, (n, steps, hv)),
            _fake(Float32, (hv,)),
            _fake(BFloat16, (n, steps, hv)),
            _fake(BFloat16, (n, steps, hv, d)),
            _fake(Float32, (npool, hv, d, d)),
            Float32(1.0),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            steps, d, hqk, hv, tpr, vpt, rows,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
        _compiled[key] = fn
    return fn


def _prep(t):
    """Dense, 16-byte aligned storage (copies only if the input is not)."""
    if not t.is_contiguous() or t.data_ptr() % ALIGN != 0:
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def _plain_tensor(t):
    return from_dlpack(t, assumed_align=ALIGN).mark_compact_shape_dynamic(
        mode=0, stride_order=t.dim_order()
    )


def solve(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale):
    batch, steps, hqk, d = q.shape
    hv = v.shape[2]
    pool = initial_state.shape[0]
    assert q.dtype == torch.bfloat16 and k.dtype == torch.bfloat16 and v.dtype == torch.bfloat16
    assert initial_state.dtype == torch.float32 and q.is_cuda
    out = torch.empty((batch, steps, hv, d), dtype=torch.bfloat16, device=q.device)
    final_state = torch.empty((pool, hv, d, d), dtype=torch.float32, device=q.device)
    if batch == 0 or steps == 0:  # nothing to predict; the pool still comes back as a copy
        final_state.copy_(initial_state)
        return out, final_state
    if pool * hv * d * d > MAX_ELEMS:
        raise ValueError("pool * v_heads * head_dim^2 must be < 2**31 (32-bit offsets)")
    fn = compile_for(steps, hqk, hv, d)
    idx = initial_state_indices.to(torch.int32).contiguous()
    args = [_prep(t) for t in (q, k, v, initial_state)] + [idx]
    args += [_prep(t) for t in (A_log.float(), a, dt_bias.float(), b)]
    args += [out, final_state]
    scale = float(scale)
    if USE_TVM_FFI:
        fn(*args, scale)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(q.device).cuda_stream)
        # A_log and dt_bias (positions 5 and 7) have no batch mode: fully static layouts.
        fn(*[from_dlpack(t, assumed_align=ALIGN) if i in (5, 7)
             else from_dlpack(t, assumed_align=4).mark_layout_dynamic() if i == 4
             else _plain_tensor(t) for i, t in enumerate(args)], scale, stream)
    return out, final_state
