"""GPU judge test (problem 28): plants an EXCEPTION after a real CuTe DSL launch.

Runs the real solution solutions/28_fused_add_rmsnorm/cutedsl/kernel.py once
(so the CuTe kernel really compiles and launches), then raises
RuntimeError("planted"). Expected verdict: failed, exception in solve
(RuntimeError: planted).
"""
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "..", "..", "solutions", "28_fused_add_rmsnorm", "cutedsl", "kernel.py")
_spec = importlib.util.spec_from_file_location("mkb_cutedsl_28_solution", _PATH)
_solution = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_solution)


def solve(hidden_states, residual, weight):
    _solution.solve(hidden_states, residual, weight)
    raise RuntimeError("planted")
