#!/usr/bin/env bash
# mkb zygote (docs/judge.md, "Start-up: the zygote"): candidates forked from a
# pre-imported parent get the verdicts, confinement and clean environment a
# cold candidate gets; the zygote outlives bad requests and judges that die.
. "$(dirname "$0")/../lib.sh"
FAST="--device cpu --workload smoke --warmup 2 --timed 8 --timeout 60"
SOCK="$TMP/z.sock"
# a secret in the caller's environment: it must reach neither the zygote nor a candidate
MKB_TEST_SECRET=zygote-do-not-leak "$MKB" zygote --socket "$SOCK" --device cpu >"$TMP/zygote.out" 2>&1 &
zpid=$!
trap 'kill $zpid 2>/dev/null; wait $zpid 2>/dev/null; rm -rf "$TMP"' EXIT
# it listens when it has printed its line (the socket is abstract: no file)
# (two: the candidates' and the checkers')
for _ in $(seq 600); do [ "$(grep -c '"zygote"' "$TMP/zygote.out" 2>/dev/null)" = 2 ] && break; sleep 0.1; done

expect 'it listens, having imported torch; the candidates zygote holds no secret of its caller' '
	grep -q "\"role\": \"candidate\", .*\"imported\": \[\"torch\"" "$TMP/zygote.out"
	grep -q "\"role\": \"checker\", .*\"imported\": \[\"torch\"" "$TMP/zygote.out"
	zp=$(pgrep -f "mkb_grader.zygote --socket $SOCK")
	! tr "\0" "\n" </proc/$zp/environ | grep -q MKB_TEST_SECRET
	[ ! -e "$SOCK" ] # abstract: nothing on disk for a process to find
'

expect 'a kernel graded through it passes, forked, under the same confinement as cold' '
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --json "$TOP/tests/kernels/28_torch_ok.py" >z.json
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --json "$TOP/tests/kernels/28_torch_ok.py" >c.json
	[ "$(field status <z.json)" = passed ]
	[ "$(field candidate_start <z.json)" = zygote ]
	[ "$(field checker_start <z.json)" = zygote ]
	[ "$(field candidate_start <c.json)" = cold ]
	[ "$(field checker_start <c.json)" = cold ]
	[ "$(field confinement <z.json)" = "$(field confinement <c.json)" ]
	[ -n "$(field confinement <z.json)" ]
'

expect 'a forked candidate writes Triton'"'"'s cache under its own HOME, as a cold one does (not the zygote'"'"'s)' '
	"${MKB_PYTHON:-$TOP/build/python}" -c "import triton" # ships with the grader venv'"'"'s torch
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --json "$TOP/tests/kernels/28_triton_cache.py" >t.json
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --json "$TOP/tests/kernels/28_triton_cache.py" >u.json
	[ "$(field candidate_start <t.json)" = zygote ]
	[ "$(field status <t.json)" = passed ] || { field reason <t.json; false; }
	[ "$(field status <u.json)" = passed ]
'

expect 'a forked checker reads the evaluation'"'"'s environment, not the zygote'"'"'s (MKB_JUDGE_REPLY)' '
	MKB_JUDGE_REPLY=spin "$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --json "$TOP/tests/kernels/28_torch_ok.py" >s.json
	[ "$(field checker_start <s.json)" = zygote ]
	python3 -c "import json; t = json.load(open(\"s.json\"))[\"timing\"]; assert t[\"reply\"] == \"spin\", t"
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --json "$TOP/tests/kernels/28_torch_ok.py" >b.json
	python3 -c "import json; t = json.load(open(\"b.json\"))[\"timing\"]; assert \"reply\" not in t, t"
'

expect 'MKB_ZYGOTE names it as --zygote does; a failing kernel fails the same way' '
	MKB_ZYGOTE="$SOCK" "$MKB" eval 28 --dsl cutedsl $FAST --no-store --json "$TOP/tests/kernels/28_off_5e-2.py" >o.json || true
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --json "$TOP/tests/kernels/28_off_5e-2.py" >p.json || true
	[ "$(field candidate_start <o.json)" = zygote ]
	[ "$(field status <o.json)" = "$(field status <p.json)" ]
	[ "$(field status <o.json)" = failed ]
'

expect 'a judge killed mid-evaluation takes its forked candidate and checker with it' '
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" "$TOP/tests/kernels/28_hang.py" >/dev/null 2>&1 &
	judge=$!
	zp=$(pgrep -f "mkb_grader.zygote --socket $SOCK")
	zc=$(pgrep -f "mkb_grader.zygote --role checker --socket $SOCK:checker")
	[ -n "$zp" ] && [ -n "$zc" ]
	candidates() { pgrep -P $zp | grep -vx "$zc" || true; } # its one other child: the checkers zygote
	for _ in $(seq 100); do [ -n "$(candidates)" ] && [ -n "$(pgrep -P $zc)" ] && break; sleep 0.1; done
	kids="$(for k in $(candidates); do echo $k; descendants $k; done) $(descendants $zc)"
	[ "$(echo $kids | wc -w)" -ge 2 ] # the candidate and the checker
	! echo $kids | tr " " "\n" | grep -qx "$zc" # the zygotes themselves are not among them
	sleep 2 # inside solve by now (the hang)
	kill -9 $judge
	wait $judge 2>/dev/null || true
	for _ in $(seq 50); do alive $kids || break; sleep 0.1; done
	! alive $kids
	kill -0 $zp && kill -0 $zc # the zygotes live on
'

expect 'a bad request is answered with an error and the zygote serves on' '
	python3 - "$SOCK" <<PY
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(b"\\0mkb-zygote:" + sys.argv[1].encode())
s.send(b"not json")
reply = json.loads(s.recv(4096))
assert "error" in reply, reply
# well formed, but a sandbox it cannot read: refused, nothing left running
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(b"\\0mkb-zygote:" + sys.argv[1].encode())
r, w = os.pipe()
socket.send_fds(s, [json.dumps({"env": [], "dir": "/", "sandbox": "bogus 1\\n"}).encode()], [r, w])
reply = json.loads(s.recv(4096))
assert "sandbox could not be applied" in reply.get("error", ""), reply
PY
	zp=$(pgrep -f "mkb_grader.zygote --socket $SOCK")
	zc=$(pgrep -f "mkb_grader.zygote --role checker --socket $SOCK:checker")
	ps -o pid,ppid,stat,args --ppid $zp || true
	[ -z "$(pgrep -P $zp | grep -vx "$zc")" ] # its one child: the checkers zygote
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --json "$TOP/tests/kernels/28_torch_ok.py" >again.json
	[ "$(field candidate_start <again.json)" = zygote ]
	[ "$(field status <again.json)" = passed ]
'

expect 'a candidate, forked or cold, cannot ask the zygote for an unconfined sibling' '
	# with a socket file and no peer check, a forked candidate got
	# {"pid": N, "layers": 128}; the abstract socket is out of its network
	# namespace and Landlock scope, and the zygote refuses its own tree
	cat >escape.py <<PY
import json, os, socket

def solve(hidden_states, residual, weight):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(3)
    try:
        s.connect(b"\\0mkb-zygote:$SOCK")
        try:
            reply = s.recv(4096).decode()  # a refusal comes at once
        except socket.timeout:
            r, w = os.pipe()
            req = {"env": [], "dir": "/", "sandbox": "disable 16383\\n"}
            socket.send_fds(s, [json.dumps(req).encode()], [r, w])
            reply = s.recv(4096).decode()
    except OSError as e:
        reply = f"unreachable: {e}"
    raise RuntimeError(f"ZYGOTE-REPLY {reply}")
PY
	for via in "--zygote $SOCK" ""; do
		"$MKB" eval 28 --dsl cutedsl $FAST --rules paper --no-store $via --json escape.py >esc.json || true
		field reason <esc.json | tee reason.txt
		grep -q "ZYGOTE-REPLY unreachable" reason.txt
	done
	# with the layers off, the peer check refuses what can reach it
	MKB_SANDBOX_OFF=net,landlock_scope "$MKB" eval 28 --dsl cutedsl $FAST --rules paper --no-store \
		--zygote "$SOCK" --json escape.py >esc.json 2>err.txt || true
	[ "$(field candidate_start <esc.json)" = cold ] # not used with both off
	grep -q "not used with the network namespace" err.txt
	# ...and a cold candidate that can then reach it is refused by its user namespace
	field reason <esc.json | tee reason.txt
	grep -q "ZYGOTE-REPLY.*another user namespace.*refused" reason.txt
	MKB_SANDBOX_OFF=net "$MKB" eval 28 --dsl cutedsl $FAST --rules paper --no-store \
		--zygote "$SOCK" --json escape.py >esc.json || true
	[ "$(field candidate_start <esc.json)" = zygote ]
	field reason <esc.json | tee reason.txt
	grep -Eq "ZYGOTE-REPLY (unreachable|.*is refused)" reason.txt
'

expect 'mkb zygote refuses to start where $MKB_SANDBOX_OFF turns off both layers that keep candidates from it' '
	rc=0
	MKB_SANDBOX_OFF=netns,landlock_scope timeout 60 "$MKB" zygote --socket "$SOCK-off" --device cpu >off.out 2>off.err || rc=$?
	[ $rc = 3 ] # infrastructure: nothing was started
	grep -q "without a network namespace and without Landlock" off.err
	[ -z "$(pgrep -f "mkb_grader.zygote --socket $SOCK-off" || true)" ]
	# one layer left is enough
	MKB_SANDBOX_OFF=netns "$MKB" zygote --socket "$SOCK-one" --device cpu >one.out 2>&1 &
	zp=$!
	for _ in $(seq 600); do [ "$(grep -c "\"zygote\"" one.out 2>/dev/null)" = 2 ] && break; sleep 0.1; done
	kill -TERM $zp; wait $zp || true
	[ "$(grep -c "\"zygote\"" one.out)" = 2 ]
'

expect '--fixed-layout: forks keep their zygote'"'"'s layout, and the verdict says which it was' '
	# this zygote was started without the flag: its forks are randomised and say so
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --fixed-layout --json "$TOP/tests/kernels/28_torch_ok.py" >r.json
	[ "$(field candidate_start <r.json)" = zygote ]
	python3 -c "import json; n = json.load(open(\"r.json\"))[\"timing\"][\"noise\"][\"layout\"]; assert n[\"checker\"] == n[\"candidate\"] == {\"aslr\": True, \"hash_seed\": \"random\"}, n"
	# one started with it: every fork without randomisation, hash seed 0
	"$MKB" zygote --socket "$SOCK-fixed" --device cpu --fixed-layout >fixed.out 2>&1 &
	zp=$!
	for _ in $(seq 600); do [ "$(grep -c "\"zygote\"" fixed.out 2>/dev/null)" = 2 ] && break; sleep 0.1; done
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK-fixed" --fixed-layout --json "$TOP/tests/kernels/28_torch_ok.py" >f.json
	kill -TERM $zp; wait $zp || true
	[ "$(field candidate_start <f.json)" = zygote ]
	[ "$(field checker_start <f.json)" = zygote ]
	python3 -c "import json; n = json.load(open(\"f.json\"))[\"timing\"][\"noise\"][\"layout\"]; assert n[\"checker\"] == n[\"candidate\"] == {\"aslr\": False, \"hash_seed\": \"0\"}, n"
'

expect 'no zygote at the socket: a warning, and the candidate starts cold' '
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$TMP/none.sock" --json "$TOP/tests/kernels/28_torch_ok.py" >cold.json 2>err.txt
	[ "$(field candidate_start <cold.json)" = cold ]
	[ "$(field status <cold.json)" = passed ]
	grep -q "starts cold" err.txt
'

expect 'every trust-boundary exploit gets its verdict through the zygote too' '
	MKB_ZYGOTE="$SOCK" bash "$TOP/tests/scenario/adversarial.sh" >adv.txt 2>&1 || { cat adv.txt; false; }
	grep -q "0 failed" adv.txt
'

expect 'SIGTERM ends both zygotes and removes the candidates'"'"' zygote'"'"'s scratch folder; evaluations start cold again' '
	zc=$(pgrep -f "mkb_grader.zygote --role checker --socket $SOCK:checker")
	home=$(tr "\0" "\n" </proc/$zpid/environ | sed -n "s/^HOME=//p")
	case "$home" in */mkb-candidate-*) ;; *) echo "zygote HOME: $home"; false ;; esac
	[ -d "$home" ]
	kill -TERM $zpid
	for _ in $(seq 100); do kill -0 $zpid 2>/dev/null || break; sleep 0.1; done
	! kill -0 $zpid 2>/dev/null
	for _ in $(seq 50); do kill -0 $zc 2>/dev/null || break; sleep 0.1; done
	! kill -0 $zc 2>/dev/null
	[ ! -e "$home" ]
	"$MKB" eval 28 --dsl cutedsl $FAST --no-store --zygote "$SOCK" --json "$TOP/tests/kernels/28_torch_ok.py" >gone.json 2>/dev/null
	[ "$(field candidate_start <gone.json)" = cold ]
	[ "$(field checker_start <gone.json)" = cold ]
'

finish
