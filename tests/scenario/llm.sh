#!/usr/bin/env bash
# The model clients end to end: `mkb chat` against a scripted server on
# loopback (tests/llm/server.py) playing the replies of tests/data/llm/*.json.
. "$(dirname "$0")/../lib.sh"
DATA=$TOP/tests/data/llm
KEY=sk-test-5ecret-Key-0123456789
export OPENAI_API_KEY=$KEY ANTHROPIC_API_KEY=$KEY MKB_TEST_KEY=$KEY
unset OPENAI_BASE_URL ANTHROPIC_BASE_URL
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1

serve() { # SCENARIO: start the server on it; $URL is its address, requests.json its log
	[ -z "${SERVER:-}" ] || kill $SERVER 2>/dev/null || true
	rm -f port requests.json
	python3 "$TOP/tests/llm/server.py" "$DATA/$1.json" requests.json >port 2>server.err &
	SERVER=$!
	trap 'kill $SERVER 2>/dev/null || true' EXIT
	for _ in $(seq 200); do [ -s port ] && break; sleep 0.05; done
	URL=http://127.0.0.1:$(cat port)
}

chat() { # [flags...] MESSAGE: mkb chat --json at the server; out.json, err.txt, rc
	set +e
	"$MKB" chat --retry-delay 0.05 --json "$@" >out.json 2>err.txt
	echo $? >rc
	set -e
	cat out.json err.txt >>"$TMP/every-output.txt"
}

# Each argument a Python expression over o (mkb's JSON), r (the requests the
# server saw) and approx(); the first false one is shown with both.
verify() {
	python3 - "$@" <<'PY'
import json, sys
o = json.load(open("out.json"))
r = json.load(open("requests.json"))["requests"]
approx = lambda a, b: a is not None and abs(a - b) <= 1e-12 + 1e-9 * abs(b)
for cond in sys.argv[1:]:
    if not eval(cond):
        print("false:", cond, "\nout:", json.dumps(o), "\nrequests:", json.dumps(r)[:3000])
        sys.exit(1)
PY
}

expect 'openai: a reply, usage exactly as the server reported, the request as sent' '
	serve openai_ok
	chat --model openai:gpt-test --base-url $URL/v1 --system "be brief" --max-tokens 50 --temperature 0.5 hello
	[ "$(cat rc)" = 0 ]
	verify "o[\"text\"] == \"Hello there.\"" "o[\"stop_reason\"] == \"stop\"" \
		"o[\"usage\"] == {\"input_tokens\": 1234, \"cached_input_tokens\": 1024, \"output_tokens\": 56}" \
		"o[\"provider_usage\"][\"total_tokens\"] == 1290" \
		"o[\"attempts\"] == 1 and o[\"error_class\"] is None and o[\"cost_usd\"] is None" \
		"o[\"latency_ms\"] > 0 and o[\"elapsed_ms\"] >= o[\"latency_ms\"]" \
		"len(r) == 1 and r[0][\"path\"] == \"/v1/chat/completions\" and r[0][\"method\"] == \"POST\"" \
		"r[0][\"key_header\"] == \"authorization\" and r[0][\"key_ok\"] and not r[0][\"key_in_body\"]" \
		"r[0][\"headers\"][\"content-type\"] == \"application/json\"" \
		"r[0][\"body\"] == {\"model\": \"gpt-test\", \"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hello\"}], \"temperature\": 0.5, \"max_tokens\": 50}"
'

expect 'openai: the text form prints the reply on stdout and usage on stderr; - reads stdin' '
	serve openai_ok
	echo "from stdin" | "$MKB" chat --model openai:gpt-test --base-url $URL/v1 - >reply.txt 2>err.txt
	cat reply.txt err.txt >>"$TMP/every-output.txt"
	[ "$(cat reply.txt)" = "Hello there." ]
	grep -q "^tokens: 1234 in (1024 cached), 56 out; stop: stop; [0-9]* ms; 1 attempt$" err.txt
	verify "r[0][\"body\"][\"messages\"] == [{\"role\": \"user\", \"content\": \"from stdin\\n\"}]" \
		"\"max_tokens\" not in r[0][\"body\"] and \"temperature\" not in r[0][\"body\"]"
'

expect 'a server that reports no usage: unknown (null, ?), no cost, still a reply' '
	serve openai_no_usage
	chat --model openai:gpt-test --base-url $URL/v1 --prices "$DATA/prices.json" hi
	[ "$(cat rc)" = 0 ]
	verify "o[\"text\"] == \"no usage here\" and o[\"stop_reason\"] == \"\"" \
		"o[\"usage\"] == {\"input_tokens\": None, \"cached_input_tokens\": None, \"output_tokens\": None}" \
		"o[\"provider_usage\"] is None and o[\"cost_usd\"] is None"
	serve openai_no_usage
	"$MKB" chat --model openai:gpt-test --base-url $URL/v1 hi >reply.txt 2>err.txt
	grep -q "^tokens: ? in (? cached), ? out; stop: -; [0-9]* ms; 1 attempt$" err.txt
'

expect 'OPENAI_BASE_URL is the base when --base-url is not given' '
	serve openai_ok
	OPENAI_BASE_URL=$URL/v1/ chat --model openai:gpt-test hi
	[ "$(cat rc)" = 0 ]
	verify "r[0][\"path\"] == \"/v1/chat/completions\""
'

expect '429 then success: retried, 2 requests, attempts=2' '
	serve openai_429_then_ok
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 0 ]
	verify "len(r) == 2 and o[\"attempts\"] == 2 and o[\"text\"] == \"Hello there.\"" \
		"o[\"usage\"][\"input_tokens\"] == 1234 and o[\"error_class\"] is None" \
		"r[0][\"body\"] == r[1][\"body\"]"
	grep -q "warning: openai: HTTP 429: Rate limit reached for requests; retry 1 of 3" err.txt
'

expect '500s until the retries run out: infrastructure, exit 3, class server' '
	serve openai_500s
	chat --model openai:gpt-test --base-url $URL/v1 --retries 2 hi
	[ "$(cat rc)" = 3 ]
	verify "len(r) == 3 and o[\"attempts\"] == 3" "o[\"error_class\"] == \"server\"" \
		"o[\"http_status\"] == 503 and \"overloaded\" in o[\"error\"]" \
		"o[\"text\"] is None and o[\"usage\"][\"input_tokens\"] is None"
	grep -q "error: openai:gpt-test: server after 3 attempts: HTTP 503" err.txt
	[ $(grep -c "^warning: openai: HTTP 50[02]" err.txt) = 2 ]
	grep -q "HTTP 502: <html>" err.txt
'

expect 'the default is 3 retries: 4 requests' '
	serve openai_500s
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 3 ]
	verify "len(r) == 4 and o[\"attempts\"] == 4 and o[\"error_class\"] == \"server\""
'

expect 'a malformed body: class malformed, exit 4, not retried' '
	serve openai_malformed
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "len(r) == 1 and o[\"error_class\"] == \"malformed\" and o[\"http_status\"] == 200" \
		"\"not JSON\" in o[\"error\"]"
	serve openai_no_choices
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "o[\"error_class\"] == \"malformed\" and \"no choices[0].message\" in o[\"error\"]"
'

expect 'a response over the size cap is a clean malformed error' '
	serve openai_too_big
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "o[\"error_class\"] == \"malformed\" and \"larger than 16777216 bytes\" in o[\"error\"]"
'

expect '401: class auth, exit 4, no retry; the key the server echoed is redacted' '
	serve openai_401
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "len(r) == 1 and o[\"error_class\"] == \"auth\" and o[\"http_status\"] == 401" \
		"\"Incorrect API key provided: [redacted].\" in o[\"error\"]"
	! grep -qF "$KEY" out.json err.txt
'

expect 'no key in the environment: no key header, and the error says which variable' '
	MKB_TEST_KEY= serve openai_401 # a server cannot echo a key it never got
	OPENAI_API_KEY= chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "r[0][\"key_header\"] is None and \"authorization\" not in r[0][\"headers\"]" \
		"o[\"error\"].endswith(\"(OPENAI_API_KEY is not set)\")"
'

expect 'out of quota (429 insufficient_quota) is auth, not a rate limit: no retry' '
	serve openai_quota
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "len(r) == 1 and o[\"error_class\"] == \"auth\""
'

expect 'a context overflow: class context_length, exit 4, no retry' '
	serve openai_context
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 4 ]
	verify "len(r) == 1 and o[\"error_class\"] == \"context_length\" and o[\"http_status\"] == 400" \
		"\"maximum context length is 128000 tokens\" in o[\"error\"]"
'

expect 'a reply slower than --timeout is a timeout, retried' '
	serve openai_timeout
	chat --model openai:gpt-test --base-url $URL/v1 --timeout 1.5 hi
	[ "$(cat rc)" = 0 ]
	verify "len(r) == 2 and o[\"attempts\"] == 2 and o[\"text\"] == \"Hello there.\"" \
		"o[\"elapsed_ms\"] >= 1500"
	grep -q "warning: openai: Operation timed out after .* (timeout); retry 1 of 3" err.txt
	serve openai_timeout
	chat --model openai:gpt-test --base-url $URL/v1 --timeout 1.5 --retries 0 hi
	[ "$(cat rc)" = 3 ]
	verify "o[\"error_class\"] == \"timeout\" and o[\"http_status\"] is None"
'

expect 'a dropped and a cut connection are network errors, retried' '
	serve openai_dropped
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 0 ]
	verify "len(r) == 3 and o[\"attempts\"] == 3 and o[\"text\"] == \"Hello there.\""
	[ $(grep -c "^warning: openai: .*(broken); retry" err.txt) = 2 ]
	serve openai_dropped
	chat --model openai:gpt-test --base-url $URL/v1 --retries 0 hi
	[ "$(cat rc)" = 3 ]
	verify "o[\"error_class\"] == \"network\""
'

expect 'nobody listening: network, exit 3 after the retries' '
	serve openai_ok
	kill $SERVER && wait $SERVER 2>/dev/null || true
	chat --model openai:gpt-test --base-url $URL/v1 --retries 1 hi
	[ "$(cat rc)" = 3 ]
	verify "o[\"error_class\"] == \"network\" and o[\"attempts\"] == 2 and \"(connect)\" in o[\"error\"]"
'

expect 'Retry-After is honoured over a shorter --retry-delay' '
	serve openai_retry_after
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 0 ]
	verify "len(r) == 2 and r[1][\"t\"] - r[0][\"t\"] >= 0.95" "o[\"elapsed_ms\"] >= 950"
	grep -q "retry 1 of 3 in 1 s" err.txt
'

expect 'anthropic: x-api-key and anthropic-version sent, system top-level, 529 retried, usage with cache reads' '
	serve anthropic_ok
	chat --model anthropic:claude-test --base-url $URL --system "be brief" hello
	[ "$(cat rc)" = 0 ]
	verify "len(r) == 2 and o[\"attempts\"] == 2" \
		"r[1][\"path\"] == \"/v1/messages\" and r[1][\"key_header\"] == \"x-api-key\" and r[1][\"key_ok\"]" \
		"r[1][\"headers\"][\"anthropic-version\"] == \"2023-06-01\" and \"authorization\" not in r[1][\"headers\"]" \
		"r[1][\"body\"] == {\"model\": \"claude-test\", \"system\": \"be brief\", \"max_tokens\": 4096, \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}]}" \
		"o[\"text\"] == \"Hello there.\" and o[\"stop_reason\"] == \"end_turn\"" \
		"o[\"usage\"] == {\"input_tokens\": 100 + 2048, \"cached_input_tokens\": 2048, \"output_tokens\": 42}" \
		"o[\"provider_usage\"] == {\"input_tokens\": 100, \"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": 2048, \"output_tokens\": 42}"
	grep -q "warning: anthropic: HTTP 529: Overloaded; retry 1 of 3" err.txt
'

expect 'anthropic: ANTHROPIC_BASE_URL; a prompt too long is context_length, not retried' '
	serve anthropic_context
	ANTHROPIC_BASE_URL=$URL chat --model anthropic:claude-test --max-tokens 10 hello
	[ "$(cat rc)" = 4 ]
	verify "len(r) == 1 and r[0][\"body\"][\"max_tokens\"] == 10" \
		"o[\"error_class\"] == \"context_length\" and \"prompt is too long\" in o[\"error\"]"
'

expect 'cost from a prices file, by bare name or by spec' '
	serve openai_ok
	chat --model openai:gpt-test --base-url $URL/v1 --prices "$DATA/prices.json" hi
	[ "$(cat rc)" = 0 ]
	verify "approx(o[\"cost_usd\"], ((1234 - 1024) * 2.5 + 1024 * 1.25 + 56 * 10) / 1e6)"
	serve anthropic_ok
	chat --model anthropic:claude-test --base-url $URL --prices "$DATA/prices.json" hi
	verify "approx(o[\"cost_usd\"], (100 * 3 + 2048 * 0.3 + 42 * 15) / 1e6)"
	serve openai_ok
	chat --model openai:other --base-url $URL/v1 --prices "$DATA/prices.json" hi
	[ "$(cat rc)" = 0 ]
	verify "o[\"cost_usd\"] is None"
	grep -q "warning: prices .* have no entry for .openai:other." err.txt
'

expect 'bad usage exits 2 before any request' '
	serve openai_ok
	for args in "hi" "--model gpt-4o hi" "--model openai: hi" "--model openai:x" "--model openai:x --retries -1 hi" \
		"--model openai:x --temperature 3 hi" "--model openai:x --timeout 0 hi" \
		"--model openai:x --base-url ftp://x hi" "--model openai:x --prices /nonexistent hi" \
		"--model openai:x --response-format json-schema hi"; do
		set +e; "$MKB" chat $args >out.txt 2>err.txt; rc=$?; set -e
		[ $rc = 2 ] || { echo "$args: exit $rc"; cat err.txt; exit 1; }
		grep -q "^usage: mkb chat" err.txt || grep -q "prices" err.txt
	done
	verify "len(r) == 0"
'

expect 'a reply that echoes the key: redacted in the text, stop reason and provider usage' '
	serve openai_echo
	chat --model openai:gpt-test --base-url $URL/v1 hi
	[ "$(cat rc)" = 0 ]
	verify "o[\"text\"] == \"your key is [redacted]\"" "o[\"stop_reason\"] == \"stop [redacted]\"" \
		"o[\"provider_usage\"] == {\"prompt_tokens\": 1, \"completion_tokens\": 2, \"note\": \"[redacted]\"}"
	serve openai_echo
	"$MKB" chat --model openai:gpt-test --base-url $URL/v1 hi >reply.txt 2>err.txt
	cat reply.txt err.txt >>"$TMP/every-output.txt"
	[ "$(cat reply.txt)" = "your key is [redacted]" ]
'

expect 'the key never appears in any output, log or file a test left' '
	[ -s "$TMP/every-output.txt" ]
	# (not "! grep": an unreadable file would pass it)
	set +e; grep -rlF --exclude=log "$KEY" "$TMP"; rc=$?; set -e
	[ $rc = 1 ]
'

finish
