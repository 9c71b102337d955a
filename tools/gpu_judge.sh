#!/usr/bin/env bash
# GPU machine, after tools/device_setup.sh: the trusted judge (docs/judge.md)
# measured beside the judge it replaced, in one device call per step.
#
#   tools/gpu_judge.sh smoke        the new judge on a torch kernel and one DSL kernel
#   tools/gpu_judge.sh adversarial  every tests/adversarial/ row on the GPU (the DSL
#                                   rules' rows with --launches enforce)
#   tools/gpu_judge.sh launches     problem 28's shipped kernels with and without the
#                                   launch recorder, alternating, twice (its cost)
#   tools/gpu_judge.sh compare [P]  shipped solutions (P: N or N/dsl, comma separated; default all 28):
#                                   old judge, then new judge, same kernel, visible;
#                                   new judge on held-out (NO_HELDOUT=1: not;
#                                   ROUNDS=N: the old/new pair N times, interleaved;
#                                   REPLY=spin: each new row again with MKB_JUDGE_REPLY=spin;
#                                   LAUNCHES=off: each new row again with --launches off;
#                                   REPEAT=1: each new row again with MKB_JUDGE_REPEAT=1;
#                                   PRIME=1: each new row again with MKB_JUDGE_PRIME=1;
#                                   VARIANTS="ENV=V ...;...": a new row per set of settings)
#   tools/gpu_judge.sh breakdown    problem 28 (torch kernels: no DSL needed): wall
#                                   time and stage timeline of one evaluation, old and
#                                   new; then 8 evaluations one at a time and 4 at a
#                                   time (throughput)
#   tools/gpu_judge.sh torch        the torch stand-ins of 28 and 36 (no DSL): old, new, new
#                                   with MKB_JUDGE_REPEAT=1 (WORKLOADS, ROUNDS; HOT=1 and
#                                   PRIME=1 add MKB_JUDGE_WAIT=hot and MKB_JUDGE_PRIME=1 rows;
#                                   VARIANTS="ENV=V ...;...": a row per ;-separated set of settings)
#   tools/gpu_judge.sh pingpong     tools/pingpong_probe.py on the torch stand-ins of 28 and 36
#                                   (smoke; no judge, no DSL; PROBE_FLAGS: more of its flags;
#                                   PROBE_KERNELS="P:file ...", PROBE_WORKLOADS: others)
#   tools/gpu_judge.sh gap          why the new judge reads small kernels slower:
#                                   tools/timing_probe.py on 28 (both DSLs; PROBE_DSLS=
#                                   picks, PROBE_CONDITIONS= its --conditions), then
#                                   28/tirx and 36/cutedsl under the old judge and the
#                                   new one (PREP=touch|warm: also the new one with
#                                   MKB_JUDGE_PREP; KEEP=1: with MKB_JUDGE_KEEP=1;
#                                   SANDBOX_OFF=1: with every confinement layer
#                                   off; SPEC=1: seccomp without SPEC_ALLOW), interleaved, twice
#   tools/gpu_judge.sh all [P]      every shipped solution, visible and held-out
#                                   (WORKLOADS="heldout": one), new judge, 4 at a time
#                                   (PAR: another count; EVAL_FLAGS: more mkb eval flags)
#
# JUDGE_DEVICE=cpu (any step that grades): every evaluation in the judges'
# CPU test mode, for a dry run of a step on a machine without a GPU.
#
# MPS=1 (pingpong only; diagnosis): the step's processes are clients of a
# private CUDA multi-process service (tools/mps_up.sh), so the checker's and
# the candidate's work share one GPU context; the daemon's server list is
# recorded in machine-<step>.txt.
#
# ZYGOTE=1 (any step): the new judge's candidates and checkers are forked
# from one `mkb zygote` started for the script (7-8 s less per evaluation on
# the H200, medians unchanged: results/zygote-bench.md); the old judge
# starts cold as it always did. Off by default.
#
# The old judge is the in-process one of commit 69b247a, whose src/ and
# grader/ a developer unpacks into old/ (ignored; carried):
#     mkdir -p old && git archive 69b247a src grader Makefile | tar -x -C old
# Rows go to $OUT/<step>.jsonl as they finish; a table is printed last, and
# written to $OUT/<step>.md (also when SIGTERM, a deadline, stops the step).
set -uo pipefail
cd "$(dirname "$0")/.."
. tools/device_env.sh
OUT=${OUT:-/tmp/mkb-gpu-judge}
mkdir -p "$OUT"
step=${1:-smoke}
rows="$OUT/$step.jsonl"
: >"$rows"
export MKB_STORE="$OUT/judge-$step.db"
log() { printf '%s\n' "$*" >&2; }

machine() {
	date -u +"date: %Y-%m-%dT%H:%M:%SZ"
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | sed 's/^/gpu: /'
	"$MKB_PYTHON" -c 'import sys, torch, importlib.metadata as m; print("python:", sys.version.split()[0], "torch:", torch.__version__); [print(d + ":", m.version(d)) for d in ("nvidia-cutlass-dsl", "apache-tvm", "apache-tvm-ffi")]' 2>&1
}
machine >"$OUT/machine-$step.txt"
# the table of the rows so far (at the end, or when a deadline stops the step)
table() { "$MKB_PYTHON" tools/judge_table.py "$rows" "$OUT/machine-$step.txt" | tee "$OUT/$step.md"; }
[ "$step" = pingpong ] || trap 'log "gpu_judge: stopped"; table; exit 124' TERM

build_old() {
	[ -x old/build/mkb ] && return 0
	[ -d old/src ] || { log "no old/ judge (see the header)"; return 1; }
	ln -sfn ../problems old/problems
	ln -sfn ../solutions old/solutions
	(cd old && make -s build/mkb DEBS_STAMP= PKG_CFLAGS="-I../.stage/include" \
		PKG_LIBS="-L../build/devlib -ljansson -lsqlite3")
}

# row JUDGE LABEL EXPECT PROBLEM DSL WORKLOAD KERNEL [flags]: one tagged JSON line.
row() {
	local judge=$1 label=$2 expect=$3 p=$4 dsl=$5 wl=$6 kernel=$7
	shift 7
	local bin=build/mkb store=$MKB_STORE
	# the old judge reads only its own store's schema
	[ "$judge" = old ] && bin=old/build/mkb store="$OUT/judge-$step-old.db"
	local t0 line
	t0=$(date +%s.%N)
	# JUDGE_DEVICE=cpu: both judges in their CPU test mode (a developer's dry run)
	line=$(MKB_STORE=$store $bin eval "$p" --dsl "$dsl" --workload "$wl" --json ${JUDGE_DEVICE:+--device "$JUDGE_DEVICE"} "$@" "$kernel" 2>>"$OUT/stderr-$step.txt")
	[ -n "$line" ] || line='{"status": "no output"}'
	"$MKB_PYTHON" - "$line" "$judge" "$label" "$expect" "$t0" >>"$rows" <<'PY'
import json, sys, time
o = json.loads(sys.argv[1])
o.update(judge=sys.argv[2], label=sys.argv[3], expect=sys.argv[4],
         wall_s=round(time.time() - float(sys.argv[5]), 2))
o.pop("versions", None)
print(json.dumps(o))
PY
	tail -1 "$rows" | cut -c1-300 >&2
}

if [ "${MPS:-}" = 1 ]; then
	[ "$step" = pingpong ] || { log "MPS=1 is for the pingpong step only (the judge's sandbox keeps its candidate off the daemon)"; exit 2; }
	. tools/mps_up.sh
	mps_up "$OUT/mps-$step" || exit 3
	echo "mps: private daemon, pipe $CUDA_MPS_PIPE_DIRECTORY" >>"$OUT/machine-$step.txt"
fi

# variant_rows LABEL PROBLEM DSL WORKLOAD KERNEL [flags]: with VARIANTS="A=1
# B=2;C=3", a new-judge row per ;-separated set of settings, labelled with it.
variant_rows() {
	local label=$1 p=$2 dsl=$3 wl=$4 k=$5 v
	shift 5
	while IFS= read -r -d ';' v; do
		[ -n "${v// /}" ] || continue
		# shellcheck disable=SC2086,SC2163 # the set is words on purpose
		(export $v && row new "$label $v" passed "$p" "$dsl" "$wl" "$k" "$@")
	done <<<"${VARIANTS:+$VARIANTS;}"
}

. tools/select.sh # wanted, solutions: which kernels a "N or N/dsl" list names
. tools/zygote_up.sh
if [ "${ZYGOTE:-}" = 1 ]; then
	zygote_up "mkb-gpu-judge-$$" cuda "$OUT/zygote-$step.out" || exit 3
	export MKB_ZYGOTE="mkb-gpu-judge-$$" # read by the new judge's mkb eval, unknown to the old one
fi

# the launch recorder (docs/launch-attribution.md): without it nothing is
# attributed and every verdict says why (dsl_checked false)
[ -f build/libmkb_launch.so ] || make -s build/libmkb_launch.so || log "no build/libmkb_launch.so: the run-time DSL rules are not checked"

case "$step" in
smoke)
	row new "torch kernel" passed 28 cutedsl visible tests/kernels/28_torch_ok.py
	row new "dsl kernel" passed 28 tirx visible solutions/28_fused_add_rmsnorm/tirx/kernel.py
	row new "segv" crashed 28 cutedsl visible tests/kernels/28_segv.py
	;;
adversarial)
	# 4th column when[:dsl]: empty: trust-boundary rows, run-time DSL rules
	# recorded only; gpu / dry: the DSL rules' rows, enforced
	while IFS=$'\t' read -r kernel want _ when; do
		case "$kernel" in '#'* | '') continue ;; esac
		# ADV_WHEN=gpu: only the rows of that 4th column (the DSL rules' rows)
		# (ADV_WHEN=none: only the rows with no 4th column, which need no DSL)
		[ -z "${ADV_WHEN:-}" ] || [ "${when%%:*}" = "${ADV_WHEN#none}" ] || continue
		dsl=cutedsl launches=record k="tests/adversarial/$kernel"
		[ -n "$when" ] && launches=enforce
		[ "${when#*:}" != "$when" ] && dsl=${when#*:}
		if [ "$kernel" = rule_token_dsl.py ]; then # appended to the shipped solution
			k="$OUT/token_$dsl/kernel.py"
			mkdir -p "$(dirname "$k")"
			cat "solutions/28_fused_add_rmsnorm/$dsl/kernel.py" "tests/adversarial/$kernel" >"$k"
		fi
		row new "$kernel ($dsl)" "$want" 28 "$dsl" visible "$k" --timeout 120 --rules paper --launches "$launches"
	done <tests/adversarial/expected.tsv
	;;
launches)
	# launch attribution's cost: problem 28's shipped kernels with the
	# recorder and without it, alternating, twice (docs/launch-attribution.md)
	for _ in 1 2; do
		for dsl in cutedsl tirx; do
			k="solutions/28_fused_add_rmsnorm/$dsl/kernel.py"
			row new "28 $dsl launches=off" passed 28 "$dsl" visible "$k" --launches off
			row new "28 $dsl launches=enforce" passed 28 "$dsl" visible "$k" --launches enforce
		done
	done
	;;
compare)
	# ROUNDS=N: old then new, N times over, each round's pair labelled "#r" (a
	# judge's own drift then shows as a difference between rounds)
	rounds=${ROUNDS:-1}
	case "$rounds" in '' | *[!0-9]* | 0) log "compare: ROUNDS must be a positive number"; exit 2 ;; esac
	case "${REPLY:-}" in '' | spin) ;; *) log "compare: REPLY is spin or unset"; exit 2 ;; esac
	case "${LAUNCHES:-}" in '' | off) ;; *) log "compare: LAUNCHES is off or unset"; exit 2 ;; esac
	case "${REPEAT:-}" in '' | 1) ;; *) log "compare: REPEAT is 1 or unset"; exit 2 ;; esac
	case "${PRIME:-}" in '' | 1) ;; *) log "compare: PRIME is 1 or unset"; exit 2 ;; esac
	build_old || exit 1
	solutions "${2:-}" | while read -r n dsl; do
		k="solutions/$n/$dsl/kernel.py"
		for r in $(seq "$rounds"); do
			label=$n
			[ "$rounds" = 1 ] || label="$n #$r"
			row old "$label" passed "${n%%_*}" "$dsl" visible "$k"
			row new "$label" passed "${n%%_*}" "$dsl" visible "$k"
			# REPLY=spin: also the new judge with MKB_JUDGE_REPLY=spin (the
			# checker polls for each call's reply: timing.phases beside)
			[ -z "${REPLY:-}" ] || MKB_JUDGE_REPLY=spin row new "$label reply=spin" passed "${n%%_*}" "$dsl" visible "$k"
			# LAUNCHES=off: also the new judge without the launch recorder (the
			# old judge had none; its callbacks cost the candidate per launch)
			[ -z "${LAUNCHES:-}" ] || row new "$label launches=off" passed "${n%%_*}" "$dsl" visible "$k" --launches off
			# REPEAT=1: also the new judge with MKB_JUDGE_REPEAT=1 (each timed
			# call's solve run again at once: phases repeat_ms, the call
			# without the gap before it, beside the old judge's loop)
			[ -z "${REPEAT:-}" ] || MKB_JUDGE_REPEAT=1 row new "$label repeat" passed "${n%%_*}" "$dsl" visible "$k"
			# PRIME=1: also the new judge with MKB_JUDGE_PRIME=1 (solve on the
			# last inputs just before each timed call, as in the old loop)
			[ -z "${PRIME:-}" ] || MKB_JUDGE_PRIME=1 row new "$label prime" passed "${n%%_*}" "$dsl" visible "$k"
			variant_rows "$label" "${n%%_*}" "$dsl" visible "$k"
		done
		[ -n "${NO_HELDOUT:-}" ] || row new "$n" passed "${n%%_*}" "$dsl" heldout "$k"
	done
	;;
torch)
	# the torch stand-ins of tests/kernels/ (no DSL: NO_DSL=1
	# tools/device_setup.sh is enough), old beside new beside new with
	# MKB_JUDGE_REPEAT=1 (HOT=1: and MKB_JUDGE_WAIT=hot; PRIME=1: and
	# MKB_JUDGE_PRIME=1), on WORKLOADS (default smoke: launch-bound, where
	# the dispatch shows; visible: GPU-bound), ROUNDS times interleaved
	build_old || exit 1
	for r in $(seq "${ROUNDS:-2}"); do
		for wl in ${WORKLOADS:-smoke visible}; do
			for p in 28 36; do
				k=tests/kernels/${p}_torch_ok.py
				row old "$p torch $wl #$r" passed "$p" cutedsl "$wl" "$k"
				row new "$p torch $wl #$r" passed "$p" cutedsl "$wl" "$k" --rules paper --launches off
				MKB_JUDGE_REPEAT=1 row new "$p torch $wl #$r repeat" passed "$p" cutedsl "$wl" "$k" --rules paper --launches off
				# HOT=1: also the candidate polling between calls instead of sleeping
				[ -z "${HOT:-}" ] || MKB_JUDGE_WAIT=hot row new "$p torch $wl #$r hot" passed "$p" cutedsl "$wl" "$k" --rules paper --launches off
				# PRIME=1: also solve on the last inputs just before each call
				[ -z "${PRIME:-}" ] || MKB_JUDGE_PRIME=1 row new "$p torch $wl #$r prime" passed "$p" cutedsl "$wl" "$k" --rules paper --launches off
				variant_rows "$p torch $wl #$r" "$p" cutedsl "$wl" "$k" --rules paper --launches off
			done
		done
	done
	;;
pingpong)
	# tools/pingpong_probe.py (no judge, no DSL) on the torch stand-ins of
	# 28 and 36, smoke workload (launch-bound); PROBE_FLAGS: more of its
	# flags; PROBE_KERNELS: other "problem:kernel file" pairs (for example
	# 36:tests/kernels/36_one_launch.py, one launch a call, as a fused DSL
	# kernel); PROBE_WORKLOADS: other workloads. Its JSON lines go to $rows,
	# its tables to $OUT/pingpong.md.
	for pk in ${PROBE_KERNELS:-28:tests/kernels/28_torch_ok.py 36:tests/kernels/36_torch_ok.py}; do
		p=${pk%%:*} k=${pk#*:}
		d=$(cd problems && ls -d ./*/"${p}"_* | head -1) && [ -f "$k" ] || { log "pingpong: no problem $p or no $k"; exit 2; }
		for wl in ${PROBE_WORKLOADS:-smoke}; do
			# shellcheck disable=SC2086 # PROBE_FLAGS is words on purpose
			"$MKB_PYTHON" tools/pingpong_probe.py --kernel "$k" --problem-dir "problems/${d#./}" --workload "$wl" \
				--json ${PROBE_FLAGS:-} 2>>"$rows" | tee -a "$OUT/pingpong.md" >&2
		done
	done
	# MPS=1: the daemon's servers now (one while its clients ran; none: the
	# probe's processes did not reach it)
	[ "${MPS:-}" != 1 ] || echo "mps servers after the probe: $(echo get_server_list | nvidia-cuda-mps-control 2>&1 | tr '\n' ' ')" >>"$OUT/machine-$step.txt"
	;;
gap)
	build_old || exit 1
	for dsl in ${PROBE_DSLS:-tirx cutedsl}; do
		"$MKB_PYTHON" tools/timing_probe.py --kernel "solutions/28_fused_add_rmsnorm/$dsl/kernel.py" \
			${PROBE_CONDITIONS:+--conditions "$PROBE_CONDITIONS"} \
			2>>"$OUT/stderr-gap.txt" | tee -a "$OUT/probe.md" >&2
	done
	for pk in "28 tirx 28_fused_add_rmsnorm" "36 cutedsl 36_rmsnorm"; do
		read -r p dsl n <<<"$pk"
		k="solutions/$n/$dsl/kernel.py"
		for _ in 1 2; do # interleaved, twice: drift shows as a difference between rounds
			row old "$n" passed "$p" "$dsl" visible "$k"
			row new "$n" passed "$p" "$dsl" visible "$k"
			[ -z "${PREP:-}" ] || MKB_JUDGE_PREP=$PREP row new "$n prep=$PREP" passed "$p" "$dsl" visible "$k"
			# KEEP=1: also the new judge with the GPU kept busy until the call
			[ -z "${KEEP:-}" ] || MKB_JUDGE_KEEP=1 row new "$n keep" passed "$p" "$dsl" visible "$k"
			# SANDBOX_OFF=1: also the new judge with every confinement layer off
			# (seccomp's speculation mitigations included), to separate the
			# sandbox from the process split
			[ -z "${SANDBOX_OFF:-}" ] || MKB_SANDBOX_OFF=userns,mountns,pidns,netns,ipcns,utsns,rlimits,landlock,seccomp \
				row new "$n sandbox off" passed "$p" "$dsl" visible "$k"
			# SPEC=1: seccomp installed without SECCOMP_FILTER_FLAG_SPEC_ALLOW
			# (the kernel may then force SSBD/STIBP on the candidate)
			[ -z "${SPEC:-}" ] || MKB_SANDBOX_OFF=spec_allow row new "$n spec off" passed "$p" "$dsl" visible "$k"
		done
	done
	;;
breakdown)
	build_old || exit 1
	for i in 1 2; do
		row old "28 torch #$i" passed 28 cutedsl visible tests/kernels/28_torch_ok.py
		row new "28 torch #$i" passed 28 cutedsl visible tests/kernels/28_torch_ok.py
	done
	# throughput: 8 evaluations, one at a time, then 4 at a time
	for par in 1 4; do
		t0=$(date +%s.%N)
		for i in 1 2 3 4; do printf '28\n36\n'; done | xargs -P "$par" -I{} sh -c \
			'build/mkb eval {} --dsl cutedsl --json "tests/kernels/{}_torch_ok.py" >>"$0/par'"$par"'.jsonl" 2>>"$0/stderr-breakdown.txt"' "$OUT"
		wall=$("$MKB_PYTHON" -c "import time; print(round(time.time() - $t0, 2))")
		echo "{\"label\": \"throughput\", \"parallel\": $par, \"evaluations\": 8, \"wall_s\": $wall}" >>"$rows"
		tail -1 "$rows" >&2
	done
	;;
all)
	export EVAL_FLAGS=${EVAL_FLAGS:-} # e.g. "--launches record"
	t0=$(date +%s.%N)
	# Evaluations whose reference alone takes more than SOLO_GB of GPU memory
	# (the catalog's peak_gb, results/h200-catalog.jsonl: 47 and 03 at 56-61
	# GB) run one at a time first, the rest PAR at a time: two such beside
	# each other run out of the GPU's memory.
	solutions "${2:-}" | while read -r n dsl; do
		for wl in ${WORKLOADS:-visible heldout}; do echo "$n $dsl $wl"; done
	done >"$OUT/jobs-all.txt"
	"$MKB_PYTHON" - "$OUT/jobs-all.txt" "${SOLO_GB:-30}" results/h200-catalog.jsonl <<'PY'
import json, os, sys
jobs, limit, catalog = sys.argv[1], float(sys.argv[2]), sys.argv[3]
peak = {}
if os.path.exists(catalog):
    for line in open(catalog):
        r = json.loads(line)
        peak[(r["problem"], r["workload"])] = r.get("peak_gb") or 0
lines = open(jobs).read().split("\n")
solo = [l for l in lines if l and peak.get((int(l[:2]), l.split()[2]), 0) > limit]
rest = [l for l in lines if l and l not in solo]
open(jobs + ".solo", "w").write("".join(l + "\n" for l in solo))
open(jobs + ".rest", "w").write("".join(l + "\n" for l in rest))
PY
	grade_all() { # PAR: the jobs on stdin, that many at a time
		xargs -P "$1" -L 1 sh -c 'build/mkb eval "$(echo "$0" | cut -c1-2 | sed "s/^0//")" --dsl "$1" --workload "$2" --json $EVAL_FLAGS "solutions/$0/$1/kernel.py" | "$MKB_PYTHON" -c "import json, sys; o = json.load(sys.stdin); o.pop(\"versions\", None); o.update(judge=\"new\", label=\"$0\", expect=\"passed\"); print(json.dumps(o))" >>'"$rows"' 2>>'"$OUT/stderr-all.txt"
	}
	grade_all 1 <"$OUT/jobs-all.txt.solo"
	grade_all "${PAR:-4}" <"$OUT/jobs-all.txt.rest"
	n=$(wc -l <"$rows")
	wall=$("$MKB_PYTHON" -c "import time; print(round(time.time() - $t0, 2))")
	solo=$(wc -l <"$OUT/jobs-all.txt.solo")
	echo "{\"label\": \"throughput\", \"parallel\": ${PAR:-4}, \"alone\": $solo, \"evaluations\": $n, \"wall_s\": $wall}" >>"$rows"
	# what ran out of GPU memory beside others is redone alone, as its verdict says
	"$MKB_PYTHON" -c 'import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o.get("status") == "infra_error" and "alone" in (o.get("reason") or ""):
        print(o["label"], o["dsl"], o["workload"])' "$rows" | while read -r n dsl wl; do
		row new "$n (alone)" passed "${n%%_*}" "$dsl" "$wl" "solutions/$n/$dsl/kernel.py"
	done
	;;
*)
	log "unknown step '$step'"
	exit 2
	;;
esac

# the probe's rows are not evaluations: its own tables are in pingpong.md
[ "$step" = pingpong ] && exit 0
table
