#!/usr/bin/env bash
# The scale benchmark of `mkb run` (issue 13, "Scale"; not a timed test):
# N attempts in flight at once (200) against the scripted model server on
# loopback, each a model-driven attempt in its sandboxed tmux terminal that
# does a few cheap turns while its "model" takes DELAY seconds a reply, and
# what the orchestrator costs per attempt in flight: peak memory (PSS of
# every mkb process) and CPU (its processes' CPU seconds over the integral
# of attempts in flight). results/run-scale.md has the numbers.
#
#     tools/bench_run_scale.sh [--concurrency N] [--turns T] [--delay S]
#                              [--interval S] [--keep] [--no-build]
#
# N solos (N/4 problems x 2 solo arms x 2 replicates; at most 296) all
# start at once. Each attempt: T turns of `echo step` (duration 1 s), then
# task_complete twice; it never writes kernel.py, so nothing is graded and
# every trial ends "failed". The sampler (tools/bench_sampler.py) reads
# /proc every --interval seconds; its JSON goes to $TMP/scale.json and the
# table is printed last. The run uses a copy of build/mkb (and mkb-submit)
# in $TMP with MKB_ROOT set, so that a rebuild meanwhile changes nothing;
# --no-build takes build/mkb as it is. Exit 0 only when every trial is
# final and nothing of the run is left running.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=200 TURNS=5 DELAY=3 INTERVAL=0.5 KEEP=0 BUILD=1
while [ $# -gt 0 ]; do
	case $1 in
	--concurrency) N=$2; shift 2 ;;
	--turns) TURNS=$2; shift 2 ;;
	--delay) DELAY=$2; shift 2 ;;
	--interval) INTERVAL=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--no-build) BUILD=0; shift ;;
	*) echo "usage: $0 [--concurrency N] [--turns T] [--delay S] [--interval S] [--keep] [--no-build]" >&2; exit 2 ;;
	esac
done
[ $((N % 4)) = 0 ] && [ "$N" -le 296 ] || { echo "--concurrency: a multiple of 4, at most 296" >&2; exit 2; }

cd "$TOP"
[ $BUILD = 0 ] || make -s all >&2
TMP=$(mktemp -d /tmp/mkb-scale.XXXXXX)
mkdir "$TMP/bin"
cp build/mkb build/mkb-submit "$TMP/bin/"
MKB=$TMP/bin/mkb
export MKB_ROOT=$TOP
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null || true
	[ "$KEEP" = 1 ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT

# Each worker holds a pipe, its store connections, a listening socket and
# its children's pipes; the server a socket per attempt: the soft limit up
# to the hard one.
ulimit -n "$(ulimit -Hn)"

python3 - "$TMP/scenario.json" "$TURNS" "$DELAY" <<'PY'
import json, sys
path, turns, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def say(analysis, cmds, done=None):
    o = {"analysis": analysis, "plan": "Go on.",
         "commands": [{"keystrokes": k, "duration": d} for k, d in cmds]}
    if done is not None:
        o["task_complete"] = done
    return {"say": o, "usage": [2000, 0, 100], "delay": delay}
replies = [say("Step %d." % (i + 1), [("echo step\n", 1)]) for i in range(turns)]
replies += [say("Done.", [], done=True), say("Confirmed.", [], done=True)]
json.dump({"by_turn": True, "replies": replies}, open(path, "w"), indent=1)
PY
python3 tests/llm/server.py "$TMP/scenario.json" - >"$TMP/port" 2>"$TMP/server.err" &
server=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
[ -s "$TMP/port" ] || { echo "the scripted server did not start" >&2; cat "$TMP/server.err" >&2; exit 1; }

nproblems=$((N / 4))
problems=$("$MKB" list --json | python3 -c "import json,sys; print(','.join(str(p['number']) for p in json.load(sys.stdin)[:$nproblems]))")
cmd=("$MKB" run --model openai:bench --base-url "http://127.0.0.1:$(cat "$TMP/port")" --device cpu
     --workload smoke --submissions 0 --arms solo_cutedsl,solo_tirx --problems "$problems"
     --replicates 2 --concurrency "$N" --store "$TMP/bench.db" --runs-dir "$TMP/runs")
echo "machine: $(nproc) CPUs, $(free -m | awk '/^Mem:/ {print $2}') MB, Linux $(uname -r)" >&2
echo "running: ${cmd[*]}" >&2
set +e
OPENAI_API_KEY=sk-bench-dummy python3 tools/bench_sampler.py --mkb "$MKB" --interval "$INTERVAL" --server "$server" \
	--json "$TMP/scale.json" -- "${cmd[@]}" >"$TMP/run.txt" 2>&1
rc=$?
set -e
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
server=

# What else is left: tmux servers and shells of this run (their sockets and
# folders are under $TMP), any mkb worker.
sleep 1
leftover=$(pgrep -f "$TMP" || true)
grep -v "^start " "$TMP/run.txt" | grep -v "^\[" | grep -v "^RUN " | tail -5 >&2 || true
final=$(grep "^done: " "$TMP/run.txt" || echo "done: (no final line)")
cp "$TMP/scale.json" "$TOP/build/bench-run-scale.json"
python3 tools/bench_sampler.py --table "$TMP/scale.json" --final "$final" --leftover "$leftover"
ok=1
grep -q "^done: $N of $N trials final" "$TMP/run.txt" || ok=0
[ -z "$leftover" ] || ok=0
python3 -c "import json,sys; sys.exit(1 if json.load(open(sys.argv[1]))['left_running'] else 0)" "$TMP/scale.json" || ok=0
echo "run exit status $rc; the sampler's JSON: build/bench-run-scale.json" >&2
[ $ok = 1 ]
