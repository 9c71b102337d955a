/* HTTP for the model clients: the only module that speaks libcurl. One POST
 * of a JSON body with headers, bounded in time (connect and total timeouts)
 * and in size (the response body goes into a capped struct buf), with
 * transport failures sorted into the few kinds a caller decides on. */
#ifndef MKB_HTTP_H
#define MKB_HTTP_H

#include <stddef.h>

#include "buf.h"

/* Why no HTTP response came back. */
enum http_fail {
	HTTP_FAIL_NONE = 0,
	HTTP_FAIL_TIMEOUT,  /* connect or total timeout passed */
	HTTP_FAIL_CONNECT,  /* refused, unreachable, host not resolved */
	HTTP_FAIL_BROKEN,   /* reset, closed without a reply, cut short */
	HTTP_FAIL_TOOBIG,   /* the body passed the response cap */
	HTTP_FAIL_OTHER,    /* anything else: bad URL, TLS trust, out of memory */
};

struct http_request {
	const char *url;
	const char *const *headers; /* "Name: value" lines, NULL-terminated, or NULL */
	const char *body;           /* sent as is, with the headers given */
	size_t body_len;
	double connect_timeout_s;
	double timeout_s;           /* whole exchange, connecting included */
	size_t max_response;        /* cap on the response body in bytes */
};

struct http_response {
	long status;          /* 0 when no response came back */
	struct buf body;      /* capped at the request's max_response */
	double retry_after_s; /* the server's Retry-After in seconds, or -1 */
	char content_type[128]; /* the response's Content-Type, "" when none */
	enum http_fail fail;
	char message[256];    /* the transport error, "" when none */
};

/* A connection cache: requests through one client reuse its connections.
 * One client per thread. */
struct http_client {
	void *curl;
};

/* 0, or -1 (error printed) when libcurl cannot start. */
int http_client_init(struct http_client *c);
void http_client_release(struct http_client *c);

void http_response_init(struct http_response *r);
void http_response_release(struct http_response *r);

/* POST req into res (released and refilled). Returns 0 when a response came
 * back, whatever its status; -1 when none did, with res->fail and
 * res->message set. Prints nothing: the caller decides what to say. The
 * header values (API keys) never reach res or any output. */
int http_post(struct http_client *c, const struct http_request *req, struct http_response *res);

/* Is a failure of this kind worth another try? */
int http_fail_retryable(enum http_fail f);
const char *http_fail_name(enum http_fail f);

#endif
