#!/usr/bin/env bash
# mkb workspace: what an agent gets, and that solutions never reach it.
. "$(dirname "$0")/../lib.sh"

expect 'no workspace of any variant holds a solution file or the held-out workload' '
	find "$TOP/solutions" -type f -exec sha256sum {} + | cut -d" " -f1 | sort -u >solution.sha
	[ -s solution.sha ]
	for n in $(seq 1 74); do
		for d in cutedsl tirx; do
			ws=ws-$n-$d
			"$MKB" workspace $n --dsl $d $ws >/dev/null
			find $ws -type f -exec sha256sum {} + | cut -d" " -f1 | sort -u >ws.sha
			if comm -12 solution.sha ws.sha | grep -q .; then echo "solution file in $ws"; exit 1; fi
			if find $ws | grep -qi solution; then echo "solution path in $ws"; exit 1; fi
			if grep -rqi "heldout\|held-out\|held out" $ws/task; then echo "held-out workload in $ws"; exit 1; fi
			"$MKB" show $n --dsl $d | cmp - $ws/INSTRUCTION.md
			[ -f $ws/task/reference.py ] && [ -f $ws/task/CONTRACT.md ] && [ -f $ws/docs/$d/primer.md ]
			rm -rf $ws
		done
	done
'

expect 'the contract helper passes a correct kernel and names a mismatch' '
	"$MKB" workspace 28 --dsl cutedsl ws >/dev/null
	cp "$TOP/tests/kernels/28_torch_ok.py" ws/kernel.py
	(cd ws && "$TOP/build/python" task/check.py) >ok.txt
	grep -q "^ok$" ok.txt
	cp "$TOP/tests/kernels/28_off_5e-2.py" ws/kernel.py
	set +e; (cd ws && "$TOP/build/python" task/check.py) >bad.txt; rc=$?; set -e
	[ $rc = 1 ] && grep -q "MISMATCH: output: max error" bad.txt
	grep -q "max|actual - anchor| <= 3.0" ws/task/CONTRACT.md
	! grep -q "{max_kernel_bytes}" ws/task/CONTRACT.md
'

expect 'a non-empty folder is refused; a failed build leaves nothing behind' '
	mkdir full && touch full/x
	set +e; "$MKB" workspace 28 --dsl tirx full 2>err.txt; rc=$?; set -e
	[ $rc = 3 ] && grep -q "not empty" err.txt
	# a project copy without the DSL primer: the build fails half-way
	mkdir root && cp -r "$TOP/problems" "$TOP/templates" "$TOP/grader" root/
	set +e; MKB_ROOT=$PWD/root "$MKB" workspace 28 --dsl tirx half 2>err.txt; rc=$?; set -e
	[ $rc = 3 ] && grep -q "primer.md" err.txt
	[ ! -e half ]
'

finish
