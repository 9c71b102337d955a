"""Where a candidate process's start-up goes, and what a pre-imported parent
would save (issue 9, "Start-up: a pre-forked candidate" in docs/judge.md).

    python tools/startup_probe.py [--device cuda|cpu] [--rounds 3] [--dsl cutedsl,tirx]

Two ways to reach "ready to import kernel.py" are timed, each --rounds times,
one after the other (nothing else should run):

  cold    a new interpreter (`python -c`), as the judge starts a candidate
          today: interpreter start, `import torch`, the DSL's import, CUDA's
          initialisation (the first tensor on the GPU and a synchronise), one
          small torch operation.
  forked  one parent imports torch and the DSL (never CUDA), then forks a
          child per round; the child does what follows the imports in cold:
          CUDA's initialisation and the small operation. This is what a
          zygote would leave per evaluation.

Each phase is the median over the rounds in seconds; the last table row is
the time from start (exec or fork) to ready. The parent also reports whether
the imports initialised CUDA (a forked child cannot use a CUDA context made
before the fork, so a zygote needs them not to). Prints a markdown table,
and one JSON line per round with --json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

IMPORTS = {"cutedsl": "import cutlass, cutlass.cute", "tirx": "import tvm\nfrom tvm.script import tirx", "none": "pass"}

# Runs in the child (cold: as `python -c`, after "t_start" is taken by the
# parent just before the exec; forked: after the fork, imports skipped).
PHASES = r'''
import json, os, sys, time
marks = [("start", T_START)]
def mark(name):
    marks.append((name, time.time()))
mark("interpreter")
if not SKIP_IMPORTS:
    import torch
    mark("import torch")
    exec(DSL_IMPORT)
    mark("import dsl")
import torch
if DEVICE == "cuda":
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    mark("cuda init")
else:
    x = torch.zeros(1)
    mark("cuda init")
y = (torch.ones(256, 256, device=x.device) * 2).sum()
float(y)
mark("first op")
print(json.dumps({"marks": marks}), flush=True)
'''


def phases(marks):
    out = {}
    for (_, a), (name, b) in zip(marks, marks[1:]):
        out[name] = b - a
    out["ready"] = marks[-1][1] - marks[0][1]
    return out


def cold(python, dsl, device):
    t = time.time()
    code = (f"T_START = {t!r}\nSKIP_IMPORTS = False\nDSL_IMPORT = {IMPORTS[dsl]!r}\n"
            f"DEVICE = {device!r}\n" + PHASES)
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"cold start failed ({dsl}): {r.stderr[-2000:]}")
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
    return phases(json.loads(line)["marks"])


def forked(dsl, device, rounds):
    """In this process: the imports once, then a child per round."""
    t = time.time()
    import torch  # noqa: F401  (what the zygote keeps)
    t_torch = time.time()
    initialised_by = []  # the import statements after which torch's CUDA was initialised
    for statement in IMPORTS[dsl].split("\n"):
        exec(statement, {})
        if torch.cuda.is_initialized():
            initialised_by.append(statement)
    t_dsl = time.time()
    parent = {"import torch": t_torch - t, "import dsl": t_dsl - t_torch,
              "cuda initialised by the imports": bool(torch.cuda.is_initialized()),
              "cuda initialised after": initialised_by}
    rows = []
    er, ew = os.pipe()
    errors = os.fdopen(er)
    os.set_blocking(er, False)
    for _ in range(rounds):
        r, w = os.pipe()
        t = time.time()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = (f"T_START = {t!r}\nSKIP_IMPORTS = True\nDSL_IMPORT = ''\nDEVICE = {device!r}\n"
                    + PHASES)
            try:
                with os.fdopen(w, "w") as f:
                    sys.stdout = f
                    exec(code, {})
                os._exit(0)
            except BaseException as e:  # report, never return into the parent's loop
                os.write(ew, f"{e!r}".encode())
                os._exit(1)
        os.close(w)
        with os.fdopen(r) as f:
            text = f.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not text.strip():
            parent["forked child failed"] = errors.read().strip()[-300:] or f"status {status}"
            return parent, []
        p = phases(json.loads(text.strip().splitlines()[-1])["marks"])
        p.pop("import torch", None)
        p.pop("import dsl", None)
        rows.append(p)
    return parent, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dsl", default="cutedsl,tirx")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--forked-env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in the pre-importing parent before its imports (e.g. "
                         "PYTORCH_NVML_BASED_CUDA_CHECK=1: torch's device count through NVML, "
                         "which does not initialise CUDA); repeatable")
    a = ap.parse_args()
    order = ["interpreter", "import torch", "import dsl", "cuda init", "first op", "ready"]
    table = []
    for dsl in a.dsl.split(","):
        if dsl not in IMPORTS:
            raise SystemExit(f"unknown DSL '{dsl}' (cutedsl, tirx)")
        cold_rows = [cold(sys.executable, dsl, a.device) for _ in range(a.rounds)]
        # the fork side runs in a child of its own so each DSL's parent starts clean
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                for kv in a.forked_env:
                    name, _, value = kv.partition("=")
                    os.environ[name] = value
                parent, rows = forked(dsl, a.device, a.rounds)
                os.write(w, json.dumps({"parent": parent, "rows": rows}).encode())
                os._exit(0)
            except BaseException as e:
                os.write(2, f"{e}\n".encode())
                os._exit(1)
        os.close(w)
        with os.fdopen(r) as f:
            text = f.read()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit(f"the forked side failed for {dsl}")
        fk = json.loads(text)
        if a.json:
            for c in cold_rows:
                print(json.dumps({"dsl": dsl, "mode": "cold", **c}))
            for c in fk["rows"]:
                print(json.dumps({"dsl": dsl, "mode": "forked", **c}))
            print(json.dumps({"dsl": dsl, "mode": "parent", **fk["parent"]}))
        for name in order:
            c = statistics.median(r_[name] for r_ in cold_rows)
            f = (statistics.median(r_[name] for r_ in fk["rows"])
                 if fk["rows"] and name in fk["rows"][0] else None)
            table.append((dsl, name, c, f))
        if "forked child failed" in fk["parent"]:
            table.append((dsl, "forked child failed: " + fk["parent"]["forked child failed"].replace("|", "/"),
                          None, None))
        table.append((dsl, "imports in the parent (once)", None,
                      fk["parent"]["import torch"] + fk["parent"]["import dsl"]))
        table.append((dsl, "CUDA initialised by the imports", None, fk["parent"]["cuda initialised by the imports"]))
        if fk["parent"]["cuda initialised after"]:
            table.append((dsl, "CUDA initialised after: " + "; ".join(fk["parent"]["cuda initialised after"]),
                          None, None))
    env = f"; the forked side's parent with {' '.join(a.forked_env)}" if a.forked_env else ""
    print(f"\ndevice {a.device}, median of {a.rounds} rounds, seconds{env}\n")
    print("| dsl | phase | cold (new interpreter) | forked from a pre-imported parent |")
    print("|---|---|---|---|")
    for dsl, name, c, f in table:
        cs = "-" if c is None else f"{c:.3f}"
        fs = "-" if f is None else (str(f).lower() if isinstance(f, bool) else f"{f:.3f}")
        print(f"| {dsl} | {name} | {cs} | {fs} |")


if __name__ == "__main__":
    main()
