/* What the model providers share: specs, conversations, the retry loop,
 * classification of failures by status, usage and cost. The providers'
 * differences are in llm_openai.c and llm_anthropic.c. */
#include "llm.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm_provider.h"
#include "mkb_limits.h"
#include "util.h"

int llm_error_retryable(enum llm_error e)
{
	return e == LLM_ERR_RATE_LIMIT || e == LLM_ERR_SERVER || e == LLM_ERR_NETWORK || e == LLM_ERR_TIMEOUT;
}

const char *llm_error_name(enum llm_error e)
{
	switch (e) {
	case LLM_OK: return "ok";
	case LLM_ERR_AUTH: return "auth";
	case LLM_ERR_CONTEXT_LENGTH: return "context_length";
	case LLM_ERR_RATE_LIMIT: return "rate_limit";
	case LLM_ERR_SERVER: return "server";
	case LLM_ERR_MALFORMED: return "malformed";
	case LLM_ERR_NETWORK: return "network";
	case LLM_ERR_TIMEOUT: return "timeout";
	case LLM_ERR_BAD_REQUEST: return "bad_request";
	}
	return "unknown";
}

/* Every provider, by enum llm_provider: adding one is adding its table here. */
static const struct llm_provider_ops *const providers[] = {
	[LLM_OPENAI] = &llm_openai_ops,
	[LLM_ANTHROPIC] = &llm_anthropic_ops,
};

const struct llm_provider_ops *llm_provider_ops(enum llm_provider p)
{
	if ((size_t)p >= ARRAY_SIZE(providers))
		BUG("no provider %d", (int)p);
	return providers[p];
}

const char *llm_provider_name(enum llm_provider p)
{
	return llm_provider_ops(p)->name;
}

int llm_model_parse(const char *spec, struct llm_model *m)
{
	m->name = NULL;
	const char *colon = strchr(spec, ':');
	if (!colon)
		return error("model '%s' is not PROVIDER:MODEL (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5)",
			     spec);
	size_t plen = (size_t)(colon - spec);
	for (size_t i = 0; i < ARRAY_SIZE(providers); i++) {
		const struct llm_provider_ops *ops = providers[i];
		if (strlen(ops->name) != plen || strncmp(spec, ops->name, plen))
			continue;
		if (!colon[1])
			return error("model '%s' names no model after '%s:'", spec, ops->name);
		for (const char *s = colon + 1; *s; s++)
			if ((unsigned char)*s <= ' ')
				return error("model '%s' has a space or control character in its name", spec);
		m->provider = ops->id;
		m->name = xstrdup(colon + 1);
		return 0;
	}
	return error("unknown provider '%.*s' in '%s' (openai, anthropic)", (int)plen, spec, spec);
}

void llm_model_release(struct llm_model *m)
{
	free(m->name);
	m->name = NULL;
}

void llm_conversation_init(struct llm_conversation *c)
{
	*c = (struct llm_conversation)LLM_CONVERSATION_INIT;
}

void llm_conversation_set_system(struct llm_conversation *c, const char *text)
{
	free(c->system);
	c->system = text ? xstrdup(text) : NULL;
}

void llm_conversation_add(struct llm_conversation *c, enum llm_role role, const char *content)
{
	if (c->n == c->alloc) {
		c->alloc = c->alloc ? c->alloc * 2 : 8;
		c->items = xrealloc(c->items, c->alloc * sizeof(*c->items));
	}
	c->items[c->n].role = role;
	c->items[c->n].content = xstrdup(content);
	c->n++;
}

void llm_conversation_truncate(struct llm_conversation *c, size_t n)
{
	while (c->n > n)
		free(c->items[--c->n].content);
}

void llm_conversation_release(struct llm_conversation *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->items[i].content);
	free(c->items);
	free(c->system);
	llm_conversation_init(c);
}

long llm_json_count(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < LONG_MAX
		? (long)json_integer_value(v) : -1;
}

const char *llm_json_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

int llm_json_set_string(json_t *obj, const char *key, const char *value)
{
	return json_object_set_new(obj, key, json_string(value)); /* NULL (bad UTF-8): -1 */
}

char *llm_json_finish(json_t *o, int rc, const char **why)
{
	char *s = NULL;
	if (rc)
		*why = "out of memory";
	/* 15 digits: 0.2 goes out as 0.2, not 0.20000000000000001. */
	else if (!(s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))))
		*why = "out of memory";
	json_decref(o);
	return s;
}

json_t *llm_json_messages(const struct llm_conversation *c, int with_system)
{
	json_t *a = json_array();
	int rc = 0;
	if (with_system && c->system) {
		json_t *m = json_object();
		rc |= llm_json_set_string(m, "role", "system");
		rc |= llm_json_set_string(m, "content", c->system);
		rc |= json_array_append_new(a, m);
	}
	for (size_t i = 0; i < c->n; i++) {
		json_t *m = json_object();
		rc |= llm_json_set_string(m, "role", c->items[i].role == LLM_USER ? "user" : "assistant");
		rc |= llm_json_set_string(m, "content", c->items[i].content);
		rc |= json_array_append_new(a, m);
	}
	if (rc) {
		json_decref(a);
		return NULL;
	}
	return a;
}

double llm_cost_usd(const struct llm_price *p, const struct llm_usage *u)
{
	if (!p || u->input_tokens < 0 || u->cached_input_tokens < 0 || u->output_tokens < 0)
		return -1;
	long cached = u->cached_input_tokens < u->input_tokens ? u->cached_input_tokens : u->input_tokens;
	return ((double)(u->input_tokens - cached) * p->input_per_mtok +
		(double)cached * p->cached_input_per_mtok +
		(double)u->output_tokens * p->output_per_mtok) / 1e6;
}

static int price_field(json_t *entry, const char *key, double *out)
{
	json_t *v = json_object_get(entry, key);
	if (!json_is_number(v) || json_number_value(v) < 0 || !isfinite(json_number_value(v)))
		return -1;
	*out = json_number_value(v);
	return 0;
}

int llm_price_load(const char *path, const char *spec, const struct llm_model *m, struct llm_price *out)
{
	char *text;
	if (read_file(path, LLM_MAX_PRICES, &text, NULL) < 0)
		return error("cannot read prices '%s': %s", path, strerror(errno));
	json_error_t jerr;
	json_t *root = json_loads(text, 0, &jerr);
	free(text);
	if (!json_is_object(root)) {
		json_decref(root);
		return error("prices '%s' is not a JSON object%s%s", path, root ? "" : ": ", root ? "" : jerr.text);
	}
	int rc = 1;
	json_t *entry = json_object_get(root, spec);
	if (!entry)
		entry = json_object_get(root, m->name);
	if (entry) {
		rc = 0;
		if (price_field(entry, "input_per_mtok", &out->input_per_mtok) < 0 ||
		    price_field(entry, "output_per_mtok", &out->output_per_mtok) < 0)
			rc = error("prices '%s': '%s' needs input_per_mtok and output_per_mtok, numbers >= 0",
				   path, spec);
		else if (!json_object_get(entry, "cached_input_per_mtok"))
			out->cached_input_per_mtok = out->input_per_mtok;
		else if (price_field(entry, "cached_input_per_mtok", &out->cached_input_per_mtok) < 0)
			rc = error("prices '%s': cached_input_per_mtok of '%s' is not a number >= 0", path, spec);
	}
	json_decref(root);
	return rc;
}

void llm_response_init(struct llm_response *r)
{
	memset(r, 0, sizeof(*r));
	r->usage = (struct llm_usage){-1, -1, -1};
	r->cost_usd = -1;
}

static void reply_release(struct llm_response *r)
{
	free(r->text);
	free(r->stop_reason);
	free(r->usage_json);
	r->text = r->stop_reason = r->usage_json = NULL;
	r->usage = (struct llm_usage){-1, -1, -1};
}

void llm_response_release(struct llm_response *r)
{
	reply_release(r);
	free(r->error_message);
	llm_response_init(r);
}

void llm_options_init(struct llm_options *o)
{
	memset(o, 0, sizeof(*o));
	o->retries = LLM_RETRIES;
	o->retry_delay_s = LLM_RETRY_DELAY_S;
	o->retry_after_max_s = LLM_RETRY_AFTER_MAX_S;
	o->timeout_s = LLM_TIMEOUT_S;
	o->connect_timeout_s = LLM_CONNECT_TIMEOUT_S;
	o->max_response = LLM_MAX_RESPONSE;
}

int llm_client_init(struct llm_client *c, const char *spec, const struct llm_options *o)
{
	memset(c, 0, sizeof(*c));
	if (llm_model_parse(spec, &c->model) < 0)
		return -1;
	const struct llm_provider_ops *ops = llm_provider_ops(c->model.provider);
	const char *base = o->base_url;
	if (!base || !*base)
		base = getenv(ops->base_env);
	if (!base || !*base)
		base = ops->default_base;
	if (strncmp(base, "http://", 7) && strncmp(base, "https://", 8)) {
		llm_model_release(&c->model);
		return error("base URL '%s' is not http:// or https://", base);
	}
	size_t len = strlen(base);
	while (len && base[len - 1] == '/')
		len--;
	c->url = xstrfmt("%.*s%s", (int)len, base, ops->path);
	c->opts = *o;
	if (http_client_init(&c->http) < 0) {
		llm_client_release(c);
		return -1;
	}
	return 0;
}

void llm_client_release(struct llm_client *c)
{
	http_client_release(&c->http);
	llm_model_release(&c->model);
	free(c->url);
	c->url = NULL;
}

double llm_retry_wait(const struct llm_options *o, double retry_after_s)
{
	double wait = o->retry_delay_s;
	if (retry_after_s > o->retry_after_max_s)
		retry_after_s = o->retry_after_max_s;
	return retry_after_s > wait ? retry_after_s : wait;
}

char *llm_redact(char *s, const char *secret)
{
	if (!s || !secret || !*secret || !strstr(s, secret))
		return s;
	struct buf b = BUF_INIT(SIZE_MAX / 2);
	size_t n = strlen(secret);
	const char *p = s, *hit;
	while ((hit = strstr(p, secret))) {
		if (buf_add(&b, p, (size_t)(hit - p)) < 0 || buf_adds(&b, "[redacted]") < 0)
			die("out of memory");
		p = hit + n;
	}
	if (buf_adds(&b, p) < 0)
		die("out of memory");
	free(s);
	return buf_detach(&b);
}

/* At most max bytes of s on one line, valid UTF-8 (it lands in JSON and logs). */
static char *clip(const char *s, size_t max)
{
	size_t n = strlen(s);
	char *c = xstrfmt("%.*s%s", (int)(n > max ? max : n), s, n > max ? "..." : "");
	for (char *p = c; *p; p++)
		if ((unsigned char)*p < ' ')
			*p = ' ';
	utf8_sanitize(c);
	return c;
}

enum llm_error llm_classify(const struct llm_provider_ops *ops, long status, const char *body,
			    char **message)
{
	json_t *root = json_loads(body, 0, NULL);
	json_t *err = json_object_get(root, "error");
	const char *type = llm_json_str(err, "type"), *code = llm_json_str(err, "code");
	/* {"error": {"message": ...}} from both providers; other servers put a
	 * string in "error", "message" or "detail". */
	const char *said = json_is_string(err) ? json_string_value(err) : llm_json_str(err, "message");
	if (!said)
		said = llm_json_str(root, "message");
	if (!said)
		said = llm_json_str(root, "detail");
	if (!said && !root && *body)
		said = body; /* a proxy's HTML or text page */

	enum llm_error e;
	if (status == 401 || status == 403)
		e = LLM_ERR_AUTH;
	else if (status >= 400 && status < 500 && ops->context_overflow(status, type, code, said))
		e = LLM_ERR_CONTEXT_LENGTH;
	else if (status == 413) /* the request is too large to accept at all */
		e = LLM_ERR_CONTEXT_LENGTH;
	else if (status == 429)
		/* Out of credit is not a passing limit: waiting does not help. */
		e = (code && !strcmp(code, "insufficient_quota")) || (type && !strcmp(type, "insufficient_quota"))
			? LLM_ERR_AUTH : LLM_ERR_RATE_LIMIT;
	else if (status == 408)
		e = LLM_ERR_TIMEOUT;
	else if (status == 409 || status >= 500) /* 529: Anthropic overloaded */
		e = LLM_ERR_SERVER;
	else
		e = LLM_ERR_BAD_REQUEST;

	char *c = clip(said ? said : "", LLM_MAX_MESSAGE);
	*message = *c ? xstrfmt("HTTP %ld: %s", status, c) : xstrfmt("HTTP %ld", status);
	free(c);
	json_decref(root);
	return e;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static enum llm_error transport_error(enum http_fail f)
{
	switch (f) {
	case HTTP_FAIL_TIMEOUT: return LLM_ERR_TIMEOUT;
	case HTTP_FAIL_CONNECT:
	case HTTP_FAIL_BROKEN: return LLM_ERR_NETWORK;
	case HTTP_FAIL_TOOBIG: return LLM_ERR_MALFORMED;
	default: return LLM_ERR_BAD_REQUEST; /* TLS trust, a URL libcurl refuses: retrying cannot help */
	}
}

/* One request and its outcome; the reply fields of out on success, else
 * *message (caller frees). */
static enum llm_error attempt(struct llm_client *c, const struct llm_provider_ops *ops,
			      const struct http_request *req, struct http_response *res,
			      struct llm_response *out, char **message)
{
	double t = now_ms();
	int got = http_post(&c->http, req, res);
	out->latency_ms = now_ms() - t;
	out->http_status = res->status;
	if (got < 0) {
		*message = xstrfmt("%s (%s)", res->message, http_fail_name(res->fail));
		return transport_error(res->fail);
	}
	if (res->status < 200 || res->status > 299)
		return llm_classify(ops, res->status, buf_str(&res->body), message);
	char *why = NULL;
	if (ops->parse(buf_str(&res->body), out, &why) < 0) {
		reply_release(out);
		char *w = clip(why, LLM_MAX_MESSAGE);
		*message = xstrfmt("HTTP %ld with a body that is not a reply: %s", res->status, w);
		free(w);
		free(why);
		return LLM_ERR_MALFORMED;
	}
	return LLM_OK;
}

int llm_chat(struct llm_client *c, const struct llm_conversation *conv,
	     const struct llm_decoding *d, struct llm_response *out)
{
	const struct llm_provider_ops *ops = llm_provider_ops(c->model.provider);
	double start = now_ms();
	llm_response_release(out);

	const char *why = NULL;
	char *body = ops->request(&c->model, c->url, conv, d, &why);
	if (!body) {
		out->error = LLM_ERR_BAD_REQUEST;
		out->error_message = xstrfmt("cannot build the request: %s", why);
		return -1;
	}
	const char *key = getenv(ops->key_env);
	if (key && !*key)
		key = NULL;
	char *lines[LLM_MAX_HEADERS + 1];
	size_t nlines = ops->headers(key, lines);
	lines[nlines] = NULL;
	const struct http_request req = {
		.url = c->url, .headers = (const char *const *)lines, .body = body, .body_len = strlen(body),
		.connect_timeout_s = c->opts.connect_timeout_s, .timeout_s = c->opts.timeout_s,
		.max_response = c->opts.max_response,
	};
	struct http_response res;
	http_response_init(&res);
	double deadline = c->opts.deadline_ms;
	if (deadline > 0 && now_ms() >= deadline) {
		out->error = LLM_ERR_TIMEOUT;
		out->error_message = xstrdup("the deadline passed before the first request");
		goto done;
	}

	for (;;) {
		char *message = NULL;
		struct http_request r = req;
		if (deadline > 0) {
			double left_s = (deadline - now_ms()) / 1e3;
			if (r.timeout_s > left_s) /* it bounds connecting too */
				r.timeout_s = left_s > 0.001 ? left_s : 0.001;
		}
		out->attempts++;
		out->error = attempt(c, ops, &r, &res, out, &message);
		free(out->error_message);
		out->error_message = NULL;
		if (out->error == LLM_OK)
			break;
		/* A server may echo what it was sent, key included. */
		message = llm_redact(message, key);
		if (out->error == LLM_ERR_AUTH && !key) {
			char *m = xstrfmt("%s (%s is not set)", message, ops->key_env);
			free(message);
			message = m;
		}
		out->error_message = message;
		if (!llm_error_retryable(out->error) || out->attempts > c->opts.retries)
			break;
		double wait = llm_retry_wait(&c->opts, res.retry_after_s);
		if (deadline > 0 && now_ms() + wait * 1e3 >= deadline)
			break;
		if (c->opts.on_retry)
			c->opts.on_retry(c->opts.on_retry_data, out->attempts, out->error, message, wait);
		else
			warning("%s: %s; retry %d of %d in %.3g s", ops->name, message, out->attempts,
				c->opts.retries, wait);
		sleep_s(wait);
	}
	if (out->error == LLM_OK) {
		/* Whatever the server sent back is printed somewhere: no key in it. */
		out->text = llm_redact(out->text, key);
		out->stop_reason = llm_redact(out->stop_reason, key);
		out->usage_json = llm_redact(out->usage_json, key);
		out->cost_usd = llm_cost_usd(c->opts.price, &out->usage);
	}
done:
	out->elapsed_ms = now_ms() - start;
	http_response_release(&res);
	for (size_t i = 0; i < nlines; i++)
		free(lines[i]);
	free(body);
	return out->error == LLM_OK ? 0 : -1;
}
