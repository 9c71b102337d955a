# A correct torch implementation of problem 28 that first writes an entry
# into Triton's cache, as the first call of any Triton kernel does (Triton
# ships with torch). Runs on the CPU. A candidate forked from the zygote
# must find that cache under its own HOME, writable, as a cold one does
# (tests/scenario/zygote.sh).
import importlib

import torch

cache = importlib.import_module("tri" + "ton.runtime.cache")


def solve(hidden_states, residual, weight):
    cache.get_cache_manager("0" * 64).put(b"compiled", "kernel.bin")
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
