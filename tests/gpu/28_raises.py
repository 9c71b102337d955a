"""GPU judge test (problem 28): plants an EXCEPTION after a real CuTe DSL launch.

Runs the real solution solutions/28_fused_add_rmsnorm/cutedsl/kernel.py once
(so the CuTe kernel really compiles and launches), then raises
RuntimeError("planted"). Expected verdict: failed, exception in solve
(RuntimeError: planted).
"""
from cutedsl28 import solution as _solution


def solve(hidden_states, residual, weight):
    _solution.solve(hidden_states, residual, weight)
    raise RuntimeError("planted")
