"""GPU judge test (problem 28): plants an ILLEGAL MEMORY ACCESS in a CuTe DSL kernel.

A tiny CuTe DSL kernel (1 CTA, 32 threads) loads 32 bf16 values from BAD_ADDR,
an address in the null page, which no CUDA allocation ever occupies (Linux never
maps below 64 KiB and CUDA never hands out address 0), and stores them into the
output buffer, so the load cannot be optimised away. The launch itself returns
normally; the fault (CUDA error 700, "an illegal memory access was encountered")
surfaces at the torch.cuda.synchronize() inside solve, which raises.
Expected verdict: failed, with a CUDA illegal-memory-access error (the CUDA
context is lost afterwards, so nothing later in the process can use the GPU).
"""
import torch
import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_stream, make_ptr

BAD_ADDR = 0x100  # null page: never mapped on the GPU
THREADS = 32


@cute.kernel
def _bad_read_kernel(bad: cute.Pointer, out: cute.Pointer):
    tidx, _, _ = cute.arch.thread_idx()
    g_bad = cute.make_tensor(bad, cute.make_layout(THREADS))
    g_out = cute.make_tensor(out, cute.make_layout(THREADS))
    g_out[tidx] = g_bad[tidx]


@cute.jit
def _launch(bad: cute.Pointer, out: cute.Pointer, stream: cuda.CUstream):
    _bad_read_kernel(bad, out).launch(grid=[1, 1, 1], block=[THREADS, 1, 1], stream=stream)


_compiled = []


def _ptr(address):
    return make_ptr(cutlass.BFloat16, address, cute.AddressSpace.gmem, assumed_align=16)


def compile_kernel():
    """Compile once; works without a GPU when CUTE_DSL_ARCH is set."""
    if not _compiled:
        _compiled.append(cute.compile(_launch, _ptr(0), _ptr(0), make_fake_stream()))
    return _compiled[0]


def solve(hidden_states, residual, weight):
    out = torch.empty_like(hidden_states)
    fn = compile_kernel()
    stream = cuda.CUstream(torch.cuda.current_stream(out.device).cuda_stream)
    fn(_ptr(BAD_ADDR), _ptr(out.data_ptr()), stream)
    torch.cuda.synchronize()  # raises: CUDA error 700, illegal memory access
    return out
