#!/usr/bin/env bash
# Issue 9's start-up, side by side in one run: the same kernels graded with the
# candidate started cold (the default) and forked from `mkb zygote`,
# alternating cold/zygote and zygote/cold round by round, so drift touches
# both alike. Prints a table (wall time, the checker's clock at the import
# stage, kernel and eager medians, status) and the ratio zygote/cold of the
# medians; rows go to $OUT/zygote.jsonl as they finish.
#
#   [OUT=DIR] [ROUNDS=3] [EVAL_FLAGS=...] tools/zygote_bench.sh [KERNEL:N:DSL ...]
#
# Default kernels: problem 28's shipped solutions in both DSLs (a GPU
# machine, after tools/device_setup.sh). On the CPU:
#   EVAL_FLAGS="--device cpu --workload smoke" tools/zygote_bench.sh \
#       tests/kernels/28_torch_ok.py:28:cutedsl
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f tools/device_env.sh ] && [ -d "${DSL_SITE:-/root/dsl-site}" ] && . tools/device_env.sh
PY=${MKB_PYTHON:-build/python}
OUT=${OUT:-/tmp/mkb-zygote-bench}
mkdir -p "$OUT"
rows="$OUT/zygote.jsonl"
: >"$rows"
read -ra flags <<<"${EVAL_FLAGS:-}"
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(solutions/28_fused_add_rmsnorm/cutedsl/kernel.py:28:cutedsl
	solutions/28_fused_add_rmsnorm/tirx/kernel.py:28:tirx)
device=cuda
for f in "${flags[@]}"; do [ "$f" = cpu ] && device=cpu; done
name="mkb-bench-$$"
. tools/zygote_up.sh
zygote_up "$name" "$device" "$OUT/zygote.out" || exit 3

one() { # mode kernel n dsl round
	local mode=$1 k=$2 n=$3 dsl=$4 round=$5 z=() t0 t1
	[ "$mode" = zygote ] && z=(--zygote "$name")
	t0=$(date +%s.%N)
	build/mkb eval "$n" --dsl "$dsl" --no-store --json "${flags[@]}" "${z[@]}" "$k" 2>>"$OUT/stderr.txt" >"$OUT/one.json"
	t1=$(date +%s.%N)
	"$PY" - "$OUT/one.json" "$mode" "$k" "$dsl" "$round" "$t0" "$t1" >>"$rows" <<'PY'
import json, sys
path, mode, k, dsl, rnd, t0, t1 = sys.argv[1:]
try:
    o = json.load(open(path))
except (OSError, ValueError):
    o = {"status": "no verdict"}
imp = next((s.get("t") for s in o.get("stages") or [] if s.get("stage") == "import"), None)
print(json.dumps({"mode": mode, "kernel": k, "dsl": dsl, "round": int(rnd), "wall_s": float(t1) - float(t0),
                  "eval_s": o.get("eval_s"), "import_at_s": imp, "status": o.get("status"),
                  "reason": (o.get("reason") or "")[:200], "kernel_ms": o.get("kernel_ms"),
                  "eager_ms": o.get("eager_ms"), "candidate_start": o.get("candidate_start"),
                  "confinement": o.get("confinement")}))
PY
}

for round in $(seq 1 "${ROUNDS:-3}"); do
	for spec in "${kernels[@]}"; do
		IFS=: read -r k n dsl <<<"$spec"
		if [ $((round % 2)) = 1 ]; then order="cold zygote"; else order="zygote cold"; fi
		for mode in $order; do one "$mode" "$k" "$n" "$dsl" "$round"; done
	done
done

"$PY" - "$rows" <<'PY' | tee "$OUT/zygote.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(rs, key):
    v = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
    return statistics.median(v) if v else None
def f(x, fmt):
    return "-" if x is None else format(x, fmt)
print("| kernel | start | evaluations | statuses | wall s (median) | import stage at s | kernel ms | eager ms |")
print("|---|---|---|---|---|---|---|---|")
keys = sorted({(r["kernel"], r["dsl"]) for r in rows})
for k, dsl in keys:
    for mode in ("cold", "zygote"):
        rs = [r for r in rows if r["kernel"] == k and r["dsl"] == dsl and r["mode"] == mode]
        starts = sorted({str(r["candidate_start"]) for r in rs})
        st = ", ".join(sorted({str(r["status"]) for r in rs}))
        print(f"| {k} ({dsl}) | {mode} (verdicts: {'/'.join(starts)}) | {len(rs)} | {st} | "
              f"{f(med(rs, 'wall_s'), '.2f')} | {f(med(rs, 'import_at_s'), '.2f')} | "
              f"{f(med(rs, 'kernel_ms'), '.4f')} | {f(med(rs, 'eager_ms'), '.4f')} |")
print()
for k, dsl in keys:
    c = [r for r in rows if r["kernel"] == k and r["dsl"] == dsl and r["mode"] == "cold"]
    z = [r for r in rows if r["kernel"] == k and r["dsl"] == dsl and r["mode"] == "zygote"]
    parts = []
    for key, label in (("wall_s", "wall"), ("import_at_s", "import stage"), ("kernel_ms", "kernel median")):
        a, b = med(c, key), med(z, key)
        if a and b:
            parts.append(f"{label} {b / a:.2f}x")
    print(f"zygote / cold, {k} ({dsl}): " + (", ".join(parts) or "-"))
PY
