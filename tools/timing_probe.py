"""Why does the trusted judge time honest kernels ~0.1 ms slower than the old
in-process judge (results/h200-judge-trusted.md)? One process, one shipped
kernel, CUDA events around each call exactly as the judge takes them, under
the conditions that differ between the two judges, interleaved call by call
(one call of each condition in turn, so drift over the run touches them all
alike), a second process holding a CUDA context throughout (as the checker
does):

  made         inputs made on the GPU by make_inputs just before the call (old judge)
  copied       inputs through pageable then pinned host memory by CPU copies (the
               new judge until session 12: its checker copied outputs on the CPU)
  copied-dma   inputs through preallocated pinned host memory by DMA only, out and
               back (the new judge since session 12), no CPU copy
  made+cpu     as made, then this thread copies 256 MB on the CPU before the call
  made+cpu2    as made, then the second process copies 256 MB on the CPU (another
               core: only the shared last-level cache is touched)
  2nd busy     as made, the second process having just run a kernel before each call
  staged-d2d   inputs made on the GPU one round earlier, copied device to device into
               fresh tensors just before the call (the new judge's device arenas)
  idle         as made, then 0.2 ms with the GPU idle and the CPU spinning (the judge's
               round trip between the empty round trip and the call)
  idle+kept    as idle, but tiny GPU sleeps keep the GPU busy until the call
  NAME+q       as NAME, but solve queued behind a 0.2 ms GPU sleep: the figure is the
               kernels' GPU time alone (event after the sleep to the end), without
               the CPU's dispatch
  copied+k, copied+warm, copied+touch, slept, spun: session 10-11 conditions
               (--conditions names them)

    python tools/timing_probe.py [--problem-dir problems/mlp_norm/28_fused_add_rmsnorm]
        [--kernel solutions/28_fused_add_rmsnorm/tirx/kernel.py] [--calls 50]

Prints one row per condition (median and quartiles of the events, ms) and
the ratio to "made". Needs a GPU; no mkb, no sandbox (the judge's sandbox is
measured by running mkb eval with MKB_SANDBOX_OFF instead)."""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "grader"))

from mkb_grader.problem import Problem  # noqa: E402

SECOND = r"""
import sys, time, torch
torch.ones(1, device="cuda").add_(1); torch.cuda.synchronize()
a, b = torch.empty(1 << 28, dtype=torch.uint8), torch.empty(1 << 28, dtype=torch.uint8)
a.fill_(1)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "kick":
        torch.ones(1 << 20, device="cuda").mul_(2); torch.cuda.synchronize()
    if line.strip() == "copy":
        b.copy_(a)
    print("done", flush=True)
"""
CPU_BYTES = 1 << 28


def load(path):
    spec = importlib.util.spec_from_file_location("kernel", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(mod)
    return mod.solve


SLEEP_CYCLES = 400_000  # ~0.2 ms at the H200's boost clock
IDLE_S = 0.0002  # the judge's gap between the empty round trip and the call (0.1-0.25 ms)
KEEP_CYCLES = 20_000  # ~10 us


def timed(solve, inputs, queued=False):
    """(event ms, CPU ms spent in the solve call). queued: the events
    bracket only the GPU work behind a GPU sleep long enough for the CPU to
    have queued all of solve's launches."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    mid = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    if queued:
        torch.cuda._sleep(SLEEP_CYCLES)
        mid.record()
    t0 = time.perf_counter()
    solve(*inputs)
    cpu_ms = (time.perf_counter() - t0) * 1e3
    end.record()
    torch.cuda.synchronize()
    return (mid if queued else start).elapsed_time(end), cpu_ms


def to_pinned(inputs):
    return [t.cpu().pin_memory() if isinstance(t, torch.Tensor) else t for t in inputs]


def from_pinned(host):
    out = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda").copy_(t)
           if isinstance(t, torch.Tensor) else t for t in host]
    torch.cuda.synchronize()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem-dir", default=os.path.join(ROOT, "problems/mlp_norm/28_fused_add_rmsnorm"))
    ap.add_argument("--kernel", default=os.path.join(ROOT, "solutions/28_fused_add_rmsnorm/tirx/kernel.py"))
    ap.add_argument("--workload", default="visible")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--conditions", default="made,copied,copied-dma,made+cpu,made+cpu2,2nd busy")
    ap.add_argument("--blocks", type=int, default=1,
                    help="repeat the whole run this many times in this process: the spread of a "
                         "condition's block medians is the noise within one process (noise study)")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per condition")
    args = ap.parse_args()
    problem = Problem(args.problem_dir, args.workload)
    solve = load(args.kernel)
    for s in range(10):  # compile and warm up
        timed(solve, problem.make_inputs(1000 + s, "cuda")[1])
    staged = {}  # condition -> inputs made one round earlier

    second = subprocess.Popen([sys.executable, "-c", SECOND], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    second.stdout.readline()
    scratch = []
    cpu_a = torch.ones(CPU_BYTES, dtype=torch.uint8)
    cpu_b = torch.empty(CPU_BYTES, dtype=torch.uint8)
    pinned = {}  # input index -> page-locked host buffer, allocated once

    def ask_second(word):
        second.stdin.write(word + "\n")
        second.stdin.flush()
        second.stdout.readline()

    def dma_round_trip(inputs):
        out = []
        for j, t in enumerate(inputs):
            if not isinstance(t, torch.Tensor):
                out.append(t)
                continue
            host = pinned.get(j)
            if host is None or host.shape != t.shape or host.dtype != t.dtype:
                host = pinned[j] = torch.empty_like(t, device="cpu").pin_memory()
            host.copy_(t)
            out.append(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda").copy_(host))
        torch.cuda.synchronize()
        return out

    def one(name, i):
        queued = name.endswith("+q")
        name = name[:-2] if queued else name
        inputs = problem.make_inputs(i, "cuda")[1]
        if name == "staged-d2d":
            made, inputs = inputs, staged.get(name) or inputs
            staged[name] = made
            inputs = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        if name == "copied-dma":
            inputs = dma_round_trip(inputs)
        if name == "made+cpu":
            torch.cuda.synchronize()
            cpu_b.copy_(cpu_a)
        if name == "made+cpu2":
            torch.cuda.synchronize()
            ask_second("copy")
        if name.startswith("copied") and name != "copied-dma":
            host = to_pinned(inputs)
            del inputs
            inputs = from_pinned(host)
            if name == "copied+k":
                torch.ones(1, device="cuda").add_(1)
            if name == "copied+warm":
                n = max(1, sum(t.numel() * t.element_size() for t in inputs
                               if isinstance(t, torch.Tensor)) // 4)
                if not scratch or scratch[0].numel() < n:
                    scratch[:] = [torch.empty(n, dtype=torch.float32, device="cuda")]
                scratch[0][:n].normal_()
            if name == "copied+touch":
                for t in inputs:
                    if isinstance(t, torch.Tensor) and t.is_cuda and t.numel():
                        t.copy_(t.clone())
            torch.cuda.synchronize()
        if name == "slept":
            torch.cuda.synchronize()
            time.sleep(0.005)
        if name == "spun":
            torch.cuda.synchronize()
            t_end = time.perf_counter() + 0.005
            while time.perf_counter() < t_end:
                pass
        if name == "idle":
            # the GPU idle for as long as the judge's round trip between the
            # candidate's empty round trip and its call, the CPU spinning
            torch.cuda.synchronize()
            t_end = time.perf_counter() + IDLE_S
            while time.perf_counter() < t_end:
                pass
        if name == "idle+kept":
            # as idle, but tiny GPU sleeps keep the GPU busy until the call
            torch.cuda.synchronize()
            t_end = time.perf_counter() + IDLE_S
            while time.perf_counter() < t_end:
                torch.cuda._sleep(KEEP_CYCLES)
        if name == "2nd busy":
            ask_second("kick")
        return timed(solve, inputs, queued)

    names = tuple(n.strip() for n in args.conditions.split(",") if n.strip())
    rows = {name: [] for name in names}
    blocks = {name: [] for name in names}  # per block: median ms
    for b in range(max(1, args.blocks)):
        first = {name: len(rows[name]) for name in names}
        for i in range(args.calls):
            for name in names:
                rows[name].append(one(name, b * args.calls + i))
        for name in names:
            blocks[name].append(statistics.median(p[0] for p in rows[name][first[name]:]))
    second.stdin.close()
    second.wait()

    base = statistics.median(p[0] for p in rows["made"])
    print(f"{torch.cuda.get_device_name()}  {os.path.relpath(args.kernel, ROOT)}  "
          f"{args.calls} calls each  ({time.strftime('%Y-%m-%d %H:%M:%S')} UTC)")
    print("| condition | median ms | q1 | q3 | / made | CPU in solve() ms |")
    print("|---|---|---|---|---|---|")
    for name, pairs in rows.items():
        ms = [p[0] for p in pairs]
        q1, med, q3 = statistics.quantiles(ms, n=4)
        print(f"| {name} | {statistics.median(ms):.4f} | {q1:.4f} | {q3:.4f} | "
              f"{statistics.median(ms) / base:.2f} | {statistics.median(p[1] for p in pairs):.4f} |")
    if args.blocks > 1:
        print(f"\nblock medians ({args.blocks} blocks of {args.calls} calls in this process):")
        for name, meds in blocks.items():
            spread = (max(meds) - min(meds)) / statistics.median(meds)
            print(f"  {name}: {' '.join(f'{m:.4f}' for m in meds)}  spread {100 * spread:.1f}%")
    if args.json:
        for name, pairs in rows.items():
            print(json.dumps({"kernel": os.path.relpath(args.kernel, ROOT), "condition": name,
                              "calls": args.calls, "block_medians_ms": blocks[name],
                              "median_ms": statistics.median(p[0] for p in pairs),
                              "cpu_in_solve_ms": statistics.median(p[1] for p in pairs)}))


if __name__ == "__main__":
    sys.exit(main())
