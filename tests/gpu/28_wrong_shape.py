"""GPU judge test (problem 28): plants a WRONG OUTPUT SHAPE from a real CuTe DSL kernel.

Runs the real solution solutions/28_fused_add_rmsnorm/cutedsl/kernel.py and
returns out[:, :-1], i.e. [T, 4095] instead of [T, 4096] (values otherwise
correct). Expected verdict: failed, output shape mismatch.
"""
from cutedsl28 import solution as _solution


def solve(hidden_states, residual, weight):
    out = _solution.solve(hidden_states, residual, weight)
    return out[:, :-1]
