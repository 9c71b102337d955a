"""Moves the recorder's current call itself: ctypes on the loaded library
(CUDA_INJECTION64_PATH), mkb_launch_end before the eager work (so its kernels
would count as the harness's, call 0) and mkb_launch_begin after it. Markers
that did not come from the checker's socket say "via": "api" -> rejected
(tampered). On the CPU this needs MKB_LAUNCH_DRY=1."""
import ctypes
import os

import torch


def solve(hidden_states, residual, weight):
    path = os.environ.get("CUDA_INJECTION64_PATH")
    lib = ctypes.CDLL(path) if path else None
    if lib is not None:
        lib.mkb_launch_end(ctypes.c_uint64(1))
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    if lib is not None:
        lib.mkb_launch_begin(ctypes.c_uint64(1))
    return y.to(hidden_states.dtype)
