"""A trivial kernel in each DSL, compiled and run on the GPU: b = a + 1.

Proves that the installed DSL really launches (TVM swallows a failure to load
its CUDA runtime sidecar; CuTe DSL's cu13 build needs a new enough driver).
Prints one line per DSL and exits non-zero if either fails.
"""
import sys
import traceback

import torch

N = 1000


def run_cutedsl(a):
    import cutlass.cute as cute
    from cutlass import Int32
    from cutlass.cute.runtime import from_dlpack

    @cute.kernel
    def add_one_kernel(g_a: cute.Tensor, g_b: cute.Tensor, n: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * 256 + tidx
        if i < n:
            g_b[i] = g_a[i] + 1.0

    @cute.jit
    def add_one(m_a: cute.Tensor, m_b: cute.Tensor, n: Int32):
        add_one_kernel(m_a, m_b, n).launch(grid=[(n + 255) // 256, 1, 1], block=[256, 1, 1])

    b = torch.empty_like(a)
    args = (from_dlpack(a), from_dlpack(b), Int32(a.numel()))
    compiled = cute.compile(add_one, *args)
    compiled(*args)
    return b


def run_tirx(a):
    import tvm
    from tvm.script import tirx as T

    @T.prim_func
    def add_one(a_ptr: T.handle, b_ptr: T.handle):
        n = T.int32()
        A = T.match_buffer(a_ptr, (n,), "float32")
        B = T.match_buffer(b_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([T.ceildiv(n, 256)])
        tx = T.thread_id([256])
        i: T.let = bx * 256 + tx
        if i < n:
            B[i] = A[i] + T.float32(1)

    major, minor = torch.cuda.get_device_capability()
    target = tvm.target.Target({"kind": "cuda", "arch": f"sm_{major}{minor}{'a' if major >= 9 else ''}"})
    with target:
        ex = tvm.compile(tvm.IRModule({"main": add_one}), target=target, tir_pipeline="tirx")
    b = torch.empty_like(a)
    ex["main"](a, b)
    return b


def main():
    a = torch.arange(N, device="cuda", dtype=torch.float32)
    failed = 0
    for name, fn in (("cutedsl", run_cutedsl), ("tirx", run_tirx)):
        try:
            b = fn(a)
            torch.cuda.synchronize()
            ok = torch.equal(b, a + 1)
            print(f"{name}: trivial kernel {'ran and is correct' if ok else 'ran but is WRONG'}")
            failed += not ok
        except Exception:
            traceback.print_exc()
            print(f"{name}: trivial kernel FAILED")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
