/* The OpenAI chat-completions API, and every server that speaks it (vLLM,
 * SGLang, llama.cpp, OpenRouter, ...): POST {base}/chat/completions with
 * "Authorization: Bearer $OPENAI_API_KEY". */
#include <string.h>

#include "llm_provider.h"
#include "util.h"

/* The response_format of a constrained call (llm.h's enum says which
 * servers read which), or NULL when d->schema is not a JSON object. */
static json_t *response_format(const struct llm_decoding *d)
{
	json_t *schema = json_loads(d->schema, 0, NULL);
	if (!json_is_object(schema)) {
		json_decref(schema);
		return NULL;
	}
	if (d->format == LLM_REPLY_JSON_OBJECT)
		return json_pack("{s:s, s:o}", "type", "json_object", "schema", schema);
	/* strict: OpenAI then decodes to the schema exactly (it must require
	 * every property and forbid others); without it, only tries to. */
	return json_pack("{s:s, s:{s:s, s:b, s:o}}", "type", "json_schema", "json_schema", "name",
			 d->schema_name ? d->schema_name : "reply", "strict", 1, "schema", schema);
}

static char *openai_request(const struct llm_model *m, const char *base_url,
			    const struct llm_conversation *c, const struct llm_decoding *d,
			    const char **why)
{
	json_t *o = json_object();
	json_t *msgs = llm_json_messages(c, 1);
	if (!msgs || llm_json_set_string(o, "model", m->name) < 0) {
		json_decref(msgs);
		json_decref(o);
		*why = "text that is not valid UTF-8";
		return NULL;
	}
	int rc = json_object_set_new(o, "messages", msgs);
	if (d->temperature >= 0)
		rc |= json_object_set_new(o, "temperature", json_real(d->temperature));
	if (d->top_p >= 0)
		rc |= json_object_set_new(o, "top_p", json_real(d->top_p));
	/* OpenAI's own reasoning models refuse max_tokens and want
	 * max_completion_tokens, which many compatible servers do not know. */
	if (d->max_tokens > 0)
		rc |= json_object_set_new(o, strstr(base_url, "://api.openai.com") ? "max_completion_tokens"
						: "max_tokens", json_integer(d->max_tokens));
	if (d->format != LLM_REPLY_TEXT && d->schema) {
		json_t *rf = response_format(d);
		if (!rf) {
			json_decref(o);
			*why = "a reply schema that is not a JSON object";
			return NULL;
		}
		rc |= json_object_set_new(o, "response_format", rf);
	}
	return llm_json_finish(o, rc, why);
}

static size_t openai_headers(const char *key, char *lines[LLM_MAX_HEADERS])
{
	size_t n = 0;
	lines[n++] = xstrdup("Content-Type: application/json");
	if (key)
		lines[n++] = xstrfmt("Authorization: Bearer %s", key);
	return n;
}

static int openai_parse(const char *body, struct llm_response *r, char **why)
{
	json_error_t jerr;
	json_t *root = json_loads(body, 0, &jerr);
	if (!root) {
		*why = xstrfmt("not JSON (%s)", jerr.text);
		return -1;
	}
	int rc = -1;
	json_t *msg = json_object_get(json_array_get(json_object_get(root, "choices"), 0), "message");
	if (!json_is_object(msg)) {
		const char *e = llm_json_str(json_object_get(root, "error"), "message");
		*why = e ? xstrfmt("no choices[0].message; error: %.300s", e) : xstrdup("no choices[0].message");
		goto out;
	}
	json_t *content = json_object_get(msg, "content");
	if (content && !json_is_string(content) && !json_is_null(content)) {
		*why = xstrdup("choices[0].message.content is not a string");
		goto out;
	}
	/* No content: a refusal says why in its own field. */
	const char *text = json_is_string(content) ? json_string_value(content) : llm_json_str(msg, "refusal");
	r->text = xstrdup(text ? text : "");
	const char *stop = llm_json_str(json_array_get(json_object_get(root, "choices"), 0), "finish_reason");
	r->stop_reason = xstrdup(stop ? stop : "");
	json_t *usage = json_object_get(root, "usage");
	if (json_is_object(usage)) {
		r->usage.input_tokens = llm_json_count(usage, "prompt_tokens");
		r->usage.output_tokens = llm_json_count(usage, "completion_tokens");
		long cached = llm_json_count(json_object_get(usage, "prompt_tokens_details"), "cached_tokens");
		/* A server without a prompt cache reports no cached tokens at all. */
		r->usage.cached_input_tokens = cached < 0 && r->usage.input_tokens >= 0 ? 0 : cached;
		r->usage_json = json_dumps(usage, JSON_COMPACT | JSON_PRESERVE_ORDER);
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

static int openai_context_overflow(long status, const char *type, const char *code, const char *message)
{
	(void)status;
	static const char *const phrases[] = {
		"context_length_exceeded",              /* OpenAI's code, in some servers' text */
		"maximum context length",               /* OpenAI, vLLM */
		"exceeds the available context size",   /* llama.cpp */
	};
	if ((code && !strcmp(code, "context_length_exceeded")) ||
	    (type && !strcmp(type, "exceed_context_size_error")))
		return 1;
	for (size_t i = 0; message && i < ARRAY_SIZE(phrases); i++)
		if (strstr(message, phrases[i]))
			return 1;
	return 0;
}

const struct llm_provider_ops llm_openai_ops = {
	.id = LLM_OPENAI,
	.name = "openai",
	.key_env = "OPENAI_API_KEY",
	.base_env = "OPENAI_BASE_URL",
	.default_base = "https://api.openai.com/v1",
	.path = "/chat/completions",
	.request = openai_request,
	.headers = openai_headers,
	.parse = openai_parse,
	.context_overflow = openai_context_overflow,
};
