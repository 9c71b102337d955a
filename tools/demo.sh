#!/usr/bin/env bash
# The main job's demo on any machine: the catalog, one variant's instruction,
# and the judge grading kernels end to end (on the GPU when there is one,
# else in the CPU test mode on the small workload).
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
echo "Every evaluation above is recorded in ${MKB_STORE:-mkb.db} (sqlite3 mkb.db 'select id, problem, status, reason from evaluations')."
