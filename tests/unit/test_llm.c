/* The model clients' pure parts: specs, request bodies, response parsing,
 * classification of failures, retry waits, cost, prices, redaction. The
 * network half is tests/scenario/llm.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm_flags.h"
#include "llm_provider.h"
#include "unit.h"
#include "util.h"

static void test_llm_model_parse(void)
{
	struct llm_model m;
	CHECK(llm_model_parse("openai:gpt-4o-mini", &m) == 0);
	CHECK(m.provider == LLM_OPENAI);
	CHECK_STR(m.name, "gpt-4o-mini");
	llm_model_release(&m);
	CHECK(m.name == NULL);
	/* Fine-tuned OpenAI models have colons in their names. */
	CHECK(llm_model_parse("openai:ft:gpt-4o:org::abc", &m) == 0);
	CHECK_STR(m.name, "ft:gpt-4o:org::abc");
	llm_model_release(&m);
	CHECK(llm_model_parse("anthropic:claude-sonnet-4-5", &m) == 0);
	CHECK(m.provider == LLM_ANTHROPIC);
	CHECK_STR(m.name, "claude-sonnet-4-5");
	CHECK_STR(llm_provider_name(m.provider), "anthropic");
	llm_model_release(&m);
	const char *bad[] = {"gpt-4o", "openai:", "google:gemini", "openaix:gpt", ":gpt", "openai:a b", "openai:a\tb", ""};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK(llm_model_parse(bad[i], &m) == -1);
		CHECK(m.name == NULL);
	}
}

static void conversation(struct llm_conversation *c, const char *system)
{
	llm_conversation_init(c);
	llm_conversation_set_system(c, system);
	llm_conversation_add(c, LLM_USER, "write a kernel");
	llm_conversation_add(c, LLM_ASSISTANT, "here: \"x\"\n");
	llm_conversation_add(c, LLM_USER, "faster");
}

static void test_llm_openai_request(void)
{
	struct llm_model m = {LLM_OPENAI, "gpt-test"};
	struct llm_conversation c;
	struct llm_decoding d = LLM_DECODING_INIT;
	const char *why = NULL;
	conversation(&c, "be brief");
	char *s = llm_openai_ops.request(&m, "http://127.0.0.1:8000/v1", &c, &d, &why);
	CHECK_STR(s, "{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
		  "{\"role\":\"user\",\"content\":\"write a kernel\"},"
		  "{\"role\":\"assistant\",\"content\":\"here: \\\"x\\\"\\n\"},"
		  "{\"role\":\"user\",\"content\":\"faster\"}]}");
	free(s);
	d.temperature = 0.2;
	d.top_p = 0.9;
	d.max_tokens = 100;
	llm_conversation_set_system(&c, NULL);
	s = llm_openai_ops.request(&m, "http://127.0.0.1:8000/v1", &c, &d, &why);
	CHECK(s && strstr(s, "\"messages\":[{\"role\":\"user\""));
	CHECK(s && strstr(s, ",\"temperature\":0.2,\"top_p\":0.9,\"max_tokens\":100}"));
	free(s);
	/* OpenAI itself wants max_completion_tokens (its reasoning models refuse max_tokens). */
	s = llm_openai_ops.request(&m, "https://api.openai.com/v1", &c, &d, &why);
	CHECK(s && strstr(s, "\"max_completion_tokens\":100}") && !strstr(s, "\"max_tokens\""));
	free(s);
	llm_conversation_add(&c, LLM_USER, "bad \xff byte");
	s = llm_openai_ops.request(&m, "http://x", &c, &d, &why);
	CHECK(s == NULL);
	CHECK_STR(why, "text that is not valid UTF-8");
	llm_conversation_release(&c);
	CHECK(c.n == 0 && c.items == NULL && c.system == NULL);
}

static void test_llm_anthropic_request(void)
{
	struct llm_model m = {LLM_ANTHROPIC, "claude-test"};
	struct llm_conversation c;
	struct llm_decoding d = LLM_DECODING_INIT;
	const char *why = NULL;
	conversation(&c, "be brief");
	char *s = llm_anthropic_ops.request(&m, "https://api.anthropic.com", &c, &d, &why);
	/* The system text is a field, not a turn; max_tokens is required. */
	CHECK_STR(s, "{\"model\":\"claude-test\",\"system\":\"be brief\",\"max_tokens\":4096,\"messages\":["
		  "{\"role\":\"user\",\"content\":\"write a kernel\"},"
		  "{\"role\":\"assistant\",\"content\":\"here: \\\"x\\\"\\n\"},"
		  "{\"role\":\"user\",\"content\":\"faster\"}]}");
	free(s);
	d.max_tokens = 7;
	d.temperature = 0;
	llm_conversation_set_system(&c, NULL);
	s = llm_anthropic_ops.request(&m, "https://api.anthropic.com", &c, &d, &why);
	CHECK(s && !strstr(s, "system") && strstr(s, "\"max_tokens\":7,") && strstr(s, "\"temperature\":0.0}"));
	free(s);
	llm_conversation_set_system(&c, "\xc3(");
	CHECK(llm_anthropic_ops.request(&m, "https://api.anthropic.com", &c, &d, &why) == NULL);
	llm_conversation_release(&c);
}

/* --response-format: response_format only on a call that carries a schema,
 * in the form the format names; recorded and read back with the decoding. */
static void test_llm_reply_format(void)
{
	struct llm_model m = {LLM_OPENAI, "gpt-test"}, a = {LLM_ANTHROPIC, "claude-test"};
	struct llm_conversation c;
	struct llm_decoding d = LLM_DECODING_INIT;
	const char *why = NULL;
	conversation(&c, NULL);
	d.format = LLM_REPLY_JSON_OBJECT;
	char *s = llm_openai_ops.request(&m, "http://x", &c, &d, &why); /* no schema: a free-text call */
	CHECK(s && !strstr(s, "response_format"));
	free(s);
	d.schema = "{\"type\": \"object\"}";
	s = llm_openai_ops.request(&m, "http://x", &c, &d, &why);
	CHECK(s && strstr(s, "],\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":\"object\"}}}"));
	free(s);
	d.format = LLM_REPLY_JSON_SCHEMA;
	d.schema_name = "terminus2_reply";
	s = llm_openai_ops.request(&m, "http://x", &c, &d, &why);
	CHECK(s && strstr(s, ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
			  "\"terminus2_reply\",\"strict\":true,\"schema\":{\"type\":\"object\"}}}}"));
	free(s);
	d.schema = "[1]";
	CHECK(llm_openai_ops.request(&m, "http://x", &c, &d, &why) == NULL);
	CHECK_STR(why, "a reply schema that is not a JSON object");
	d.schema = "{}";
	CHECK(llm_anthropic_ops.request(&a, "http://x", &c, &d, &why) == NULL);
	CHECK(why && strstr(why, "openai: models only"));
	llm_conversation_release(&c);

	/* Recorded only when set, so trials keyed before the option keep their keys. */
	struct llm_decoding e = LLM_DECODING_INIT, back;
	e.temperature = 0.7;
	json_t *j = llm_decoding_json(&e);
	char *t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(t, "{\"temperature\":0.69999999999999996}");
	free(t);
	json_decref(j);
	e.format = LLM_REPLY_JSON_OBJECT;
	e.max_tokens = 512;
	j = llm_decoding_json(&e);
	CHECK_STR(json_string_value(json_object_get(j, "response_format")), "json-object");
	CHECK(llm_decoding_from_json(j, &back) == 0);
	CHECK(back.format == LLM_REPLY_JSON_OBJECT && back.max_tokens == 512 && back.temperature == 0.7);
	CHECK(back.top_p < 0 && back.schema == NULL);
	json_object_set_new(j, "response_format", json_string("yaml"));
	CHECK(llm_decoding_from_json(j, &back) == -1);
	json_decref(j);
	CHECK_STR(llm_reply_format_name(LLM_REPLY_JSON_SCHEMA), "json-schema");
}

static void test_llm_headers(void)
{
	char *h[LLM_MAX_HEADERS];
	size_t n = llm_openai_ops.headers("sk-1", h);
	CHECK(n == 2);
	CHECK_STR(h[0], "Content-Type: application/json");
	CHECK_STR(h[1], "Authorization: Bearer sk-1");
	for (size_t i = 0; i < n; i++)
		free(h[i]);
	n = llm_openai_ops.headers(NULL, h);
	CHECK(n == 1);
	free(h[0]);
	n = llm_anthropic_ops.headers("sk-ant", h);
	CHECK(n == 3);
	CHECK_STR(h[1], "anthropic-version: 2023-06-01");
	CHECK_STR(h[2], "x-api-key: sk-ant");
	for (size_t i = 0; i < n; i++)
		free(h[i]);
}

/* Parse body with ops into r (released first); returns parse's result. */
static int parse(const struct llm_provider_ops *ops, const char *body, struct llm_response *r, char **why)
{
	llm_response_release(r);
	free(*why);
	*why = NULL;
	return ops->parse(body, r, why);
}

static void test_llm_parse_openai(void)
{
	struct llm_response r;
	char *why = NULL;
	llm_response_init(&r);
	CHECK(parse(&llm_openai_ops, "{\"id\":\"c\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
		    "\"content\":\"hi \\u00e9\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":1234,"
		    "\"completion_tokens\":56,\"total_tokens\":1290,\"prompt_tokens_details\":{\"cached_tokens\":1024}}}",
		    &r, &why) == 0);
	CHECK_STR(r.text, "hi \xc3\xa9");
	CHECK_STR(r.stop_reason, "length");
	CHECK(r.usage.input_tokens == 1234 && r.usage.cached_input_tokens == 1024 && r.usage.output_tokens == 56);
	CHECK_STR(r.usage_json, "{\"prompt_tokens\":1234,\"completion_tokens\":56,\"total_tokens\":1290,"
		  "\"prompt_tokens_details\":{\"cached_tokens\":1024}}");
	/* No cache details: nothing cached; no usage at all: unknown. */
	CHECK(parse(&llm_openai_ops, "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],"
		    "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"prompt_tokens_details\":null}}", &r, &why) == 0);
	CHECK(r.usage.input_tokens == 5 && r.usage.cached_input_tokens == 0 && r.usage.output_tokens == 1);
	CHECK(parse(&llm_openai_ops, "{\"choices\":[{\"message\":{\"content\":\"x\"}}]}", &r, &why) == 0);
	CHECK(r.usage.input_tokens == -1 && r.usage.cached_input_tokens == -1 && r.usage.output_tokens == -1);
	CHECK(r.usage_json == NULL);
	CHECK_STR(r.stop_reason, "");
	/* A refusal has no content; its text is the refusal. */
	CHECK(parse(&llm_openai_ops, "{\"choices\":[{\"message\":{\"content\":null,\"refusal\":\"no\"},"
		    "\"finish_reason\":\"stop\"}]}", &r, &why) == 0);
	CHECK_STR(r.text, "no");
	CHECK(parse(&llm_openai_ops, "{\"choices\":[{\"message\":{\"tool_calls\":[]}}]}", &r, &why) == 0);
	CHECK_STR(r.text, "");

	CHECK(parse(&llm_openai_ops, "{\"choices\":[{\"message\":{\"role\":\"assi", &r, &why) == -1);
	CHECK(why && !strncmp(why, "not JSON", 8));
	CHECK(parse(&llm_openai_ops, "{\"choices\":[]}", &r, &why) == -1);
	CHECK_STR(why, "no choices[0].message");
	CHECK(parse(&llm_openai_ops, "{\"error\":{\"message\":\"upstream died\"}}", &r, &why) == -1);
	CHECK_STR(why, "no choices[0].message; error: upstream died");
	CHECK(parse(&llm_openai_ops, "{\"choices\":[{\"message\":{\"content\":[1]}}]}", &r, &why) == -1);
	CHECK(parse(&llm_openai_ops, "", &r, &why) == -1);
	CHECK(r.text == NULL);
	free(why);
	llm_response_release(&r);
}

static void test_llm_parse_anthropic(void)
{
	struct llm_response r;
	char *why = NULL;
	llm_response_init(&r);
	CHECK(parse(&llm_anthropic_ops, "{\"id\":\"msg\",\"type\":\"message\",\"content\":["
		    "{\"type\":\"thinking\",\"thinking\":\"hmm\"},{\"type\":\"text\",\"text\":\"Hello\"},"
		    "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}},{\"type\":\"text\",\"text\":\" there\"}],"
		    "\"stop_reason\":\"max_tokens\",\"usage\":{\"input_tokens\":100,\"cache_creation_input_tokens\":10,"
		    "\"cache_read_input_tokens\":2048,\"output_tokens\":42}}", &r, &why) == 0);
	CHECK_STR(r.text, "Hello there");
	CHECK_STR(r.stop_reason, "max_tokens");
	/* Every prompt token counts as input; cache reads are the cached part. */
	CHECK(r.usage.input_tokens == 100 + 10 + 2048);
	CHECK(r.usage.cached_input_tokens == 2048);
	CHECK(r.usage.output_tokens == 42);
	CHECK(r.usage_json && strstr(r.usage_json, "\"cache_read_input_tokens\":2048"));
	CHECK(parse(&llm_anthropic_ops, "{\"content\":[],\"stop_reason\":\"end_turn\","
		    "\"usage\":{\"input_tokens\":7,\"output_tokens\":0}}", &r, &why) == 0);
	CHECK_STR(r.text, "");
	CHECK(r.usage.input_tokens == 7 && r.usage.cached_input_tokens == 0 && r.usage.output_tokens == 0);
	CHECK(parse(&llm_anthropic_ops, "{\"content\":[{\"type\":\"text\"}]}", &r, &why) == -1);
	CHECK_STR(why, "content[0] is a text block without text");
	CHECK(r.text == NULL);
	CHECK(parse(&llm_anthropic_ops, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
		    "\"message\":\"Overloaded\"}}", &r, &why) == -1);
	CHECK_STR(why, "no content; error: Overloaded");
	CHECK(parse(&llm_anthropic_ops, "[]", &r, &why) == -1);
	free(why);
	llm_response_release(&r);
}

/* The body of reply n of a scenario in tests/data/llm (what server.py sends). */
static char *canned_body(const char *scenario, size_t n)
{
	char *path = xstrfmt("%s/tests/data/llm/%s.json", MKB_SOURCE_ROOT, scenario);
	json_t *root = json_load_file(path, 0, NULL);
	free(path);
	json_t *body = json_object_get(json_array_get(json_object_get(root, "replies"), n), "body");
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(root);
	return s;
}

/* The scenario tests' replies, parsed here too: the data and the parsers agree. */
static void test_llm_parse_canned(void)
{
	struct llm_response r;
	char *why = NULL, *body;
	llm_response_init(&r);
	body = canned_body("openai_ok", 0);
	CHECK(body && parse(&llm_openai_ops, body, &r, &why) == 0);
	CHECK_STR(r.text, "Hello there.");
	CHECK(r.usage.input_tokens == 1234 && r.usage.cached_input_tokens == 1024 && r.usage.output_tokens == 56);
	free(body);
	body = canned_body("anthropic_ok", 1);
	CHECK(body && parse(&llm_anthropic_ops, body, &r, &why) == 0);
	CHECK_STR(r.text, "Hello there.");
	CHECK_STR(r.stop_reason, "end_turn");
	CHECK(r.usage.input_tokens == 100 + 2048 && r.usage.cached_input_tokens == 2048 && r.usage.output_tokens == 42);
	free(body);
	body = canned_body("openai_no_choices", 0);
	CHECK(body && parse(&llm_openai_ops, body, &r, &why) == -1);
	free(body);
	char *msg = NULL;
	body = canned_body("openai_context", 0);
	CHECK(body && llm_classify(&llm_openai_ops, 400, body, &msg) == LLM_ERR_CONTEXT_LENGTH);
	free(msg);
	free(body);
	body = canned_body("anthropic_context", 0);
	CHECK(body && llm_classify(&llm_anthropic_ops, 400, body, &msg) == LLM_ERR_CONTEXT_LENGTH);
	free(msg);
	free(body);
	free(why);
	llm_response_release(&r);
}

static void test_llm_classify(void)
{
	static const struct {
		const struct llm_provider_ops *ops;
		long status;
		const char *body;
		enum llm_error want;
		const char *message;
	} cases[] = {
		{&llm_openai_ops, 401, "{\"error\":{\"message\":\"Incorrect API key\",\"code\":\"invalid_api_key\"}}",
		 LLM_ERR_AUTH, "HTTP 401: Incorrect API key"},
		{&llm_anthropic_ops, 403, "{\"type\":\"error\",\"error\":{\"type\":\"permission_error\",\"message\":\"no\"}}",
		 LLM_ERR_AUTH, "HTTP 403: no"},
		{&llm_openai_ops, 429, "{\"error\":{\"message\":\"Rate limit\",\"code\":\"rate_limit_exceeded\"}}",
		 LLM_ERR_RATE_LIMIT, "HTTP 429: Rate limit"},
		{&llm_openai_ops, 429, "{\"error\":{\"message\":\"quota\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}",
		 LLM_ERR_AUTH, NULL},
		{&llm_anthropic_ops, 429, "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow\"}}",
		 LLM_ERR_RATE_LIMIT, NULL},
		{&llm_openai_ops, 400, "{\"error\":{\"message\":\"too long\",\"type\":\"invalid_request_error\","
		 "\"code\":\"context_length_exceeded\"}}", LLM_ERR_CONTEXT_LENGTH, NULL},
		/* vLLM: the phrase, no code */
		{&llm_openai_ops, 400, "{\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 "
		 "tokens. However, you requested 5000 tokens.\",\"type\":\"BadRequestError\",\"code\":400}",
		 LLM_ERR_CONTEXT_LENGTH, "HTTP 400: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."},
		{&llm_openai_ops, 400, "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available context "
		 "size, try increasing it\",\"type\":\"exceed_context_size_error\"}}", LLM_ERR_CONTEXT_LENGTH, NULL},
		{&llm_openai_ops, 400, "{\"error\":{\"message\":\"Invalid value for temperature\",\"type\":\"invalid_request_error\"}}",
		 LLM_ERR_BAD_REQUEST, "HTTP 400: Invalid value for temperature"},
		/* Anthropic's words are Anthropic's: not recognised from another provider. */
		{&llm_openai_ops, 400, "{\"error\":{\"message\":\"prompt is too long\"}}", LLM_ERR_BAD_REQUEST, NULL},
		{&llm_anthropic_ops, 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
		 "\"message\":\"prompt is too long: 215000 tokens > 200000 maximum\"}}", LLM_ERR_CONTEXT_LENGTH, NULL},
		{&llm_anthropic_ops, 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
		 "\"message\":\"input length and `max_tokens` exceed context limit: 150000 + 64000 > 200000\"}}",
		 LLM_ERR_CONTEXT_LENGTH, NULL},
		{&llm_anthropic_ops, 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
		 "\"message\":\"messages: roles must alternate\"}}", LLM_ERR_BAD_REQUEST, NULL},
		{&llm_anthropic_ops, 413, "{\"type\":\"error\",\"error\":{\"type\":\"request_too_large\",\"message\":\"big\"}}",
		 LLM_ERR_CONTEXT_LENGTH, NULL},
		{&llm_openai_ops, 404, "{\"detail\":\"Not Found\"}", LLM_ERR_BAD_REQUEST, "HTTP 404: Not Found"},
		{&llm_openai_ops, 408, "", LLM_ERR_TIMEOUT, "HTTP 408"},
		{&llm_openai_ops, 409, "", LLM_ERR_SERVER, NULL},
		{&llm_openai_ops, 500, "{\"error\":\"boom\"}", LLM_ERR_SERVER, "HTTP 500: boom"},
		{&llm_openai_ops, 502, "<html>\n<h1>502 Bad Gateway</h1>\n</html>", LLM_ERR_SERVER,
		 "HTTP 502: <html> <h1>502 Bad Gateway</h1> </html>"},
		{&llm_anthropic_ops, 529, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
		 LLM_ERR_SERVER, "HTTP 529: Overloaded"},
		{&llm_openai_ops, 302, "", LLM_ERR_BAD_REQUEST, NULL},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *msg = NULL;
		enum llm_error e = llm_classify(cases[i].ops, cases[i].status, cases[i].body, &msg);
		if (e != cases[i].want)
			fprintf(stderr, "  case %zu: %s, want %s\n", i, llm_error_name(e), llm_error_name(cases[i].want));
		CHECK(e == cases[i].want);
		CHECK(msg != NULL);
		if (cases[i].message)
			CHECK_STR(msg, cases[i].message);
		free(msg);
	}
	/* A long message is cut, and stays valid UTF-8 where it was cut. */
	char body[2000] = "{\"error\":{\"message\":\"";
	for (size_t i = strlen(body); i < 1000; i += 2)
		memcpy(body + i, "\xc3\xa9", 2);
	memcpy(body + 1000, "\"}}", 4);
	char *msg = NULL;
	CHECK(llm_classify(&llm_openai_ops, 500, body, &msg) == LLM_ERR_SERVER);
	CHECK(msg && strlen(msg) <= 320 && !strcmp(msg + strlen(msg) - 3, "..."));
	char *copy = xstrdup(msg);
	utf8_sanitize(copy);
	CHECK_STR(copy, msg);
	free(copy);
	free(msg);
}

static void test_llm_error_classes(void)
{
	CHECK(!llm_error_retryable(LLM_OK));
	CHECK(!llm_error_retryable(LLM_ERR_AUTH));
	CHECK(!llm_error_retryable(LLM_ERR_CONTEXT_LENGTH));
	CHECK(!llm_error_retryable(LLM_ERR_MALFORMED));
	CHECK(!llm_error_retryable(LLM_ERR_BAD_REQUEST));
	CHECK(llm_error_retryable(LLM_ERR_RATE_LIMIT));
	CHECK(llm_error_retryable(LLM_ERR_SERVER));
	CHECK(llm_error_retryable(LLM_ERR_NETWORK));
	CHECK(llm_error_retryable(LLM_ERR_TIMEOUT));
	CHECK_STR(llm_error_name(LLM_ERR_CONTEXT_LENGTH), "context_length");
	CHECK_STR(llm_error_name(LLM_ERR_BAD_REQUEST), "bad_request");
	CHECK(http_fail_retryable(HTTP_FAIL_TIMEOUT) && http_fail_retryable(HTTP_FAIL_CONNECT) &&
	      http_fail_retryable(HTTP_FAIL_BROKEN));
	CHECK(!http_fail_retryable(HTTP_FAIL_TOOBIG) && !http_fail_retryable(HTTP_FAIL_OTHER));
}

static void test_llm_retry_wait(void)
{
	struct llm_options o;
	llm_options_init(&o);
	CHECK(o.retries == 3 && o.retry_delay_s == 30); /* PROTOCOL.md "The attempt" */
	CHECK(llm_retry_wait(&o, -1) == 30);
	CHECK(llm_retry_wait(&o, 5) == 30);   /* the longer of the two */
	CHECK(llm_retry_wait(&o, 60) == 60);
	CHECK(llm_retry_wait(&o, 1e6) == LLM_RETRY_AFTER_MAX_S); /* capped */
	o.retry_delay_s = 0.05;
	o.retry_after_max_s = 2;
	CHECK(llm_retry_wait(&o, 1) == 1);
	CHECK(llm_retry_wait(&o, 3) == 2);
	CHECK(llm_retry_wait(&o, -1) == 0.05);
}

static void test_llm_cost(void)
{
	const struct llm_price p = {2.5, 1.25, 10};
	struct llm_usage u = {1234, 1024, 56};
	CHECK(fabs(llm_cost_usd(&p, &u) - (210 * 2.5 + 1024 * 1.25 + 56 * 10) / 1e6) < 1e-15);
	u = (struct llm_usage){1000000, 0, 1000000};
	CHECK(llm_cost_usd(&p, &u) == 12.5);
	u = (struct llm_usage){0, 0, 0};
	CHECK(llm_cost_usd(&p, &u) == 0);
	u = (struct llm_usage){10, 20, 0}; /* more cached than input: all of it cached */
	CHECK(fabs(llm_cost_usd(&p, &u) - 10 * 1.25 / 1e6) < 1e-18);
	u = (struct llm_usage){10, 0, -1};
	CHECK(llm_cost_usd(&p, &u) == -1);
	CHECK(llm_cost_usd(NULL, &u) == -1);
}

static void test_llm_price_load(void)
{
	char *dir = unit_tmpdir();
	unit_write(dir, "p.json", "{\"gpt-x\": {\"input_per_mtok\": 2, \"output_per_mtok\": 8},"
		   "\"openai:gpt-y\": {\"input_per_mtok\": 1, \"cached_input_per_mtok\": 0.5, \"output_per_mtok\": 4},"
		   "\"gpt-z\": {\"input_per_mtok\": \"cheap\", \"output_per_mtok\": 1},"
		   "\"gpt-w\": {\"input_per_mtok\": 1, \"cached_input_per_mtok\": -1, \"output_per_mtok\": 1}}");
	unit_write(dir, "bad.json", "[1, 2]");
	char *path = xstrfmt("%s/p.json", dir), *bad = xstrfmt("%s/bad.json", dir);
	struct llm_model m = {LLM_OPENAI, "gpt-x"};
	struct llm_price pr;
	CHECK(llm_price_load(path, "openai:gpt-x", &m, &pr) == 0);
	CHECK(pr.input_per_mtok == 2 && pr.cached_input_per_mtok == 2 && pr.output_per_mtok == 8);
	m.name = "gpt-y";
	CHECK(llm_price_load(path, "openai:gpt-y", &m, &pr) == 0);
	CHECK(pr.input_per_mtok == 1 && pr.cached_input_per_mtok == 0.5 && pr.output_per_mtok == 4);
	m.name = "gpt-q";
	CHECK(llm_price_load(path, "openai:gpt-q", &m, &pr) == 1);
	m.name = "gpt-z";
	CHECK(llm_price_load(path, "openai:gpt-z", &m, &pr) == -1);
	m.name = "gpt-w";
	CHECK(llm_price_load(path, "openai:gpt-w", &m, &pr) == -1);
	CHECK(llm_price_load(bad, "openai:gpt-w", &m, &pr) == -1);
	CHECK(llm_price_load("/nonexistent/p.json", "openai:gpt-w", &m, &pr) == -1);
	free(path);
	free(bad);
	unit_rmtree(dir);
	free(dir);
}

static void test_llm_redact(void)
{
	char *s = llm_redact(xstrdup("key sk-1 and sk-1sk-1."), "sk-1");
	CHECK_STR(s, "key [redacted] and [redacted][redacted].");
	char *same = llm_redact(s, "absent");
	CHECK(same == s);
	CHECK(llm_redact(s, NULL) == s && llm_redact(s, "") == s);
	free(s);
	CHECK(llm_redact(NULL, "x") == NULL);
}

static void test_llm_client_url(void)
{
	struct llm_options o;
	struct llm_client c;
	llm_options_init(&o);
	o.base_url = "http://127.0.0.1:9/v1//";
	CHECK(llm_client_init(&c, "openai:m", &o) == 0);
	CHECK_STR(c.url, "http://127.0.0.1:9/v1/chat/completions");
	llm_client_release(&c);
	o.base_url = "https://proxy.example/anthropic";
	CHECK(llm_client_init(&c, "anthropic:m", &o) == 0);
	CHECK_STR(c.url, "https://proxy.example/anthropic/v1/messages");
	llm_client_release(&c);
	o.base_url = "file:///etc/passwd";
	CHECK(llm_client_init(&c, "openai:m", &o) == -1);
	o.base_url = "http://x";
	CHECK(llm_client_init(&c, "nope", &o) == -1);
}

/* Port 1 of loopback: nothing listens, a connection is refused at once. */
static void test_llm_deadline(void)
{
	struct llm_options o;
	struct llm_client c;
	struct llm_conversation conv = LLM_CONVERSATION_INIT;
	struct llm_decoding d = LLM_DECODING_INIT;
	struct llm_response r;
	llm_options_init(&o);
	o.base_url = "http://127.0.0.1:1/v1";
	llm_conversation_add(&conv, LLM_USER, "hi");
	llm_response_init(&r);

	o.deadline_ms = now_ms() - 1; /* passed: nothing sent */
	CHECK(llm_client_init(&c, "openai:m", &o) == 0);
	CHECK(llm_chat(&c, &conv, &d, &r) == -1);
	CHECK(r.error == LLM_ERR_TIMEOUT && r.attempts == 0);
	CHECK_STR(r.error_message, "the deadline passed before the first request");
	llm_client_release(&c);

	/* A 30 s wait for the retry would pass the deadline: not waited. */
	o.deadline_ms = now_ms() + 2000;
	CHECK(llm_client_init(&c, "openai:m", &o) == 0);
	double t = now_ms();
	CHECK(llm_chat(&c, &conv, &d, &r) == -1);
	CHECK(now_ms() - t < 1500);
	CHECK(r.error == LLM_ERR_NETWORK && r.attempts == 1);
	CHECK(r.error_message && strstr(r.error_message, "(connect)"));
	llm_client_release(&c);
	llm_response_release(&r);
	llm_conversation_release(&conv);
}

const struct unit_test llm_tests[] = {
	{"llm_model_parse", test_llm_model_parse},
	{"llm_openai_request", test_llm_openai_request},
	{"llm_anthropic_request", test_llm_anthropic_request},
	{"llm_reply_format", test_llm_reply_format},
	{"llm_headers", test_llm_headers},
	{"llm_parse_openai", test_llm_parse_openai},
	{"llm_parse_anthropic", test_llm_parse_anthropic},
	{"llm_parse_canned", test_llm_parse_canned},
	{"llm_classify", test_llm_classify},
	{"llm_error_classes", test_llm_error_classes},
	{"llm_retry_wait", test_llm_retry_wait},
	{"llm_cost", test_llm_cost},
	{"llm_price_load", test_llm_price_load},
	{"llm_redact", test_llm_redact},
	{"llm_client_url", test_llm_client_url},
	{"llm_deadline", test_llm_deadline},
};
const size_t llm_ntests = ARRAY_SIZE(llm_tests);
