#!/usr/bin/env bash
# Issue 11, on a GPU machine after tools/device_setup.sh: how much the judge's
# figure for one unchanged kernel moves, between processes and within one.
#
#   [AB=1] tools/noise_study.sh [P] [EVALS] [BLOCKS]
#       P       problems, comma list of N (both DSLs) or N/dsl (default: every
#               problem with solutions), e.g. 28/tirx,36/cutedsl
#       EVALS   back-to-back `mkb eval` per kernel, visible workload (default 5):
#               noise between evaluations (each its own processes, as in a run)
#       BLOCKS  blocks of 50 calls of tools/timing_probe.py in one process, inputs
#               made on the GPU just before each call as the paper's harness does
#               (default 5): noise within one process
#
# AB=1: before and after in one go. Each of the EVALS evaluations is made
# twice, by the default judge (rows "config": "default") and with the noise
# measures of docs/judge.md on (rows "config": "reduced", flags $REDUCED,
# default "--pin-cpus auto --warmup-until 0.02 --gc-freeze"), interleaved
# A B B A A B ... so drift over the call touches both alike; the table then
# sets the two side by side. Twice the evaluations: about 150 s per kernel.
#
# SOLUTIONS: the folder of NN_name/<dsl>/kernel.py to study (default solutions;
# tests/scenario/noise_study.sh points it at torch kernels on the CPU).
#
# EVAL_FLAGS: more `mkb eval` flags for every evaluation (e.g. "--device cpu
# --workload smoke" to try the study's plumbing on a machine without a GPU).
#
# ZYGOTE=1: every evaluation's checker and candidate forked from one `mkb
# zygote` started for the study (7-8 s less start-up per evaluation on the
# H200: results/zygote-bench.md), as `--zygote auto` runs grade. ZYGOTE=reduced
# (with AB=1): only the "reduced" configuration's evaluations are forked, so
# the A/B sets cold processes beside forked ones (REDUCED= empty: the zygote
# and nothing else). Rows record it as "start": "zygote" or "cold".
#
# BEFORE="ENV=V ..." (with AB=1): the judge before a change beside it after.
# The first configuration's evaluations run with these settings (rows
# "config": "before"), the second's with the judge's default plus $REDUCED
# (rows "config": "default" when REDUCED is empty, else "reduced"). Session
# 30 set BEFORE to the timed procedure the default replaced:
#     BEFORE="MKB_JUDGE_EAGER=interleaved MKB_JUDGE_GO=socket MKB_JUDGE_REPLY=socket MKB_JUDGE_PRIME=0" REDUCED=
#
# LAYOUT=fixed (with AB=1): the "reduced" evaluations also get `mkb eval
# --fixed-layout` (checker and candidate with the same memory layout and hash
# seed every time: no address-space randomisation, PYTHONHASHSEED=0), so the
# A/B tells whether what differs between two processes of one kernel is
# where things landed. Rows record "layout": "fixed" or "random".
#
# Each evaluation records the GPU's SM/memory clocks, temperature and power at
# the start and end of its timed calls (timing.gpu_state). Rows go to
# $OUT/noise.jsonl as they finish (a machine taken back mid-call keeps them);
# the table (tools/noise_table.py) is printed last and written to $OUT/noise.md.
# About 75 s per kernel with the defaults: pick P to fit a device call.
#
# PAR=N: N kernels studied at once (each kernel's evaluations still one after
# the other), as a run grades: start-up, import and correctness overlap, and
# the judge's GPU lock keeps every warm-up and timed section alone on the GPU;
# the CPU is shared, so the end-to-end figure is measured under that load
# (the machine's record says so). BLOCKS defaults to 0 then (the timing
# probe takes no lock and would time beside others). Session 14 graded 4 at
# a time at about 14 evaluations a minute; kernels whose eager reference
# takes 0.2-1 s a call (47, 66, 72, 73) take 1-2 minutes an evaluation, so
# give them a device call of their own (47 alone: its reference needs 14 GiB).
set -uo pipefail
cd "$(dirname "$0")/.."
. tools/device_env.sh
par=${PAR:-1}
case "$par" in '' | *[!0-9]* | 0) echo "noise: PAR must be a positive number" >&2; exit 2 ;; esac
zygote=${ZYGOTE:-}
case "$zygote" in
'' | 1) ;;
reduced) [ -n "${AB:-}" ] || { echo "noise: ZYGOTE=reduced needs AB=1" >&2; exit 2; } ;;
*) echo "noise: ZYGOTE must be 1 or reduced" >&2; exit 2 ;;
esac
layout=${LAYOUT:-}
case "$layout" in
'') ;;
fixed)
	[ -n "${AB:-}" ] || { echo "noise: LAYOUT=fixed needs AB=1" >&2; exit 2; }
	;;
*) echo "noise: LAYOUT must be fixed" >&2; exit 2 ;;
esac
before=${BEFORE:-}
read -ra before_env <<<"$before"
[ -z "$before" ] || [ -n "${AB:-}" ] || { echo "noise: BEFORE needs AB=1" >&2; exit 2; }
for v in "${before_env[@]}"; do
	[[ "$v" == [A-Za-z_]*=* ]] || { echo "noise: BEFORE is ENV=VALUE words, not '$v'" >&2; exit 2; }
done
OUT=${OUT:-/tmp/mkb-noise}
mkdir -p "$OUT"
rows="$OUT/noise.jsonl"
: >"$rows"
evals=${2:-5}
blocks=${3:-$([ "$par" -gt 1 ] && echo 0 || echo 5)}
parts="$OUT/parts" # one rows file per kernel: parallel kernels never share a file
rm -rf "$parts" && mkdir -p "$parts"
reduced=${REDUCED---pin-cpus auto --warmup-until 0.02 --gc-freeze}
read -ra reduced_flags <<<"$reduced"
# the A/B's two configurations: default and reduced, or before and the
# default (plus $REDUCED's flags, if any)
first=default second=reduced
if [ -n "$before" ]; then
	first=before
	[ -n "$reduced" ] || second=default
fi
read -ra eval_flags <<<"${EVAL_FLAGS:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >"$OUT/machine.txt" 2>&1
echo "cores: $(nproc) of $(getconf _NPROCESSORS_ONLN)${AB:+; $second: ${reduced:-the default}}${before:+; before: $before}; kernels at once: $par${zygote:+; zygote: $zygote}${layout:+; reduced layout: $layout}" >>"$OUT/machine.txt"

. tools/select.sh # solutions: which kernels a "N or N/dsl" list names

if [ -n "$zygote" ]; then
	. tools/zygote_up.sh
	zygote_name="mkb-noise-$$"
	device=cuda
	[[ " ${eval_flags[*]} " == *" --device cpu "* ]] && device=cpu
	zygote_up "$zygote_name" "$device" "$OUT/zygote.out" || exit 3
fi

evaluate() { # round config [flags...]: one evaluation of $k, its row appended to $part
	local i=$1 config=$2 start=cold
	shift 2
	local fork=() fixed=() placed=random
	if [ "$zygote" = 1 ] || { [ "$zygote" = reduced ] && [ "$config" = "$second" ]; }; then
		fork=(--zygote "$zygote_name") start=zygote
	fi
	if [ "$layout" = fixed ] && [ "$config" = "$second" ]; then
		fixed=(--fixed-layout) placed=fixed
	fi
	local settings=()
	[ "$config" != before ] || settings=("${before_env[@]}")
	env "${settings[@]}" MKB_STORE="$OUT/noise-$n-$dsl.db" build/mkb eval "$p" --dsl "$dsl" --workload visible --json "${eval_flags[@]}" "${fork[@]}" "${fixed[@]}" "$@" "$k" 2>>"$OUT/stderr.txt" |
		"$MKB_PYTHON" -c 'import json, sys
o = json.load(sys.stdin); o.pop("versions", None); o.pop("stages", None)
o.update(kind="eval", label=sys.argv[1], round=int(sys.argv[2]), config=sys.argv[3], start=sys.argv[4], layout=sys.argv[5]); print(json.dumps(o))' \
			"$n/$dsl" "$i" "$config" "$start" "$placed" >>"$part"
}
list=${1:-}
table() {
	cat "$parts"/*.jsonl >"$rows" 2>/dev/null
	rm -f "$OUT"/noise*.db
	"$MKB_PYTHON" tools/noise_table.py "$rows" "$OUT/machine.txt" | tee "$OUT/noise.md"
}
# stopped at a deadline (tools/gpu_batch.sh): the table of the rows so far
trap 'echo "noise: stopped" >&2; table; exit 124' TERM

study() { # one kernel ($n $p $dsl $k $pdir): its evaluations, then its blocks
	local part="$parts/$n-$dsl.jsonl" i
	for i in $(seq 1 "$evals"); do
		if [ -z "${AB:-}" ]; then
			evaluate "$i" default
		elif [ $((i % 2)) = 1 ]; then
			evaluate "$i" "$first"
			evaluate "$i" "$second" "${reduced_flags[@]}"
		else
			evaluate "$i" "$second" "${reduced_flags[@]}"
			evaluate "$i" "$first"
		fi
	done
	[ -n "$pdir" ] && [ "$blocks" -gt 0 ] && "$MKB_PYTHON" tools/timing_probe.py --problem-dir "$pdir" \
		--kernel "$k" --conditions made --blocks "$blocks" --json 2>>"$OUT/stderr.txt" |
		grep '^{' | sed "s|^{|{\"kind\": \"probe\", \"label\": \"$n/$dsl\", |" >>"$part"
	echo "noise: $n/$dsl done" >&2
}

root=${SOLUTIONS:-solutions}
studies=()
solutions "$list" "$root" >"$OUT/selected.txt"
while read -r n dsl; do
	p=$((10#${n%%_*}))
	pdir=$(ls -d problems/*/"$n" 2>/dev/null | head -1)
	k="$root/$n/$dsl/kernel.py"
	# the zygote is a background job too: count and wait for the studies only
	while [ "$(jobs -rp | grep -cvx "${ZYGOTE_PID:-none}")" -ge "$par" ]; do
		wait -n
	done
	study </dev/null &
	studies+=($!)
done <"$OUT/selected.txt"
[ ${#studies[@]} = 0 ] || wait "${studies[@]}"
table
