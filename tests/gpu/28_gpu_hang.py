"""GPU judge test (problem 28): plants a GPU HANG in a CuTe DSL kernel.

A tiny CuTe DSL kernel (1 CTA, 32 threads) spins in a dynamic `while` loop until
an int32 flag read from global memory equals `stop` (1). The flag comes from
torch.zeros and nothing ever writes it, so the loop never ends. The compiler
hoists the load out of the loop and keeps the loop as a branch to itself
(checked in the sm_90a PTX, `$L__BB0_1: bra.uni $L__BB0_1`, and SASS). solve()
then calls torch.cuda.synchronize(), so the Python call blocks for ever.
Expected verdict: the judge kills the run at its timeout and reports it hung
(timeout), not failed or crashed.
"""
import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import Int32
from cutlass.cute.runtime import make_fake_stream, make_ptr

THREADS = 32


@cute.kernel
def _spin_kernel(flag: cute.Pointer, out: cute.Pointer, stop: Int32):
    tidx, _, _ = cute.arch.thread_idx()
    g_flag = cute.make_tensor(flag, cute.make_layout(1))
    g_out = cute.make_tensor(out, cute.make_layout(THREADS))
    n = Int32(0)
    v = g_flag[0]
    while v != stop:  # runtime condition: lowered to scf.while, never true here
        n = n + 1
        v = g_flag[0]
    g_out[tidx] = n


@cute.jit
def _launch(flag: cute.Pointer, out: cute.Pointer, stop: Int32, stream: cuda.CUstream):
    _spin_kernel(flag, out, stop).launch(grid=[1, 1, 1], block=[THREADS, 1, 1], stream=stream)


_compiled = []


def _ptr(address):
    return make_ptr(Int32, address, cute.AddressSpace.gmem, assumed_align=16)


def compile_kernel():
    """Compile once; works without a GPU when CUTE_DSL_ARCH is set."""
    if not _compiled:
        _compiled.append(cute.compile(_launch, _ptr(0), _ptr(0), Int32(1), make_fake_stream()))
    return _compiled[0]


def solve(hidden_states, residual, weight):
    flag = torch.zeros(4, dtype=torch.int32, device=hidden_states.device)
    counts = torch.zeros(THREADS, dtype=torch.int32, device=hidden_states.device)
    fn = compile_kernel()
    stream = cuda.CUstream(torch.cuda.current_stream(flag.device).cuda_stream)
    fn(_ptr(flag.data_ptr()), _ptr(counts.data_ptr()), 1, stream)
    torch.cuda.synchronize()  # never returns: the kernel spins for ever
    return torch.empty_like(hidden_states)
