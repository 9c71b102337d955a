#!/usr/bin/env bash
# Issue 11, on a GPU machine after tools/device_setup.sh: how much the judge's
# figure for one unchanged kernel moves, between processes and within one.
#
#   tools/noise_study.sh [P] [EVALS] [BLOCKS]
#       P       problems, comma list (default: every problem with solutions)
#       EVALS   back-to-back `mkb eval` per kernel, visible workload (default 5):
#               noise between evaluations (each its own processes, as in a run)
#       BLOCKS  blocks of 50 calls of tools/timing_probe.py in one process, inputs
#               made on the GPU just before each call as the paper's harness does
#               (default 5): noise within one process
#
# Each evaluation records the GPU's SM/memory clocks, temperature and power at
# the start and end of its timed calls (timing.gpu_state). Rows go to
# $OUT/noise.jsonl as they finish (a machine taken back mid-call keeps them);
# the table (tools/noise_table.py) is printed last and written to $OUT/noise.md.
# About 75 s per kernel with the defaults: pick P to fit a device call.
set -uo pipefail
cd "$(dirname "$0")/.."
. tools/device_env.sh
OUT=${OUT:-/tmp/mkb-noise}
mkdir -p "$OUT"
rows="$OUT/noise.jsonl"
: >"$rows"
evals=${2:-5}
blocks=${3:-5}
export MKB_STORE="$OUT/noise.db"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >"$OUT/machine.txt" 2>&1

for d in solutions/[0-9]*_*/; do
	n=$(basename "$d")
	p=$((10#${n%%_*}))
	[ -n "${1:-}" ] && ! grep -qw "$p" <<<"${1//,/ }" && continue
	pdir=$(ls -d problems/*/"$n" 2>/dev/null | head -1)
	for dsl in cutedsl tirx; do
		k="$d$dsl/kernel.py"
		[ -f "$k" ] || continue
		for i in $(seq 1 "$evals"); do
			build/mkb eval "$p" --dsl "$dsl" --workload visible --json "$k" 2>>"$OUT/stderr.txt" |
				"$MKB_PYTHON" -c 'import json, sys
o = json.load(sys.stdin); o.pop("versions", None); o.pop("stages", None)
o.update(kind="eval", label=sys.argv[1], round=int(sys.argv[2])); print(json.dumps(o))' "$n/$dsl" "$i" >>"$rows"
		done
		[ -n "$pdir" ] && "$MKB_PYTHON" tools/timing_probe.py --problem-dir "$pdir" --kernel "$k" \
			--conditions made --blocks "$blocks" --json 2>>"$OUT/stderr.txt" |
			grep '^{' | sed "s|^{|{\"kind\": \"probe\", \"label\": \"$n/$dsl\", |" >>"$rows"
		echo "noise: $n/$dsl done" >&2
	done
done
rm -f "$OUT/noise.db"
"$MKB_PYTHON" tools/noise_table.py "$rows" "$OUT/machine.txt" | tee "$OUT/noise.md"
