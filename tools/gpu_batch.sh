#!/usr/bin/env bash
# One device call's worth of GPU work (after tools/device_setup.sh), its
# results consolidated into three files under $OUT (the device tool returns a
# limited number of files per call: rows-STEP.jsonl, tables-STEP.md,
# stderr-STEP.txt).
#
#   tools/gpu_batch.sh judge          vmm check, smoke, the timing probe (made, staged
#                                     d2d, GPU idle before the call, kept busy), old vs
#                                     new judge (28 tirx, 36 cutedsl; SANDBOX_OFF=1 adds
#                                     the new judge with every layer off; with the GPU
#                                     kept busy until the call, MKB_JUDGE_KEEP=1; SPEC=1
#                                     adds seccomp without SPEC_ALLOW)
#   tools/gpu_batch.sh adversarial    every tests/adversarial/ kernel on problem 28
#   tools/gpu_batch.sh launches       launch attribution (issue 12): tools/gpu_launch_check.sh,
#                                     the recorder's cost in the judge, every adversarial
#                                     row (the DSL rules' rows enforced)
#   tools/gpu_batch.sh rules          the recorder's cost in the judge and the DSL rules'
#                                     exploit rows (launches without the probe)
#   tools/gpu_batch.sh catalog        tools/catalog_gpu.py's eager column (--inproc --timed 10)
#                                     for CAT_PROBLEMS (default all) and CAT_WORKLOADS
#   tools/gpu_batch.sh compile        the catalog's torch.compile column (--compile --jobs JOBS,
#                                     ROW_S per row) for CAT_PROBLEMS on CAT_WORKLOADS (visible)
#   tools/gpu_batch.sh compare [P]    tools/gpu_judge.sh compare: the old judge beside the new one
#                                     on the shipped solutions of P (default all 28), visible,
#                                     and the new one on held-out (its ROUNDS, VARIANTS,
#                                     NO_HELDOUT, ZYGOTE); kernels not reached by the deadline
#                                     are missing: name the rest in the next call
#   tools/gpu_batch.sh kernels [P]    shipped solutions of problems P (default the five
#                                     rewritten in session 12), visible + held-out
#   tools/gpu_batch.sh startup        tools/startup_probe.py: a candidate's start-up, cold and
#                                     forked from a pre-imported parent (ROUNDS, default 3)
#   tools/gpu_batch.sh zygote [P]     tools/zygote_bench.sh: the shipped kernels of problems P
#                                     (default 28) graded cold and through mkb zygote,
#                                     alternating, side by side (ROUNDS, default 3)
#   tools/gpu_batch.sh noise [P]      the noise study (tools/noise_study.sh) on P (N or
#                                     N/dsl); AB=1: default and noise measures on,
#                                     interleaved, side by side (about 150 s per kernel);
#                                     PAR=4: four kernels at once (noise_study.sh: which fit);
#                                     EVALS=3: evaluations per kernel (default 5);
#                                     BLOCKS: timing-probe blocks per kernel (its default);
#                                     BEFORE=, REDUCED=: noise_study.sh's
#   tools/gpu_batch.sh layout [P]     tools/layout_probe.py (no judge) on the shipped kernels
#                                     of P (default 28,36), random beside fixed memory layout
#                                     in fresh processes (PROCESSES per arm, default 6);
#                                     TORCH=1: the torch stand-ins of tests/kernels/ on the
#                                     smoke workload instead (no DSL needed: no set-up);
#                                     PROBE_FLAGS: more layout_probe.py flags
#
# Session 12 ran `judge` (then with adversarial inside) and `kernels`
# (results/h200-judge-trusted.md).
set -uo pipefail
cd "$(dirname "$0")/.."
export MKB_PYTHON=${MKB_PYTHON:-/opt/torch/.venv/bin/python}
. tools/device_env.sh
. tools/select.sh # solutions: which kernels a "N or N/dsl" list names
out=${OUT:?set OUT}
mkdir -p "$out"
step=${1:?step}
work=/tmp/gpu-batch-$step
rm -rf "$work" && mkdir -p "$work"
# Every command stops by the deadline (BATCH_S seconds from now, default 540),
# so the files below are written inside a device call's 600 s: timeout signals
# its whole process group, evaluations included.
deadline=$(($(date +%s) + ${BATCH_S:-540}))
bounded() {
	local left=$((deadline - $(date +%s)))
	[ "$left" -gt 5 ] || { echo "gpu_batch: no time left for $*" >&2; return 124; }
	timeout -k 10 "$left" "$@"
}
# What has come so far goes to $OUT every 20 s as well as at the end: a
# machine taken back mid-call still returns the rows finished before.
consolidate() {
	{ cat "$work"/*.jsonl 2>/dev/null
		[ -s "$work/noise.jsonl" ] || cat "$work"/parts/*.jsonl 2>/dev/null; } >"$out/rows-$step.jsonl"
	cat "$work"/*.md "$work"/machine*.txt "$work/vmm.txt" >"$out/tables-$step.md" 2>/dev/null
	tail -c 30000 -q "$work"/stderr*.txt >"$out/stderr-$step.txt" 2>/dev/null
	return 0
}
(while sleep 20; do consolidate; done) &
syncer=$!
trap 'kill "$syncer" 2>/dev/null' EXIT
case "$step" in
judge)
	# what the kernel does to a seccomp-confined process's speculation
	{ uname -r; for v in spec_store_bypass spectre_v2; do
		echo "$v: $(cat /sys/devices/system/cpu/vulnerabilities/$v 2>&1)"; done; } >"$work/machine-spec.txt"
	cat "$work/machine-spec.txt"
	PYTHONPATH=grader:$PYTHONPATH bounded "$MKB_PYTHON" tests/gpu/vmm_share.py >"$work/vmm.txt" 2>&1
	cat "$work/vmm.txt"
	OUT=$work bounded tools/gpu_judge.sh smoke 2>/dev/null | tail -6
	KEEP=1 PROBE_CONDITIONS="made,staged-d2d,idle,idle+kept" OUT=$work bounded tools/gpu_judge.sh gap 2>/dev/null | tail -12
	cat "$work/probe.md"
	;;
adversarial)
	OUT=$work bounded tools/gpu_judge.sh adversarial 2>/dev/null | tail -25
	;;
launches)
	# issue 12 on the GPU: the recorder end to end beside torch's own kernels
	# (classes per workload, its overhead), then its cost inside the judge
	# (28's shipped kernels, recorder off and enforced, alternating), then
	# every exploit, the DSL rules' rows enforced
	OUT=$work/check bounded tools/gpu_launch_check.sh >"$work/launch-check.md" 2>"$work/stderr-launch-check.txt"
	tail -40 "$work/launch-check.md"
	OUT=$work bounded tools/gpu_judge.sh launches 2>/dev/null | tail -14
	OUT=$work bounded tools/gpu_judge.sh adversarial 2>/dev/null | tail -30
	;;
rules)
	# the recorder's cost in the judge and the DSL rules' exploit rows only
	# (launches without the probe and the trust-boundary rows)
	OUT=$work bounded tools/gpu_judge.sh launches 2>/dev/null | tail -14
	ADV_WHEN=gpu OUT=$work bounded tools/gpu_judge.sh adversarial 2>/dev/null | tail -12
	;;
catalog | compile)
	# catalog: the eager column, every problem (or CAT_PROBLEMS), one process,
	# nothing else running (results/h200-catalog.md's eager run). compile:
	# the torch.compile column (the eager time beside it), one process per
	# row, JOBS compiling while the one timing holds the lock and pauses the
	# others, on CAT_WORKLOADS (default visible); rows not reached by the
	# deadline are missing: run the rest in the next call and --merge
	if [ "$step" = catalog ]; then
		flags=(--inproc ${CAT_WORKLOADS:+--workloads "$CAT_WORKLOADS"})
	else
		wl=${CAT_WORKLOADS:-visible}
		# the rows' earlier peaks keep the workers inside the GPU's memory
		# (JOBS=8 ran 11 rows out of it on the H200 without)
		flags=(--compile --jobs "${JOBS:-6}" --timeout "${ROW_S:-150}" --workloads "$wl" --compile-workloads "$wl"
			--peaks "${PEAKS:-results/h200-catalog.jsonl}")
	fi
	bounded "$MKB_PYTHON" tools/catalog_gpu.py --out "$work/catalog" --timed 10 "${flags[@]}" \
		${CAT_PROBLEMS:+--problems "$CAT_PROBLEMS"} 2>"$work/stderr-catalog.txt" | tail -20
	cp "$work/catalog/catalog.jsonl" "$work/catalog.jsonl" 2>/dev/null
	cp "$work/catalog/catalog.md" "$work/catalog.md" 2>/dev/null
	;;
compare)
	OUT=$work bounded tools/gpu_judge.sh compare "${2:-}" 2>/dev/null | tail -40
	;;
kernels)
	OUT=$work bounded tools/gpu_judge.sh all "${2:-47,49,52,60,66}" 2>/dev/null | tail -40
	;;
startup)
	# where a candidate's start-up goes, cold against forked from a
	# pre-imported parent (issue 9's zygote, measured before building)
	bounded "$MKB_PYTHON" tools/startup_probe.py --rounds "${ROUNDS:-3}" ${STARTUP_DSL:+--dsl "$STARTUP_DSL"} \
		${FORKED_ENV:+--forked-env "$FORKED_ENV"} --json >"$work/startup.txt" 2>"$work/stderr-startup.txt"
	grep '^{' "$work/startup.txt" >"$work/startup.jsonl"
	grep -v '^{' "$work/startup.txt" | tee "$work/startup.md"
	;;
zygote)
	# issue 9: the shipped kernels of problems P (default 28) graded cold
	# and through mkb zygote, alternating (tools/zygote_bench.sh)
	specs=()
	while read -r n dsl; do # P: problems (N or N/dsl), their shipped kernels
		specs+=("solutions/$n/$dsl/kernel.py:$((10#${n%%_*})):$dsl")
	done < <(solutions "${2:-28}")
	OUT=$work bounded tools/zygote_bench.sh "${specs[@]}" 2>"$work/stderr-zygote.txt" | tail -12
	;;
layout)
	# issue 11: does where a process landed set the end-to-end figure?
	while read -r n dsl; do
		k="solutions/$n/$dsl/kernel.py" wl=visible
		if [ -n "${TORCH:-}" ]; then
			k="tests/kernels/${n%%_*}_torch_ok.py" wl=smoke
			[ "$dsl" = cutedsl ] && [ -f "$k" ] || continue # one torch stand-in per problem
		fi
		bounded "$MKB_PYTHON" tools/layout_probe.py --kernel "$k" --problem-dir "$(ls -d problems/*/"$n" | head -1)" \
			--workload "$wl" --processes "${PROCESSES:-6}" --json ${PROBE_FLAGS:-} 2>>"$work/stderr-layout.txt" >"$work/layout.txt"
		grep '^{' "$work/layout.txt" | sed "s|^{|{\"label\": \"$n/$dsl\", |" >>"$work/layout.jsonl"
		grep -v '^{' "$work/layout.txt" | tee -a "$work/layout.md"
	done < <(solutions "${2:-28,36}")
	;;
noise)
	OUT=$work bounded tools/noise_study.sh "${2:-28,36}" "${EVALS:-}" ${BLOCKS:+"$BLOCKS"} 2>"$work/stderr-noise.txt" | tail -40
	;;
*)
	echo "gpu_batch: unknown step '$step'" >&2
	exit 2
	;;
esac
kill "$syncer" 2>/dev/null
wait "$syncer" 2>/dev/null
consolidate
