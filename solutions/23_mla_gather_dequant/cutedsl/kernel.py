"""Problem 23, paged MLA cache gather + FP8 (e4m3) dequantisation, written in CuTe DSL (nvidia-cutlass-dsl 4.7).

    out[start[r] + p, :] = float32(e4m3(src_cache[block_table[r, p // bs], p % bs, :])) * scale
    start[r] = seq_lens[0] + ... + seq_lens[r - 1]

The output [tokens, entry] fp32 is cut into work items of `vec` codes (16 for
entry 576: 36 items per row). One thread per item: it finds its row's request
by a running sum over seq_lens (requests entries, the same addresses for the
whole warp, so the loads are broadcasts from L1; no host-side prefix sum),
looks up the block id in block_table, loads `vec` bytes of codes with one
16-byte load, converts e4m3 -> f32 (exact) and multiplies by the scale (a
run-time fp32 argument; one fp32 rounding, as the reference's fp32 multiply),
then writes `vec` floats with 16-byte stores (4 for vec 16). Consecutive
threads take consecutive items, so loads and stores of a warp are contiguous
within a row.

Table entries past a request's last block are never read (only blocks that
hold one of its tokens). Compiled once per (block_size, entry); requests,
table width, block count and tokens are runtime values. The total token count
sum(seq_lens) is read on the host to size the output (the reference reads
seq_lens on the host too).
"""
import importlib.util

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

THREADS = 256  # threads per CTA (tuning knob)


def _vec(width):
    vec = 16
    while width % vec:
        vec //= 2
    return vec


@cute.kernel
def _gather_kernel(
    p_kv: cute.Pointer,
    block_table: cute.Tensor,
    seq_lens: cute.Tensor,
    p_out: cute.Pointer,
    scale: Float32,
    n_items: Int32,
    batch: Int32,
    block_size: cutlass.Constexpr,
    width: cutlass.Constexpr,
    vec: cutlass.Constexpr,
):
    items_per_row = width // vec
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    item = bidx * THREADS + tidx
    if item < n_items:
        row = item // items_per_row
        col = (item % items_per_row) * vec
        # Request of this row: the last b whose start (sum of the earlier lengths) is <= row
        # (a zero-length request never owns a row: a later one with the same start wins).
        seq = Int32(0)
        base = Int32(0)
        acc = Int32(0)
        for b in cutlass.range(batch, unroll=4):
            if acc <= row:
                seq = b
                base = acc
            acc = acc + seq_lens[b]
        pos = row - base
        blk = block_table[seq, pos // block_size]
        slot = Int64(blk) * block_size + Int64(pos % block_size)
        src_off = slot * width + Int64(col)  # bytes; 64-bit (the pool may exceed 2 GiB)
        dst_off = row * width + col  # floats; tokens * width < 2**31 (checked on the host)

        p_src = cute.recast_ptr(p_kv + cute.assume(src_off, divby=vec), dtype=cutlass.Float8E4M3FN)
        g_src = cute.make_tensor(p_src, cute.make_layout(vec))
        g_dst = cute.make_tensor(p_out + cute.assume(dst_off, divby=vec), cute.make_layout(vec))

        r_codes = cute.make_rmem_tensor(vec, cutlass.Float8E4M3FN)
        r_out = cute.make_rmem_tensor(vec, Float32)
        cute.autovec_copy(g_src, r_codes)
        r_out.store(r_codes.load().to(Float32) * scale)
        cute.autovec_copy(r_out, g_dst)


@cute.jit
def _launch(
    src_cache: cute.Tensor,
    block_table: cute.Tensor,
    seq_lens: cute.Tensor,
    out: cute.Tensor,
    scale: Float32,
    stream: cuda.CUstream,
    block_size: cutlass.Constexpr,
    width: cutlass.Constexpr,
    vec: cutlass.Constexpr,
):
    n_items = out.shape[0] * (width // vec)
    batch = block_table.shape[0]
    _gather_kernel(
        src_cache.iterator, block_table, seq_lens, out.iterator, scale, n_items, batch,
        block_size, width, vec,
    ).launch(grid=[(n_items + (THREADS - 1)) // THREADS, 1, 1], block=[THREADS, 1, 1], stream=stream)


USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None

_compiled = {}


def compile_for(block_size, width):
    """Compile (once) for this (block_size, width); works without a GPU if CUTE_DSL_ARCH is set."""
    key = (block_size, width, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        vec = _vec(width)
        align = min(16, vec)
        batch = cute.sym_int32()
        fn = _compiled[key] = cute.compile(
            _launch,
            make_fake_compact_tensor(cutlass.Uint8, (cute.sym_int32(), block_size, width),
                                     stride_order=(2, 1, 0), assumed_align=align),
            make_fake_compact_tensor(Int32, (batch, cute.sym_int32()), stride_order=(1, 0),
                                     assumed_align=4),
            make_fake_compact_tensor(Int32, (batch,), assumed_align=4),
            make_fake_compact_tensor(Float32, (cute.sym_int32(), width), stride_order=(1, 0),
                                     assumed_align=min(16, 4 * vec)),
            Float32(1.0),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            block_size, width, vec,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
    return fn


def _plain_tensor(t, align):
    return from_dlpack(t, assumed_align=align).mark_layout_dynamic()


def solve(src_cache, block_table, seq_lens, scale):
    assert src_cache.dtype == torch.uint8 and src_cache.is_cuda
    num_blocks, block_size, width = src_cache.shape
    lens = seq_lens.to(torch.int32).contiguous()
    total = int(lens.sum())  # output size; the reference reads seq_lens on the host too
    out = torch.empty((total, width), dtype=torch.float32, device=src_cache.device)
    if total == 0 or width == 0:
        return out
    assert total * width < 2**31
    vec = _vec(width)
    kv = src_cache.contiguous()
    assert kv.data_ptr() % min(16, vec) == 0
    bt = block_table.to(torch.int32).contiguous()
    sc = float(scale)
    fn = compile_for(block_size, width)
    if USE_TVM_FFI:
        fn(kv, bt, lens, out, sc)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(kv.device).cuda_stream)
        fn(_plain_tensor(kv, min(16, vec)), _plain_tensor(bt, 4), _plain_tensor(lens, 4),
           _plain_tensor(out, min(16, 4 * vec)), sc, stream)
    return out
