#include "http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* curl_global_init is not thread-safe in every libcurl a machine may have: it
 * runs once, from the first client, which is made before any thread starts. */
static int curl_ready;

int http_client_init(struct http_client *c)
{
	c->curl = NULL;
	if (!curl_ready) {
		CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
		if (rc != CURLE_OK)
			return error("cannot start libcurl: %s", curl_easy_strerror(rc));
		curl_ready = 1;
	}
	c->curl = curl_easy_init();
	if (!c->curl)
		return error("cannot start libcurl: no handle");
	return 0;
}

void http_client_release(struct http_client *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
}

void http_response_init(struct http_response *r)
{
	r->status = 0;
	buf_init(&r->body, 0);
	r->retry_after_s = -1;
	r->content_type[0] = '\0';
	r->fail = HTTP_FAIL_NONE;
	r->message[0] = '\0';
}

void http_response_release(struct http_response *r)
{
	buf_release(&r->body);
	http_response_init(r);
}

struct sink {
	struct buf *body;
	int toobig;
};

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	struct sink *s = ctx;
	if (buf_add(s->body, data, size * n) < 0) {
		s->toobig = 1;
		return 0; /* less than given: curl stops with CURLE_WRITE_ERROR */
	}
	return size * n;
}

static enum http_fail classify(CURLcode rc, int toobig)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return HTTP_FAIL_TIMEOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return HTTP_FAIL_CONNECT;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return HTTP_FAIL_BROKEN;
	case CURLE_WRITE_ERROR:
		return toobig ? HTTP_FAIL_TOOBIG : HTTP_FAIL_OTHER;
	default:
		return HTTP_FAIL_OTHER;
	}
}

static long ms(double s)
{
	return s <= 0 ? 0 : s * 1e3 < 1 ? 1 : (long)(s * 1e3);
}

/* Returns the first setopt error: CURLE_OK when every option took. */
static CURLcode setup(CURL *h, const struct http_request *req, struct curl_slist *headers,
		      struct sink *sink, char *errbuf)
{
	CURLcode rc = CURLE_OK;
#define SET(opt, val) do { if (rc == CURLE_OK) rc = curl_easy_setopt(h, opt, val); } while (0)
	SET(CURLOPT_ERRORBUFFER, errbuf);
	SET(CURLOPT_URL, req->url);
	SET(CURLOPT_POST, 1L);
	SET(CURLOPT_POSTFIELDS, req->body);
	SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, sink);
	SET(CURLOPT_CONNECTTIMEOUT_MS, ms(req->connect_timeout_s));
	SET(CURLOPT_TIMEOUT_MS, ms(req->timeout_s));
	/* No signals: timeouts must work in threads (DESIGN: many trials in flight). */
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_ACCEPT_ENCODING, ""); /* whatever this libcurl can decode */
#undef SET
	return rc;
}

int http_post(struct http_client *c, const struct http_request *req, struct http_response *res)
{
	CURL *h = c->curl;
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL;
	int ret = -1;

	http_response_release(res);
	res->body.max = req->max_response;
	/* No "Expect: 100-continue": a server that never answers it costs a
	 * second per large request. */
	const char *fixed[] = {"Expect:", NULL};
	for (int pass = 0; pass < 2; pass++) {
		const char *const *list = pass ? req->headers : fixed;
		for (size_t i = 0; list && list[i]; i++) {
			struct curl_slist *next = curl_slist_append(headers, list[i]);
			if (!next) {
				snprintf(res->message, sizeof(res->message), "out of memory");
				res->fail = HTTP_FAIL_OTHER;
				goto out;
			}
			headers = next;
		}
	}

	struct sink sink = {&res->body, 0};
	curl_easy_reset(h); /* the connection cache survives a reset */
	CURLcode rc = setup(h, req, headers, &sink, errbuf);
	if (rc == CURLE_OK)
		rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		res->fail = classify(rc, sink.toobig);
		if (res->fail == HTTP_FAIL_TOOBIG)
			snprintf(res->message, sizeof(res->message),
				 "response larger than %zu bytes", req->max_response);
		else
			snprintf(res->message, sizeof(res->message), "%s",
				 errbuf[0] ? errbuf : curl_easy_strerror(rc));
		goto out;
	}
	if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status) != CURLE_OK || res->status <= 0) {
		res->fail = HTTP_FAIL_BROKEN;
		snprintf(res->message, sizeof(res->message), "no HTTP status in the response");
		goto out;
	}
	curl_off_t after = 0;
	if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0)
		res->retry_after_s = (double)after;
	char *ctype = NULL;
	if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK && ctype)
		snprintf(res->content_type, sizeof(res->content_type), "%s", ctype);
	ret = 0;
out:
	/* The handle keeps pointers to our headers and buffers until reset. */
	curl_easy_reset(h);
	curl_slist_free_all(headers);
	return ret;
}

int http_fail_retryable(enum http_fail f)
{
	return f == HTTP_FAIL_TIMEOUT || f == HTTP_FAIL_CONNECT || f == HTTP_FAIL_BROKEN;
}

const char *http_fail_name(enum http_fail f)
{
	switch (f) {
	case HTTP_FAIL_NONE: return "none";
	case HTTP_FAIL_TIMEOUT: return "timeout";
	case HTTP_FAIL_CONNECT: return "connect";
	case HTTP_FAIL_BROKEN: return "broken";
	case HTTP_FAIL_TOOBIG: return "toobig";
	case HTTP_FAIL_OTHER: return "other";
	}
	return "other";
}
