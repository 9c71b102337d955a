#!/usr/bin/env bash
# mkb attempt end to end in CPU test mode: the built-in agent against a
# scripted model server on loopback (tests/llm/server.py playing
# tests/llm/attempt_scenarios.py), a real sandboxed tmux terminal, real
# submissions to the judge, the store's records.
. "$(dirname "$0")/../lib.sh"
KEY=sk-test-5ecret-Key-0123456789
export OPENAI_API_KEY=$KEY ANTHROPIC_API_KEY=$KEY MKB_TEST_KEY=$KEY
unset OPENAI_BASE_URL ANTHROPIC_BASE_URL
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1

# A listener the sandbox's socket probe aims at (it must never connect).
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
open(sys.argv[1], "w").close()
while True:
    c, _ = s.accept(); open(sys.argv[1], "a").write("accepted\n"); c.close()
' "$TMP/probe-accepts" >"$TMP/probe-port" &
PROBE=$!
for _ in $(seq 100); do [ -s "$TMP/probe-port" ] && break; sleep 0.05; done
export MKB_PROBE_PORT=$(cat "$TMP/probe-port")
SCEN=$TMP/scenarios
python3 "$TOP/tests/llm/attempt_scenarios.py" "$SCEN" "$TOP"

serve() { # SCENARIO: the model server on it; $URL, requests.json
	[ -z "${SERVER:-}" ] || kill $SERVER 2>/dev/null || true
	rm -f port requests.json
	python3 "$TOP/tests/llm/server.py" "$SCEN/$1.json" requests.json >port 2>server.err &
	SERVER=$!
	# a test's body is a subshell: the server ends with it, not with the suite
	trap 'kill $SERVER 2>/dev/null || true' EXIT
	for _ in $(seq 200); do [ -s port ] && break; sleep 0.05; done
	URL=http://127.0.0.1:$(cat port)
}
trap 'kill $PROBE ${SERVER:-} 2>/dev/null; rm -rf "$TMP"' EXIT

attempt() { # [flags...]: mkb attempt 28 --json into out.json (folder w); rc in rc
	rm -rf w
	set +e
	"$MKB" attempt 28 --dsl cutedsl --device cpu --workload smoke --retry-delay 0.05 --retries 2 \
		--wall 120 --workdir "$PWD/w" --json "$@" >out.json 2>err.txt
	echo $? >rc
	set -e
	cat out.json err.txt >>"$TMP/every-output.txt"
}

# Python expressions over o (the attempt's --json), r (requests the server
# saw), t (the transcript: mkb attempt show --json) and ev(kind).
verify() {
	"$MKB" attempt show "$(python3 -c 'import json; print(json.load(open("out.json"))["id"])')" \
		--json >transcript.json
	python3 - "$@" <<'PY'
import json, sys
o = json.load(open("out.json"))
r = json.load(open("requests.json"))["requests"]
t = json.load(open("transcript.json"))
ev = lambda kind: [e["body"] for e in t["events"] if e["kind"] == kind]
prompt = lambda i: r[i]["body"]["messages"][-1]["content"] if "messages" in r[i]["body"] else ""
for cond in sys.argv[1:]:
    if not eval(cond):
        print("false:", cond, "\nout:", json.dumps(o)[:3000], "\nevents:", json.dumps(t["events"])[:6000])
        sys.exit(1)
PY
}

expect 'a normal attempt: kernel written, submitted, skill left, completion confirmed, final grade passed' '
	serve normal
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 0 ] || { cat err.txt; false; }
	verify "o[\"status\"] == \"passed\" and o[\"final_verdict\"][\"passed\"]" \
		"o[\"submissions\"] == 1 and o[\"turns\"] == 5 and len(r) == 5" \
		"(o[\"input_tokens\"], o[\"cached_tokens\"], o[\"output_tokens\"]) == (18300, 9216, 780)" \
		"o[\"skill_out\"].startswith(\"Fusing the residual add\") and o[\"skill_out_tokens\"] > 0" \
		"o[\"kernel_sha256\"] and o[\"final_evaluation\"] > 0 and o[\"skill_in_sha256\"] is None" \
		"ev(\"submission\")[0][\"counted\"] and \"Submission 1 of 10\" in ev(\"submission\")[0][\"feedback\"]" \
		"\"Status: passed\" in prompt(2) and \"Submissions left: 9\" in prompt(2)" \
		"\"Are you sure you want to mark the task as complete\" in prompt(4)" \
		"\"Task Description:\" in prompt(0) and \"# Problem 28\" in prompt(0)" \
		"r[0][\"body\"][\"temperature\"] == 0.7 and \"max_tokens\" not in r[0][\"body\"]" \
		"not any(\"response_format\" in q[\"body\"] for q in r)" \
		"[m[\"role\"] for m in r[4][\"body\"][\"messages\"]] == [\"user\", \"assistant\"] * 4 + [\"user\"]" \
		"ev(\"final\")[0][\"verdict\"][\"status\"] == \"passed\"" \
		"json.loads(open(\"w/submissions/1/kernel.py\").read() and \"1\") == 1"
	[ -f w/final/kernel.py ] && [ -f w/final/SKILL.md ] && [ -x w/bin/submit ]
	grep -q "^API index for cutedsl: nvidia-cutlass-dsl 4.7.0" w/workspace/docs/cutedsl/api-index.txt
	grep -q "^def solve" w/final/kernel.py
'

expect 'the text form and mkb attempt show print the outcome and the transcript' '
	serve normal
	"$MKB" attempt 28 --dsl tirx --device cpu --workload smoke --model openai:gpt-test --base-url $URL \
		--workdir "$PWD/w2" >summary.txt 2>err.txt
	grep -q "^attempt [0-9]*: passed$" summary.txt
	grep -q "^tokens: 18300 in (9216 cached), 780 out$" summary.txt
	grep -q "^final kernel: passed, kernel [0-9.]* ms" summary.txt
	id=$(sed -n "s/^attempt \([0-9]*\):.*/\1/p" summary.txt)
	"$MKB" attempt show $id >show.txt
	grep -q "^attempt $id: problem 28, tirx, openai:gpt-test, passed$" show.txt
	grep -q "^keystrokes: submit$" show.txt
	grep -q "^feedback: Submission 1 of 10$" show.txt
	"$MKB" attempt show 99999 2>err.txt && false
	grep -q "no attempt 99999" err.txt
'

expect 'a 429 is retried (not the model'"'"'s failure); usage counts only the replies' '
	serve retry_429
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\" and len(r) == 4" \
		"(o[\"input_tokens\"], o[\"output_tokens\"]) == (1500 + 1700 * 2, 300 + 20 * 2)" \
		"ev(\"response\")[0][\"requests\"] == 2"
'

expect 'server errors until the retries run out: infra_error, the kernel still graded' '
	serve server_500s
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 3 ]
	verify "o[\"status\"] == \"infra_error\" and \"server\" in o[\"reason\"]" "len(r) == 3" \
		"o[\"turns\"] == 0 and o[\"final_evaluation\"] is None"
'

expect 'a body that is not JSON: model_error' '
	serve malformed
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 4 ]
	verify "o[\"status\"] == \"model_error\" and \"malformed\" in o[\"reason\"]"
'

expect 'a reply that is not JSON and a command that fails: the agent reads both and goes on' '
	serve errors_then_work
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\"" \
		"\"parsing errors\" in prompt(1) and \"No valid JSON found\" in prompt(1)" \
		"\"nosuchtool: command not found\" in prompt(2)"
'

expect 'a model that never finishes: the wall clock ends it (timed_out), the on-disk kernel is graded' '
	serve never_finishes
	attempt --model openai:gpt-test --base-url $URL --wall 8
	[ "$(cat rc)" = 1 ]
	verify "o[\"status\"] == \"timed_out\" and o[\"final_verdict\"][\"passed\"]" \
		"7 <= o[\"agent_s\"] < 20 and o[\"turns\"] >= 2"
'

expect 'a context overflow: the hand-off summary (3 calls), then the work goes on' '
	serve context
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\" and len(r) == 8" \
		"\"hand your work to another AI agent\" in prompt(2)" \
		"\"Ask at least five questions\" in prompt(3) and len(r[3][\"body\"][\"messages\"]) == 1" \
		"\"Answer each one in detail\" in prompt(4)" \
		"\"answers the other agent gave\" in prompt(5)" \
		"[m[\"role\"] for m in r[5][\"body\"][\"messages\"]] == [\"user\", \"user\", \"assistant\", \"user\"]" \
		"len(ev(\"summary\")) == 1"
'

expect '--response-format (ours, off by default): the turns carry the reply schema, the hand-off'"'"'s free-text calls do not' '
	serve context
	attempt --model openai:gpt-test --base-url $URL --response-format json-schema
	[ "$(cat rc)" = 0 ] || { cat err.txt; false; }
	verify "o[\"status\"] == \"passed\" and len(r) == 8" \
		"[\"response_format\" in q[\"body\"] for q in r] == [True, True, False, False, False] + [True] * 3" \
		"[e.get(\"reply_schema\") for e in ev(\"request\")] == [\"terminus2_reply\"] * 2 + [None] * 3 + [\"terminus2_reply\"] * 3" \
		"o[\"options\"][\"decoding\"] == {\"temperature\": 0.7, \"response_format\": \"json-schema\"}"
	python3 - <<-'"'"'PY'"'"'
		import json
		rf = json.load(open("requests.json"))["requests"][0]["body"]["response_format"]
		assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "terminus2_reply", rf
		assert rf["json_schema"]["strict"] is True, rf
		s = rf["json_schema"]["schema"]
		assert s["required"] == ["analysis", "plan", "commands", "task_complete"], s
		assert s["additionalProperties"] is False and list(s["properties"]) == s["required"], s
		c = s["properties"]["commands"]["items"]
		assert c["required"] == ["keystrokes", "duration"] and c["additionalProperties"] is False, c
		assert s["properties"]["task_complete"] == {"type": "boolean"}, s
	PY
	serve normal
	attempt --model openai:gpt-test --base-url $URL --response-format json-object --max-tokens 900
	[ "$(cat rc)" = 0 ] || { cat err.txt; false; }
	verify "o[\"status\"] == \"passed\" and len(r) == 5" \
		"all(q[\"body\"][\"response_format\"][\"type\"] == \"json_object\" and set(q[\"body\"][\"response_format\"]) == {\"type\", \"schema\"} for q in r)" \
		"r[0][\"body\"][\"response_format\"][\"schema\"][\"properties\"][\"commands\"][\"type\"] == \"array\"" \
		"o[\"options\"][\"decoding\"] == {\"temperature\": 0.7, \"max_tokens\": 900, \"response_format\": \"json-object\"}"
'

expect 'an Anthropic conversation: /v1/messages, usage on one scale' '
	serve anthropic
	attempt --model anthropic:claude-test --base-url $URL
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\" and r[0][\"path\"] == \"/v1/messages\"" \
		"(o[\"input_tokens\"], o[\"cached_tokens\"], o[\"output_tokens\"]) == (1500 + 3400, 500 + 2000, 340)" \
		"r[0][\"body\"][\"max_tokens\"] == 4096 and r[0][\"body\"][\"temperature\"] == 0.7"
'

expect 'an external agent (cli:): its program reaches the model only through the proxy, never sees the key, submits' '
	serve cli
	mkdir -p agents
	# the "agent": a program that asks its model for a kernel, writes it, submits,
	# leaves a skill, and reports what it could see and reach
	python3 - "$MKB_PROBE_PORT" >agents/fake.json <<"PY"
import json, sys
script = r"""
import json, os, socket, subprocess, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
seen = {"key": key, "secrets": sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k),
        "real_key_anywhere": any(("5ec" + "ret") in v for v in os.environ.values())}
body = json.dumps({"model": os.environ["AGENT_MODEL"], "messages": [{"role": "user", "content": open("INSTRUCTION.md").read()[:200]}]}).encode()
req = urllib.request.Request(base + "/chat/completions", data=body, headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
reply = json.load(urllib.request.urlopen(req, timeout=30))
open("kernel.py", "w").write(reply["choices"][0]["message"]["content"])
seen["usage"] = reply["usage"]
for name, addr in (("probe", ("127.0.0.1", int(os.environ["PROBE_PORT"]))), ("outside", ("10.0.0.1", 80))):
    try:
        socket.create_connection(addr, timeout=2).close(); seen[name] = "connected"
    except OSError as e:
        seen[name] = str(e)
try:
    urllib.request.urlopen(urllib.request.Request(base + "/models"), timeout=10); seen["get"] = "ok"
except urllib.error.HTTPError as e:
    seen["get"] = e.code
out = subprocess.run(["submit"], capture_output=True, text=True)
seen["submit"] = out.stdout
open("SKILL.md", "w").write("Add the residual in fp32 before the norm.\n")
json.dump(seen, open("seen.json", "w"))
"""
print(json.dumps({"description": "a test agent", "provider": "openai", "default_model": "gpt-test",
                  "command": ["python3", "-c", script],
                  "env": {"OPENAI_BASE_URL": "{base_url}", "OPENAI_API_KEY": "{dummy_key}",
                          "AGENT_MODEL": "{model}", "PROBE_PORT": sys.argv[1]}}))
PY
	attempt --model "cli:$PWD/agents/fake.json:gpt-cli" --base-url "$URL" --submissions 2
	cat err.txt w/run/agent.log >&2 || true
	[ "$(cat rc)" = 0 ]
	python3 - <<PY
import json
seen = json.load(open("w/workspace/seen.json"))
o = json.load(open("out.json"))
r = json.load(open("requests.json"))["requests"]
assert seen["key"] == "mkb-proxy-holds-the-key" and not seen["real_key_anywhere"], seen
assert seen["secrets"] == ["OPENAI_API_KEY"], seen
assert "connected" not in (seen["probe"], seen["outside"]), seen
assert seen["get"] == 405, seen
assert "Submission 1 of 2" in seen["submit"] or "submission 1 of 2" in seen["submit"].lower(), seen["submit"]
assert len(r) == 1 and r[0]["key_ok"] and r[0]["path"] == "/chat/completions", r
assert r[0]["body"]["model"] == "gpt-cli", r[0]["body"]
assert o["status"] == "passed" and o["submissions"] == 1, o
assert (o["input_tokens"], o["cached_tokens"], o["output_tokens"]) == (1500, 512, 300), o
PY
	[ ! -s "$TMP/probe-accepts" ]
	"$MKB" attempt show "$(python3 -c "import json; print(json.load(open(\"out.json\"))[\"id\"])")" --json >t.json
	python3 -c "import json; t=json.load(open(\"t.json\")); k=[e[\"kind\"] for e in t[\"events\"]]; assert \"cli\" in k and \"proxy\" in k and \"cli_end\" in k, k"
	! grep -rl "5ecret" w t.json >&2
'

expect 'an external agent without a network namespace of its own is refused unless --unsafe' '
	printf "{\"provider\": \"openai\", \"command\": [\"true\"]}" >noop.json
	MKB_SANDBOX_OFF=netns attempt --model "cli:$PWD/noop.json" --base-url http://127.0.0.1:9
	[ "$(cat rc)" = 3 ]
	grep -q "needs a network namespace of its own.*--unsafe runs it anyway" err.txt
	[ "$(field status <out.json)" = infra_error ]
'

expect 'the sandbox: no repository, store, home, key, network; nothing outlives the attempt' '
	serve sandbox
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\"" "\"landlock_fs\" in o[\"options\"][\"sandbox\"]"
	python3 - <<PY
import json
p = json.load(open("requests.json"))["requests"][1]["body"]["messages"][-1]["content"]
need = ["solutions=1", "heldout=1", "repo=2", "store=1", "home=2", "started-survivor"]
for n in need:
    assert n in p, (n, p)
assert p.count("Permission denied") >= 4, p
assert "0\nkeys-listed" in p, p
assert "\nconnected\n" not in p, p
assert "Address family not supported" in p or "Network is unreachable" in p, p
PY
	[ ! -s "$TMP/probe-accepts" ]
	! pgrep -f mkb-attempt-survivor-31337
'

expect 'limits: the DSLs import; a file stops at 1 GB; a flood reaches the model bounded; a fork bomb is contained' '
	if ! mkdir /sys/fs/cgroup/pids/mkb-probe 2>/dev/null; then
		echo "no writable pids cgroup here: the fork bomb would not be contained; not run"
		exit 0
	fi
	rmdir /sys/fs/cgroup/pids/mkb-probe
	serve limits
	attempt --model openai:gpt-test --base-url $URL
	[ "$(cat rc)" = 0 ] || { cat err.txt; false; }
	verify "o[\"status\"] == \"passed\" and \"cgroup\" in o[\"options\"][\"sandbox\"]" \
		"\"dsl imports\" in prompt(1)" \
		"\"fsize=153\" in prompt(1) and \"size=1073741824\" in prompt(1)" \
		"len(prompt(2).encode()) < 10300 and prompt(2).count(\"mkb-flood-line\") > 20"
	! ls -d /sys/fs/cgroup/pids/mkb-* 2>/dev/null
	[ "$(pgrep -c -f "bomb" || true)" -lt 5 ]
'

expect 'the key never appears in the store, a workspace, a transcript or any output' '
	! grep -rqF "$KEY" "$TMP"/*/ "$TMP"/*.json "$TMP/every-output.txt" 2>/dev/null
	! python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); print(\"\n\".join(str(r) for r in db.execute(\"select * from attempt_events\")))" "$MKB_STORE" | grep -qF "$KEY"
'

expect 'control agents: oracle (stand-in on the CPU, a skill), null (no kernel), eager' '
	attempt --model oracle
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\" and o[\"submissions\"] == 1 and o[\"turns\"] == 0" \
		"ev(\"control\")[0] == {\"agent\": \"oracle\", \"kernel\": \"plain-torch stand-in (reference)\"}" \
		"o[\"skill_out\"].startswith(\"The oracle control agent\")" \
		"o[\"input_tokens\"] == 0 and o[\"output_tokens\"] == 0"
	grep -q "^def solve(\*inputs):" w/final/kernel.py
	attempt --model null
	[ "$(cat rc)" = 1 ]
	verify "o[\"status\"] == \"failed\" and \"no kernel.py\" in o[\"reason\"] and o[\"submissions\"] == 0"
	attempt --model eager
	[ "$(cat rc)" = 0 ]
	verify "o[\"status\"] == \"passed\" and o[\"skill_out\"] is None"
'

expect 'the judge flags of the attempt reach its evaluations (rules, launches, the DSL share floor)' '
	attempt --model oracle --rules paper --launches record --dsl-min-share 0.5
	[ "$(cat rc)" = 0 ]
	python3 - <<PY
import json, sqlite3
eid = json.load(open("out.json"))["final_evaluation"]
(opts,) = sqlite3.connect("$MKB_STORE").execute("select options from evaluations where id = ?", (eid,)).fetchone()
o = json.loads(opts)
assert (o.get("rules"), o.get("launches"), o.get("dsl_min_share")) == ("paper", "record", 0.5), o
PY
'

expect 'bad usage is refused with exit 2' '
	set +e
	"$MKB" attempt 28 --dsl cutedsl >/dev/null 2>err.txt; a=$?
	"$MKB" attempt 28 --model openai:x >/dev/null 2>>err.txt; b=$?
	"$MKB" attempt 28 --dsl cutedsl --model openai:x --wall 0 >/dev/null 2>>err.txt; c=$?
	"$MKB" attempt show x >/dev/null 2>>err.txt; d=$?
	"$MKB" attempt 28 --dsl cutedsl --model openai:x --response-format yaml >/dev/null 2>>err.txt; e=$?
	"$MKB" attempt 28 --dsl cutedsl --model anthropic:x --device cpu --response-format json-schema >/dev/null 2>>err.txt; f=$?
	set -e
	[ $a = 2 ] && [ $b = 2 ] && [ $c = 2 ] && [ $d = 2 ] && [ $e = 2 ] && [ $f = 2 ]
	grep -q "model is required" err.txt && grep -q "dsl is required" err.txt
	grep -q "response-format wants text, json-schema or json-object" err.txt
	grep -q "response-format json-schema is for openai: models only" err.txt
'

expect 'no model server outlives the test that started it' '
	! pgrep -f "tests/llm/server.py $SCEN/" >/dev/null
'

finish
