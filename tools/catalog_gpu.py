"""The catalog on a GPU: every problem's eager and torch.compile times, its
speed-of-light floor and its output statistics (developer tool, issue 3).

    python tools/catalog_gpu.py --out DIR [--problems 1,2,...] [--workloads visible,heldout]
                                [--compile [--compile-workloads visible,...]] [--timed 20]
                                [--timeout 120] [--inproc | --jobs N [--peaks OLD.jsonl [--memory-gb G]]]
                                [--carry OLD/catalog.jsonl]
    python tools/catalog_gpu.py --out DIR --merge RUN1.jsonl RUN2.jsonl ...

The ceilings (HBM copy bandwidth, bf16 and fp32 matmul throughput) are
measured first, in the same run. Each (problem, workload) then runs in its own
process with a timeout: inputs from a fixed seed, eager median of --timed calls
after 5 warm-ups (fresh inputs each call, as the judge times), torch.compile
median likewise on the --compile-workloads (default: visible; compile time
reported apart; torch.compile and dynamo with torch's default settings, its
graph count, graph breaks and any hit of dynamo's recompile limit noted),
output min/max/std/zero share, and the correctness allowance of each output
against the float64 anchor. What a worker wrote to stderr (a failed compile's
whole traceback) is kept in DIR/logs/ for rows that failed.

--jobs N runs N such processes at once: they build inputs, trace and compile
in parallel, and take a file lock for every timed section, so no two time at
once; the one timing pauses the others (SIGSTOP/SIGCONT), so their compiles do
not take the CPU from a launch-bound reference. --timeout is wall time, pauses
included. A row that ran out of GPU memory next to others is measured again
alone. --peaks takes each row's GPU memory from an earlier run's peak_gb
(times 1.5): rows then start largest first and only while they fit in
--memory-gb together (default 90% of the GPU's); a row larger than that runs
alone. A row whose torch.compile does not finish within --timeout keeps its
eager part, with the reason in the flags column. --carry fills the pairs this
run does not measure, or measured with an error, from an earlier run's rows
(flagged with that run), and gives a row of this run without a compiled time
the eager time of an earlier eager-only row (see carry()). Writes
DIR/catalog.jsonl (this run's rows), DIR/catalog-all.jsonl (the table's rows,
for the next --carry) and DIR/catalog.md (flags: eager < 50 us or > 10 s,
degenerate outputs) and prints the table.
"""
import argparse
import ast
import concurrent.futures
import contextlib
import fcntl
import glob
import json
import math
import operator
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "grader"))

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg}


def formula(text, params):
    """Evaluate a problem.json formula (numbers, names, + - * / **, parentheses)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            return params[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError(f"unsupported formula element in {text!r}")
    return float(ev(ast.parse(text, mode="eval")))


_LOCK = None  # with --jobs: a file whose flock makes timing exclusive across workers


def _registry(lock):
    """With --jobs: the folder where each live worker leaves a file named by
    its process group, so that the one timing can pause the others."""
    return os.path.join(os.path.dirname(lock), "workers")


def _signal_groups(groups, sig):
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, sig)


def _group_states(groups):
    """{pid: state letter} of every process in these process groups (/proc)."""
    states = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces
            if int(fields[2]) in groups:
                states[int(pid)] = fields[0]
    return states


def _wait_stopped(groups, limit_s=2.0):
    """SIGSTOP is delivered asynchronously: a paused process stops only once
    the scheduler runs it. Wait (bounded) until every process of these groups
    is stopped (T), or gone, so the timing that follows runs alone."""
    groups, deadline = set(groups), time.monotonic() + limit_s
    while groups and time.monotonic() < deadline:
        if all(s in "TtZX" for s in _group_states(groups).values()):
            return
        time.sleep(0.002)


@contextlib.contextmanager
def timing_lock():
    """Only one worker times at a time, and the others (which trace and
    compile meanwhile) are paused with SIGSTOP while it does: a compile on
    the CPU would otherwise slow a launch-bound reference's Python by up to
    2-3x. GPU work a paused worker had already queued still runs."""
    if _LOCK is None:
        yield
        return
    with open(_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        me = os.getpgrp()
        others = [int(n) for n in os.listdir(_registry(_LOCK)) if n.isdigit() and int(n) != me]
        _signal_groups(others, signal.SIGSTOP)
        _wait_stopped(others)
        try:
            yield
        finally:
            _signal_groups(others, signal.SIGCONT)
            fcntl.flock(f, fcntl.LOCK_UN)


def median_ms(fn, make, warmup, timed, device="cuda"):
    """The judge's procedure: fresh inputs per call, synchronised, median."""
    from mkb_grader.timing import Clock
    clock = Clock(device)
    with timing_lock():
        for _ in range(warmup):
            fn(*make())
            clock.sync()
        return statistics.median(clock.time_call(fn, make())[1] for _ in range(timed))


def measure(problem_dir, workload, timed, do_compile, device="cuda", emit=None):
    """The row of one (problem, workload), as worker() prints it. emit(row)
    receives the row once the eager part is done, before torch.compile (which
    may not finish: loops over sequences unroll or recompile per length)."""
    import torch
    from mkb_grader import correctness, numerics
    from mkb_grader.problem import Problem
    from mkb_grader.selfcheck import leaves
    p = Problem(problem_dir, workload)
    row = {"problem": p.meta["number"], "name": p.meta["name"], "family": p.meta["family"],
           "workload": workload, "params": p.params}
    row["flops"] = formula(p.meta["flops"], p.params)
    row["bytes"] = formula(p.meta["bytes"], p.params)
    seeds = iter(range(1, 10 ** 6))

    def fresh_seed():
        return next(seeds)

    def make():  # margin problems redraw from the next seeds, as the judge does
        return p.make_inputs(fresh_seed(), device, fresh_seed)[1]

    with numerics.strict():
        _, inputs = p.make_inputs(fresh_seed(), device, fresh_seed)
        t0 = time.monotonic()
        expected = p.reference(*correctness.clone_inputs(inputs))
        if device == "cuda":
            torch.cuda.synchronize()
        row["first_call_s"] = round(time.monotonic() - t0, 3)
        anchor = p.reference(*correctness.to_anchor(inputs))
        outs = []
        for k, (e, a) in enumerate(zip(leaves(expected), leaves(anchor))):
            v = e.detach().to(torch.float64)
            o = {"output": k, "dtype": str(e.dtype).replace("torch.", ""), "shape": list(e.shape)}
            if e.numel():
                o.update(min=v.min().item(), max=v.max().item(),
                         std=v.std().item() if e.numel() > 1 else 0.0,
                         zeros=(v == 0).double().mean().item())
                if e.is_floating_point():
                    o["allowance"] = correctness.allowance(e, a)
            outs.append(o)
        row["outputs"] = outs
        del expected, anchor, inputs
        row["eager_ms"] = median_ms(p.reference, make, 5, timed, device)
        if device == "cuda":
            row["peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
    if do_compile:
        if emit:
            emit(row)
        # torch's defaults throughout, as a user gets them: among them dynamo's
        # recompile limit (8 per frame), past which a frame runs eagerly.
        from torch._dynamo.utils import counters
        counters.clear()
        compiled = torch.compile(p.reference)
        t0 = time.monotonic()
        try:
            with numerics.strict():
                compiled(*make())
                if device == "cuda":
                    torch.cuda.synchronize()
                row["compile_s"] = round(time.monotonic() - t0, 2)
                row["compiled_ms"] = median_ms(compiled, make, 3, timed, device)
        except Exception as exc:  # the eager row stands; say why there is no compiled time
            traceback.print_exc()  # whole, into the worker's log
            row["compile_error"] = summary(f"{type(exc).__name__}: {exc}")
        row["graphs"] = counters["stats"]["unique_graphs"]
        row["graph_breaks"] = sum(counters["graph_break"].values())
    return row


def worker(problem_dir, workload, timed, do_compile, device):
    if _LOCK is not None:  # visible to the others' timing_lock(); the parent removes it
        open(os.path.join(_registry(_LOCK), str(os.getpgrp())), "w").close()

    def emit(row):
        print(json.dumps(row), flush=True)
    emit(measure(problem_dir, workload, timed, do_compile, device, emit))


def summary(text):
    """One line for a table: the last 'SomethingError: message' line of a
    traceback or exception text, else its last line."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    named = [l for l in lines if l.split(":")[0].split(".")[-1].endswith(("Error", "Exception"))]
    return ((named or lines or ["no output"])[-1])[:240]


def last_row(stdout):
    """The last JSON row a worker printed (the eager part, if it got no further)."""
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8", "replace")
    rows = [l for l in (stdout or "").splitlines() if l.startswith("{")]
    return json.loads(rows[-1]) if rows else None


_WORKERS = set()  # live worker processes, each the leader of its own process group


def stop_workers(signum, _frame):
    """SIGTERM/SIGINT (e.g. `timeout` around a run): the workers' process
    groups go too, so no compile outlives the run and holds the GPU; the
    rows written so far stay in catalog.jsonl."""
    for proc in list(_WORKERS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    os._exit(128 + signum)  # not sys.exit: the pool would go on starting the queued rows


# A row's GPU memory beside others is taken as its earlier peak (--peaks)
# times this (compiling and its autotuning allocate beyond the eager peak).
PEAK_HEADROOM = 1.5


class MemoryBudget:
    """With --jobs and --peaks: a row starts only when its earlier peak fits
    beside the rows running (parallel workers ran 11 rows out of memory on
    the H200); a row bigger than the whole budget runs alone."""

    def __init__(self, total_gb):
        self.total, self.used, self.running = total_gb, 0.0, 0
        self.cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, gb, label):
        with self.cond:
            self.cond.wait_for(lambda: self.running == 0 or self.used + gb <= self.total)
            print(f"{label}: starts ({gb:.1f} GB by --peaks, {self.used:.1f} of {self.total:.1f} GB held)",
                  flush=True)
            self.used += gb
            self.running += 1
        try:
            yield
        finally:
            with self.cond:
                print(f"{label}: ends, {gb:.1f} GB free again", flush=True)
                self.used -= gb
                self.running -= 1
                self.cond.notify_all()


def read_peaks(path):
    """(problem, workload) -> peak GB from an earlier run's rows."""
    peaks = {}
    for line in open(path):
        r = json.loads(line)
        if isinstance(r.get("peak_gb"), (int, float)):
            peaks[(r["problem"], r["workload"])] = float(r["peak_gb"])
    return peaks


def run_one(d, wl, args):
    """One row: in this process (--inproc, faster: no torch start-up per
    problem), or in a child process with a timeout (isolates crashes/hangs)."""
    do_compile = args.compile and wl in args.compile_workloads.split(",")
    if args.inproc:
        import torch
        try:
            row = measure(d, wl, args.timed, do_compile, args.device)
        except Exception as exc:  # a broken reference must not end the run
            row = {"error": summary(f"{type(exc).__name__}: {exc}")}
        if args.device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        return row
    cmd = [sys.executable, __file__, "--worker", d, wl, "--out", args.out, "--timed", str(args.timed),
           "--device", args.device]
    if args.jobs > 1:
        cmd += ["--lock", os.path.join(args.out, "timing.lock")]
    if do_compile:
        cmd.append("--compile")  # the worker compiles whatever workload it is given
    env = dict(os.environ)
    if args.jobs > 1:  # N compiling workers share the cores
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 2) // (args.jobs + 1))))
    # Own process group: on a timeout the worker's compile processes go with it.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    _WORKERS.add(proc)
    try:
        out, err = proc.communicate(timeout=args.timeout)
        why, why_compile = summary(err), "the worker died in torch.compile: " + summary(err)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        if args.jobs > 1:  # it may have died timing, with the others paused
            _signal_groups([w.pid for w in list(_WORKERS) if w is not proc], signal.SIGCONT)
        why = f"timed out after {args.timeout:.0f} s"
        why_compile = f"torch.compile did not finish within the {args.timeout:.0f} s per row"
    finally:
        _WORKERS.discard(proc)
        if args.jobs > 1:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(args.out, "workers", str(proc.pid)))
    row = last_row(out) or {"error": why}
    if "torch._dynamo hit config." in err:  # dynamo's warning that a frame went eager for good
        row["recompile_limit"] = True
    if do_compile and "error" not in row and "compiled_ms" not in row and "compile_error" not in row:
        row["compile_error"] = why_compile  # only the eager part came
    if err.strip() and ({"error", "compile_error", "recompile_limit"} & row.keys()):
        os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)  # all the worker said, for a closer look
        with open(os.path.join(args.out, "logs", f"{os.path.basename(d)}-{wl}.txt"), "w") as f:
            f.write(err)
    return row


def ceilings():
    import torch
    n = 1 << 30  # 2 GiB of bf16
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), lambda: (), 3, 20)
    bw = 2 * a.numel() * a.element_size() / (ms * 1e-3)
    del a, b
    out = {"hbm_bytes_per_s": bw}
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
        m = 8192
        x = torch.randn(m, m, device="cuda", dtype=dt)
        y = torch.randn(m, m, device="cuda", dtype=dt)
        torch.backends.cuda.matmul.allow_tf32 = False
        ms = median_ms(lambda: x @ y, lambda: (), 3, 10)
        out[f"{name}_flops_per_s"] = 2 * m ** 3 / (ms * 1e-3)
    return out


def sol_ms(row, ceil, dtypes):
    fp32_only = all(d in ("float32", "fp32") for d in dtypes)
    peak = ceil["fp32_flops_per_s"] if fp32_only else ceil["bf16_flops_per_s"]
    return 1e3 * max(row["flops"] / peak, row["bytes"] / ceil["hbm_bytes_per_s"])


def flags(row):
    f = []
    if "error" in row:
        return ["ERROR"]
    if row["workload"] != "smoke":  # smoke is tiny on purpose: CPU tests only
        if row["eager_ms"] < 0.05:
            f.append("eager < 50 us")
        if row["eager_ms"] > 10_000:
            f.append("eager > 10 s")
    for o in row["outputs"]:
        if any(not math.isfinite(o[k]) for k in ("min", "max", "std") if k in o):
            f.append(f"output {o['output']} not finite")
        elif "std" in o and (o["std"] == 0 or o["zeros"] > 0.9):
            f.append(f"output {o['output']} degenerate")
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--problems", default="", help="comma-separated numbers, started in this order "
                    "(default: all, in catalog order)")
    ap.add_argument("--workloads", default="visible,heldout")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--compile-workloads", default="visible",
                    help="the workloads --compile times torch.compile on (comma-separated)")
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--inproc", action="store_true", help="no child process per problem")
    ap.add_argument("--jobs", type=int, default=1,
                    help="child processes at once; they trace and compile in parallel and time one at a time")
    ap.add_argument("--peaks", default="", help="a catalog.jsonl whose peak_gb says how much GPU memory "
                    "each row takes: with --jobs, rows start only while they fit in --memory-gb together")
    ap.add_argument("--memory-gb", type=float, default=0,
                    help="with --peaks: the GPU memory rows may hold at once (default: 90%% of the GPU's)")
    ap.add_argument("--carry", default="", help="a catalog.jsonl whose rows fill the (problem, workload) "
                    "pairs this run does not measure, marked with the run they come from")
    ap.add_argument("--merge", nargs="+", metavar="JSONL", help="measure nothing: one table from the rows "
                    "of these runs, oldest first (later rows win as with --carry)")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script on the smoke workload")
    ap.add_argument("--problems-dir", default=os.path.join(ROOT, "problems"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", nargs=2)
    ap.add_argument("--lock", default=None)
    args = ap.parse_args()
    if args.jobs > 1 and args.inproc:
        ap.error("--jobs needs child processes; drop --inproc")
    if args.merge:
        return merge(args.merge, args.out)
    if args.worker:
        global _LOCK
        _LOCK = args.lock
        worker(args.worker[0], args.worker[1], args.timed, args.compile, args.device)
        return 0
    import torch
    signal.signal(signal.SIGTERM, stop_workers)
    signal.signal(signal.SIGINT, stop_workers)
    os.makedirs(args.out, exist_ok=True)
    if args.device == "cuda":
        ceil = ceilings()
        torch.cuda.empty_cache()
    else:  # a dry run of the script itself: no meaningful speed of light
        ceil = {"hbm_bytes_per_s": float("inf"), "bf16_flops_per_s": float("inf"),
                "fp32_flops_per_s": float("inf")}
    if args.jobs > 1:  # no stale process groups from an earlier run in DIR: they would be paused
        shutil.rmtree(os.path.join(args.out, "workers"), ignore_errors=True)
        os.makedirs(os.path.join(args.out, "workers"))
    print("ceilings:", json.dumps({k: f"{v:.4g}" for k, v in ceil.items()}), flush=True)
    wanted = [int(x) for x in args.problems.split(",") if x]
    dirs = sorted(glob.glob(os.path.join(args.problems_dir, "*", "[0-9][0-9]_*")),
                  key=lambda d: os.path.basename(d))
    tasks = []
    for d in dirs:
        meta = json.load(open(os.path.join(d, "problem.json")))
        if not wanted or meta["number"] in wanted:
            tasks += [(d, meta, wl) for wl in args.workloads.split(",")]
    peaks = read_peaks(args.peaks) if args.peaks else {}
    if wanted:  # started in the order given: with --jobs, put the slow compiles first
        tasks.sort(key=lambda t: wanted.index(t[1]["number"]))
    elif peaks:  # the largest first, while the GPU is empty; the small ones fill in beside
        tasks.sort(key=lambda t: -peaks.get((t[1]["number"], t[2]), 0))
    budget = None
    if peaks and args.jobs > 1:
        total = args.memory_gb or (0.9 * torch.cuda.mem_get_info()[1] / 1e9 if args.device == "cuda" else 0)
        if total <= 0:
            ap.error("--peaks on the CPU needs --memory-gb")
        budget = MemoryBudget(total)
    jsonl = open(os.path.join(args.out, "catalog.jsonl"), "a")

    def one(task):
        d, meta, wl = task
        gb = PEAK_HEADROOM * peaks.get((meta["number"], wl), 0)
        with budget.hold(gb, f"{meta['number']:02d} {wl}") if budget else contextlib.nullcontext():
            t0 = time.monotonic()
            row = run_one(d, wl, args)
        row.update(problem=meta["number"], name=meta["name"], family=meta["family"], workload=wl,
                   wall_s=round(time.monotonic() - t0, 1))
        if "error" not in row:
            row["sol_ms"] = sol_ms(row, ceil, meta.get("dtypes", []))
        row["flags"] = flags(row)
        return row

    def record(row):
        jsonl.write(json.dumps(row) + "\n")
        jsonl.flush()
        print(f"{row['problem']:02d} {row['workload']}: {row.get('eager_ms', '-')} ms "
              f"compiled {row.get('compiled_ms', '-')} {row['flags']} {cell(row.get('error', ''), 200)}", flush=True)

    rows = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        # Each row is written as it finishes: a run stopped from outside keeps them all.
        for fut in concurrent.futures.as_completed([pool.submit(one, t) for t in tasks]):
            row = fut.result()
            rows[(row["problem"], row["workload"])] = row
            record(row)
    if args.jobs > 1:  # parallel workers can exhaust GPU memory together: those rows again, alone
        again = [t for t in tasks if "out of memory" in rows[(t[1]["number"], t[2])].get("error", "")]
        args.jobs = 1
        for t in again:
            row = one(t)
            row["retried_alone"] = True
            rows[(row["problem"], row["workload"])] = row
            record(row)
    if args.carry:
        carry(rows, args.carry)
    finish(rows, ceil, args.out)
    return 0


def run_label(path):
    """How a table names the run a row comes from: its file, or its folder
    when the file has the script's own name."""
    name = os.path.basename(path)
    if name.startswith("catalog"):
        name = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return name.removesuffix(".jsonl")


def eager_only(row):
    """A row from a run without --compile: its eager time was taken with no
    compile beside it (in its process or another worker's)."""
    return not ({"error", "compile_error", "compiled_ms"} & row.keys())


def carry(rows, path, latest="this run"):
    """Fill rows (keyed by (problem, workload)) from an earlier run's jsonl:
    pairs not measured; pairs whose new row is an error (the old row stays,
    with the new error attached); and pairs whose new row got no compiled
    time, where the old row is eager only (its eager time stays, with the new
    compile outcome: an eager time stands beside a compiled one from its own
    process, or else comes from a run that timed nothing else)."""
    label = run_label(path)
    for line in open(path):
        old = json.loads(line)
        key = (old["problem"], old["workload"])
        new = rows.get(key)
        if new is None or ("error" in new and "error" not in old):
            if "eager_from" not in old:  # a row of two runs names both already
                old.setdefault("carried_from", label)
            if new is not None:
                old["rerun_error"] = new["error"]
            rows[key] = old
        elif ("compile_error" in new and "compiled_ms" not in new and "eager_from" not in new
              and eager_only(old)):
            for k in ("compile_error", "graphs", "graph_breaks", "recompile_limit"):
                if k in new:
                    old[k] = new[k]
            old["compile_from"] = new.get("carried_from", latest)
            old["eager_from"] = label
            rows[key] = old


def finish(rows, ceil, out):
    ordered = [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1] != "visible", k[1]))]
    with open(os.path.join(out, "catalog-all.jsonl"), "w") as f:  # the table's rows, for a later --carry
        f.writelines(json.dumps(r) + "\n" for r in ordered)
    write_table(ordered, ceil, os.path.join(out, "catalog.md"))
    print(open(os.path.join(out, "catalog.md")).read())


def merge(paths, out):
    """--merge: no measuring; the rows of several runs, the latest winning as
    --carry decides, rendered as one table."""
    rows = {(r["problem"], r["workload"]): r for r in map(json.loads, open(paths[-1]))}
    for path in reversed(paths[:-1]):  # each earlier file only fills in
        carry(rows, path, run_label(paths[-1]))
    os.makedirs(out, exist_ok=True)
    finish(rows, None, out)
    return 0


def cell(text, limit):
    """Text for one table cell: one line, no column bars, at most limit
    characters; the start is kept (summary() already chose the telling line)."""
    text = " ".join(str(text).replace("|", "/").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def plural(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def write_table(rows, ceil, path):
    with open(path, "w") as f:
        if ceil is None:
            f.write("Rows merged from several runs; each row's SOL ms uses the ceilings its own run measured.\n\n")
        else:
            f.write(f"Ceilings measured in this run: HBM copy {ceil['hbm_bytes_per_s'] / 1e12:.2f} TB/s, "
                    f"bf16 matmul {ceil['bf16_flops_per_s'] / 1e12:.0f} TFLOP/s, "
                    f"fp32 matmul {ceil['fp32_flops_per_s'] / 1e12:.1f} TFLOP/s\n\n")
        f.write("| # | name | workload | eager ms | compiled ms | compile s | SOL ms | eager/SOL | "
                "outputs: dtype [shape] min..max std zeros allowance | flags |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "error" in r:
                f.write(f"| {r['problem']:02d} | {r['name']} | {r['workload']} | - | - | - | - | - | "
                        f"{cell(r['error'], 150)} | ERROR |\n")
                continue
            outs = "; ".join(
                f"{o['dtype']} {o['shape']} {fmt(o.get('min'), '.3g')}..{fmt(o.get('max'), '.3g')} "
                f"{fmt(o.get('std'), '.3g')} {fmt(o.get('zeros'), '.2f')} {fmt(o.get('allowance'), '.2g')}"
                for o in r["outputs"])
            notes = list(r["flags"])
            if "eager_from" in r:
                notes.append(f"eager from {r['eager_from']}, compile from {r['compile_from']}")
            if r.get("graph_breaks"):
                notes.append(f"compile: {plural(r['graphs'], 'graph')}, {plural(r['graph_breaks'], 'graph break')}")
            if r.get("recompile_limit"):
                notes.append("compile: dynamo's recompile limit reached, a frame ran eagerly after it")
            if "compile_error" in r:
                notes.append("compile: " + cell(r["compile_error"], 120))
            if "rerun_error" in r:
                notes.append("a later run failed: " + cell(r["rerun_error"], 120))
            if "carried_from" in r:
                notes.append(f"from {r['carried_from']}")
            f.write(f"| {r['problem']:02d} | {r['name']} | {r['workload']} | {fmt(r['eager_ms'])} | "
                    f"{fmt(r.get('compiled_ms'))} | {fmt(r.get('compile_s'), '.1f')} | {fmt(r['sol_ms'], '.4f')} | "
                    f"{r['eager_ms'] / r['sol_ms'] if r['sol_ms'] else float('inf'):.1f} | {outs} | "
                    f"{', '.join(notes)} |\n")


if __name__ == "__main__":
    sys.exit(main())
