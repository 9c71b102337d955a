# Scenario-test helpers (git's test_expect_success idea). Source this, call
# expect 'what' 'shell commands', then finish. Each test runs in a subshell
# with `set -e`; its output is shown only when it fails.
set -u
TESTS_PASSED=0
TESTS_FAILED=0
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MKB=$(realpath "${MKB:-$TOP/build/asan/mkb}")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mkb-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export MKB_STORE="$TMP/store.db"
# each suite its own judge queue and GPU locks (the machine's are in /tmp)
export MKB_LOCK_DIR="$TMP"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

expect() {
	local name=$1 body=$2 log="$TMP/log"
	# ONLY=pattern runs only the tests whose name matches (a developer's aid)
	if [ -n "${ONLY:-}" ] && ! grep -q -- "$ONLY" <<<"$name"; then return 0; fi
	# Not inside `if`: bash ignores set -e in a tested command.
	(set -e; cd "$TMP"; eval "$body") >"$log" 2>&1
	local rc=$?
	if [ $rc -eq 0 ]; then
		TESTS_PASSED=$((TESTS_PASSED + 1))
		printf 'ok   %s\n' "$name"
	else
		TESTS_FAILED=$((TESTS_FAILED + 1))
		printf 'FAIL %s\n' "$name"
		sed 's/^/     | /' "$log" | tail -25
	fi
}

# Field of a JSON object on stdin, printed as Python prints it.
field() {
	python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(v if not isinstance(v, bool) else str(v).lower())' "$1"
}

# Every process below PID (depth first), while they run: a test that kills
# an mkb checks these are gone, not every process of a name on the machine
# (other suites may be grading at the same time).
descendants() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}

# Succeeds if any PID given is still running (a zombie is not).
alive() {
	local p s
	for p in "$@"; do
		s=$(ps -o stat= -p "$p" 2>/dev/null) || continue
		case "$s" in Z*) ;; *) return 0 ;; esac
	done
	return 1
}

# Succeeds if one of the PIDs given runs the candidate process.
has_candidate() {
	local p
	for p in "$@"; do
		tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null | grep -q "mkb_grader.candidate" && return 0
	done
	return 1
}

finish() {
	printf '%s: %d passed, %d failed\n' "$(basename "$0" .sh)" "$TESTS_PASSED" "$TESTS_FAILED"
	[ "$TESTS_FAILED" -eq 0 ]
}
