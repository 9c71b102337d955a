#!/usr/bin/env bash
# The shared PostgreSQL store and mkb worker: a real server (the Debian
# package postgresql, tools/bootstrap.sh installs it) started in a temporary
# folder on a loopback port; the store round-trips an attempt and its
# evaluation as the SQLite store does; a planner enqueues 2 problems x 4 arms,
# 3 workers drain the queue, one is killed with SIGKILL while it holds a
# trial, and every trial still ends exactly once.
#
# initdb and postgres refuse to run as root: as root (CI) the server runs as
# the unprivileged user `nobody` (runuser), in a folder it owns; the tests
# themselves connect over TCP to 127.0.0.1 (trust authentication, loopback
# only), so mkb runs as whoever runs the tests.
. "$(dirname "$0")/../lib.sh"
RUN_FLAGS="--device cpu --workload smoke --submissions 0 --runs-dir $TMP/runs"

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/mkb-pg.XXXXXX")
WORKERS=""
as_pg() { # run a server program as the server's user
	if [ "$(id -u)" = 0 ]; then (cd "$PGDIR" && runuser -u nobody -- "$@"); else (cd "$PGDIR" && "$@"); fi
}
cleanup() {
	for p in $WORKERS; do kill -9 "$p" 2>/dev/null || true; done
	[ -f "$PGDIR/data/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1
	rm -rf "$PGDIR" "$TMP"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="postgres://mkb@127.0.0.1:$PORT/mkb"
sql() { "$PGBIN/psql" -X -A -t -q -h 127.0.0.1 -p "$PORT" -U mkb -d mkb -c "$1"; }

expect 'a PostgreSQL server starts in a temporary folder (initdb, pg_ctl; as nobody when root)' '
	[ -x "$PGBIN/initdb" ] || { echo "no PostgreSQL server programs under /usr/lib/postgresql (tools/bootstrap.sh --debs installs the package postgresql)"; exit 1; }
	[ "$(id -u)" != 0 ] || chown nobody "$PGDIR"
	as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U mkb --auth=trust --encoding=UTF8 --locale=C -N >"$PGDIR/initdb.log" 2>&1 || { cat "$PGDIR/initdb.log"; exit 1; }
	as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null || { cat "$PGDIR/server.log"; exit 1; }
	"$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U mkb mkb
	"$MKB" status --store "$URL" | grep -q "^no trials in postgres://mkb@127.0.0.1:$PORT/mkb"
	[ "$(sql "select version from mkb_schema")" = 6 ]
	# a version 5 database gains the held-out column
	sql "alter table attempts drop column heldout_evaluation; update mkb_schema set version = 5"
	"$MKB" status --store "$URL" >/dev/null
	[ "$(sql "select version from mkb_schema")" = 6 ]
	[ "$(sql "select count(*) from information_schema.columns where table_name = '"'"'attempts'"'"' and column_name = '"'"'heldout_evaluation'"'"'")" = 1 ]
'

expect 'the PostgreSQL store round-trips an attempt, its events and its evaluation as SQLite does' '
	for store in "$URL" "$TMP/rt.db"; do
		"$MKB" attempt 28 --dsl cutedsl --model oracle --device cpu --workload smoke --submissions 1 \
			--workdir "$TMP/rt-$(echo "$store" | tr -c "a-z0-9\n" _)" --store "$store" --json >/dev/null
	done
	"$MKB" attempt show "$(sql "select max(id) from attempts")" --store "$URL" --json >pg.json
	"$MKB" attempt show 1 --store "$TMP/rt.db" --json >sq.json
	sql "select row_to_json(e) from evaluations e order by id" >pg-evals.json
	python3 - "$TMP/rt.db" <<PY
import json, sqlite3, sys
# what differs by nature between two runs: ids, times, paths, timings (and
# the feedback text, which quotes them)
VOLATILE = {"id", "started_at", "finished_at", "at", "elapsed_s", "agent_s", "workdir", "owner_pid",
            "owner_start", "final_evaluation", "evaluation_id", "kernel_path", "credited_s",
            "wait_ms", "eval_ms", "kernel_ms", "eager_ms", "speedup", "queue_ms", "hold_ms", "ms",
            "result", "stages", "output_tail", "feedback", "timing", "seeds"}
def norm(v):
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, str) and ("/rt-" in v or "mkb-test." in v):
        return "<path>"
    if isinstance(v, float): # a measurement: its type must match, not its value
        return "<real>"
    return v
pg, sq = json.load(open("pg.json")), json.load(open("sq.json"))
assert list(pg) == list(sq), (list(pg), list(sq))
assert [e["kind"] for e in pg["events"]] == [e["kind"] for e in sq["events"]], "event kinds differ"
assert pg["status"] == "passed" and pg["submissions"] == 1, pg["status"]
a, b = norm(pg), norm(sq)
def diff(x, y, at=""):
    if isinstance(x, dict) and isinstance(y, dict):
        return [d for k in sorted(set(x) | set(y)) for d in diff(x.get(k), y.get(k), at + "." + k)]
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return [d for i, (p, q) in enumerate(zip(x, y)) for d in diff(p, q, "%s[%d]" % (at, i))]
    return [] if x == y else [(at, str(x)[:200], str(y)[:200])]
assert a == b, diff(a, b)
db = sqlite3.connect(sys.argv[1]); db.row_factory = sqlite3.Row
sq_e = [dict(r) for r in db.execute("select * from evaluations order by id")]
pg_e = [json.loads(l) for l in open("pg-evals.json") if l.strip()]
assert len(sq_e) == len(pg_e) == 2, (len(sq_e), len(pg_e))
for x, y in zip(pg_e, sq_e):
    assert list(x) == list(y), (list(x), list(y))
    x, y = norm(x), norm(y)
    assert x == y, diff(x, y)
PY
'

expect 'an enqueued run: 2 problems x 4 arms queued for mkb worker, nothing run; SQLite has no queue' '
	"$MKB" run --model oracle --problems 28,36 --store "$URL" $RUN_FLAGS --enqueue >enqueue.txt
	grep -q "^plan: 8 trials: 8 to run, 0 to reuse, 0 to rerun, 0 stale$" enqueue.txt
	grep -q "^enqueued: 8 trials queued for mkb worker, 0 in the queue already$" enqueue.txt
	[ "$(sql "select count(*) from trials where status = '"'"'queued'"'"' and archived = 0")" = 8 ]
	[ "$(sql "select count(*) from trials where source is not null")" = 4 ]
	"$MKB" run --model oracle --problems 28,36 --store "$URL" $RUN_FLAGS --enqueue >again.txt
	grep -q "^QUEUED p28_r1_solo_cutedsl$" again.txt
	grep -q "^enqueued: 0 trials queued for mkb worker, 8 in the queue already$" again.txt
	set +e
	"$MKB" run --model oracle --problems 28,36 --store "$URL" $RUN_FLAGS >direct.txt 2>&1; a=$?
	"$MKB" run --model oracle --problems 28 --store "$TMP/q.db" $RUN_FLAGS --enqueue >/dev/null 2>err.txt; b=$?
	"$MKB" worker --store "$TMP/q.db" $RUN_FLAGS >/dev/null 2>>err.txt; c=$?
	set -e
	[ $a = 3 ] && [ $b = 2 ] && [ $c = 2 ]
	grep -q "is queued by mkb worker" direct.txt
	grep -q "needs a shared PostgreSQL store" err.txt
'

expect '3 workers drain it; one killed with SIGKILL mid-trial: its trial is reclaimed when its lease expires' '
	t0=$(date +%s)
	for i in 1 2 3; do
		"$MKB" worker --store "$URL" --lease 5 $RUN_FLAGS >w$i.txt 2>&1 &
		eval "w$i=\$!"
		WORKERS="$WORKERS $!"
	done
	victim=""
	for _ in $(seq 300); do
		row=$(sql "select lease_owner || '"'"' '"'"' || name from trials where archived = 0 and status = '"'"'running'"'"' and lease_owner is not null order by id limit 1")
		if [ -n "$row" ]; then victim=${row%% *}; trial=${row#* }; break; fi
		sleep 0.1
	done
	[ -n "$victim" ]
	pid=${victim##*:}
	case " $w1 $w2 $w3 " in *" $pid "*) ;; *) echo "lease owner $victim is not one of our workers"; exit 1;; esac
	sleep 1 # into its attempt
	kill -9 "$pid"
	echo "killed worker $pid holding $trial" >killed.txt
	for w in $w1 $w2 $w3; do
		[ "$w" = "$pid" ] && continue
		for _ in $(seq 1200); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
		wait "$w" # exit 0: nothing left in the queue
	done
	echo "drained in $(( $(date +%s) - t0 )) s" >>killed.txt
	cat killed.txt
	[ "$(sql "select count(*) from trials where archived = 0")" = 8 ]
	[ "$(sql "select count(distinct name) from trials where archived = 0")" = 8 ]
	[ "$(sql "select count(*) from trials where archived = 0 and status = '"'"'passed'"'"'")" = 8 ]
	# the killed worker'"'"'s trial: its row archived as interrupted, a fresh one final
	[ "$(sql "select count(*) from trials where archived = 1 and name = '"'"'$trial'"'"' and note like '"'"'interrupted: the lease of worker $victim expired%'"'"'")" = 1 ]
	[ "$(sql "select count(*) from trials where archived = 1")" = 1 ]
	[ "$(sql "select count(*) from trials where lease_owner is not null or lease_expires is not null")" = 0 ]
	[ "$(sql "select count(*) from attempts where status = '"'"'running'"'"'")" = 0 ]
	# each skill arm ran after its source and got its skill
	[ "$(sql "select count(*) from trials t join attempts a on a.id = t.attempt where t.archived = 0 and t.source is not null and a.skill_in_sha256 is not null")" = 4 ]
	grep -q "^claimed " w1.txt w2.txt w3.txt
	"$MKB" run --model oracle --problems 28,36 --store "$URL" $RUN_FLAGS --dry-run | grep -q "^plan: 8 trials: 0 to run, 8 to reuse, 0 to rerun, 0 stale$"
	"$MKB" status --store "$URL" >status.txt
	grep -q "^oracle  *{\"temperature\":0.7}  *passed  *8  *0$" status.txt
	grep -q "^oracle  *{\"temperature\":0.7}  *running  *0  *1$" status.txt # the archived one
	"$MKB" report --store "$URL" --format csv >report.csv
	grep -q "^\"oracle\",.*,\"scores\",\"overall\",\"n\",4,," report.csv
'

# The same rows, through plain SQL, in a SQLite file and a PostgreSQL
# database: the report must read the same, the final evaluations' speedup
# intervals included (tests/scenario/report.sh works these out by hand:
# --calls intervals turns 2 of 8 calls neutral). A result is a speedup_ci,
# null, a malformed (truncated) text or absent.
cat >"$TMP/ci.spec" <<'S'
28 solo_cutedsl 1.0 0.95:1.05
28 solo_tirx 1.0 0.90:1.10
28 cutedsl2tirx_skill 1.2 1.05:1.30
28 tirx2cutedsl_skill 1.5 1.40:1.60
36 solo_cutedsl 2.0 1.9:2.1
36 solo_tirx 1.0 0.95:1.05
36 cutedsl2tirx_skill 0.5 0.45:0.55
36 tirx2cutedsl_skill 1.9 -
1 solo_cutedsl 1.1 0.9:1.3
1 solo_tirx 1.0 0.8:1.2
1 cutedsl2tirx_skill 0.9 0.7:1.1
1 tirx2cutedsl_skill - -
2 solo_cutedsl 1.0 bad
2 solo_tirx 1.0 null
2 cutedsl2tirx_skill 1.5 1.0:1.6
2 tirx2cutedsl_skill 1.5 1.0:1.6
S
cat >"$TMP/ci_sql.py" <<'PY'
import json, sys
def lit(v):
    return "NULL" if v is None else repr(v) if isinstance(v, (int, float)) else "'" + v.replace("'", "''") + "'"
now = "2025-01-01T00:00:00Z"
for i, line in enumerate(open(sys.argv[1]).read().splitlines()):
    if not line.strip():
        continue
    prob, arm, speed, ci = line.split()
    dsl = "tirx" if arm in ("solo_tirx", "cutedsl2tirx_skill") else "cutedsl"
    passed = speed != "-"
    status = "passed" if passed else "failed"
    result = None if ci == "-" else '{"status":"passed","speedup_ci":[0.95,1.05' if ci == "bad" else json.dumps(
        {"status": status, "speedup_ci": None if ci == "null" else [float(x) for x in ci.split(":")]}, separators=(",", ":"))
    print("INSERT INTO evaluations (id, started_at, problem, dsl, workload, device, kernel_path, problem_sha256,"
          " grader_sha256, options, status, passed, speedup, result) VALUES (%s);" % ", ".join(map(lit, (
          i + 1, now, int(prob), dsl, "visible", "cuda", "k.py", "x", "x", "{}", status, int(passed),
          float(speed) if passed else None, result))))
    print("INSERT INTO attempts (id, started_at, problem, dsl, model, arm, workdir, options, status, final_evaluation)"
          " VALUES (%s);" % ", ".join(map(lit, (i + 1, now, int(prob), dsl, "c", arm, "w", "{}", status, i + 1))))
    print("INSERT INTO trials (name, model, decoding, arm, problem, dsl, replicate, fingerprint, status, attempt,"
          " created_at) VALUES (%s);" % ", ".join(map(lit, ("p%02d_r1_%s" % (int(prob), arm), "c", "{}", arm,
          int(prob), dsl, 1, "f", status, i + 1, now))))
PY

expect 'the report reads the same from PostgreSQL as from SQLite, speedup intervals (--calls intervals) and device times (--time device) included' '
	python3 "$TMP/ci_sql.py" "$TMP/ci.spec" >ci.sql
	"$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U mkb mkbci
	CI_URL="postgres://mkb@127.0.0.1:$PORT/mkbci"
	"$MKB" status --store "$CI_URL" >/dev/null
	"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U mkb -d mkbci -f ci.sql
	"$MKB" status --store ci.db >/dev/null
	python3 -c "import sqlite3, sys; db = sqlite3.connect(\"ci.db\"); db.executescript(open(\"ci.sql\").read()); db.commit()"
	for calls in paper intervals; do
		"$MKB" report --store "$CI_URL" --format json --calls $calls >pg-$calls.json
		"$MKB" report --store ci.db --format json --calls $calls >sq-$calls.json
		"$MKB" report --store "$CI_URL" --calls $calls >pg-$calls.txt
		"$MKB" report --store ci.db --calls $calls >sq-$calls.txt
		cmp pg-$calls.txt sq-$calls.txt
	done
	python3 - <<PY
import json
for calls in ("paper", "intervals"):
    pg, sq = (json.load(open("%s-%s.json" % (b, calls))) for b in ("pg", "sq"))
    assert pg.pop("store").startswith("postgres://") and sq.pop("store") == "ci.db"
    assert pg == sq, calls
c = pg["models"][0]["paired"]
assert c["calls"]["turned_neutral"] == 2 and c["calls"]["n_by_intervals"] == 4, c["calls"]
assert (c["groups"]["all"]["helped"], c["groups"]["all"]["harmed"], c["groups"]["all"]["neutral"]) == (3, 3, 2)
PY
	# timing.device_ms read by both (--time device): numbers with and
	# without an exponent, one passing row without it (its comparisons stay
	# end to end)
	python3 - "$TMP/ci.spec" >dev.sql <<PY
import json, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines() if l.strip()]
for i, (prob, arm, speed, ci) in enumerate(rows):
    if speed == "-" or ci == "bad":
        continue
    r = {"status": "passed", "speedup_ci": None if ci in ("null", "-") else [float(x) for x in ci.split(":")],
         "timing": {"device_ms": None if i == 0 else 0.00001 * (i + 1)}}
    print("UPDATE evaluations SET eager_ms = 1.0, result = \x27%s\x27 WHERE id = %d;"
          % (json.dumps(r, separators=(",", ":")), i + 1))
PY
	grep -q "e-05" dev.sql
	"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U mkb -d mkbci -f dev.sql
	python3 -c "import sqlite3; db = sqlite3.connect(\"ci.db\"); db.executescript(open(\"dev.sql\").read()); db.commit()"
	"$MKB" report --store "$CI_URL" --format json --time device >pg-dev.json
	"$MKB" report --store ci.db --format json --time device >sq-dev.json
	python3 - <<PY
import json
pg, sq = (json.load(open("%s-dev.json" % b)) for b in ("pg", "sq"))
assert pg.pop("store").startswith("postgres://") and sq.pop("store") == "ci.db"
assert pg == sq
t = sq["models"][0]["paired"]["time"]
assert t["on_device"] > 0 and t["end_to_end"] > 0, t
PY
'

finish
