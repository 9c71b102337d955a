#!/usr/bin/env bash
# tools/catalog_gpu.py, the catalog table's script, as a dry run on the CPU
# (smoke workloads): parallel workers, the timing lock, rows carried over.
. "$(dirname "$0")/../lib.sh"
PY=$TOP/build/python
CAT="$PY $TOP/tools/catalog_gpu.py --device cpu --workloads smoke --timed 2"

expect 'parallel workers give one row per problem, in catalog order, with statistics and allowances' '
	$CAT --jobs 2 --problems 36,25 --out run >out.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("run/catalog.jsonl")]
assert sorted(r["problem"] for r in rows) == [25, 36], rows
for r in rows:
    assert "error" not in r, r
    assert r["eager_ms"] > 0 and r["flops"] > 0 and r["bytes"] > 0, r
    assert all("std" in o for o in r["outputs"]), r
    assert all(("allowance" in o) == o["dtype"].startswith(("float", "bfloat")) for o in r["outputs"]), r
PY
	[ "$(grep -c "^| [0-9][0-9] |" run/catalog.md)" = 2 ]
	grep "^| [0-9][0-9] |" run/catalog.md | cut -d"|" -f2 | tr -d " " | tr "\n" " " | grep -qx "25 36 "
	[ -f run/timing.lock ]
'

expect 'with --jobs, the worker timing pauses the others' '
	mkdir -p pause/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm "$TOP"/problems/mlp_norm/28_* pause/mlp_norm/
	printf "\nimport time as _time\n_time.sleep(20)  # still importing while 36 times\n" >>pause/mlp_norm/28_*/reference.py
	cat >>pause/mlp_norm/36_rmsnorm/reference.py <<PY

import os as _os
import sys as _sys
import time as _time
_eager = reference
_calls = [0]
_reg = _os.path.join(_os.path.dirname(_sys.argv[_sys.argv.index("--lock") + 1]), "workers")
for _ in range(3000):  # both workers start at once; on a busy machine 28 may register late
    if len(_os.listdir(_reg)) > 1:
        break
    _time.sleep(0.01)


def reference(*a):
    _calls[0] += 1
    if _calls[0] > 2:  # after the first call and the anchor: the timed calls
        for g in _os.listdir(_reg):
            if int(g) != _os.getpgrp():
                state = open(f"/proc/{g}/stat").read().rsplit(")", 1)[1].split()[0]
                print(state, file=open(_os.path.join(_reg, "..", "states.txt"), "a"))
    return _eager(*a)
PY
	$CAT --problems 36,28 --jobs 2 --out p --problems-dir pause >/dev/null
	sort p/states.txt | uniq -c; ls p/workers  # shown if a check below fails
	[ "$(sort -u p/states.txt)" = T ]
	[ "$(wc -l <p/states.txt)" -ge 7 ]
	[ -z "$(ls p/workers)" ]
'

expect '--carry fills the pairs not measured from an earlier run, flagged with its run' '
	$CAT --problems 36 --out a >/dev/null
	$CAT --problems 28 --out b --carry a/catalog.jsonl >/dev/null
	grep -q "^| 28 | fused_add_rmsnorm | smoke .*|  |$" b/catalog.md
	grep -q "^| 36 | rmsnorm | smoke .*| from a |$" b/catalog.md
	[ "$(wc -l <b/catalog.jsonl)" = 1 ]
'

expect 'a broken reference is an ERROR row, not the end of the run' '
	mkdir -p probs/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm probs/mlp_norm/
	printf "def reference(*a):\n    raise RuntimeError(\"planted\")\n" >>probs/mlp_norm/36_rmsnorm/reference.py
	$CAT --problems 36 --out c --problems-dir probs >out.txt
	grep -q "^| 36 | rmsnorm | smoke | - .*planted.* | ERROR |$" c/catalog.md
'

expect 'a reference whose output is not finite is flagged, not taken for a measurement' '
	mkdir -p nan/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm nan/mlp_norm/
	cat >>nan/mlp_norm/36_rmsnorm/reference.py <<PY

_finite = reference


def reference(*a):
    return _finite(*a) * float("inf") * 0  # planted: inf times 0 is NaN
PY
	$CAT --problems 36 --out n --problems-dir nan >out.txt
	grep -q "^| 36 | rmsnorm | smoke | [0-9.]* .* nan\.\.nan .*| output 0 not finite |$" n/catalog.md
'

expect '--compile times torch.compile on the workloads asked for, beside eager' '
	$CAT --problems 36 --compile --compile-workloads smoke --out k >/dev/null
	python3 -c "
import json
r = [json.loads(l) for l in open(\"k/catalog.jsonl\")][0]
assert r[\"compiled_ms\"] > 0 and r[\"compile_s\"] > 0 and r[\"eager_ms\"] > 0, r
assert \"compile_error\" not in r, r
"
	grep -q "^| 36 | rmsnorm | smoke | [0-9.]* | [0-9.]* | [0-9.]* |" k/catalog.md
'

expect 'a torch.compile that does not finish keeps the eager row, with the reason' '
	mkdir -p slow/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm slow/mlp_norm/
	python3 -c "import json,sys; f=sys.argv[1]; d=json.load(open(f)); d[\"workloads\"][\"visible\"]=d[\"workloads\"][\"smoke\"]; json.dump(d, open(f, \"w\"))" slow/mlp_norm/36_rmsnorm/problem.json
	cat >>slow/mlp_norm/36_rmsnorm/reference.py <<PY

import time as _time
_eager = reference


def reference(*a):
    if torch.compiler.is_compiling():  # only the traced call sleeps
        _time.sleep(600)
    return _eager(*a)
PY
	$CAT --problems 36 --workloads visible --compile --timeout 45 --out e --problems-dir slow >out.txt
	grep -q "^| 36 | rmsnorm | visible | [0-9.]* | - | - | .*compile: torch.compile did not finish within the 45 s per row |$" e/catalog.md
'

expect 'SIGTERM ends the run and its workers; the rows finished so far stay' '
	mkdir -p stop/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm "$TOP"/problems/mlp_norm/28_* stop/mlp_norm/
	cat >>stop/mlp_norm/36_rmsnorm/reference.py <<PY

import time as _time


def reference(*a):
    _time.sleep(600)  # planted hang
PY
	$CAT --problems 28,36 --jobs 2 --out s --problems-dir stop >out.txt 2>&1 &
	pid=$!
	for _ in $(seq 120); do grep -q "\"problem\": 28" s/catalog.jsonl 2>/dev/null && break; sleep 1; done
	grep -q "\"problem\": 28" s/catalog.jsonl
	pgrep -f "stop/mlp_norm/36_rmsnorm" >/dev/null
	kill -TERM $pid
	set +e; wait $pid; rc=$?; set -e
	[ $rc = 143 ]
	sleep 1
	! pgrep -f "stop/mlp_norm/36_rmsnorm" >/dev/null
	[ "$(wc -l <s/catalog.jsonl)" = 1 ]
'

expect 'a worker that dies in torch.compile keeps the eager row, with why' '
	mkdir -p dies/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm dies/mlp_norm/
	cat >>dies/mlp_norm/36_rmsnorm/reference.py <<PY

import os as _os
import sys as _sys
_eager = reference


def reference(*a):
    if torch.compiler.is_compiling():  # only the traced call dies
        print("RuntimeError: planted death in compile", file=_sys.stderr, flush=True)
        _os._exit(3)
    return _eager(*a)
PY
	$CAT --problems 36 --compile --compile-workloads smoke --out f --problems-dir dies >out.txt
	grep -q "^| 36 | rmsnorm | smoke | [0-9.]* | - | - | .*compile: the worker died in torch.compile: RuntimeError: planted death in compile |$" f/catalog.md
	grep -q "planted death in compile" f/logs/36_rmsnorm-smoke.txt
'

expect 'a compile that raises keeps its traceback in the log; graph breaks are counted and noted' '
	mkdir -p brk/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm brk/mlp_norm/
	cat >>brk/mlp_norm/36_rmsnorm/reference.py <<PY

_eager = reference


def reference(*a):
    y = _eager(*a)
    torch._dynamo.graph_break()
    return y * 1
PY
	mkdir -p bad/mlp_norm && cp -r "$TOP"/problems/mlp_norm/36_rmsnorm bad/mlp_norm/
	cat >>bad/mlp_norm/36_rmsnorm/reference.py <<PY

_eager = reference


@torch.library.custom_op("mkbtest::planted", mutates_args=())
def _planted(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_planted.register_fake
def _planted_failure(x):  # runs only when torch.compile traces
    raise ValueError("planted failure in compile")


def reference(*a):
    return _planted(_eager(*a))
PY
	$CAT --problems 36 --compile --compile-workloads smoke --out g --problems-dir brk >/dev/null
	python3 -c "
import json
r = [json.loads(l) for l in open(\"g/catalog.jsonl\")][0]
assert r[\"compiled_ms\"] > 0 and r[\"graph_breaks\"] == 1 and r[\"graphs\"] == 2, r
"
	grep -q "^| 36 | rmsnorm | smoke | .*compile: 2 graphs, 1 graph break |$" g/catalog.md
	$CAT --problems 36 --compile --compile-workloads smoke --out h --problems-dir bad >/dev/null
	grep -q "^| 36 | rmsnorm | smoke | [0-9.]* | - | - | .*compile: TorchRuntimeError: .*|$" h/catalog.md
	grep -q "Traceback" h/logs/36_rmsnorm-smoke.txt
	grep -q "planted failure in compile" h/logs/36_rmsnorm-smoke.txt
'

expect '--merge renders one table from several runs, the latest winning, errors never replacing rows' '
	$CAT --problems 36,28 --out m1 >/dev/null
	$CAT --problems 36 --out m2 >/dev/null
	printf "{\"problem\": 28, \"workload\": \"smoke\", \"name\": \"fused_add_rmsnorm\", \"error\": \"planted: torch.compile did not finish within the 240 s per row (a long reason | with a bar, that a table cell must cut at its end, not at its start)\", \"flags\": [\"ERROR\"]}\n" >m3.jsonl
	$CAT --merge m1/catalog.jsonl m2/catalog.jsonl m3.jsonl --out merged >/dev/null
	grep -q "^| 36 | rmsnorm | smoke .*| from m2 |$" merged/catalog.md
	grep -q "^| 28 | fused_add_rmsnorm | smoke | [0-9.]* .*a later run failed: planted: torch.compile did not finish within the 240 s per row (a long reason / with a bar, [^|]*\.\.\., from m1 |$" merged/catalog.md
	[ "$(wc -l <merged/catalog-all.jsonl)" = 2 ]
	e36=$(python3 -c "import json; print([json.loads(l)[\"eager_ms\"] for l in open(\"m2/catalog.jsonl\")][0])")
	grep -q "^| 36 | rmsnorm | smoke | $(printf %.3f "$e36") |" merged/catalog.md
	python3 -c "
import json
r = json.loads(open(\"m1/catalog.jsonl\").readline())
r.update(eager_ms=999.0, compile_error=\"planted compile outcome\", graphs=3, graph_breaks=2)
print(json.dumps(r))" >m4.jsonl
	$CAT --merge m1/catalog.jsonl m2/catalog.jsonl m4.jsonl --out merged2 >/dev/null
	grep -q "^| 36 | rmsnorm | smoke | $(printf %.3f "$e36") | - | - |.*eager from m2, compile from m4, compile: 3 graphs, 2 graph breaks, compile: planted compile outcome |$" merged2/catalog.md
	# a merged table merged again: that row keeps naming its two runs, not the merged file
	sed -n 2p m1/catalog.jsonl >m5.jsonl
	$CAT --merge merged2/catalog-all.jsonl m5.jsonl --out merged3 >/dev/null
	grep -q "^| 36 | rmsnorm | smoke | $(printf %.3f "$e36") | - | - |.*eager from m2, compile from m4, compile: 3 graphs, 2 graph breaks, compile: planted compile outcome |$" merged3/catalog.md
	grep -q "^| 28 | fused_add_rmsnorm | smoke | " merged3/catalog.md
	! grep -q "from merged2" merged3/catalog.md
'

expect '--jobs with --inproc is refused' '
	set +e; $CAT --jobs 2 --inproc --out d 2>err.txt; rc=$?; set -e
	[ $rc = 2 ]
	grep -q "drop --inproc" err.txt
'
expect '--peaks with --jobs: rows that would not fit in --memory-gb together run one after the other, the largest first' '
	printf "%s\n" "{\"problem\": 36, \"workload\": \"smoke\", \"peak_gb\": 8}" \
		"{\"problem\": 25, \"workload\": \"smoke\", \"peak_gb\": 2}" >peaks.jsonl
	for d in "$TOP"/problems/*/25_* "$TOP"/problems/*/36_*; do # a catalog of these two alone
		mkdir -p "two/$(basename "$(dirname "$d")")" && cp -r "$d" "two/$(basename "$(dirname "$d")")/"
	done
	$CAT --jobs 2 --out tight --peaks peaks.jsonl --memory-gb 14 --problems-dir two >tight.txt
	grep -E "^(25|36) smoke: (starts|ends)" tight.txt | cut -d" " -f1,3 | tr "\n" " " >order.txt
	cat order.txt
	# 8 GB x 1.5 = 12 of 14: 25 (3 GB) waits for 36, which goes first as the largest
	[ "$(cat order.txt)" = "36 starts 36 ends, 25 starts 25 ends, " ]
	$CAT --jobs 2 --out roomy --peaks peaks.jsonl --memory-gb 40 --problems 36,25 >roomy.txt
	grep -E "^(25|36) smoke: (starts|ends)" roomy.txt | cut -d" " -f3 | head -2 | tr "\n" " " | grep -qx "starts starts "
	[ "$(grep -c "^| [0-9][0-9] |" tight/catalog.md)" -ge 2 ]
'

finish
