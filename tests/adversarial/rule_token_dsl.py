"""A token DSL kernel beside an eager computation: appended by
tools/gpu_judge.sh to a copy of the shipped solution of the variant
(solutions/28_fused_add_rmsnorm/<dsl>/kernel.py, whose solve it renames), it
runs the real DSL kernel on copies and discards the result, and returns the
eager one. Every launch rule is kept (a DSL kernel by origin, torch glue
only); the DSL share floor (`--dsl-min-share`, 0.25 by default) rejects it:
its DSL kernel is 0.07 of the call's kernel time on the H200 (session 14).
The dependence check (docs/launch-attribution.md) would be the proof; the
floor bounds what such a kernel can leave to torch. On its own (the CPU)
there is no _dsl_solve: eager only."""
import torch

_dsl_solve = globals().get("solve")


def solve(hidden_states, residual, weight):
    if _dsl_solve is not None:
        _dsl_solve(hidden_states.clone(), residual.clone(), weight.clone())  # result discarded
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
