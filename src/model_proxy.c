#define _GNU_SOURCE
#include "model_proxy.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "llm_provider.h"
#include "mkb_limits.h"
#include "util.h"

#define MAX_FORWARD 8       /* request headers passed on */

/* Request headers passed upstream (the key's are replaced, the rest dropped). */
static const char *const forwarded[] = {
	"content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta",
};

int model_proxy_open(struct model_proxy *p, const char *path, enum llm_provider provider,
		     const char *upstream)
{
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	const struct llm_provider_ops *ops = llm_provider_ops(provider);
	const char *key = getenv(ops->key_env);
	if (!key || !*key)
		return error("an external agent on %s needs $%s (it stays outside the sandbox)", ops->name,
			     ops->key_env);
	const char *base = upstream && *upstream ? upstream : getenv(ops->base_env);
	if (!base || !*base)
		base = ops->default_base;
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(addr.sun_path))
		return error("socket path '%s' is too long", path);
	memcpy(addr.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error("socket: %s", strerror(errno));
	unlink(path);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 16) < 0) {
		int e = errno;
		close(fd);
		return error("cannot listen on '%s': %s", path, strerror(e));
	}
	if (http_client_init(&p->http) < 0) {
		close(fd);
		unlink(path);
		return -1;
	}
	p->fd = fd;
	p->path = xstrdup(path);
	p->provider = provider;
	p->upstream = xstrdup(base);
	size_t n = strlen(p->upstream);
	while (n && p->upstream[n - 1] == '/')
		p->upstream[--n] = '\0';
	p->key = xstrdup(key);
	p->timeout_s = 600;
	return 0;
}

void model_proxy_close(struct model_proxy *p)
{
	if (p->fd >= 0) {
		close(p->fd);
		unlink(p->path);
		http_client_release(&p->http);
	}
	p->fd = -1;
	free(p->path);
	free(p->upstream);
	if (p->key) {
		explicit_bzero(p->key, strlen(p->key));
		free(p->key);
	}
	p->path = p->upstream = p->key = NULL;
}

static void respond(int fd, long status, const char *ctype, const char *body, size_t len)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %ld %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, status < 300 ? "OK" : "Error", ctype && *ctype ? ctype : "application/json", len);
	(void)socket_send_all(fd, head, (size_t)n);
	(void)socket_send_all(fd, body, len);
}

static void refuse(int fd, long status, const char *why)
{
	json_t *o = json_pack("{s:{s:s, s:s}}", "error", "type", "mkb_proxy", "message", why);
	char *text = json_dumps(o, JSON_COMPACT);
	respond(fd, status, "application/json", text, strlen(text));
	free(text);
	json_decref(o);
}

/* Read until the headers' end and the body's Content-Length. 0, or -1 with
 * *status and *why set. */
static int read_request(int fd, struct buf *in, size_t *head_len, size_t *body_len, long *status,
			const char **why)
{
	char chunk[16384];
	double deadline = now_ms() + MODEL_PROXY_READ_WAIT_MS;
	*head_len = 0;
	for (;;) {
		if (!*head_len) {
			const char *end = in->len ? memmem(in->data, in->len, "\r\n\r\n", 4) : NULL;
			if (end) {
				*head_len = (size_t)(end - in->data) + 4;
				/* Content-Length, the only framing accepted */
				*body_len = 0;
				int have = 0;
				for (const char *l = in->data; l < end;) {
					const char *nl = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
					if (!nl)
						break;
					if ((size_t)(nl - l) > 15 && !strncasecmp(l, "content-length:", 15)) {
						char num[32];
						size_t k = (size_t)(nl - l) - 15;
						if (k >= sizeof(num))
							k = sizeof(num) - 1;
						memcpy(num, l + 15, k);
						num[k] = '\0';
						long v;
						char *s = num;
						while (*s == ' ' || *s == '\t')
							s++;
						if (parse_long(s, 0, MODEL_PROXY_MAX_BODY, &v) < 0) {
							*status = 413, *why = "body too large or Content-Length unreadable";
							return -1;
						}
						*body_len = (size_t)v;
						have = 1;
					}
					if ((size_t)(nl - l) > 18 && !strncasecmp(l, "transfer-encoding:", 18)) {
						*status = 411, *why = "send a Content-Length (no chunked requests)";
						return -1;
					}
					l = nl + 2;
				}
				(void)have;
			} else if (in->len > MODEL_PROXY_HEAD_MAX) {
				*status = 431, *why = "request headers too large";
				return -1;
			}
		}
		if (*head_len && in->len >= *head_len + *body_len)
			return 0;
		int left = (int)(deadline - now_ms());
		struct pollfd pf = {fd, POLLIN, 0};
		if (left <= 0 || poll(&pf, 1, left) <= 0) {
			*status = 408, *why = "the request did not arrive in time";
			return -1;
		}
		ssize_t r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			*status = 400, *why = "the request ended early";
			return -1;
		}
		if (buf_add(in, chunk, (size_t)r) < 0) {
			*status = 413, *why = "request too large";
			return -1;
		}
	}
}

/* Add the usage fields of one provider usage object. */
static int add_usage(enum llm_provider provider, json_t *u, struct llm_usage *sum)
{
	if (!json_is_object(u))
		return 0;
	long in, cached, out;
	if (provider == LLM_OPENAI) {
		/* chat completions (prompt/completion) or responses (input/output) */
		in = llm_json_count(u, "prompt_tokens");
		if (in < 0)
			in = llm_json_count(u, "input_tokens");
		out = llm_json_count(u, "completion_tokens");
		if (out < 0)
			out = llm_json_count(u, "output_tokens");
		json_t *d = json_object_get(u, "prompt_tokens_details");
		if (!d)
			d = json_object_get(u, "input_tokens_details");
		cached = llm_json_count(d, "cached_tokens");
	} else {
		long base = llm_json_count(u, "input_tokens");
		long read = llm_json_count(u, "cache_read_input_tokens");
		long write = llm_json_count(u, "cache_creation_input_tokens");
		in = base < 0 && read < 0 && write < 0 ? -1
		     : (base > 0 ? base : 0) + (read > 0 ? read : 0) + (write > 0 ? write : 0);
		cached = read;
		out = llm_json_count(u, "output_tokens");
	}
	if (in < 0 && out < 0)
		return 0;
	sum->input_tokens += in > 0 ? in : 0;
	sum->cached_input_tokens += cached > 0 ? cached : 0;
	sum->output_tokens += out > 0 ? out : 0;
	return 1;
}

int model_proxy_usage(enum llm_provider provider, const char *body, struct llm_usage *u)
{
	int any = 0;
	json_t *whole = json_loads(body, 0, NULL);
	if (whole) {
		any = add_usage(provider, json_object_get(whole, "usage"), u);
		if (!any) /* the Responses API nests it */
			any = add_usage(provider, json_object_get(json_object_get(whole, "response"), "usage"), u);
		json_decref(whole);
		return any;
	}
	/* server-sent events: one JSON object per "data:" line */
	for (const char *l = body; *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		if (len > 5 && !strncmp(l, "data:", 5)) {
			json_t *ev = json_loadb(l + 5, len - 5, 0, NULL);
			if (ev) {
				const char *type = json_string_value(json_object_get(ev, "type"));
				json_t *usage = json_object_get(ev, "usage");
				if (type && !strcmp(type, "message_start")) /* Anthropic: the input side */
					usage = json_object_get(json_object_get(ev, "message"), "usage");
				else if (type && !strcmp(type, "response.completed")) /* OpenAI Responses */
					usage = json_object_get(json_object_get(ev, "response"), "usage");
				any |= add_usage(provider, usage, u);
				json_decref(ev);
			}
		}
		l += len + (nl != NULL);
	}
	return any;
}

/* One connection: its request forwarded, the response handed back. */
static void serve_one(struct model_proxy *p, int fd)
{
	struct buf in = BUF_INIT(MODEL_PROXY_HEAD_MAX + MODEL_PROXY_MAX_BODY);
	size_t head_len = 0, body_len = 0;
	long status = 0;
	const char *why = NULL;
	double t0 = now_ms();
	if (read_request(fd, &in, &head_len, &body_len, &status, &why) < 0) {
		refuse(fd, status, why);
		buf_release(&in);
		return;
	}
	/* request line: METHOD PATH HTTP/1.x */
	char method[16] = "", path[2048] = "";
	const char *sp1 = memchr(in.data, ' ', head_len);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', head_len - (size_t)(sp1 + 1 - in.data)) : NULL;
	if (!sp1 || !sp2 || (size_t)(sp1 - in.data) >= sizeof(method) || (size_t)(sp2 - sp1 - 1) >= sizeof(path)) {
		refuse(fd, 400, "bad request line");
		buf_release(&in);
		return;
	}
	memcpy(method, in.data, (size_t)(sp1 - in.data));
	memcpy(path, sp1 + 1, (size_t)(sp2 - sp1 - 1));
	if (strcmp(method, "POST")) {
		refuse(fd, 405, "only POST requests reach the model");
		buf_release(&in);
		return;
	}
	if (path[0] != '/' || strstr(path, "..") || strchr(path, '@') || strchr(path, '#')) {
		refuse(fd, 400, "bad path");
		buf_release(&in);
		return;
	}
	/* headers: the allowed ones, then the key's */
	char *lines[MAX_FORWARD + LLM_MAX_HEADERS + 1];
	size_t n = 0;
	const char *end = in.data + head_len - 4;
	const char *l = memmem(in.data, head_len, "\r\n", 2);
	for (l = l ? l + 2 : end; l < end && n < MAX_FORWARD;) {
		const char *nl = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
		if (!nl)
			break;
		for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++) {
			size_t k = strlen(forwarded[i]);
			if ((size_t)(nl - l) > k && !strncasecmp(l, forwarded[i], k) && l[k] == ':') {
				lines[n++] = xstrfmt("%.*s", (int)(nl - l), l);
				break;
			}
		}
		l = nl + 2;
	}
	const struct llm_provider_ops *ops = llm_provider_ops(p->provider);
	char *key_lines[LLM_MAX_HEADERS];
	size_t nk = ops->headers(p->key, key_lines);
	size_t from_client = n;
	for (size_t i = 0; i < nk; i++) {
		/* the client's content-type and version lines stand; ours fill in */
		const char *colon = strchr(key_lines[i], ':');
		size_t k = colon ? (size_t)(colon - key_lines[i]) + 1 : 0;
		int dup = 0;
		for (size_t j = 0; j < from_client && k; j++)
			dup |= !strncasecmp(lines[j], key_lines[i], k);
		if (dup) {
			free(key_lines[i]);
			continue;
		}
		lines[n++] = key_lines[i];
	}
	lines[n] = NULL;
	char *url = xstrfmt("%s%s", p->upstream, path);
	const char *body = in.data + head_len;
	struct http_request req = {
		.url = url, .headers = (const char *const *)lines, .body = body, .body_len = body_len,
		.connect_timeout_s = 30, .timeout_s = p->timeout_s, .max_response = MODEL_PROXY_MAX_BODY,
	};
	struct http_response res;
	http_response_init(&res);
	int rc = http_post(&p->http, &req, &res);
	p->requests++;
	struct llm_usage u = {0, 0, 0};
	int has_usage = 0;
	if (rc == 0) {
		respond(fd, res.status, res.content_type, res.body.data ? res.body.data : "", res.body.len);
		if (res.status >= 200 && res.status < 300) {
			has_usage = model_proxy_usage(p->provider, buf_str(&res.body), &u);
			p->usage.input_tokens += u.input_tokens;
			p->usage.cached_input_tokens += u.cached_input_tokens;
			p->usage.output_tokens += u.output_tokens;
		}
	} else {
		char msg[300];
		snprintf(msg, sizeof(msg), "the model endpoint: %s", res.message);
		refuse(fd, 502, msg);
	}
	if (p->record) {
		char *req_text = xstrfmt("%.*s", (int)body_len, body);
		utf8_sanitize(req_text);
		char *res_text = xstrdup(rc == 0 ? buf_str(&res.body) : "");
		utf8_sanitize(res_text);
		json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:f}", "method", method, "path", path,
				       "request", req_text, "status", (json_int_t)(rc == 0 ? res.status : 0),
				       "response", res_text, "error", rc == 0 ? "" : res.message,
				       "latency_ms", now_ms() - t0);
		if (has_usage)
			json_object_set_new(ev, "usage",
					    json_pack("{s:I, s:I, s:I}", "input_tokens", (json_int_t)u.input_tokens,
						      "cached_input_tokens", (json_int_t)u.cached_input_tokens,
						      "output_tokens", (json_int_t)u.output_tokens));
		p->record(p->ctx, ev);
		free(req_text);
		free(res_text);
	}
	for (size_t i = 0; i < n; i++) {
		explicit_bzero(lines[i], strlen(lines[i]));
		free(lines[i]);
	}
	free(url);
	http_response_release(&res);
	buf_release(&in);
}

void model_proxy_serve(struct model_proxy *p)
{
	if (p->fd < 0)
		return;
	for (;;) {
		int c = accept4(p->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			return;
		serve_one(p, c);
		close(c);
	}
}
