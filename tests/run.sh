#!/usr/bin/env bash
# Every test: C unit tests (ASan/UBSan build), the grader's Python tests, and
# the scenario tests that drive build/asan/mkb. Ends with one line
# "N passed, N failed" and exits non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0
add() { # "<label>: N passed, M failed" line -> totals
	local p f
	p=$(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' <<<"$1" | tail -1)
	f=$(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' <<<"$1" | tail -1)
	if [ -z "$p" ]; then # the suite died before its summary
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + p))
	failed=$((failed + f))
}

echo "== C unit tests (ASan/UBSan)"
out=$(ASAN_OPTIONS=detect_leaks=1 build/asan/unit 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || grep -q "failed" <<<"$out" || failed=$((failed + 1))
add "$(grep 'unit:' <<<"$out")"

echo "== grader Python tests"
out=$(PYTHONPATH=grader build/python -m unittest discover -s tests/python 2>&1)
rc=$?
echo "$out" | tail -15
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' <<<"$out")
bad=0
for n in $(grep -o 'failures=[0-9]*\|errors=[0-9]*' <<<"$out" | cut -d= -f2); do
	bad=$((bad + n))
done
if [ -z "$ran" ] || { [ $rc -ne 0 ] && [ "$bad" -eq 0 ]; }; then
	failed=$((failed + 1))
else
	add "python: $((ran - bad)) passed, $bad failed"
fi

for t in tests/scenario/*.sh; do
	echo "== $t"
	out=$(MKB=build/asan/mkb bash "$t" 2>&1)
	echo "$out"
	add "$(tail -1 <<<"$out")"
done

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
