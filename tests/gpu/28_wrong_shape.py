"""GPU judge test (problem 28): plants a WRONG OUTPUT SHAPE from a real CuTe DSL kernel.

Runs the real solution solutions/28_fused_add_rmsnorm/cutedsl/kernel.py and
returns out[:, :-1], i.e. [T, 4095] instead of [T, 4096] (values otherwise
correct). Expected verdict: failed, output shape mismatch.
"""
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "..", "..", "solutions", "28_fused_add_rmsnorm", "cutedsl", "kernel.py")
_spec = importlib.util.spec_from_file_location("mkb_cutedsl_28_solution", _PATH)
_solution = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_solution)


def solve(hidden_states, residual, weight):
    out = _solution.solve(hidden_states, residual, weight)
    return out[:, :-1]
