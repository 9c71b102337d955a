#!/usr/bin/env bash
# mkb run in CPU test mode with the control agents (no model): the plan, the
# four arms, reuse, staleness, skipped skill arms, and resuming after kill -9.
. "$(dirname "$0")/../lib.sh"
RUN_FLAGS="--device cpu --workload smoke --submissions 0 --runs-dir $TMP/runs"

sql() { python3 -c 'import sqlite3, sys; print("\n".join("|".join(str(c) for c in r) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])))' "$MKB_STORE" "$1"; }

expect 'the dry-run plan of 2 problems x 2 replicates x 4 arms lists 16 trials to run, solos first' '
	"$MKB" run --model oracle --problems 28,36 --replicates 2 $RUN_FLAGS --dry-run >plan.txt
	[ "$(grep -c "^RUN " plan.txt)" = 16 ]
	grep -q "^plan: 16 trials: 16 to run, 0 to reuse, 0 to rerun, 0 stale$" plan.txt
	head -4 plan.txt | grep -q "p28_r1_solo_cutedsl"
	[ "$(sed -n 9p plan.txt | tr -s " " | cut -d" " -f2)" = p28_r1_cutedsl2tirx_skill ]
	[ "$(sql "select count(*) from trials")" = 0 ]
'

expect 'a run completes; a skill arm gets its source'"'"'s skill, its instruction differing only by it' '
	"$MKB" run --model oracle --problems 28 $RUN_FLAGS >run.txt
	grep -q "^done: 4 of 4 trials final: 4 passed" run.txt
	[ "$(sql "select count(*) from trials where archived=0 and status=\"passed\"")" = 4 ]
	solo=$(sql "select attempt from trials where name=\"p28_r1_solo_tirx\"")
	skill=$(sql "select attempt from trials where name=\"p28_r1_cutedsl2tirx_skill\"")
	src=$(sql "select attempt from trials where name=\"p28_r1_solo_cutedsl\"")
	"$MKB" attempt show $solo --json >solo.json
	"$MKB" attempt show $skill --json >skill.json
	"$MKB" attempt show $src --json >src.json
	python3 - <<PY
import hashlib, json
solo, skill, src = (json.load(open(f)) for f in ("solo.json", "skill.json", "src.json"))
inst = lambda a: next(e["body"]["instruction"] for e in a["events"] if e["kind"] == "start")
a, b = inst(solo), inst(skill)
assert b.startswith(a), "the skill arm must be the solo instruction plus the skill"
extra = b[len(a):]
assert extra.startswith("\n## Skill from a prior attempt\n"), extra[:200]
assert "different kernel DSL (CuTe DSL)" in extra
assert src["skill_out"] and src["skill_out"] in extra
assert skill["skill_in_sha256"] == hashlib.sha256(src["skill_out"].encode()).hexdigest()
assert solo["skill_in_sha256"] is None and skill["arm"] == "p28_r1_cutedsl2tirx_skill"
PY
'

expect 'a second invocation reuses every final trial and runs nothing' '
	"$MKB" run --model oracle --problems 28 $RUN_FLAGS >again.txt
	grep -q "^plan: 4 trials: 0 to run, 4 to reuse, 0 to rerun, 0 stale$" again.txt
	! grep -q "^\[" again.txt
	[ "$(sql "select count(*) from attempts")" = 4 ]
'

expect 'an edited reference marks its trials stale: the run stops until --rerun-stale, which archives them' '
	root=$TMP/root
	mkdir -p $root/problems
	for f in grader templates docs solutions build; do ln -s "$TOP/$f" $root/$f; done
	cp -r "$TOP/problems/." $root/problems/
	echo "# edited" >>$root/problems/mlp_norm/28_fused_add_rmsnorm/reference.py
	set +e
	MKB_ROOT=$root "$MKB" run --model oracle --problems 28 $RUN_FLAGS >stale.txt; rc=$?
	set -e
	[ $rc = 1 ]
	[ "$(grep -c "^STALE " stale.txt)" = 4 ]
	grep -q "^4 stale trials: .*--rerun-stale" stale.txt
	MKB_ROOT=$root "$MKB" run --model oracle --problems 28 --rerun-stale $RUN_FLAGS >rerun.txt
	grep -q "^done: 4 of 4 trials final: 4 passed" rerun.txt
	[ "$(sql "select count(*) from trials where archived=1 and note like \"%stale%\"")" = 4 ]
	[ "$(sql "select count(*) from trials where archived=0")" = 4 ]
'

expect 'a source that leaves no skill: its skill arm is recorded as skipped' '
	"$MKB" run --model null --problems 36 $RUN_FLAGS >null.txt
	grep -q "^done: 4 of 4 trials final: 0 passed, 2 failed, 0 timed out, 0 model errors, 0 infrastructure errors, 2 skipped" null.txt
	[ "$(sql "select note from trials where model=\"null\" and name=\"p36_r1_cutedsl2tirx_skill\"")" = "skipped: its source left no SKILL.md" ]
'

expect 'kill -9 at random moments: each resume continues; every trial ends with exactly one final record' '
	export MKB_STORE=$TMP/crash.db
	for delay in 2 5 9; do
		"$MKB" run --model oracle --problems 25 $RUN_FLAGS >>crash.txt 2>&1 &
		pid=$!
		sleep $delay
		kill -9 $pid 2>/dev/null || true
		wait $pid 2>/dev/null || true
	done
	"$MKB" run --model oracle --problems 25 $RUN_FLAGS >final.txt 2>&1
	grep -q "^done: 4 of 4 trials final: 4 passed" final.txt
	[ "$(sql "select count(*) from trials where archived=0")" = 4 ]
	[ "$(sql "select count(*) from trials where archived=0 and status=\"passed\"")" = 4 ]
	[ "$(sql "select count(distinct name) from trials where archived=0")" = 4 ]
	[ "$(sql "select count(*) from trials where status=\"running\" and archived=0")" = 0 ]
	[ "$(sql "select count(*) from attempts where status=\"running\"")" = 0 ]
	! pgrep -f "mkb-candidate" >/dev/null
	"$MKB" status >status.txt
	grep -q "^oracle  *{\"temperature\":0.7}  *passed  *4 " status.txt
	"$MKB" status --json | python3 -c "import json,sys; rows=json.load(sys.stdin); assert all(r[\"running\"] is None for r in rows), rows"
'

expect 'a spending ceiling: no new trial starts once the model has cost --max-cost; what ran is kept' '
	python3 "$TOP/tests/llm/attempt_scenarios.py" scen "$TOP"
	python3 "$TOP/tests/llm/server.py" scen/normal.json requests.json >port 2>/dev/null &
	server=$!
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
	export OPENAI_API_KEY=sk-test MKB_STORE=$TMP/cost.db
	flags="--model openai:gpt-test --base-url http://127.0.0.1:$(cat port) --prices $TOP/tests/data/llm/prices.json --retry-delay 0.05 --problems 28 --arms solo_cutedsl,solo_tirx $RUN_FLAGS"
	set +e
	"$MKB" run $flags --max-cost 0.0001 >cost.txt 2>&1; rc=$?
	set -e
	kill $server
	[ $rc = 1 ]
	grep -q "^\[1/2\] p28_r1_solo_cutedsl: passed" cost.txt
	grep -q "^spending ceiling reached: \$0.0420 spent on openai:gpt-test of \$0.0001" cost.txt
	[ "$(sql "select count(*) from trials")" = 1 ]
	# the first attempt cost exactly its usage at the prices
	python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]).execute(\"select cost_usd from attempts\").fetchone()[0]; e=((18300-9216)*2.5+9216*1.25+780*10)/1e6; assert abs(c-e) < 1e-12, (c, e)" "$MKB_STORE"
	"$MKB" run $flags --max-cost 0.0001 --dry-run | grep -q "^REUSE  p28_r1_solo_cutedsl"
'

expect 'the protocol over 2 problems x 2 replicates x 4 arms, 4 trials in flight: a skill arm starts after its source; evaluations share one judge queue' '
	export MKB_STORE=$TMP/conc.db
	"$MKB" run --model oracle --problems 28,36 --replicates 2 --concurrency 4 $RUN_FLAGS >conc.txt 2>&1
	grep -q "^done: 16 of 16 trials final: 16 passed" conc.txt
	# four solos start before the first one finishes
	[ "$(sed -n "/^\[1\/16\]/q;p" conc.txt | grep -c "^start p.._r._solo_")" = 4 ]
	for pr in 28 36; do
		src=$(grep -n "^\[[0-9]*\/16\] p${pr}_r1_solo_cutedsl: passed" conc.txt | cut -d: -f1)
		dst=$(grep -n "^start p${pr}_r1_cutedsl2tirx_skill$" conc.txt | cut -d: -f1)
		[ -n "$src" ] && [ -n "$dst" ] && [ "$dst" -gt "$src" ]
	done
	[ "$(sql "select count(*) from trials where archived=0 and status=\"passed\"")" = 16 ]
	# the default queue on the CPU: 2 slots, every evaluation in one of them
	[ "$(sql "select count(*) from evaluations where slot in (0, 1) and queue_ms >= 0")" = "$(sql "select count(*) from evaluations")" ]
	[ "$(sql "select count(*) from evaluations where gpu_index is not null")" = 0 ]
	"$MKB" run --model oracle --problems 28,36 --replicates 2 --concurrency 4 $RUN_FLAGS | grep -q "^plan: 16 trials: 0 to run, 16 to reuse"
'

expect 'one judge slot for 4 trials in flight: evaluations wait their turn, and the wait is recorded' '
	export MKB_STORE=$TMP/slot.db
	"$MKB" run --model oracle --problems 25 --concurrency 4 --slots 1 $RUN_FLAGS --submissions 1 >slot.txt 2>&1
	grep -q "^done: 4 of 4 trials final: 4 passed" slot.txt
	[ "$(sql "select count(distinct slot) from evaluations")" = 1 ]
	[ "$(sql "select max(queue_ms) > 500 from evaluations")" = 1 ]
	# the wait went back on the agent'"'"'s wall clock: the submissions say so
	sql "select body from attempt_events where kind=\"submission\"" | python3 -c "import json,sys; e=[json.loads(l) for l in sys.stdin if \"verdict\" in l]; assert len(e) == 4, e; assert all(abs(x[\"credited_s\"] - (x[\"verdict\"][\"queue_ms\"] + x[\"verdict\"][\"wait_ms\"]) / 1e3) < 1e-6 for x in e), e"
'

expect 'an external agent'"'"'s template is part of what its trials ran: an edited template makes them stale' '
	export MKB_STORE=$TMP/cli.db OPENAI_API_KEY=sk-unused
	printf "{\"provider\": \"openai\", \"command\": [\"true\"]}" >agent.json
	flags="--model cli:$PWD/agent.json --problems 28 --arms solo_cutedsl --base-url http://127.0.0.1:9 $RUN_FLAGS"
	set +e
	"$MKB" run $flags >cli1.txt 2>&1
	set -e
	grep -q "^done: 1 of 1 trials final: 0 passed, 1 failed" cli1.txt
	"$MKB" run $flags --dry-run | grep -q "^REUSE  p28_r1_solo_cutedsl"
	printf "{\"provider\": \"openai\", \"command\": [\"false\"]}" >agent.json
	"$MKB" run $flags --dry-run | grep -q "^STALE  p28_r1_solo_cutedsl"
'

expect 'the judge flags given to mkb run reach every evaluation of its attempts (counts, seed, noise flags)' '
	# verdict STORE: the final verdict of p28_r1_solo_tirx in that store, as JSON
	verdict() {
		MKB_STORE=$1 "$MKB" attempt show "$(MKB_STORE=$1 sql "select attempt from trials where name=\"p28_r1_solo_tirx\"")" --json |
			python3 -c "import json, sys; print(json.dumps(next(e[\"body\"][\"verdict\"] for e in json.load(sys.stdin)[\"events\"] if e[\"kind\"] == \"final\")))"
	}
	flagged() { # store [more flags]
		local db=$1; shift
		MKB_STORE=$db "$MKB" run --model oracle --problems 28 --arms solo_tirx $RUN_FLAGS --runs-dir "$db.runs" \
			--draws 2 --warmup 1 --timed 7 --rechecks 1 --gc-freeze "$@" >"$db.txt" &&
			grep -q "^done: 1 of 1 trials final: 1 passed" "$db.txt" && verdict "$db" >"$db.json"
	}
	flagged $TMP/f1.db --seed 12345
	flagged $TMP/f2.db --seed 12345
	flagged $TMP/f3.db --seed 54321
	python3 - "$TMP" <<PY
import json, sys
a, b, c = (json.load(open(f"{sys.argv[1]}/f{i}.db.json")) for i in (1, 2, 3))
assert (a["draws_total"], a["timed_calls"], a["outputs_checked"]) == (2, 7, 9), a
assert a["timing"]["noise"]["gc"]["checker"] == "frozen", a["timing"].get("noise")
# the same seed draws the same inputs (same errors), another seed others
assert a["errors"] == b["errors"], (a["errors"], b["errors"])
assert a["errors"] != c["errors"], (a["errors"], c["errors"])
PY
'

expect 'bad usage is refused with exit 2' '
	set +e
	"$MKB" run --problems 28 >/dev/null 2>err.txt; a=$?
	"$MKB" run --model oracle --arms solo_cuda >/dev/null 2>>err.txt; b=$?
	"$MKB" run --model oracle --problems 28 --family moe >/dev/null 2>>err.txt; c=$?
	"$MKB" run --model oracle --problems 99 >/dev/null 2>>err.txt; d=$?
	"$MKB" run --model openai:x --problems 28 --max-cost 5 >/dev/null 2>>err.txt; e=$?
	set -e
	[ $a = 2 ] && [ $b = 2 ] && [ $c = 2 ] && [ $d = 2 ] && [ $e = 2 ]
	grep -q "max-cost needs --prices" err.txt
	grep -q "unknown arm .solo_cuda." err.txt
'

finish
