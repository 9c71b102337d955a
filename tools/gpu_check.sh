#!/usr/bin/env bash
# GPU machine, after tools/device_setup.sh: prove the judge on the GPU.
#  1. a trivial kernel in each DSL really runs (tools/dsl_smoke.py);
#  2. every shipped solution of problems 28 and 36, both DSLs, passes `mkb eval`
#     on the visible and held-out workloads;
#  3. the planted failure kernels of tests/gpu/ are classified as expected.
# Writes evals.jsonl, table.md and the store to $OUT and prints the table last.
set -uo pipefail
cd "$(dirname "$0")/.."
. tools/device_env.sh
OUT=${OUT:-/tmp/mkb-gpu-check}
mkdir -p "$OUT"
export MKB_STORE="$OUT/gpu-check.db"
rows="$OUT/evals.jsonl"
: >"$rows"
log() { printf '%s\n' "$*" >&2; }

{
	date -u +"date: %Y-%m-%dT%H:%M:%SZ"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
	"$MKB_PYTHON" -c 'import sys, torch, importlib.metadata as m; print("python:", sys.version.split()[0]); print("torch:", torch.__version__, "cuda", torch.version.cuda); [print(d + ":", m.version(d)) for d in ("nvidia-cutlass-dsl", "apache-tvm", "apache-tvm-ffi")]'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" >&2

log "== trivial kernels"
"$MKB_PYTHON" tools/dsl_smoke.py 2>&1 | tee "$OUT/dsl_smoke.txt" >&2

# eval LABEL EXPECT PROBLEM DSL WORKLOAD KERNEL [flags...]: one JSON line, tagged.
eval_one() {
	local label=$1 expect=$2 p=$3 dsl=$4 wl=$5 kernel=$6
	shift 6
	log "== $label: mkb eval $p --dsl $dsl --workload $wl $* $kernel"
	local t0=$SECONDS
	local line
	line=$(build/mkb eval "$p" --dsl "$dsl" --workload "$wl" --json "$@" "$kernel" 2>>"$OUT/stderr.txt")
	[ -n "$line" ] || line='{"status": "no output"}'
	"$MKB_PYTHON" -c 'import json, sys; o = json.loads(sys.argv[1]); o.update(label=sys.argv[2], expect=sys.argv[3], judge_s=int(sys.argv[4])); print(json.dumps(o))' \
		"$line" "$label" "$expect" "$((SECONDS - t0))" >>"$rows"
	tail -1 "$rows" | cut -c1-400 >&2
}

for p in 28_fused_add_rmsnorm 36_rmsnorm; do
	for dsl in cutedsl tirx; do
		for wl in visible heldout; do
			eval_one "solution" passed "${p%%_*}" "$dsl" "$wl" "solutions/$p/$dsl/kernel.py"
		done
	done
done

eval_one "wrong values" failed 28 cutedsl visible tests/gpu/28_wrong_values.py
eval_one "wrong shape" failed 28 cutedsl visible tests/gpu/28_wrong_shape.py
eval_one "raises" failed 28 cutedsl visible tests/gpu/28_raises.py
eval_one "illegal address" crashed 28 cutedsl visible tests/gpu/28_illegal_address.py
eval_one "SIGSEGV" crashed 28 cutedsl visible tests/kernels/28_segv.py
eval_one "GPU hang" hung 28 cutedsl visible tests/gpu/28_gpu_hang.py --timeout 45

"$MKB_PYTHON" tools/results_table.py "$rows" "$OUT/machine.txt" >"$OUT/table.md"
cat "$OUT/table.md"
