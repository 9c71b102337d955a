"""Does where a process's memory landed set a kernel's end-to-end time?
(issue 11; docs/judge.md, "Noise"). One kernel timed in several fresh
processes per arm, the arms interleaved process by process so drift over the
run touches them alike:

  random    as every process starts: address-space randomisation, random hash seed
  fixed     no randomisation and PYTHONHASHSEED=0 (what `mkb eval --fixed-layout` gives)
  aslr-off  no randomisation only      hash0  PYTHONHASHSEED=0 only

Each process imports the kernel, makes 20 warm-up calls, then BLOCKS blocks of
CALLS calls on inputs made just before each call, as the judge's checker
makes them; a block's figure is its median call (CUDA events around the call
on a GPU, as the judge takes them; the CPU's clock with --device cpu). No
judge, no sandbox, one process at a time: only the process differs.

    python tools/layout_probe.py [--kernel K] [--problem-dir D] [--device cuda|cpu]
        [--workload visible] [--processes 6] [--arms random,fixed] [--json]

Prints one row per arm: the per-process medians, their spread between
processes ((max - min) / median, and the interquartile range over the median,
which one disturbed process does not set) and the spread of blocks inside
one process (the median over processes): the first well above the last says
the process, not the calls, sets the figure."""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARMS = {  # arm -> (address randomisation off, hash seed 0)
    "random": (False, False),
    "fixed": (True, True),
    "aslr-off": (True, False),
    "hash0": (False, True),
}


def spread(values):
    return (max(values) - min(values)) / statistics.median(values) if values else None


def iqr_share(values):
    """Interquartile range over the median: a spread one disturbed process
    (a shared machine's) does not set, beside max - min, which it does."""
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return (q[2] - q[0]) / statistics.median(values)


def child(args):
    """One process: the kernel's block medians (ms) and its layout, as one JSON line."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "grader"))
    from mkb_grader.problem import Problem, load_module
    from mkb_grader.timing import process_layout

    problem = Problem(args.problem_dir, args.workload)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.kernel)))
    mod = load_module("kernel", args.kernel)
    cuda = args.device == "cuda"

    def call(seed):
        inputs = problem.make_inputs(seed, args.device)[1]
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            mod.solve(*inputs)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        mod.solve(*inputs)
        return (time.perf_counter() - t0) * 1e3

    for s in range(20):
        call(1000 + s)
    blocks = [statistics.median(call(10_000 * (b + 1) + i) for i in range(args.calls))
              for b in range(args.blocks)]
    print(json.dumps({"blocks": blocks, **process_layout()}))


def run_arm(args, arm):
    no_aslr, hash0 = ARMS[arm]
    env = dict(os.environ)
    env.pop("PYTHONHASHSEED", None)
    if hash0:
        env["PYTHONHASHSEED"] = "0"
    argv = [sys.executable, os.path.abspath(__file__), "--child", "--kernel", args.kernel,
            "--problem-dir", args.problem_dir, "--device", args.device, "--workload", args.workload,
            "--calls", str(args.calls), "--blocks", str(args.blocks)]
    if no_aslr:
        argv = ["setarch", platform.machine(), "-R"] + argv
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        raise SystemExit(f"layout_probe: the {arm} process failed (rc {out.returncode}): {out.stderr[-600:]}")
    row = json.loads(lines[-1])
    if row["aslr"] == no_aslr or (row["hash_seed"] == "0") != hash0:
        raise SystemExit(f"layout_probe: the {arm} process did not get its layout: {row}")
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default=os.path.join(ROOT, "solutions/28_fused_add_rmsnorm/tirx/kernel.py"))
    ap.add_argument("--problem-dir", default=os.path.join(ROOT, "problems/mlp_norm/28_fused_add_rmsnorm"))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--workload", default="visible")
    ap.add_argument("--processes", type=int, default=6, help="fresh processes per arm")
    ap.add_argument("--arms", default="random,fixed", help="comma list of " + ", ".join(ARMS))
    ap.add_argument("--calls", type=int, default=50, help="calls per block (the judge's 50)")
    ap.add_argument("--blocks", type=int, default=3, help="blocks per process")
    ap.add_argument("--json", action="store_true", help="also print each process's row")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in arms if a not in ARMS]
    if bad or not arms or args.processes < 2 or args.calls < 1 or args.blocks < 1:
        ap.error(f"--arms from {', '.join(ARMS)} (not {bad}); --processes >= 2; --calls, --blocks >= 1")
    rows = {a: [] for a in arms}
    for i in range(args.processes):
        for arm in (arms if i % 2 == 0 else arms[::-1]):
            row = run_arm(args, arm)
            row.update(arm=arm, process=i + 1)
            rows[arm].append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    print(f"\n{os.path.relpath(args.kernel, ROOT)} ({args.device}, {args.workload}): "
          f"{args.processes} processes per arm, {args.blocks} blocks of {args.calls} calls each\n")
    print("| arm | per-process medians (ms) | between processes | IQR between processes | blocks inside a process |")
    print("|---|---|---|---|---|")
    for arm in arms:
        medians = [statistics.median(r["blocks"]) for r in rows[arm]]
        inside = statistics.median(spread(r["blocks"]) for r in rows[arm])
        print(f"| {arm} | {' '.join(f'{m:.4f}' for m in medians)} | {100 * spread(medians):.1f}% "
              f"| {100 * iqr_share(medians):.1f}% | {100 * inside:.1f}% |")


if __name__ == "__main__":
    main()
