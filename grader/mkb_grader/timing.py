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


# ---- uncertainty of a median (extra fields; the median itself is the paper's) ----

def median_ci(values, level=0.95):
    """Distribution-free interval of the median: the order statistics
    (k-th smallest, k-th largest) with k the largest rank whose binomial(n,
    1/2) tail leaves at least level covered. None when too few values."""
    n = len(values)
    if n < 6:
        return None
    xs = sorted(values)
    # P(Binomial(n, 1/2) < k), accumulated exactly
    from math import comb
    total = 2 ** n
    tail, k = 0, 0
    while True:
        nxt = tail + comb(n, k)
        if 2 * nxt / total > 1 - level:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return None
    return [xs[k - 1], xs[n - k]]


def ratio_ci(numerators, denominators, level=0.95, resamples=2000, seed=12345):
    """Percentile bootstrap interval of median(numerators) / median(denominators)
    over paired calls (same inputs), resampling the pairs. Fixed seed: the
    same calls give the same interval."""
    import random
    n = len(numerators)
    if n < 6 or n != len(denominators):
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        den = statistics.median(denominators[i] for i in idx)
        if den > 0:
            ratios.append(statistics.median(numerators[i] for i in idx) / den)
    if len(ratios) < resamples // 2:
        return None
    ratios.sort()
    lo = ratios[int((1 - level) / 2 * len(ratios))]
    hi = ratios[min(len(ratios) - 1, int((1 + level) / 2 * len(ratios)))]
    return [lo, hi]
