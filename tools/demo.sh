#!/usr/bin/env bash
# The main job's demo on any machine: the catalog, one variant's instruction,
# the judge grading kernels end to end, then the benchmark's protocol itself
# (mkb run: four arms per problem) with the oracle control agent on every
# problem that has a shipped solution in both DSLs (on the GPU when there is
# one, else in the CPU test mode on the small workload, saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
mkb=build/mkb
echo "== mkb list"
$mkb list
echo
echo "== mkb show 28 --dsl cutedsl (first lines)"
instruction=$($mkb show 28 --dsl cutedsl)
sed -n 1,12p <<<"$instruction"
if [ -e /dev/nvidia0 ]; then
	flags=(--device cuda)
else
	flags=(--device cpu --workload smoke)
	echo
	echo "(no GPU here: CPU test mode on the smoke workload)"
fi
for k in 28_torch_ok 28_off_5e-2 28_segv; do
	echo
	echo "== mkb eval 28 --dsl cutedsl ${flags[*]} tests/kernels/$k.py"
	$mkb eval 28 --dsl cutedsl "${flags[@]}" "tests/kernels/$k.py" || true
done
echo
# a store of its own, so the demo's trials never mix with real runs; trials
# that a change to the problems, grader or templates made stale run again
# (a second `make demo` after a pull would otherwise stop on them)
store=${MKB_DEMO_STORE:-build/demo.db}
if [ -e /dev/nvidia0 ]; then
	echo "== mkb run --model oracle ${flags[*]}: the four arms on every problem with both solutions"
	$mkb run --model oracle "${flags[@]}" --rerun-stale --store "$store" --runs-dir build/demo-runs
else
	# about 10 s a trial on the CPU: two problems here; without --problems,
	# every problem with both solutions (56 trials, about 10 minutes)
	echo "== mkb run --model oracle ${flags[*]} --problems 28,36: the four arms of two problems"
	echo "(CPU test mode: the oracle submits a plain-torch stand-in of the reference, labelled as such;"
	echo " drop --problems for every problem with shipped solutions in both DSLs)"
	$mkb run --model oracle "${flags[@]}" --rerun-stale --problems 28,36 --store "$store" --runs-dir build/demo-runs
fi
echo
echo "== mkb report --store $store: the scores and the paired analysis of those trials"
echo "(the oracle transfers nothing: a skill arm submits the very kernel of its solo, so whatever"
echo " help or harm shows below is the timing noise between two evaluations on this machine)"
$mkb report --store "$store" --bootstrap 200
$mkb report --store "$store" --format html --trials -o build/demo-report.html
echo "(the same as one HTML page with its figures and a page per trial: build/demo-report.html)"
echo
echo "Every evaluation above is recorded in ${MKB_STORE:-mkb.db}, the protocol's trials and attempts in $store"
echo "(sqlite3 $store 'select name, status from trials'; build/mkb attempt show ID --store $store)."
