#!/usr/bin/env bash
# mkb validate on the CPU, over a stand-in solutions tree of torch kernels.
. "$(dirname "$0")/../lib.sh"
SOL=$TOP/tests/fixtures/solutions
FAST="--device cpu --warmup 1 --timed 3"

expect 'one row per solution and workload, a summary per DSL, exit 1 on a failure' '
	set +e; "$MKB" validate $FAST --solutions "$SOL" --workload smoke >out.txt 2>err.txt; rc=$?; set -e
	cat out.txt
	[ $rc = 1 ]
	[ "$(grep -c "^[0-9][0-9]  " out.txt)" = 3 ]
	grep -q "^28  cutedsl  smoke    passed " out.txt
	grep -q "^28  tirx     smoke    failed .*max error" out.txt
	grep -q "^36  tirx     smoke    passed " out.txt
	grep -q "^2 of 3 evaluations passed" out.txt
	grep -q "^cutedsl  smoke: 1 of 1 passed, geomean speedup [0-9.]*x, geomean fraction of speed of light" out.txt
	grep -q "^tirx     smoke: 1 of 2 passed" out.txt
'

expect 'visible and held-out by default; filters by problem and DSL; exit 0 when all pass' '
	"$MKB" validate $FAST --draws 1 --solutions "$SOL" --problems 36 --dsl tirx >out.txt
	[ "$(grep -c "^36  tirx " out.txt)" = 2 ]
	grep -q "^36  tirx     visible  passed" out.txt
	grep -q "^36  tirx     heldout  passed" out.txt
	! grep -q "^28 " out.txt
'

expect '--json prints one object per evaluation with the speed of light' '
	set +e; "$MKB" validate $FAST --solutions "$SOL" --workload smoke --json >out.json; set -e
	python3 -c "
import json
rows = [json.loads(l) for l in open(\"out.json\")]
assert len(rows) == 3, rows
assert all(r[\"sol_ms\"] > 0 for r in rows)
assert sorted((r[\"problem\"], r[\"dsl\"], r[\"status\"]) for r in rows) == [(28, \"cutedsl\", \"passed\"), (28, \"tirx\", \"failed\"), (36, \"tirx\", \"passed\")]
"
'

expect 'the speed-of-light fraction follows the ceilings given' '
	"$MKB" validate $FAST --solutions "$SOL" --problems 36 --workload smoke --json --hbm-tbps 4 >a.json
	"$MKB" validate $FAST --solutions "$SOL" --problems 36 --workload smoke --json --hbm-tbps 2 >b.json
	python3 -c "
import json
a = json.loads(open(\"a.json\").readline()); b = json.loads(open(\"b.json\").readline())
assert abs(b[\"sol_ms\"] / a[\"sol_ms\"] - 2) < 1e-9, (a[\"sol_ms\"], b[\"sol_ms\"])
"
'

expect 'no solutions, bad lists and bad DSLs are clear errors' '
	set +e
	"$MKB" validate --device cpu --solutions "$SOL" --problems 1 2>e1; r1=$?
	"$MKB" validate --device cpu --problems 28,x 2>e2; r2=$?
	"$MKB" validate --device cpu --dsl cuda 2>e3; r3=$?
	set -e
	[ "$r1$r2$r3" = 322 ]
	grep -q "no solutions found" e1 && grep -q "problems wants numbers" e2 && grep -q "unknown DSL" e3
'

expect 'every shipped solution sits where mkb validate finds it and passes the judge'"'"'s pre-checks' '
	"$MKB" list --json | python3 -c "import json,sys; [print(\"%02d_%s\" % (p[\"number\"], p[\"name\"])) for p in json.load(sys.stdin)]" >names.txt
	max_bytes=$(awk "/define JUDGE_MAX_KERNEL_BYTES/ {print \$3}" "$TOP/src/mkb_limits.h")
	[ "$max_bytes" -gt 0 ]
	for d in "$TOP"/solutions/*/; do
		name=$(basename "$d")
		[ "$name" = notes ] && continue
		grep -qx "$name" names.txt || { echo "solutions/$name is no problem of the catalog"; exit 1; }
		for k in "$d"*/; do
			case $(basename "$k") in cutedsl|tirx) ;; *) echo "unknown DSL folder $k"; exit 1;; esac
			[ -f "$k/kernel.py" ] || { echo "$k has no kernel.py"; exit 1; }
			# what the judge checks before grading: size, UTF-8, Python syntax
			[ "$(wc -c <"$k/kernel.py")" -le "$max_bytes" ] || { echo "$k/kernel.py is over the size limit"; exit 1; }
			PYTHONPATH="$TOP/grader" "$TOP/build/python" -m mkb_grader --syntax "$k/kernel.py" ||
				{ echo "$k/kernel.py fails the syntax check"; exit 1; }
			grep -q "^def solve(" "$k/kernel.py" || { echo "$k/kernel.py defines no solve()"; exit 1; }
		done
	done
'

finish
