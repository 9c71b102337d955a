/* The Anthropic Messages API: POST {base}/v1/messages with "x-api-key:
 * $ANTHROPIC_API_KEY" and an anthropic-version header; the system text is a
 * top-level field, not a turn. */
#include <string.h>

#include "llm_provider.h"
#include "util.h"

/* The API version this client's bodies follow (it changes what a body means). */
#define ANTHROPIC_VERSION "2023-06-01"

static char *anthropic_request(const struct llm_model *m, const char *base_url,
			       const struct llm_conversation *c, const struct llm_decoding *d,
			       const char **why)
{
	(void)base_url;
	if (d->format != LLM_REPLY_TEXT && d->schema) {
		*why = "a constrained reply format (--response-format) is for openai: models only";
		return NULL;
	}
	json_t *o = json_object();
	json_t *msgs = llm_json_messages(c, 0);
	if (!msgs || llm_json_set_string(o, "model", m->name) < 0 ||
	    (c->system && llm_json_set_string(o, "system", c->system) < 0)) {
		json_decref(msgs);
		json_decref(o);
		*why = "text that is not valid UTF-8";
		return NULL;
	}
	int rc = json_object_set_new(o, "max_tokens",
				     json_integer(d->max_tokens > 0 ? d->max_tokens : LLM_ANTHROPIC_MAX_TOKENS));
	rc |= json_object_set_new(o, "messages", msgs);
	if (d->temperature >= 0)
		rc |= json_object_set_new(o, "temperature", json_real(d->temperature));
	if (d->top_p >= 0)
		rc |= json_object_set_new(o, "top_p", json_real(d->top_p));
	return llm_json_finish(o, rc, why);
}

static size_t anthropic_headers(const char *key, char *lines[LLM_MAX_HEADERS])
{
	size_t n = 0;
	lines[n++] = xstrdup("Content-Type: application/json");
	lines[n++] = xstrdup("anthropic-version: " ANTHROPIC_VERSION);
	if (key)
		lines[n++] = xstrfmt("x-api-key: %s", key);
	return n;
}

static int anthropic_parse(const char *body, struct llm_response *r, char **why)
{
	json_error_t jerr;
	json_t *root = json_loads(body, 0, &jerr);
	if (!root) {
		*why = xstrfmt("not JSON (%s)", jerr.text);
		return -1;
	}
	int rc = -1;
	json_t *content = json_object_get(root, "content");
	if (!json_is_array(content)) {
		const char *e = llm_json_str(json_object_get(root, "error"), "message");
		*why = e ? xstrfmt("no content; error: %.300s", e) : xstrdup("no content");
		goto out;
	}
	/* The reply is its text blocks in order; thinking and tool blocks are not text. */
	size_t len = 0, i;
	json_t *block;
	json_array_foreach(content, i, block) {
		const char *t = llm_json_str(block, "type");
		if (t && !strcmp(t, "text")) {
			const char *s = llm_json_str(block, "text");
			if (!s) {
				*why = xstrfmt("content[%zu] is a text block without text", i);
				goto out;
			}
			len += strlen(s);
		}
	}
	char *text = xmalloc(len + 1), *p = text;
	json_array_foreach(content, i, block) {
		const char *t = llm_json_str(block, "type");
		if (t && !strcmp(t, "text")) {
			size_t n = strlen(llm_json_str(block, "text"));
			memcpy(p, llm_json_str(block, "text"), n);
			p += n;
		}
	}
	*p = '\0';
	r->text = text;
	const char *stop = llm_json_str(root, "stop_reason");
	r->stop_reason = xstrdup(stop ? stop : "");
	json_t *usage = json_object_get(root, "usage");
	long in = llm_json_count(usage, "input_tokens");
	if (in >= 0) {
		/* Anthropic's input_tokens leaves out the cache's reads and writes;
		 * ours counts every prompt token (llm.h). Absent: no cache used. */
		long read = llm_json_count(usage, "cache_read_input_tokens");
		long write = llm_json_count(usage, "cache_creation_input_tokens");
		read = read < 0 ? 0 : read;
		write = write < 0 ? 0 : write;
		r->usage.input_tokens = in + read + write;
		r->usage.cached_input_tokens = read;
	}
	r->usage.output_tokens = llm_json_count(usage, "output_tokens");
	if (json_is_object(usage))
		r->usage_json = json_dumps(usage, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = 0;
out:
	json_decref(root);
	return rc;
}

static int anthropic_context_overflow(long status, const char *type, const char *code, const char *message)
{
	(void)code;
	if (status != 400 || !type || strcmp(type, "invalid_request_error") || !message)
		return 0;
	/* "prompt is too long: 215000 tokens > 200000 maximum"; "input length
	 * and `max_tokens` exceed context limit: 150000 + 64000 > 200000". */
	return strstr(message, "prompt is too long") || strstr(message, "exceed context limit");
}

const struct llm_provider_ops llm_anthropic_ops = {
	.id = LLM_ANTHROPIC,
	.name = "anthropic",
	.key_env = "ANTHROPIC_API_KEY",
	.base_env = "ANTHROPIC_BASE_URL",
	.default_base = "https://api.anthropic.com",
	.path = "/v1/messages",
	.request = anthropic_request,
	.headers = anthropic_headers,
	.parse = anthropic_parse,
	.context_overflow = anthropic_context_overflow,
};
