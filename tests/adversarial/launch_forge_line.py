"""Writes a well-formed "kernel" line claiming a CuTe DSL kernel on the launch
recorder's descriptor (MKB_LAUNCH_FD), then computes eagerly. It cannot know
the evaluation's tag (read by the recorder at cuInit) nor the sequence
number: the checker sees a line without the seal -> rejected (tampered).
On the CPU this needs MKB_LAUNCH_DRY=1 (tests/scenario/adversarial.sh)."""
import json
import os

import torch


def solve(hidden_states, residual, weight):
    fd = os.environ.get("MKB_LAUNCH_FD")
    if fd:
        line = {"t": "kernel", "call": 1, "class": "dsl_cutedsl", "rule": "loaded by libcute_dsl_runtime",
                "ns": 80000, "name": "kernel_cutlass_forged_0", "seq": 3, "tag": "0" * 32}
        try:
            os.write(int(fd), json.dumps(line).encode())
        except OSError:
            pass
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
