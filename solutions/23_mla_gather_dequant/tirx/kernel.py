"""Problem 23, paged MLA cache gather + FP8 (e4m3) dequantisation, written in TIRx (Apache TVM 0.27).

    out[cu[b] + p, :] = float32(e4m3(kv_cache[block_table[b, p // bs], p % bs, :])) * scale[0]

The output [tokens, width] fp32 is cut into work items of `vec` codes (16 for
width 576: 36 items per row). One thread per item: it finds its row's sequence
by a scan of cu_seq_lens (the whole warp reads the same entries: broadcasts),
looks up the block id in block_table, loads `vec` code bytes with one 16-byte
load, converts e4m3 -> f32 (exact) and multiplies by the scale (one fp32
rounding, as the reference), then writes the floats with 16-byte stores.
Consecutive threads take consecutive items, so a warp's accesses are
contiguous within a row.

Table entries past a sequence's last block are never read. Compiled once per
(block_size, width); batch, max_blocks, num_blocks and tokens are symbolic.
The total token count cu_seq_lens[-1] is read on the host to size the output
(as the reference does).
"""
import torch
import tvm
from tvm.script import tirx as T

THREADS = 256  # threads per CTA (tuning knob)

_CACHE = {}


def vec_for(width):
    vec = 16
    while width % vec:
        vec //= 2
    return vec


def make_prim_func(block_size, width):
    """The TIRx kernel for one (block_size, width); the other sizes are symbolic."""
    vec = vec_for(width)
    ipr = width // vec  # items per output row
    svec = min(vec, 4)  # floats per vector store (16 bytes when vec >= 4)

    @T.prim_func
    def gather_dequant(kv_ptr: T.handle, s_ptr: T.handle, bt_ptr: T.handle, cu_ptr: T.handle,
                       o_ptr: T.handle):
        nb = T.int32()
        batch = T.int32()
        max_blocks = T.int32()
        ncu = T.int32()
        total = T.int32()
        KV = T.match_buffer(kv_ptr, (nb, block_size, width), "uint8")
        S = T.match_buffer(s_ptr, (1,), "float32")
        BT = T.match_buffer(bt_ptr, (batch, max_blocks), "int32")
        CU = T.match_buffer(cu_ptr, (ncu,), "int32")
        O = T.match_buffer(o_ptr, (total, width), "float32")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(total * ipr, THREADS)])
        tx = T.thread_id([THREADS])
        codes = T.alloc_local((vec,), "uint8")
        vals = T.alloc_local((vec,), "float32")
        seq = T.alloc_local((1,), "int32")
        # `T.let` keeps the index expressions visible to the vectoriser's alignment proof.
        item: T.let = bx * THREADS + tx
        row: T.let = item // ipr
        col: T.let = (item % ipr) * vec
        if item < total * ipr:
            # Sequence of this row: the largest b in [1, batch) with cu[b] <= row (else 0).
            seq[0] = 0
            for b in T.serial(1, batch):
                if CU[b] <= row:
                    seq[0] = b
            pos: T.let = row - CU[seq[0]]
            blk: T.let = T.Cast("int64", BT[seq[0], pos // block_size])  # 64-bit cache offsets
            for e in T.vectorized(vec):
                codes[e] = KV[blk, pos % block_size, col + e]
            sc: T.let = S[0]
            for e in T.unroll(vec):
                vals[e] = T.float32(T.reinterpret("float8_e4m3fn", codes[e])) * sc
            for g in T.unroll(vec // svec):
                for e in T.vectorized(svec):
                    O[row, col + g * svec + e] = vals[g * svec + e]

    return gather_dequant


def target_for(device=None):
    """CUDA target of the given (or current) GPU, with the 'a' suffix on sm_90+."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def compile_kernel(block_size, width, target):
    """tvm.compile with the TIRx pipeline; returns the runtime Executable."""
    mod = tvm.IRModule({"main": make_prim_func(block_size, width)})
    with target:  # the CUDA JIT callback reads the arch from the current target
        return tvm.compile(mod, target=target, tir_pipeline="tirx")


def _kernel(block_size, width, device):
    key = (block_size, width, device.index, THREADS)
    fn = _CACHE.get(key)
    if fn is None:
        fn = _CACHE[key] = compile_kernel(block_size, width, target_for(device))["main"]
    return fn


def solve(kv_cache, scale, block_table, cu_seq_lens):
    if kv_cache.dtype != torch.uint8 or scale.dtype != torch.float32:
        raise TypeError("uint8 cache and fp32 scale only")
    num_blocks, block_size, width = kv_cache.shape
    total = int(cu_seq_lens[-1])  # output size; the reference reads it on the host too
    out = torch.empty((total, width), dtype=torch.float32, device=kv_cache.device)
    if total == 0 or width == 0:
        return out
    if total * width >= 2**31:
        raise ValueError("tokens * width must be < 2**31 (32-bit output indexing)")
    fn = _kernel(block_size, width, kv_cache.device)
    fn(
        kv_cache.contiguous(),
        scale.reshape(1).contiguous(),
        block_table.to(torch.int32).contiguous(),
        cu_seq_lens.to(torch.int32).contiguous(),
        out,
    )
    return out
