"""Problem 23, paged MLA cache gather + FP8 (e4m3) dequantisation, written in TIRx (Apache TVM 0.27).

    out[start[r] + p, :] = float32(e4m3(src_cache[block_table[r, p // bs], p % bs, :])) * scale
    start[r] = seq_lens[0] + ... + seq_lens[r - 1]

The output [tokens, entry] fp32 is cut into work items of `vec` codes (16 for
entry 576: 36 items per row). One thread per item: it finds its row's request
by a running sum over seq_lens (the whole warp reads the same entries:
broadcasts; no host-side prefix sum), looks up the block id in block_table,
loads `vec` code bytes with one 16-byte load, converts e4m3 -> f32 (exact) and
multiplies by the scale (a run-time fp32 kernel argument; one fp32 rounding,
as the reference's fp32 multiply), then writes the floats with 16-byte stores.
Consecutive threads take consecutive items, so a warp's accesses are
contiguous within a row.

Table entries past a request's last block are never read. Compiled once per
(block_size, entry); requests, table width, block count and tokens are
symbolic. The total token count sum(seq_lens) is read on the host to size the
output (the reference reads seq_lens on the host too).
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
    def gather_dequant(kv_ptr: T.handle, bt_ptr: T.handle, sl_ptr: T.handle, o_ptr: T.handle,
                       scale: T.float32):
        nb = T.int32()
        batch = T.int32()
        max_blocks = T.int32()
        total = T.int32()
        KV = T.match_buffer(kv_ptr, (nb, block_size, width), "uint8")
        BT = T.match_buffer(bt_ptr, (batch, max_blocks), "int32")
        SL = T.match_buffer(sl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (total, width), "float32")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(total * ipr, THREADS)])
        tx = T.thread_id([THREADS])
        codes = T.alloc_local((vec,), "uint8")
        vals = T.alloc_local((vec,), "float32")
        seq = T.alloc_local((1,), "int32")
        base = T.alloc_local((1,), "int32")
        run = T.alloc_local((1,), "int32")
        # `T.let` keeps the index expressions visible to the vectoriser's alignment proof.
        item: T.let = bx * THREADS + tx
        row: T.let = item // ipr
        col: T.let = (item % ipr) * vec
        if item < total * ipr:
            # Request of this row: the last b whose start (sum of the earlier lengths) is
            # <= row (a zero-length request never owns a row: a later one with the same
            # start wins).
            seq[0] = 0
            base[0] = 0
            run[0] = 0
            for b in T.serial(batch, unroll=4):
                if run[0] <= row:
                    seq[0] = b
                    base[0] = run[0]
                run[0] = run[0] + SL[b]
            pos: T.let = row - base[0]
            blk: T.let = T.Cast("int64", BT[seq[0], pos // block_size])  # 64-bit cache offsets
            for e in T.vectorized(vec):
                codes[e] = KV[blk, pos % block_size, col + e]
            for e in T.unroll(vec):
                vals[e] = T.float32(T.reinterpret("float8_e4m3fn", codes[e])) * scale
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


def solve(src_cache, block_table, seq_lens, scale):
    if src_cache.dtype != torch.uint8:
        raise TypeError("uint8 (e4m3 bytes) cache only")
    num_blocks, block_size, width = src_cache.shape
    lens = seq_lens.to(torch.int32).contiguous()
    total = int(lens.sum())  # output size; the reference reads seq_lens on the host too
    out = torch.empty((total, width), dtype=torch.float32, device=src_cache.device)
    if total == 0 or width == 0:
        return out
    if total * width >= 2**31:
        raise ValueError("tokens * entry must be < 2**31 (32-bit output indexing)")
    fn = _kernel(block_size, width, src_cache.device)
    fn(
        src_cache.contiguous(),
        block_table.to(torch.int32).contiguous(),
        lens,
        out,
        float(scale),
    )
    return out
