"""Why does the trusted judge time honest kernels ~0.1 ms slower than the old
in-process judge (results/h200-judge-trusted.md)? One process, one shipped
kernel, CUDA events around each call exactly as the judge takes them, under
the conditions that differ between the two judges, interleaved call by call
(one call of each condition in turn, so drift over the run touches them all
alike), a second process holding a CUDA context throughout (as the checker
does):

  made         inputs made on the GPU by make_inputs just before the call (old judge)
  copied       inputs copied in from pinned host memory just before the call (new judge)
  copied+k     as copied, then one small kernel of ours (the new judge's prepare)
  copied+warm  as copied, then GPU work the inputs' size (MKB_JUDGE_PREP=warm)
  copied+touch as copied, then every input rewritten in place on the GPU (MKB_JUDGE_PREP=touch)
  2nd busy     as made, the second process having just run a kernel before each call
  slept        as made, then the process sleeps 5 ms before the call (not in the default set)
  spun         as made, then the process busy-waits 5 ms before the call (not in the default set)

    python tools/timing_probe.py [--problem-dir problems/mlp_norm/28_fused_add_rmsnorm]
        [--kernel solutions/28_fused_add_rmsnorm/tirx/kernel.py] [--calls 50]

Prints one row per condition (median and quartiles of the events, ms) and
the ratio to "made". Needs a GPU; no mkb, no sandbox (the judge's sandbox is
measured by running mkb eval with MKB_SANDBOX_OFF instead)."""
import argparse
import importlib.util
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
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "kick":
        torch.ones(1 << 20, device="cuda").mul_(2); torch.cuda.synchronize()
    print("done", flush=True)
"""


def load(path):
    spec = importlib.util.spec_from_file_location("kernel", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(mod)
    return mod.solve


def timed(solve, inputs):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    solve(*inputs)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


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
    args = ap.parse_args()
    problem = Problem(args.problem_dir, args.workload)
    solve = load(args.kernel)
    for s in range(10):  # compile and warm up
        timed(solve, problem.make_inputs(1000 + s, "cuda")[1])

    second = subprocess.Popen([sys.executable, "-c", SECOND], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    second.stdout.readline()
    scratch = []

    def one(name, i):
        inputs = problem.make_inputs(i, "cuda")[1]
        if name.startswith("copied"):
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
        if name == "2nd busy":
            second.stdin.write("kick\n")
            second.stdin.flush()
            second.stdout.readline()
        return timed(solve, inputs)

    names = ("made", "copied", "copied+k", "copied+warm", "copied+touch", "2nd busy")
    rows = {name: [] for name in names}
    for i in range(args.calls):
        for name in names:
            rows[name].append(one(name, i))
    second.stdin.close()
    second.wait()

    base = statistics.median(rows["made"])
    print(f"{torch.cuda.get_device_name()}  {os.path.relpath(args.kernel, ROOT)}  "
          f"{args.calls} calls each  ({time.strftime('%Y-%m-%d %H:%M:%S')} UTC)")
    print("| condition | median ms | q1 | q3 | / made |")
    print("|---|---|---|---|---|")
    for name, ms in rows.items():
        q1, med, q3 = statistics.quantiles(ms, n=4)
        print(f"| {name} | {statistics.median(ms):.4f} | {q1:.4f} | {q3:.4f} | "
              f"{statistics.median(ms) / base:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
