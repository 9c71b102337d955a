"""End-to-end timing (PROTOCOL.md "Timing (paper)"): fresh inputs per call,
built untimed; synchronise, time one call, synchronise; median of the draws.
No L2 flush, no CUDA graphs: Python dispatch is part of the time."""
import statistics
import time

import torch


class Clock:
    """CUDA events on a GPU, perf_counter on the CPU (test mode)."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def time_call(self, fn, args):
        """Run fn(*args) once; return (result, milliseconds)."""
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            out = fn(*args)
            end.record()
            torch.cuda.synchronize()
            return out, start.elapsed_time(end)
        t0 = time.perf_counter()
        out = fn(*args)
        return out, (time.perf_counter() - t0) * 1e3


def median(values):
    return statistics.median(values) if values else None
