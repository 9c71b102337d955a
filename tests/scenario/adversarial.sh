#!/usr/bin/env bash
# Every kernel of tests/adversarial/ against the judge on the CPU: each gets
# the verdict of expected.tsv, and the judge survives all of them.
. "$(dirname "$0")/../lib.sh"
A=$TOP/tests/adversarial
FAST="--device cpu --workload smoke --warmup 2 --timed 8 --timeout 60"
export MKB_TEST_SECRET=do-not-leak OPENAI_API_KEY=sk-do-not-leak

# A loopback server the network exploit tries to reach.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True); time.sleep(600)' >"$TMP/port" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
export MKB_TEST_PORT=$(cat "$TMP/port")

table="$TMP/table.md"
echo "| exploit | expected | got | reason |" >"$table"
echo "|---|---|---|---|" >>"$table"
while IFS=$'\t' read -r kernel want pattern; do
	case "$kernel" in '#'* | '') continue ;; esac
	expect "$kernel: $want" '
		set +e
		"$MKB" eval 28 --dsl cutedsl $FAST --json --no-store "$A/'"$kernel"'" >out.json 2>err.txt
		rc=$?
		set -e
		cat out.json
		[ $rc -le 3 ] # the judge itself survives: a verdict, not a death
		got=$(field status <out.json)
		reason=$(field reason <out.json)
		printf "| %s | %s | %s | %.120s |\n" "'"$kernel"'" "'"$want"'" "$got" "$reason" >>"'"$table"'"
		[ "$got" = "'"$want"'" ]
		text=$(python3 -c "import json; v=json.load(open(\"out.json\")); print(v[\"reason\"]); print(v.get(\"output_tail\", \"\")); print(json.dumps(v.get(\"timing\"))); print(\"eager_ms=%s\" % v[\"eager_ms\"])")
		pat='"'$pattern'"'
		if [ "${pat#!}" != "$pat" ]; then
			! grep -Eq -- "${pat#!}" <<<"$text"
		else
			grep -Eq -- "$pat" <<<"$text"
		fi
	'
done <"$A/expected.tsv"

expect 'a forked child does not outlive its evaluation' '
	sleep 0.3
	! pgrep -f mkb-adversary-survivor-5c1e
'

expect 'no descriptor of the judge reaches the candidate' '
	exec 9>"$TMP/fd9"
	cat >"$TMP/fds.py" <<PY
import os
def solve(hidden_states, residual, weight):
    fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    raise RuntimeError("fds %s" % [(f, os.readlink(f"/proc/self/fd/{f}")) for f in fds if os.path.exists(f"/proc/self/fd/{f}")])
PY
	"$MKB" eval 28 --dsl cutedsl $FAST --json --no-store "$TMP/fds.py" >out.json || true
	field reason <out.json | grep "fds"
	! field reason <out.json | grep -q "fd9"
'

cat "$table"
finish
