#!/usr/bin/env bash
# GPU machine: launch attribution (docs/launch-attribution.md) end to end, in
# one command:
#
#   tools/gpu_launch_check.sh
#
# Builds build/libmkb_launch.so, then runs a small Python probe that calls
# problem 28's shipped CuTe DSL and TIRx solutions, torch.matmul (cuBLAS),
# scaled_dot_product_attention (flash attention in torch) and an elementwise
# add (ATen): a few warm-up calls, then LAUNCH_CHECK_CALLS (50) timed calls
# each, CUDA events around each call as candidate.py times them. The probe
# runs ROUNDS (2) times without the library and with it, alternately, so the
# overhead table compares them side by side. Prints every kernel seen per
# workload with its class and the rule that decided it, whether each
# workload's classes are the expected ones, and the overhead table.
#
# Environment: OUT (default /tmp/mkb-launch-check: records, logs, summaries),
# MKB_PYTHON (a Python with CUDA torch; tools/device_env.sh sets it on the
# GPU machine, else build/python), CUDA_DIR (default /usr/local/cuda-13.0),
# LAUNCH_CHECK_CALLS, ROUNDS, TOKENS / HIDDEN (problem 28's shape, 4096 x 4096).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [ -z "${MKB_PYTHON:-}" ] && [ -d "${DSL_SITE:-/root/dsl-site}" ]; then
	. tools/device_env.sh
fi
py=${MKB_PYTHON:-$root/build/python}
OUT=${OUT:-/tmp/mkb-launch-check}
rounds=${ROUNDS:-2}
mkdir -p "$OUT"
log() { printf '%s\n' "$*" >&2; }

make -s build/libmkb_launch.so
lib=$root/build/libmkb_launch.so
log "library: $lib"
if ldd "$lib" | grep -q 'libcupti.*not found'; then
	log "libcupti is not found by the loader: set CUDA_DIR (make -B build/libmkb_launch.so CUDA_DIR=...)"
	exit 1
fi

# ---- the probe: one process, one condition ----------------------------------
cat >"$OUT/probe.py" <<'EOF'
"""Time a few workloads; with the injection library, bracket every call with
mkb_launch_begin / mkb_launch_end. argv: repository root, summary path."""
import ctypes
import importlib.util
import json
import os
import sys
import time
import traceback

import torch

root, summary_path = sys.argv[1], sys.argv[2]
calls = int(os.environ.get("LAUNCH_CHECK_CALLS", "50"))
tokens = int(os.environ.get("TOKENS", "4096"))
hidden = int(os.environ.get("HIDDEN", "4096"))

torch.cuda.init()
torch.ones(1, device="cuda").add_(1)  # cuInit has run: the library is loaded
torch.cuda.synchronize()

lib = None
inject = os.environ.get("CUDA_INJECTION64_PATH")
if inject:
    lib = ctypes.CDLL(inject)  # the copy the driver loaded (same path)
    lib.mkb_launch_begin.argtypes = [ctypes.c_uint64]
    lib.mkb_launch_begin.restype = ctypes.c_int
    lib.mkb_launch_end.argtypes = [ctypes.c_uint64]
    lib.mkb_launch_end.restype = ctypes.c_int
    lib.mkb_launch_active.restype = ctypes.c_int
    if lib.mkb_launch_active() != 1:
        sys.exit("the library is loaded but not recording: see the 'error' line in the records")


def load(rel, name):
    path = os.path.join(root, rel)
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


dev = "cuda"
bf16 = torch.bfloat16
h = torch.randn(tokens, hidden, dtype=bf16, device=dev)
r = torch.randn(tokens, hidden, dtype=bf16, device=dev)
w = torch.randn(hidden, dtype=bf16, device=dev)
a = torch.randn(4096, 4096, dtype=bf16, device=dev)
b = torch.randn(4096, 4096, dtype=bf16, device=dev)
q, k, v = (torch.randn(8, 16, 1024, 128, dtype=bf16, device=dev) for _ in range(3))

workloads = []  # (name, callable)
for dsl in ("cutedsl", "tirx"):
    try:
        mod = load(f"solutions/28_fused_add_rmsnorm/{dsl}/kernel.py", f"k28_{dsl}")
        workloads.append((f"28 {dsl}", lambda m=mod: m.solve(h, r, w)))
    except Exception:
        print(f"28 {dsl}: cannot import", file=sys.stderr)
        traceback.print_exc()
workloads.append(("torch.matmul", lambda: a @ b))
workloads.append(("torch sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)))
workloads.append(("torch add", lambda: h + r))

next_call = 0
summary = {"injected": bool(lib), "calls": calls, "workloads": {}}
for name, fn in workloads:
    entry = summary["workloads"][name] = {"call_ids": [], "warm_ids": [], "events_ms": [], "wall_ms": []}
    try:
        for i in range(3 + calls):
            next_call += 1
            cid = next_call
            torch.cuda.synchronize()
            w0 = time.perf_counter()
            if lib and lib.mkb_launch_begin(cid) != 0:
                raise RuntimeError("mkb_launch_begin failed")
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            torch.cuda.synchronize()
            if lib and lib.mkb_launch_end(cid) != 0:
                raise RuntimeError("mkb_launch_end failed")
            w1 = time.perf_counter()
            del out
            if i < 3:
                entry["warm_ids"].append(cid)
            else:
                entry["call_ids"].append(cid)
                entry["events_ms"].append(start.elapsed_time(end))
                entry["wall_ms"].append((w1 - w0) * 1e3)
    except Exception:
        entry["error"] = traceback.format_exc(limit=3)
        print(f"{name}: failed", file=sys.stderr)
        traceback.print_exc()
with open(summary_path, "w") as f:
    json.dump(summary, f)
EOF

# ---- the report: stdlib only -------------------------------------------------
cat >"$OUT/report.py" <<'EOF'
"""Read the probe's summaries and the library's records; print the kernels
of each workload, the expected-class check and the overhead table."""
import collections
import json
import os
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])
EXPECT = {  # workload: (classes that must appear, classes allowed besides)
    "28 cutedsl": ({"dsl_cutedsl"}, {"torch_native"}),
    "28 tirx": ({"dsl_tirx"}, {"torch_native"}),
    "torch.matmul": ({"vendor_library"}, set()),
    "torch sdpa": ({"vendor_library"}, {"torch_native"}),
    "torch add": ({"torch_native"}, set()),
}


def load(path):
    with open(path) as f:
        return json.load(f)


def short(path):
    return os.path.basename(path) if path else "-"


records, bad = [], 0
with open(os.path.join(out, f"records-{rounds}.jsonl"), "rb") as f:
    for raw in f:
        try:
            records.append(json.loads(raw))
        except ValueError:
            bad += 1
by_type = collections.Counter(r.get("t") for r in records)
print("records:", dict(by_type), f"unparsable lines: {bad}")
for r in records:
    if r["t"] in ("hello", "error", "bye"):
        print(" ", json.dumps(r))
print("modules loaded:")
for r in records:
    if r["t"] == "module":
        print(f"  #{r['origin']} {r['api']}: image {short(r.get('image'))}, loader "
              f"{short(r.get('loader'))} -> {r['class']} ({r['rule']})")
        print(f"      chain: {r.get('chain')}")

kernels = collections.defaultdict(list)
ends = {}
for r in records:
    if r["t"] == "kernel":
        kernels[r["call"]].append(r)
    elif r["t"] == "end":
        ends[r["call"]] = r

summary = load(os.path.join(out, f"with-{rounds}.json"))
failures = 0
for name, entry in summary["workloads"].items():
    ids = entry["call_ids"]
    print(f"\n== {name}: {len(ids)} timed calls" + (" (FAILED: see with-*.log)" if "error" in entry else ""))
    seen = collections.OrderedDict()
    missing_end = [c for c in ids if c not in ends]
    for c in ids:
        for k in kernels.get(c, []):
            key = (k["class"], k["name"])
            s = seen.setdefault(key, {"n": 0, "ns": 0, "rule": k["rule"], "api": k.get("api"),
                                      "image": k.get("image"), "loader": k.get("loader"),
                                      "demangled": k.get("demangled"), "grid": k.get("grid"),
                                      "block": k.get("block")})
            s["n"] += 1
            s["ns"] += k["ns"]
    total = sum(s["ns"] for s in seen.values()) or 1
    for (cls, kname), s in seen.items():
        shown = (s["demangled"] or kname)[:110]
        print(f"  {cls:15s} x{s['n']:<4d} {s['ns'] / max(s['n'], 1) / 1e3:9.1f} us  "
              f"{100 * s['ns'] / total:5.1f}%  {shown}")
        print(f"  {'':15s} rule: {s['rule']}; api {s['api']}; image {short(s['image'])}; "
              f"loader {short(s['loader'])}; grid {s['grid']} block {s['block']}")
    classes = {cls for cls, _ in seen}
    need, allowed = EXPECT.get(name, (set(), set()))
    ok = bool(ids) and need <= classes and classes <= need | allowed and not missing_end
    failures += not ok
    print(f"  expected {sorted(need)} (+ {sorted(allowed)} allowed), saw {sorted(classes)}, "
          f"calls without an end record: {len(missing_end)} -> {'OK' if ok else 'UNEXPECTED'}")
    per_call = [len(kernels.get(c, [])) for c in ids]
    if per_call:
        print(f"  kernels per call: min {min(per_call)} max {max(per_call)}; "
              f"end records' counts agree: {all(ends[c]['kernels'] == len(kernels.get(c, [])) for c in ids if c in ends)}")
if ends:
    last = ends[max(ends)]
    print("\nlosses (last end record):", {k: last[k] for k in ("dropped", "refused_buffers", "unmatched",
                                                                 "table_full", "cut_lines", "lost_lines",
                                                                 "cupti_errors")})

print("\n== overhead: median of each round's timed calls, ms (events: the timed window; "
      "wall: the harness's whole call with begin/end)")
print(f"{'workload':14s} {'events without':>22s} {'events with':>22s} {'wall without':>22s} {'wall with':>22s}")
rows = collections.OrderedDict()
for i in range(1, rounds + 1):
    for cond in ("without", "with"):
        s = load(os.path.join(out, f"{cond}-{i}.json"))
        for name, entry in s["workloads"].items():
            row = rows.setdefault(name, collections.defaultdict(list))
            if entry["events_ms"]:
                row["events " + cond].append(statistics.median(entry["events_ms"]))
                row["wall " + cond].append(statistics.median(entry["wall_ms"]))
for name, row in rows.items():
    cells = [" ".join(f"{x:.4f}" for x in row[c]) or "-" for c in
             ("events without", "events with", "wall without", "wall with")]
    print(f"{name:14s} " + " ".join(f"{c:>22s}" for c in cells))
print("\n" + ("all workloads classified as expected" if not failures else f"{failures} workload(s) UNEXPECTED"))
sys.exit(1 if failures else 0)
EOF

for i in $(seq 1 "$rounds"); do
	log "round $i/$rounds: without the library"
	"$py" "$OUT/probe.py" "$root" "$OUT/without-$i.json" >"$OUT/without-$i.log" 2>&1 ||
		{ tail -20 "$OUT/without-$i.log" >&2; exit 1; }
	log "round $i/$rounds: with the library"
	CUDA_INJECTION64_PATH=$lib MKB_LAUNCH_FD=9 \
		"$py" "$OUT/probe.py" "$root" "$OUT/with-$i.json" 9>"$OUT/records-$i.jsonl" >"$OUT/with-$i.log" 2>&1 ||
		{ tail -20 "$OUT/with-$i.log" >&2; head -5 "$OUT/records-$i.jsonl" >&2; exit 1; }
done
"$py" "$OUT/report.py" "$OUT" "$rounds"
