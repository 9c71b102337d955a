#!/usr/bin/env bash
# Every kernel of tests/adversarial/ against the judge on the CPU: each gets
# the verdict of expected.tsv, and the judge survives all of them.
. "$(dirname "$0")/../lib.sh"
A=$TOP/tests/adversarial
# The trust boundary is under test here, not the DSL rules' static checks
# (which would reject some of these kernels before they run): --rules paper.
FAST="--device cpu --workload smoke --warmup 2 --timed 8 --timeout 60 --rules paper --launches enforce"
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
while IFS=$'\t' read -r kernel want pattern when; do
	case "$kernel" in '#'* | '') continue ;; esac
	# GPU-only rows (the run-time DSL rules need CUPTI): tools/gpu_judge.sh adversarial
	case "$when" in gpu*)
		printf "| %s | %s | (GPU only) | |\n" "$kernel" "$want" >>"$table"
		continue ;;
	esac
	dry=; [ "$when" = dry ] && dry=1
	expect "$kernel: $want" '
		set +e
		MKB_LAUNCH_DRY='"$dry"' "$MKB" eval 28 --dsl cutedsl $FAST --json --no-store "$A/'"$kernel"'" >out.json 2>err.txt
		rc=$?
		set -e
		cat out.json
		[ $rc -le 3 ] # the judge itself survives: a verdict, not a death
		got=$(field status <out.json)
		reason=$(field reason <out.json)
		printf "| %s | %s | %s | %.120s |\n" "'"$kernel"'" "'"$want"'" "$got" "$reason" >>"'"$table"'"
		[ "$got" = "'"$want"'" ]
		# through a zygote (tests/scenario/zygote.sh): every candidate forked from it
		[ -z "${MKB_ZYGOTE:-}" ] || [ "$(field candidate_start <out.json)" = zygote ]
		text=$(python3 -c "import json; v=json.load(open(\"out.json\")); print(v[\"reason\"]); print(v.get(\"output_tail\", \"\")); print(json.dumps(v.get(\"timing\"))); print(\"eager_ms=%s\" % v[\"eager_ms\"]); print(\"kernel_ms=%s source=%s\" % (v[\"kernel_ms\"], (v.get(\"timing\") or {}).get(\"source\")))")
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

# The static checks of the DSL rules (enforced by default): each kernel is
# rejected before it runs, the message naming the rule.
rule_case() { # name dsl expected-rule-words source
	local name=$1 dsl=$2 want=$3 src=$4
	expect "static rule: $name is rejected ($want)" '
		printf "%s\n" "'"$src"'" >"$TMP/rule.py"
		set +e
		"$MKB" eval 28 --dsl '"$dsl"' --device cpu --workload smoke --json --no-store "$TMP/rule.py" >out.json
		rc=$?
		set -e
		[ $rc = 1 ]
		[ "$(field status <out.json)" = rejected ]
		field reason <out.json | grep -q "breaks a DSL rule: '"$want"'"
	'
}
rule_case "ctypes" cutedsl "no ctypes or cffi" "import ctypes
def solve(*a):
    return ctypes"
rule_case "Triton" cutedsl "no Triton" "import triton.language as tl
def solve(*a):
    return None"
rule_case "torch.compile" tirx "no torch.compile" "import torch
f = torch.compile(lambda x: x)
def solve(*a):
    return f(a[0])"
rule_case "the other DSL" cutedsl "no other DSL" "from tvm.script import tirx as T
def solve(*a):
    return None"
rule_case "a CUDA graph" tirx "no CUDA graphs" "import torch
def solve(*a):
    g = torch.cuda.CUDAGraph()
    return g"
rule_case "subprocess" cutedsl "no subprocess" "import subprocess
def solve(*a):
    return subprocess.run"
rule_case "the reference" cutedsl "no use of the reference" "from reference import reference
def solve(*a):
    return reference(*a)"

expect 'a shipped-style kernel breaks no static rule' '
	"$MKB" eval 28 --dsl cutedsl --device cpu --workload smoke --timed 3 --json --no-store "$TOP/tests/kernels/28_torch_ok.py" >out.json
	[ "$(field status <out.json)" = passed ]
'

cat "$table"
finish
