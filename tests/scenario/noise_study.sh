#!/usr/bin/env bash
# tools/noise_study.sh, the noise study's script (issue 11), on the CPU
# (smoke workload, torch kernels in place of the shipped DSL ones): kernels
# studied side by side with PAR, each kernel's rows in a file of its own.
. "$(dirname "$0")/../lib.sh"
study() { # out par evals [P]
	OUT=$TMP/$1 PAR=$2 SOLUTIONS=$TMP/sol MKB_PYTHON=$TOP/build/python \
		EVAL_FLAGS="--device cpu --workload smoke" bash "$TOP/tools/noise_study.sh" "${4:-}" "$3"
}
ab_study() { # out solutions VAR=value...: AB=1 with nothing but VARs in the reduced arm, 28/tirx twice
	local out=$1 sol=$2
	shift 2
	env OUT="$TMP/$out" AB=1 REDUCED= PAR=1 SOLUTIONS="$sol" MKB_PYTHON="$TOP/build/python" \
		EVAL_FLAGS="--device cpu --workload smoke" "$@" bash "$TOP/tools/noise_study.sh" 28/tirx 2 0
}
mkdir -p "$TMP/sol/28_fused_add_rmsnorm/cutedsl" "$TMP/sol/28_fused_add_rmsnorm/tirx" "$TMP/sol/36_rmsnorm/cutedsl"
cp "$TOP/tests/kernels/28_torch_ok.py" "$TMP/sol/28_fused_add_rmsnorm/cutedsl/kernel.py"
cp "$TOP/tests/kernels/28_torch_ok.py" "$TMP/sol/28_fused_add_rmsnorm/tirx/kernel.py"
cat >"$TMP/sol/36_rmsnorm/cutedsl/kernel.py" <<'PY'
import torch


def solve(hidden_states, weight):
    x = hidden_states.float()
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    return (x * inv_rms * weight.float()).to(hidden_states.dtype)
PY

expect 'PAR=2: every kernel of P evaluated EVALS times, rows kept apart per kernel, one table' '
	study par 2 2 28,36 >out.txt 2>err.txt
	python3 - <<PY
import collections, json
rows = [json.loads(l) for l in open("par/noise.jsonl")]
assert all(r["kind"] == "eval" for r in rows), "no probe rows when PAR > 1 (BLOCKS 0)"
got = collections.Counter(r["label"] for r in rows)
assert got == {"28_fused_add_rmsnorm/cutedsl": 2, "28_fused_add_rmsnorm/tirx": 2, "36_rmsnorm/cutedsl": 2}, got
bad = [(r["label"], r["status"], r.get("reason")) for r in rows if r["status"] != "passed"]
assert not bad, bad
assert sorted(r["round"] for r in rows) == [1, 1, 1, 2, 2, 2], rows
import glob, os
parts = sorted(glob.glob("par/parts/*.jsonl"))
assert [os.path.basename(p) for p in parts] == ["28_fused_add_rmsnorm-cutedsl.jsonl",
    "28_fused_add_rmsnorm-tirx.jsonl", "36_rmsnorm-cutedsl.jsonl"], parts
for p in parts:  # a kernel file holds its own rows only
    labels = {json.loads(l)["label"] for l in open(p)}
    assert labels == {os.path.basename(p)[:-6].replace("-", "/")}, (p, labels)
PY
	grep -q "kernels at once: 2" par/machine.txt
	[ "$(grep -c "| 2 of 2 |" par/noise.md)" = 3 ]
	grep -q "^noise: 36_rmsnorm/cutedsl done" err.txt
	! ls par/noise*.db 2>/dev/null
'

expect 'P picks kernels (N/dsl); PAR=1 studies them one after the other' '
	study one 1 1 28/tirx >out.txt 2>err.txt
	[ "$(wc -l <one/noise.jsonl)" = 1 ]
	grep -q "28_fused_add_rmsnorm/tirx" one/noise.jsonl
	grep -q "kernels at once: 1" one/machine.txt
'

expect 'PAR that is not a positive number is refused before anything runs' '
	rc=0; study bad 0 1 28 >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "PAR must be a positive number" err.txt
	[ ! -e bad/noise.jsonl ]
'
expect 'ZYGOTE=reduced with AB=1: the reduced configuration forked from the study'"'"'s zygote, the default cold; the zygote ends with the study' '
	ab_study zy "$TMP/sol" ZYGOTE=reduced >out.txt 2>err.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("zy/noise.jsonl")]
got = sorted((r["config"], r["start"], r["candidate_start"], r["status"]) for r in rows)
assert got == [("default", "cold", "cold", "passed")] * 2 + [("reduced", "zygote", "zygote", "passed")] * 2, got
PY
	grep -q "zygote: reduced" zy/machine.txt
	name=$(grep -o "mkb-noise-[0-9]*" zy/zygote.out | head -1)
	[ -n "$name" ]
	for _ in $(seq 50); do pgrep -f "mkb_grader.zygote .*--socket $name" >/dev/null || break; sleep 0.1; done
	! pgrep -f "mkb_grader.zygote .*--socket $name"
'

expect 'BEFORE=settings with AB=1: the "before" evaluations run under them, the others under the default; the table sets them side by side' '
	ab_study bf "$TMP/sol" BEFORE="MKB_JUDGE_EAGER=interleaved MKB_JUDGE_PRIME=0" >out.txt 2>err.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("bf/noise.jsonl")]
got = sorted((r["config"], r["timing"].get("eager"), r["timing"].get("prime"), r["status"]) for r in rows)
assert [g[0] for g in got] == ["before", "before", "default", "default"], got
assert all(g[3] == "passed" for g in got), got
before = [g for g in got if g[0] == "before"]
after = [g for g in got if g[0] == "default"]
assert all(g[1] is None and g[2] is None for g in before), before  # neither in force
assert all(g[1] == "block" and g[2] is True for g in after), after
PY
	grep -q "before: MKB_JUDGE_EAGER=interleaved MKB_JUDGE_PRIME=0" bf/machine.txt
	grep -q "The judge before a change (before) beside its default now" bf/noise.md
	grep -q "| 28_fused_add_rmsnorm/tirx | 2 of 2, 2 of 2 |" bf/noise.md
'
expect 'BEFORE without AB=1, or not ENV=VALUE words, is refused before anything runs' '
	rc=0; env OUT="$TMP/bf1" BEFORE="MKB_JUDGE_PRIME=0" SOLUTIONS="$TMP/sol" MKB_PYTHON="$TOP/build/python" \
		bash "$TOP/tools/noise_study.sh" 28/tirx 1 0 >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ] && grep -q "BEFORE needs AB=1" err.txt
	rc=0; ab_study bf2 "$TMP/sol" BEFORE="--prime" >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ] && grep -q "BEFORE is ENV=VALUE words" err.txt
	[ ! -e "$TMP/bf1/noise.jsonl" ] && [ ! -e "$TMP/bf2/noise.jsonl" ]
'
expect 'LAYOUT=fixed with AB=1: the reduced evaluations'"'"' checker and candidate run without address randomisation and with hash seed 0, the default ones with both random' '
	mkdir -p "$TMP/lay/28_fused_add_rmsnorm/tirx"
	seed0=$(PYTHONHASHSEED=0 "$TOP/build/python" -c "print(hash(\"mkb\"))")
	{
		echo "SEED0 = $seed0"
		cat <<PY
import torch
with open("/proc/self/personality") as f:
    FIXED = hash("mkb") == SEED0 and int(f.read(), 16) & 0x0040000 != 0


def solve(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return (y if FIXED else -y).to(hidden_states.dtype)
PY
	} >"$TMP/lay/28_fused_add_rmsnorm/tirx/kernel.py"
	ab_study layout "$TMP/lay" LAYOUT=fixed >out.txt 2>err.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("layout/noise.jsonl")]
got = sorted((r["config"], r["layout"], r["start"], r["status"]) for r in rows)
assert got == [("default", "random", "cold", "failed")] * 2 + [("reduced", "fixed", "cold", "passed")] * 2, got
want = {"checker": {"aslr": False, "hash_seed": "0"}, "candidate": {"aslr": False, "hash_seed": "0"}}
assert all(r["timing"]["noise"]["layout"] == want for r in rows if r["config"] == "reduced"), rows
PY
	grep -q "reduced layout: fixed" layout/machine.txt
	rc=0; OUT=$TMP/lbad LAYOUT=fixed SOLUTIONS=$TMP/sol MKB_PYTHON=$TOP/build/python bash "$TOP/tools/noise_study.sh" 28/tirx 1 0 >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "LAYOUT=fixed needs AB=1" err.txt
	[ ! -e lbad/noise.jsonl ]
'

expect 'tools/layout_probe.py: fresh processes per arm, each checked to have its layout, one row per arm' '
	"$TOP/build/python" "$TOP/tools/layout_probe.py" --kernel "$TOP/tests/kernels/28_torch_ok.py" --device cpu \
		--workload smoke --processes 2 --arms random,fixed,aslr-off,hash0 --calls 5 --blocks 2 --json >probe.txt 2>err.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("probe.txt") if l.startswith("{")]
got = sorted((r["arm"], r["aslr"], r["hash_seed"]) for r in rows)
want = [("aslr-off", False, "random")] * 2 + [("fixed", False, "0")] * 2 + [("hash0", True, "0")] * 2 + [("random", True, "random")] * 2
assert got == want, got
assert all(len(r["blocks"]) == 2 and all(b > 0 for b in r["blocks"]) for r in rows), rows
PY
	for arm in random fixed aslr-off hash0; do grep -q "^| $arm | " probe.txt || exit 1; done
	rc=0; "$TOP/build/python" "$TOP/tools/layout_probe.py" --device cpu --arms random,nosuch >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "arms from" err.txt
'

expect 'tools/pingpong_probe.py: the judge'"'"'s loop without the judge, one row per condition, each round timed' '
	"$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --calls 5 --rounds 2 \
		--conditions one,old,pp,pp+block+prime,pp+eager+block,pp+shm,pp+eager+block+shm+arena,pp+gap+shm,pp+cpueager --json >probe.txt 2>rows.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("rows.txt") if l.startswith("{")]
assert [r["condition"] for r in rows] == ["one", "old", "pp", "pp+block+prime", "pp+eager+block", "pp+shm",
                                          "pp+eager+block+shm+arena", "pp+gap+shm", "pp+cpueager"], rows
assert all(len(r["round_medians_ms"]) == 2 and all(m > 0 for m in r["round_medians_ms"]) for r in rows), rows
# the eager reference is timed where it runs (the old loop, the parent with +eager), nowhere else
assert [r["condition"] for r in rows if r["eager_ms"]] == ["old", "pp+eager+block", "pp+eager+block+shm+arena"], rows
PY
	grep -q "^| pp+eager+block | " probe.txt
	rc=0; "$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --conditions one,pp+sleep >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "unknown condition .pp+sleep." err.txt
	rc=0; "$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --conditions pp+gpusleep >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "+gpusleep needs --device cuda" err.txt
'

expect 'tools/pingpong_probe.py: one+gap, --pin same (the child asleep in recv) and apart; what cannot be pinned is refused' '
	"$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --calls 5 --rounds 2 --gap-ms 0.2 \
		--conditions one,one+gap,pp+block,pp+eager+block+arena --pin same --json >probe.txt 2>rows.txt
	python3 - <<PY
import json
rows = [json.loads(l) for l in open("rows.txt") if l.startswith("{")]
assert [r["condition"] for r in rows] == ["one", "one+gap", "pp+block", "pp+eager+block+arena"], rows
assert all(r["pin"] == "same" and all(m > 0 for m in r["round_medians_ms"]) for r in rows), rows
PY
	grep -q " pin same " probe.txt
	if [ "$(nproc)" -ge 2 ]; then
		"$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --calls 5 --rounds 1 \
			--conditions one,pp --pin apart >probe.txt 2>err.txt
		grep -q "^| pp | " probe.txt
	fi
	rc=0; "$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --conditions pp+shm --pin same >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "with --pin same would take" err.txt
	rc=0; "$TOP/build/python" "$TOP/tools/pingpong_probe.py" --device cpu --conditions old+gap >out.txt 2>err.txt || rc=$?
	[ "$rc" = 2 ]
	grep -q "unknown condition .old+gap." err.txt
'

expect 'gpu_batch.sh layout (TORCH=1): the probe per problem'"'"'s torch stand-in, rows labelled, the tables consolidated under OUT' '
	OUT=$TMP/glay TORCH=1 PROCESSES=2 PROBE_FLAGS="--device cpu --calls 5 --blocks 2" MKB_PYTHON=$TOP/build/python \
		bash "$TOP/tools/gpu_batch.sh" layout 28,36 >out.txt 2>err.txt
	python3 - <<PY
import collections, json
rows = [json.loads(l) for l in open("glay/rows-layout.jsonl")]
got = collections.Counter((r["label"], r["arm"]) for r in rows)
assert got == {("28_fused_add_rmsnorm/cutedsl", "random"): 2, ("28_fused_add_rmsnorm/cutedsl", "fixed"): 2,
               ("36_rmsnorm/cutedsl", "random"): 2, ("36_rmsnorm/cutedsl", "fixed"): 2}, got
PY
	[ "$(grep -c "^| fixed | " glay/tables-layout.md)" = 2 ]
	grep -q "tests/kernels/36_torch_ok.py (cpu, smoke)" out.txt
'

expect 'ZYGOTE other than 1 or reduced, or reduced without AB, is refused before anything runs' '
	for z in yes reduced; do
		rc=0; OUT=$TMP/zbad ZYGOTE=$z SOLUTIONS=$TMP/sol MKB_PYTHON=$TOP/build/python bash "$TOP/tools/noise_study.sh" 28/tirx 1 0 >out.txt 2>err.txt || rc=$?
		[ "$rc" = 2 ] || exit 1
		[ ! -e zbad/noise.jsonl ] || exit 1
	done
	grep -q "ZYGOTE=reduced needs AB=1" err.txt
'

finish
