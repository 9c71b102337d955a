"""GPU judge test (problem 28): plants WRONG VALUES from a real CuTe DSL kernel.

Runs the real solution solutions/28_fused_add_rmsnorm/cutedsl/kernel.py and
returns its output scaled by 1.05 (cast back to bf16): right shape, dtype and
device, every value about 5% off. Expected verdict: failed, output mismatch.
"""
import torch

from cutedsl28 import solution as _solution


def solve(hidden_states, residual, weight):
    out = _solution.solve(hidden_states, residual, weight)
    return (out.float() * 1.05).to(torch.bfloat16)
