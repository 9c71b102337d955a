#!/usr/bin/env bash
# The judge end to end on the CPU: `mkb eval --device cpu` on planted kernels.
. "$(dirname "$0")/../lib.sh"
K=$TOP/tests/kernels
FAST="--device cpu --workload smoke --warmup 1 --timed 5"

evaljson() { # problem kernel [flags...]: JSON verdict in out.json, exit code in rc
	local p=$1 k=$2
	shift 2
	set +e
	"$MKB" eval "$p" --dsl cutedsl $FAST --json "$@" "$K/$k" >out.json 2>err.txt
	echo $? >rc
	set -e
	cat out.json
}

expect 'a correct kernel passes with timings and exit 0' '
	evaljson 28 28_torch_ok.py --timed 12
	[ "$(field status <out.json)" = passed ]
	[ "$(field passed <out.json)" = true ]
	[ "$(field draws_passed <out.json)" = 5 ]
	[ "$(field draws_total <out.json)" = 5 ]
	python3 -c "import json; v=json.load(open(\"out.json\")); assert v[\"kernel_ms\"] > 0 and v[\"eager_ms\"] > 0 and v[\"speedup\"] > 0; assert v[\"gpu\"].startswith(\"cpu\")"
	# 95% intervals from the calls of this evaluation, around the medians
	python3 -c "import json; v=json.load(open(\"out.json\")); k, e, r = v[\"kernel_ci_ms\"], v[\"eager_ci_ms\"], v[\"speedup_ci\"]; assert k[0] <= v[\"kernel_ms\"] <= k[1] and e[0] <= v[\"eager_ms\"] <= e[1] and r[0] <= r[1], v"
	[ "$(cat rc)" = 0 ]
'

expect 'the visible workload is the default and runs on the CPU too' '
	"$MKB" eval 36 --dsl tirx --device cpu --timed 3 --warmup 1 --draws 1 --json "$TOP/tests/kernels/36_torch_ok.py" >out.json
	[ "$(field workload <out.json)" = visible ]
	[ "$(field status <out.json)" = passed ]
'

expect '1e-2 relative error on bf16 is inside the paper allowance' '
	evaljson 28 28_off_1e-2.py
	[ "$(field status <out.json)" = passed ]
'

expect '5e-2 relative error fails with a mismatch reason' '
	evaljson 28 28_off_5e-2.py
	[ "$(field status <out.json)" = failed ]
	[ "$(field correct <out.json)" = false ]
	field reason <out.json | grep -q "max error .* > allowance"
	[ "$(cat rc)" = 1 ]
'

expect 'a tuple where a tensor is expected fails on structure' '
	evaljson 28 28_tuple.py
	[ "$(field status <out.json)" = failed ]
	field reason <out.json | grep -q "expected tensor.*got tuple"
'

expect 'a wrong output shape fails on shape' '
	evaljson 28 28_shape.py
	field reason <out.json | grep -q "shape \[37, 255\] != expected \[37, 256\]"
'

expect 'NaN in the output fails' '
	evaljson 28 28_nan.py
	[ "$(field status <out.json)" = failed ]
	field reason <out.json | grep -q "NaN/Inf"
'

expect 'a kernel that raises fails with the exception and stage' '
	evaljson 28 28_raises.py
	[ "$(field status <out.json)" = failed ]
	[ "$(field imported <out.json)" = true ]
	field reason <out.json | grep -q "correctness raised ValueError: planted failure"
	# The traceback is in the output tail, not in the one-line reason.
	"$MKB" eval 28 --dsl cutedsl $FAST "$K/28_raises.py" >fb.txt || true
	! grep -q "Traceback" fb.txt
	python3 -c "import sqlite3; t = sqlite3.connect(\"$MKB_STORE\").execute(\"select output_tail from evaluations where kernel_path like \x27%28_raises.py\x27\").fetchone()[0]; assert \"Traceback\" in t and \"planted failure\" in t, t"
'

expect 'a kernel without solve() fails at import' '
	evaljson 28 28_no_solve.py
	[ "$(field imported <out.json)" = false ]
	field reason <out.json | grep -q "no solve"
'

expect 'a SIGSEGV is classified as crashed with the signal and stage' '
	evaljson 28 28_segv.py
	[ "$(field status <out.json)" = crashed ]
	[ "$(field signal <out.json)" = 11 ]
	[ "$(field stage <out.json)" = correctness ]
	field reason <out.json | grep -q SIGSEGV
	[ "$(cat rc)" = 1 ]
	# What the stage events prove survives the crash: it imported, ran on
	# the CPU, and died in the first draw.
	[ "$(field imported <out.json)" = true ]
	[ "$(field draws_passed <out.json)" = 0 ]
	[ "$(field draws_total <out.json)" = 5 ]
	field gpu <out.json | grep -q "^cpu"
'

# The timeouts below leave the grader time to import torch on a loaded machine.
expect 'a hang is killed at --timeout, classified hung, within timeout + 10 s of its first call' '
	start=$(date +%s)
	evaljson 28 28_hang.py --timeout 15
	took=$(( $(date +%s) - start ))
	[ "$(field status <out.json)" = hung ]
	[ "$(field stage <out.json)" = correctness ]
	# start-up (interpreter, torch, import) is not the kernel'"'"'s time
	first=$(python3 -c "import json; o=json.load(open(\"out.json\")); print(int(next(s[\"t\"] for s in o[\"stages\"] if s[\"stage\"] == \"correctness\")) + 1)")
	[ "$took" -le $((15 + 10 + first)) ]
'

expect 'the timeout counts the candidate'"'"'s time only, not start-up or the reference' '
	# the whole evaluation takes seconds; the kernel itself well under one
	evaljson 28 28_torch_ok.py --timeout 1
	[ "$(field status <out.json)" = passed ]
	python3 -c "import json; v=json.load(open(\"out.json\")); assert v[\"eval_s\"] > 1, v[\"eval_s\"]"
'

expect 'nothing a kernel starts outlives its evaluation, even outside its group' '
	evaljson 28 28_orphan.py --timeout 15 --rules paper # forks: a static rule otherwise
	[ "$(field status <out.json)" = hung ]
	sleep 0.5
	! pgrep -f mkb-orphan-marker-7f3a
'

expect 'a forged protocol line on stdout is not believed' '
	evaljson 28 28_forge.py
	[ "$(field status <out.json)" = failed ]
	field reason <out.json | grep -q "the real outcome"
'

expect 'invalid Python is rejected before grading and not counted' '
	evaljson 28 28_syntax.py
	[ "$(field status <out.json)" = rejected ]
	field reason <out.json | grep -q "not valid Python"
'

expect 'an oversized kernel is rejected' '
	evaljson 28 28_torch_ok.py --max-kernel-bytes 100
	[ "$(field status <out.json)" = rejected ]
	field reason <out.json | grep -q "over the 100-byte limit"
'

expect 'a missing kernel is rejected' '
	set +e; "$MKB" eval 28 --dsl cutedsl --device cpu --json /nonexistent/kernel.py >out.json; set -e
	[ "$(field status <out.json)" = rejected ]
'

expect 'the feedback text reports every field of PROTOCOL.md' '
	"$MKB" eval 28 --dsl cutedsl $FAST "$K/28_off_5e-2.py" >fb.txt || true
	grep -q "^GPU: cpu (test mode), evaluation took" fb.txt
	grep -q "DSL rules are not checked" fb.txt
	grep -q "^Imported: yes" fb.txt
	grep -q "^Correct: no (0/5 draws)" fb.txt
	grep -q "^Reason: draw 1/5: output: max error" fb.txt
	grep -q "^Passed: no" fb.txt
'

expect 'the feedback of a pass shows each median with its 95% interval' '
	"$MKB" eval 28 --dsl cutedsl $FAST --timed 12 "$K/28_torch_ok.py" >fb.txt
	grep -Eq "^Kernel median: [0-9.]+ ms \(95% CI [0-9.]+ - [0-9.]+\)$" fb.txt
	grep -Eq "^Eager median: [0-9.]+ ms \(95% CI [0-9.]+ - [0-9.]+\)$" fb.txt
	grep -Eq "^Speedup: [0-9.]+x \(95% CI [0-9.]+ - [0-9.]+\)$" fb.txt
'

expect '--until-ci adds timed calls while the interval is wide, up to --max-timed' '
	evaljson 28 28_torch_ok.py --timed 20 --until-ci 0.000001 --max-timed 40
	[ "$(field timed_calls <out.json)" = 40 ]
	[ "$(field outputs_checked <out.json)" = 45 ] # 5 draws + 40 timed calls, every one checked
	evaljson 28 28_torch_ok.py --timed 20 --until-ci 0.99
	[ "$(field timed_calls <out.json)" = 20 ]
	evaljson 28 28_torch_ok.py --timed 12
	[ "$(field timed_calls <out.json)" = 12 ] # off by default: the paper count
'

expect 'MKB_JUDGE_REPLY=spin (diagnosis): off by default, recorded as timing.reply when on' '
	evaljson 28 28_torch_ok.py --timed 6
	python3 -c "import json; v=json.load(open(\"out.json\")); assert \"reply\" not in v[\"timing\"], v[\"timing\"]"
	MKB_JUDGE_REPLY=spin evaljson 28 28_torch_ok.py --timed 6
	[ "$(field status <out.json)" = passed ]
	python3 -c "import json; v=json.load(open(\"out.json\")); assert v[\"timing\"][\"reply\"] == \"spin\", v[\"timing\"]"
	MKB_JUDGE_REPLY=block evaljson 28 28_torch_ok.py --timed 6 # only "spin" turns it on
	python3 -c "import json; v=json.load(open(\"out.json\")); assert \"reply\" not in v[\"timing\"], v[\"timing\"]"
'

expect 'MKB_JUDGE_WAIT=hot and MKB_JUDGE_REPEAT=1 (diagnosis): off by default, recorded when on; the repeat times solve again' '
	evaljson 28 28_torch_ok.py --timed 6
	python3 -c "
import json
t = json.load(open(\"out.json\"))[\"timing\"]
assert \"wait\" not in t and \"repeat\" not in t and \"repeat_ms\" not in t[\"phases\"], t
assert t[\"phases\"][\"wait_ms\"] > 0 and t[\"phases\"][\"inputs_ms\"] > 0, t
"
	MKB_JUDGE_WAIT=hot MKB_JUDGE_REPEAT=1 evaljson 28 28_torch_ok.py --timed 6
	[ "$(field status <out.json)" = passed ]
	python3 -c "
import json
t = json.load(open(\"out.json\"))[\"timing\"]
assert t[\"wait\"] == \"hot\" and t[\"repeat\"] is True, t
assert t[\"phases\"][\"repeat_ms\"] > 0, t
"
'

expect 'the timed procedure by default: the block, both boxes and the prime, recorded; MKB_JUDGE_PRIME=0 and the others turn parts off' '
	evaljson 28 28_torch_ok.py --timed 6
	[ "$(field status <out.json)" = passed ]
	python3 -c "
import json
t = json.load(open(\"out.json\"))[\"timing\"]
assert t[\"prime\"] is True and t[\"phases\"][\"prime_ms\"] > 0, t
assert t[\"eager\"] == \"block\" and t[\"go\"] == {\"channel\": \"mailbox\", \"replies\": \"mailbox\"}, t
"
	MKB_JUDGE_PRIME=0 MKB_JUDGE_EAGER=interleaved MKB_JUDGE_GO=socket evaljson 28 28_torch_ok.py --timed 6
	[ "$(field status <out.json)" = passed ]
	python3 -c "import json; t = json.load(open(\"out.json\"))[\"timing\"]; assert not ({\"prime\", \"eager\", \"go\"} & set(t)) and \"prime_ms\" not in t[\"phases\"], t"
'

expect '--fixed-layout: checker and candidate without address randomisation and with hash seed 0, each saying so; without it both random' '
	evaljson 28 28_torch_ok.py --timed 6 --fixed-layout
	[ "$(field status <out.json)" = passed ]
	python3 -c "
import json
n = json.load(open(\"out.json\"))[\"timing\"][\"noise\"]
want = {\"aslr\": False, \"hash_seed\": \"0\"}
assert n == {\"layout\": {\"checker\": want, \"candidate\": want}}, n
"
	python3 - <<PY
import json, sqlite3
eid = json.load(open("out.json"))["evaluation_id"]
(opts,) = sqlite3.connect("$MKB_STORE").execute("select options from evaluations where id = ?", (eid,)).fetchone()
assert json.loads(opts)["fixed_layout"] is True, opts
PY
	# a process started without it keeps its randomisation: the kernel of the
	# noise study test fails unless its own layout is fixed
	evaljson 28 28_torch_ok.py --timed 6
	python3 -c "import json; v=json.load(open(\"out.json\")); assert \"noise\" not in v[\"timing\"], v[\"timing\"]"
'

expect 'noise measures: off by default, recorded under timing.noise when asked for' '
	evaljson 28 28_torch_ok.py --timed 6
	python3 -c "import json; v=json.load(open(\"out.json\")); assert \"noise\" not in v[\"timing\"], v[\"timing\"]"
	evaljson 28 28_torch_ok.py --timed 6 --pin-cpus auto --warmup-until 0.99 --gc-freeze
	[ "$(field status <out.json)" = passed ]
	# both pinned inside the sandbox (the candidate reports its own affinity),
	# 20 warm-up calls (two windows of 10), the collector off in both
	python3 -c "
import json, os
n = json.load(open(\"out.json\"))[\"timing\"][\"noise\"]
p, cores = n[\"pin\"], os.sched_getaffinity(0)
if len(cores) >= 2:
    assert p[\"checker\"] in cores and p[\"candidate\"] in cores and p[\"checker\"] != p[\"candidate\"], p
else:
    assert p[\"candidate\"] is None, p
assert n[\"warmup\"] == {\"until\": 0.99, \"calls\": 20, \"stable\": True}, n
assert n[\"gc\"] == {\"checker\": \"frozen\", \"candidate\": \"frozen\"}, n
"
	set +e
	"$MKB" eval 28 --dsl cutedsl $FAST --pin-cpus 3 "$K/28_torch_ok.py" 2>e1; r1=$?
	"$MKB" eval 28 --dsl cutedsl $FAST --pin-cpus 2,2 "$K/28_torch_ok.py" 2>e2; r2=$?
	"$MKB" eval 28 --dsl cutedsl $FAST --warmup-until 1.5 "$K/28_torch_ok.py" 2>e3; r3=$?
	set -e
	[ "$r1$r2$r3" = 222 ]
	grep -q "pin-cpus is auto or two different cores" e1 && grep -q "pin-cpus is auto" e2
	grep -q "warmup-until wants a share" e3
	# a core this machine does not give us: infrastructure, not the kernel
	evaljson 28 28_torch_ok.py --timed 6 --pin-cpus 0,4000
	[ "$(field status <out.json)" = infra_error ]
	field reason <out.json | grep -q "core 4000 is not among"
'

expect 'a crash shows the stage and the output tail' '
	"$MKB" eval 28 --dsl cutedsl $FAST "$K/28_segv.py" >fb.txt || true
	grep -q "^Status: crashed" fb.txt
	grep -q "^Stage: correctness" fb.txt
	grep -q "^Output tail:" fb.txt
	grep -q "Segmentation fault" fb.txt
	grep -q "28_segv.py" fb.txt
'

expect 'every evaluation lands in the store with hashes and source' '
	export MKB_STORE="$TMP/own.db"
	evaljson 28 28_torch_ok.py >/dev/null
	evaljson 28 28_segv.py >/dev/null
	python3 - <<PY
import sqlite3, hashlib
db = sqlite3.connect("$TMP/own.db")
rows = db.execute("select status, kernel_sha256, kernel_source, problem_sha256, grader_sha256, versions, finished_at from evaluations order by id").fetchall()
assert [r[0] for r in rows] == ["passed", "crashed"], rows
src = open("$K/28_torch_ok.py", "rb").read()
assert rows[0][1] == hashlib.sha256(src).hexdigest()
assert rows[0][2] == src.decode()
assert len(rows[0][3]) == 64 and len(rows[0][4]) == 64 and rows[0][6]
assert "torch" in rows[0][5]
PY
'

expect '--dsl-min-share: a share in [0, 1), recorded in the store when not the default' '
	export MKB_STORE="$TMP/share.db"
	evaljson 28 28_torch_ok.py
	evaljson 28 28_torch_ok.py --dsl-min-share 0.5
	evaljson 28 28_torch_ok.py --dsl-min-share 0
	python3 - <<PY
import json, sqlite3
rows = [json.loads(o) for (o,) in sqlite3.connect("$TMP/share.db").execute("select options from evaluations order by id")]
assert [r.get("dsl_min_share") for r in rows] == [None, 0.5, 0.0], rows
PY
	for bad in 1 -0.1 abc 0.25x; do
		set +e; "$MKB" eval 28 --dsl cutedsl $FAST --no-store --dsl-min-share "$bad" "$K/28_torch_ok.py" 2>err.txt; rc=$?; set -e
		[ $rc = 2 ] && grep -q "dsl-min-share wants a share in \[0, 1)" err.txt
	done
'

expect 'no GPU and no --device cpu is a clear error' '
	set +e; "$MKB" eval 28 --dsl cutedsl "$K/28_torch_ok.py" 2>err.txt; rc=$?; set -e
	[ $rc = 3 ]
	grep -q "no NVIDIA GPU 0 on this machine" err.txt
	grep -q -- "--device cpu" err.txt
'

expect 'a broken interpreter is an infrastructure error, not the kernel'"'"'s' '
	set +e
	"$MKB" eval 28 --dsl cutedsl $FAST --python /bin/false --json --no-store "$K/28_torch_ok.py" >out.json
	rc=$?
	set -e
	[ "$(field status <out.json)" = infra_error ]
	[ $rc = 3 ]
'

expect 'SIGTERM of mkb eval kills the evaluation and records it as interrupted' '
	export MKB_STORE="$TMP/sig.db"
	"$MKB" eval 28 --dsl cutedsl $FAST --json "$K/28_hang.py" >out.json 2>err.txt &
	pid=$!
	sleep 5 # in whatever stage it is by then
	kids=$(descendants $pid)
	has_candidate $kids
	kill -TERM $pid
	set +e
	wait $pid
	rc=$?
	set -e
	[ $rc = 143 ]
	[ "$(field status <out.json)" = infra_error ]
	field reason <out.json | grep -q "interrupted by signal 15"
	python3 -c "import sqlite3; r = sqlite3.connect(\"$TMP/sig.db\").execute(\"select status from evaluations\").fetchall(); assert r == [(\"infra_error\",)], r"
	sleep 0.3
	! alive $kids
'

sql() { # DB SQL...: run statements, print rows as a|b lines (no sqlite3 CLI needed)
	python3 - "$@" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for stmt in sys.argv[2:]:
    for row in db.execute(stmt).fetchall():
        print("|".join(str(x) for x in row))
db.commit()
PY
}

expect 'kill -9 of mkb eval leaves nothing running, and the next one marks its row abandoned' '
	export MKB_STORE="$TMP/kill.db"
	"$MKB" eval 28 --dsl cutedsl $FAST --json "$K/28_hang.py" >/dev/null 2>&1 &
	pid=$!
	sleep 5
	kids=$(descendants $pid)
	has_candidate $kids
	kill -KILL $pid
	wait $pid || true
	sleep 0.5
	! alive $kids
	[ "$(sql "$TMP/kill.db" "select status from evaluations")" = running ]
	"$MKB" eval 28 --dsl cutedsl $FAST --json "$K/28_torch_ok.py" >out.json 2>err.txt
	grep -q "1 row (evaluations, attempts) left running by an mkb process that ended" err.txt
	[ "$(sql "$TMP/kill.db" "select status from evaluations order by id" | tr "\n" " ")" = "infra_error passed " ]
	sql "$TMP/kill.db" "select reason from evaluations where id = 1" | grep -q "abandoned: the mkb process that ran it (pid $pid)"
'

expect 'a store of schema version 1 is migrated, its rows kept' '
	export MKB_STORE="$TMP/v1.db"
	"$MKB" eval 28 --dsl cutedsl $FAST --json "$K/28_torch_ok.py" >/dev/null
	for c in owner_pid owner_boot owner_start gpu_index slot queue_ms hold_ms; do
		sql "$TMP/v1.db" "alter table evaluations drop column $c"
	done
	sql "$TMP/v1.db" "alter table attempts drop column heldout_evaluation" "pragma user_version=1"
	"$MKB" eval 28 --dsl cutedsl $FAST --json "$K/28_torch_ok.py" >/dev/null
	[ "$(sql "$TMP/v1.db" "pragma user_version")" = 6 ]
	[ "$(sql "$TMP/v1.db" "select count(*) from pragma_table_info(\"attempts\") where name=\"heldout_evaluation\"")" = 1 ]
	[ "$(sql "$TMP/v1.db" "select count(*), count(owner_pid), count(queue_ms) from evaluations")" = "2|1|1" ]
'

expect 'a kernel with a NUL byte is stored whole' '
	export MKB_STORE="$TMP/nul.db"
	printf "# a\000b\ndef solve(*a):\n    return None\n" >"$TMP/nul.py"
	"$MKB" eval 28 --dsl cutedsl $FAST --json "$TMP/nul.py" >out.json || true
	[ "$(field status <out.json)" = rejected ]
	[ "$(sql "$TMP/nul.db" "select length(kernel_source) from evaluations")" = 37 ]
'

expect 'bad usage is refused with exit 2' '
	set +e
	"$MKB" eval 28 "$K/28_torch_ok.py" 2>e1; r1=$?
	"$MKB" eval 28 --dsl cuda "$K/28_torch_ok.py" 2>e2; r2=$?
	"$MKB" eval 99 --dsl tirx --device cpu "$K/28_torch_ok.py" 2>e3; r3=$?
	"$MKB" eval 28 --dsl tirx --device cpu --workload huge "$K/28_torch_ok.py" 2>e4; r4=$?
	"$MKB" eval 28 --dsl tirx --device cpu --timeout -1 "$K/28_torch_ok.py" 2>e5; r5=$?
	set -e
	[ "$r1$r2$r3$r4$r5" = 22222 ]
	grep -q "dsl is required" e1 && grep -q "unknown DSL" e2 && grep -q "no problem 99" e3
	grep -q "no workload .huge." e4 && grep -q "timeout wants" e5
'

finish
