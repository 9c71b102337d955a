"""Problem 25, batched K/V cache block copy under one block remapping (vLLM swap_blocks),
written in CuTe DSL (nvidia-cutlass-dsl 4.7).

    for (src, dst) in block_mapping:  dst_k[dst] = src_k[src];  dst_v[dst] = src_v[src]

All four caches are viewed as uint8 [num_blocks, block_bytes] (block_bytes =
block_size * kv_heads * head_dim; a free reshape of the contiguous caches); the
destination caches are modified in place and returned. One CTA copies one
`chunk` of one mapped block for BOTH key and value: every thread first loads
`vpt` 16-byte vectors of the source key block and `vpt` of the source value
block (2 * vpt * 16 bytes in flight per thread), then stores them. Vector v of
a chunk goes to thread v % threads, so each load/store instruction of a warp
touches 512 contiguous bytes.

Workload [1024, 32, 8, 256] uint8: block_bytes 65536 = 4096 vectors; 256 threads
x 4 vectors = 1024 vectors per chunk, 4 chunks per block, grid = mappings * 4.

The block ids come from block_mapping (int64) inside the kernel, so the whole
copy is one launch with no host synchronisation. The block offset src *
block_bytes is computed in 64 bits. Any block_bytes is supported: the vector
width is the largest of 16, 8, 4, 2, 1 bytes that divides block_bytes (16 for
every workload here). Compiled once per (block_bytes, cache dtype) and cached;
num_blocks and the number of mappings are runtime values.
"""
import importlib.util

import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream

ALIGN = 16  # bytes; the cache pointers are promised to the compiler as 16-byte aligned
MAX_THREADS = 256  # threads per CTA (tuning knob)
MAX_VPT = 4  # vectors per thread and per cache (tuning knob: bytes in flight)


def _plan(block_bytes):
    """(vector bytes, threads per CTA, vectors per thread, chunks per block)."""
    vec = 16
    while block_bytes % vec:
        vec //= 2
    nvec = block_bytes // vec
    threads = min(MAX_THREADS, -(-nvec // 32) * 32)
    vpt = min(MAX_VPT, -(-nvec // threads))
    chunks = -(-nvec // (threads * vpt))
    return vec, threads, vpt, chunks


@cute.kernel
def _copy_kernel(
    p_sk: cute.Pointer,
    p_sv: cute.Pointer,
    p_dk: cute.Pointer,
    p_dv: cute.Pointer,
    mapping: cute.Tensor,
    num_blocks: Int32,
    block_bytes: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    threads: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    chunks: cutlass.Constexpr,
):
    nvec = block_bytes // vec
    exact = threads * vpt * chunks == nvec  # else the tail of the last chunk is predicated

    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    if cutlass.const_expr(chunks == 1):
        m = bidx
        chunk = 0
    else:
        m = bidx // chunks
        chunk = bidx % chunks

    src = mapping[m, 0]  # int64 block ids: every thread of the CTA reads the same two words
    dst = mapping[m, 1]
    # Byte offsets of the chunk in 64 bits (num_blocks * block_bytes may exceed 2**31);
    # src/dst * block_bytes and the chunk offset are multiples of 16.
    chunk_off = Int64(chunk * (threads * vpt * vec))
    off_src = src * block_bytes + chunk_off
    off_dst = dst * block_bytes + chunk_off

    # Byte (e, t, k) of the chunk: e + t*vec + k*vec*threads (a warp's k-th loads are contiguous).
    layout = cute.make_layout((vec, threads, vpt), stride=(1, vec, vec * threads))
    g_ks = cute.make_tensor(p_sk + cute.assume(off_src, divby=vec), layout)
    g_kd = cute.make_tensor(p_dk + cute.assume(off_dst, divby=vec), layout)
    g_vs = cute.make_tensor(p_sv + cute.assume(off_src, divby=vec), layout)
    g_vd = cute.make_tensor(p_dv + cute.assume(off_dst, divby=vec), layout)

    r_k = cute.make_rmem_tensor((vec, vpt), cutlass.Uint8)
    r_v = cute.make_rmem_tensor((vec, vpt), cutlass.Uint8)

    for k in cutlass.range_constexpr(vpt):
        if cutlass.const_expr(exact):
            cute.autovec_copy(g_ks[None, tidx, k], r_k[None, k])
            cute.autovec_copy(g_vs[None, tidx, k], r_v[None, k])
        else:
            if chunk * (threads * vpt) + k * threads + tidx < nvec:
                cute.autovec_copy(g_ks[None, tidx, k], r_k[None, k])
                cute.autovec_copy(g_vs[None, tidx, k], r_v[None, k])
    for k in cutlass.range_constexpr(vpt):
        if cutlass.const_expr(exact):
            cute.autovec_copy(r_k[None, k], g_kd[None, tidx, k])
            cute.autovec_copy(r_v[None, k], g_vd[None, tidx, k])
        else:
            if chunk * (threads * vpt) + k * threads + tidx < nvec:
                cute.autovec_copy(r_k[None, k], g_kd[None, tidx, k])
                cute.autovec_copy(r_v[None, k], g_vd[None, tidx, k])


@cute.jit
def _launch(
    src_k: cute.Tensor,
    src_v: cute.Tensor,
    dst_k: cute.Tensor,
    dst_v: cute.Tensor,
    mapping: cute.Tensor,
    stream: cuda.CUstream,
    block_bytes: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    threads: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    chunks: cutlass.Constexpr,
):
    n_map = mapping.shape[0]
    _copy_kernel(
        src_k.iterator, src_v.iterator, dst_k.iterator, dst_v.iterator, mapping, dst_k.shape[0],
        block_bytes, vec, threads, vpt, chunks,
    ).launch(grid=[n_map * chunks, 1, 1], block=[threads, 1, 1], stream=stream)


# TVM-FFI calling convention (see solutions/notes/cutedsl-notes.md): torch tensors go in
# directly, the wrapper checks dtype/shape/strides/device and launches on torch's
# current stream. Without apache-tvm-ffi, the documented plain call is used.
USE_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None

_compiled = {}

_CUTE_DTYPES = {torch.uint8: cutlass.Uint8}


def compile_for(block_bytes, dtype=torch.uint8):
    """Compile (once) for this block size in bytes; works without a GPU if CUTE_DSL_ARCH is set."""
    key = (block_bytes, dtype, USE_TVM_FFI)
    fn = _compiled.get(key)
    if fn is None:
        vec, threads, vpt, chunks = _plan(block_bytes)
        nb = cute.sym_int32()  # shared by all four caches: the TVM-FFI wrapper checks they match
        n_map = cute.sym_int32()
        cache = lambda: make_fake_compact_tensor(  # noqa: E731
            _CUTE_DTYPES[dtype], (nb, block_bytes), stride_order=(1, 0), assumed_align=ALIGN
        )
        fn = _compiled[key] = cute.compile(
            _launch,
            cache(),
            cache(),
            cache(),
            cache(),
            make_fake_compact_tensor(Int64, (n_map, 2), stride_order=(1, 0), assumed_align=8),
            make_fake_stream(use_tvm_ffi_env_stream=USE_TVM_FFI),
            block_bytes, vec, threads, vpt, chunks,
            options="--enable-tvm-ffi" if USE_TVM_FFI else None,
        )
    return fn


def _plain_tensor(t, align):
    return from_dlpack(t, assumed_align=align).mark_compact_shape_dynamic(
        mode=0, stride_order=t.dim_order()
    )


def solve(src_k, src_v, dst_k, dst_v, block_mapping):
    caches = (src_k, src_v, dst_k, dst_v)
    assert all(c.dtype == torch.uint8 and c.shape == dst_k.shape for c in caches) and dst_k.is_cuda
    # In-place copy: the destination caches must be used as they are (a copy would lose
    # the writes). The sources are only read: a non-contiguous or misaligned one is copied.
    assert dst_k.is_contiguous() and dst_v.is_contiguous()
    assert dst_k.data_ptr() % ALIGN == 0 and dst_v.data_ptr() % ALIGN == 0
    src_k, src_v = (c if c.is_contiguous() and c.data_ptr() % ALIGN == 0
                    else c.clone(memory_format=torch.contiguous_format) for c in (src_k, src_v))
    num_blocks = dst_k.shape[0]
    block_bytes = dst_k[0].numel() if num_blocks else 0
    n_map = block_mapping.shape[0]
    if n_map == 0 or block_bytes == 0:
        return dst_k, dst_v
    assert num_blocks < 2**31 and n_map * _plan(block_bytes)[3] < 2**31
    views = [c.view(num_blocks, block_bytes) for c in (src_k, src_v, dst_k, dst_v)]
    mp = block_mapping.to(torch.int64).contiguous()
    fn = compile_for(block_bytes)
    if USE_TVM_FFI:
        fn(*views, mp)
    else:
        stream = cuda.CUstream(torch.cuda.current_stream(dst_k.device).cuda_stream)
        fn(*[_plain_tensor(c, ALIGN) for c in views], _plain_tensor(mp, 8), stream)
    return dst_k, dst_v
