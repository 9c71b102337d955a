#!/usr/bin/env bash
# --zygote auto (docs/judge.md, "Start-up: the zygote"): mkb run (and
# validate) start a zygote of their own, grade every kernel through it, and
# end it however they end: returning, SIGTERM, kill -9. Where the sandbox
# cannot keep candidates from it: a warning, and every evaluation cold.
. "$(dirname "$0")/../lib.sh"
RUN_FLAGS="--model oracle --problems 28 --device cpu --workload smoke --submissions 0 --runs-dir $TMP/runs"

# The verdict of trial's final grading: "candidate_start checker_start status".
final_start() {
	id=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("select attempt from trials where name=?", (sys.argv[2],)).fetchone()[0])' "$MKB_STORE" "$1")
	"$MKB" attempt show "$id" --json | python3 -c '
import json, sys
a = json.load(sys.stdin)
v = next(e["body"]["verdict"] for e in a["events"] if e["kind"] == "final")
print(v["candidate_start"], v["checker_start"], v["status"])'
}
# The zygote a command started, from its line on stderr.
zygote_name() { grep -o "zygote: mkb-[0-9]*-[0-9a-f]* listens" "$1" | cut -d" " -f2; }
# Its processes (the candidates' zygote and NAME:checker), while any is left.
zygotes_of() { pgrep -f "mkb_grader.zygote .*--socket $1" || true; }
gone() { for _ in $(seq 100); do [ -z "$(zygotes_of "$1")" ] && return 0; sleep 0.1; done; return 1; }
# A two-problem run with --zygote auto in the background (store DB); $pid the
# run, $name its zygote once it listens.
run_listening() {
	export MKB_STORE=$TMP/$1.db
	"$MKB" run $RUN_FLAGS --problems 28,36 --zygote auto >run.txt 2>err.txt &
	pid=$!
	for _ in $(seq 300); do [ -n "$(zygote_name err.txt)" ] && break; sleep 0.1; done
	name=$(zygote_name err.txt)
	[ -n "$name" ]
}

expect 'mkb run --zygote auto grades through a zygote of its own (trials in flight too), and ends it when it returns' '
	export MKB_STORE=$TMP/run.db
	"$MKB" run $RUN_FLAGS --arms solo_cutedsl,solo_tirx --concurrency 2 --zygote auto >run.txt 2>err.txt &
	pid=$!
	wait $pid || { cat err.txt; false; }
	grep -q "^done: 2 of 2 trials final: 2 passed" run.txt
	name=$(zygote_name err.txt)
	[ -n "$name" ] && [ "${name#mkb-$pid-}" != "$name" ] # unique: the run'"'"'s pid and a random part
	[ "$(final_start p28_r1_solo_cutedsl)" = "zygote zygote passed" ]
	[ "$(final_start p28_r1_solo_tirx)" = "zygote zygote passed" ]
	[ -z "$(zygotes_of "$name")" ] # nothing of it outlives the run
'

expect 'mkb run --zygote auto --fixed-layout: its zygote is started with the flag, so the forks'"'"' layout is fixed' '
	export MKB_STORE=$TMP/fixed.db
	"$MKB" run $RUN_FLAGS --arms solo_cutedsl --zygote auto --fixed-layout >run.txt 2>err.txt || { cat err.txt; false; }
	grep -q "^done: 1 of 1 trials final: 1 passed" run.txt
	[ "$(final_start p28_r1_solo_cutedsl)" = "zygote zygote passed" ]
	id=$(python3 -c "import sqlite3; print(sqlite3.connect(\"$MKB_STORE\").execute(\"select attempt from trials\").fetchone()[0])")
	"$MKB" attempt show "$id" --json | python3 -c "
import json, sys
a = json.load(sys.stdin)
v = next(e[\"body\"][\"verdict\"] for e in a[\"events\"] if e[\"kind\"] == \"final\")
n = v[\"timing\"][\"noise\"][\"layout\"]
assert n[\"checker\"] == n[\"candidate\"] == {\"aslr\": False, \"hash_seed\": \"0\"}, n"
'

expect 'without --zygote a run starts every evaluation cold, as before' '
	export MKB_STORE=$TMP/cold.db
	env -u MKB_ZYGOTE "$MKB" run $RUN_FLAGS --arms solo_cutedsl >run.txt 2>err.txt
	grep -q "^done: 1 of 1 trials final: 1 passed" run.txt
	[ "$(final_start p28_r1_solo_cutedsl)" = "cold cold passed" ]
	! grep -q "zygote" err.txt
'

expect 'a run stopped by SIGTERM mid-way ends its zygote (and what it forked)' '
	run_listening term
	zp=$(pgrep -f "mkb_grader.zygote --socket $name ")
	kids="$zp $(descendants $zp)"
	sleep 1 # a trial under way
	kill -0 $pid # not done yet
	kill -TERM $pid
	rc=0; wait $pid || rc=$?
	[ $rc = 143 ] # 128 + SIGTERM: interrupted
	[ -z "$(zygotes_of "$name")" ] # gone when the run has returned
	! alive $kids
'

expect 'a run interrupted while its zygote starts leaves none' '
	export MKB_STORE=$TMP/early.db
	"$MKB" run $RUN_FLAGS --zygote auto >run.txt 2>err.txt &
	pid=$!
	for _ in $(seq 100); do pgrep -f "mkb_grader.zygote --socket mkb-$pid-" >/dev/null && break; sleep 0.05; done
	kill -INT $pid
	rc=0; wait $pid || rc=$?
	[ $rc = 130 ]
	grep -q "interrupted while it started" err.txt
	[ -z "$(zygotes_of "mkb-$pid-")" ]
'

expect 'kill -9 of the run takes its zygote with it (parent-death signal)' '
	run_listening kill
	[ -n "$(zygotes_of "$name")" ]
	kill -9 $pid
	wait $pid 2>/dev/null || true
	gone "$name"
'

expect 'with the network namespace and Landlock scope off: a warning, no zygote, every evaluation cold' '
	export MKB_STORE=$TMP/off.db
	MKB_SANDBOX_OFF=netns,landlock_scope "$MKB" run $RUN_FLAGS --arms solo_cutedsl --zygote auto >run.txt 2>err.txt &
	pid=$!
	wait $pid || { cat err.txt; false; }
	grep -q "^done: 1 of 1 trials final: 1 passed" run.txt
	grep -q "warning: --zygote auto: .*none is started; every evaluation starts cold" err.txt
	[ "$(final_start p28_r1_solo_cutedsl)" = "cold cold passed" ]
	[ -z "$(zygotes_of "mkb-$pid-")" ]
'

expect 'mkb validate --zygote auto: every solution through it (the judge'"'"'s clean-up spares it)' '
	# the shipped solutions need a GPU: a kernel that passes on the CPU, as both
	for d in cutedsl tirx; do
		mkdir -p sol/28_fused_add_rmsnorm/$d
		cp "$TOP/tests/kernels/28_torch_ok.py" sol/28_fused_add_rmsnorm/$d/kernel.py
	done
	"$MKB" validate --solutions sol --problems 28 --workload smoke --device cpu --warmup 2 --timed 8 \
		--no-store --json --zygote auto >v.json 2>err.txt &
	pid=$!
	wait $pid || { cat err.txt; false; }
	name=$(zygote_name err.txt)
	[ -n "$name" ]
	[ "$(wc -l <v.json)" = 2 ] # cutedsl and tirx
	while read -r line; do
		[ "$(field candidate_start <<<"$line")" = zygote ]
		[ "$(field checker_start <<<"$line")" = zygote ]
		[ "$(field status <<<"$line")" = passed ]
	done <v.json
	[ -z "$(zygotes_of "$name")" ]
'

expect 'mkb eval --zygote auto: a warning, and the one evaluation cold' '
	"$MKB" eval 28 --dsl cutedsl --device cpu --workload smoke --warmup 2 --timed 8 --no-store --json \
		--zygote auto "$TOP/tests/kernels/28_torch_ok.py" >e.json 2>err.txt
	[ "$(field candidate_start <e.json)" = cold ]
	[ "$(field status <e.json)" = passed ]
	grep -q "warning: --zygote auto starts a zygote for commands that grade many kernels" err.txt
'

finish
