"""Problem 25, batched K/V cache block copy under one block remapping (vLLM swap_blocks),
written in TIRx (Apache TVM 0.27).

    for (src, dst) in block_mapping:  dst_k[dst] = src_k[src];  dst_v[dst] = src_v[src]

All four caches are viewed as uint8 [num_blocks, block_bytes] (block_bytes =
block_size * kv_heads * head_dim; a free reshape of the contiguous caches); the
destination caches are modified in place and returned. One CTA copies one chunk
of one mapped block for BOTH key and value: each thread loads `vpt` 16-byte
vectors of the source key block and `vpt` of the source value block
(2 * vpt * 16 bytes in flight), then stores them. Vector v of
a chunk belongs to thread v % threads, so a warp's accesses are contiguous.

Workload [1024, 32, 8, 256] uint8: block_bytes 65536 = 4096 vectors; 256 threads
x 4 vectors per cache = 4 chunks per block, grid = mappings * 4 CTAs.

The block ids are read from block_mapping (int64) inside the kernel (one
launch, no host synchronisation), and the block offsets are 64-bit. Supported:
any block_bytes (vector width = largest of 16, 8, 4, 2, 1 bytes dividing it).
Compiled once per block_bytes; num_blocks and the mapping count are symbolic.
"""
import torch
import tvm
from tvm.script import tirx as T

MAX_THREADS = 256  # threads per CTA (tuning knob)
MAX_VPT = 4  # vectors per thread and per cache (tuning knob: bytes in flight)

_CACHE = {}


def plan(block_bytes):
    """(vector bytes, threads per CTA, vectors per thread, chunks per block)."""
    vec = 16
    while block_bytes % vec:
        vec //= 2
    nvec = block_bytes // vec
    threads = min(MAX_THREADS, -(-nvec // 32) * 32)
    vpt = min(MAX_VPT, -(-nvec // threads))
    chunks = -(-nvec // (threads * vpt))
    return vec, threads, vpt, chunks


def make_prim_func(block_bytes):
    """The TIRx kernel for one block size in bytes; num_blocks and mappings are symbolic."""
    vec, threads, vpt, chunks = plan(block_bytes)
    nvec = block_bytes // vec
    exact = threads * vpt * chunks == nvec
    per_chunk = threads * vpt * vec  # bytes of one chunk

    @T.prim_func
    def block_copy(sk_ptr: T.handle, sv_ptr: T.handle, dk_ptr: T.handle, dv_ptr: T.handle,
                   m_ptr: T.handle):
        nb = T.int32()
        nm = T.int32()
        SK = T.match_buffer(sk_ptr, (nb, block_bytes), "uint8")
        SV = T.match_buffer(sv_ptr, (nb, block_bytes), "uint8")
        K = T.match_buffer(dk_ptr, (nb, block_bytes), "uint8")
        V = T.match_buffer(dv_ptr, (nb, block_bytes), "uint8")
        M = T.match_buffer(m_ptr, (nm, 2), "int64")
        T.device_entry()
        bx = T.cta_id([nm * chunks])
        tx = T.thread_id([threads])
        kv = T.alloc_local((vpt * vec,), "uint8")
        vv = T.alloc_local((vpt * vec,), "uint8")
        # `T.let` keeps these expressions visible to the vectoriser's alignment proof
        # (a plain assignment would become a local variable and turn 16-byte
        # accesses into byte gathers). Block ids are int64: 64-bit offsets.
        src: T.let = M[bx // chunks, 0]
        dst: T.let = M[bx // chunks, 1]
        col: T.let = (bx % chunks) * per_chunk + tx * vec
        for j in T.unroll(vpt):
            if exact:  # Python constant: resolved while parsing
                for e in T.vectorized(vec):
                    kv[j * vec + e] = SK[src, col + j * (threads * vec) + e]
                for e in T.vectorized(vec):
                    vv[j * vec + e] = SV[src, col + j * (threads * vec) + e]
            else:
                if col + j * (threads * vec) < block_bytes:
                    for e in T.vectorized(vec):
                        kv[j * vec + e] = SK[src, col + j * (threads * vec) + e]
                    for e in T.vectorized(vec):
                        vv[j * vec + e] = SV[src, col + j * (threads * vec) + e]
        for j in T.unroll(vpt):
            if exact:
                for e in T.vectorized(vec):
                    K[dst, col + j * (threads * vec) + e] = kv[j * vec + e]
                for e in T.vectorized(vec):
                    V[dst, col + j * (threads * vec) + e] = vv[j * vec + e]
            else:
                if col + j * (threads * vec) < block_bytes:
                    for e in T.vectorized(vec):
                        K[dst, col + j * (threads * vec) + e] = kv[j * vec + e]
                    for e in T.vectorized(vec):
                        V[dst, col + j * (threads * vec) + e] = vv[j * vec + e]

    return block_copy


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(block_bytes, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable."""
    mod = tvm.IRModule({"main": make_prim_func(block_bytes)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(block_bytes, device):
    key = (block_bytes, device.index, MAX_THREADS, MAX_VPT)
    fn = _CACHE.get(key)
    if fn is None:
        fn = _CACHE[key] = compile_kernel(block_bytes, target_for(device))["main"]
    return fn


def solve(src_k, src_v, dst_k, dst_v, block_mapping):
    caches = (src_k, src_v, dst_k, dst_v)
    if any(c.dtype != torch.uint8 for c in caches):
        raise TypeError("uint8 caches only")
    if any(c.shape != dst_k.shape for c in caches):
        raise ValueError("all four caches must have the same shape")
    # In-place copy: the destination caches are used as they are (a copy would lose the
    # writes). The sources are only read: a non-contiguous or misaligned one is copied.
    if not (dst_k.is_contiguous() and dst_v.is_contiguous()):
        raise ValueError("destination caches must be contiguous")
    if dst_k.data_ptr() % 16 or dst_v.data_ptr() % 16:
        raise ValueError("destination caches must be 16-byte aligned")
    src_k, src_v = (c if c.is_contiguous() and c.data_ptr() % 16 == 0
                    else c.clone(memory_format=torch.contiguous_format) for c in (src_k, src_v))
    num_blocks = dst_k.shape[0]
    block_bytes = dst_k[0].numel() if num_blocks else 0
    n_map = block_mapping.shape[0]
    if n_map == 0 or block_bytes == 0:
        return dst_k, dst_v
    if num_blocks >= 2**31 or n_map * plan(block_bytes)[3] >= 2**31:
        raise ValueError("too many blocks / mappings for 32-bit grid indexing")
    fn = _kernel(block_bytes, dst_k.device)
    # DLPack, zero copy; tvm-ffi launches on torch's current stream.
    fn(
        src_k.view(num_blocks, block_bytes),
        src_v.view(num_blocks, block_bytes),
        dst_k.view(num_blocks, block_bytes),
        dst_v.view(num_blocks, block_bytes),
        block_mapping.to(torch.int64).contiguous(),
    )
    return dst_k, dst_v
