/* The model proxy of an external agent (mkb attempt --model cli:NAME): the
 * agent's program runs in a sandbox with no network but a relay
 * (src/relay/main.c) that carries its connections to 127.0.0.1:PORT to this
 * proxy's Unix socket. Here, outside the sandbox, each HTTP request is
 * checked (POST, under the provider's API path), its key headers replaced
 * by the real key from our environment, sent to the one upstream endpoint
 * the attempt allows, and the response handed back. The key never enters
 * the sandbox; no other host is reachable; every exchange, with the usage
 * the provider reported, is recorded.
 *
 * One request per connection (the response says Connection: close), one at
 * a time: a request waits while another is in flight. A streamed response
 * (server-sent events) is handed back whole once it has ended. */
#ifndef MKB_MODEL_PROXY_H
#define MKB_MODEL_PROXY_H

#include <jansson.h>

#include "http.h"
#include "llm.h"
#include "mkb_limits.h"

struct model_proxy {
	int fd;                       /* listening Unix socket, non-blocking */
	char *path;
	enum llm_provider provider;   /* how the key travels, how usage reads */
	char *upstream;               /* base URL, no trailing slash */
	char *key;                    /* from the environment; never written anywhere */
	double timeout_s;             /* one upstream exchange */
	struct http_client http;
	/* what the agent's model cost, as the provider reported it */
	long requests;
	struct llm_usage usage;       /* sums; fields stay 0 when never reported */
	/* every exchange: kind "proxy", a JSON object (caller's ctx) */
	void (*record)(void *ctx, json_t *event);
	void *ctx;
};

/* Listen at path for provider's requests to upstream (NULL: the provider's
 * base URL from its environment variable, then its default). The key comes
 * from the provider's environment variable; without one, -1. 0 or -1
 * (error printed). */
int model_proxy_open(struct model_proxy *p, const char *path, enum llm_provider provider,
		     const char *upstream);
/* Serve every connection waiting now (each to its end). */
void model_proxy_serve(struct model_proxy *p);
void model_proxy_close(struct model_proxy *p);

/* The usage in a provider's response body, streamed (server-sent events) or
 * not, added into *u; 1 when the body reported any, else 0. */
int model_proxy_usage(enum llm_provider provider, const char *body, struct llm_usage *u);

#endif
