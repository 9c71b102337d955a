/* Model clients: one conversation in, one reply out, over any OpenAI-
 * compatible chat-completions endpoint ("openai:MODEL") or the Anthropic
 * Messages API ("anthropic:MODEL"). Transient failures (429, 5xx, 529,
 * timeouts, broken connections) are retried (PROTOCOL.md: 3 times, 30 s
 * apart) and are infrastructure, never the model's failure; every failure
 * has one class of enum llm_error.
 *
 * Keys are read from the environment at each call (OPENAI_API_KEY,
 * ANTHROPIC_API_KEY) and go nowhere but the request's header: not into a
 * response, a message, or anything printed. */
#ifndef MKB_LLM_H
#define MKB_LLM_H

#include <stddef.h>

#include "http.h"
#include "mkb_limits.h"

#define LLM_ANTHROPIC_MAX_TOKENS 4096 /* Anthropic requires max_tokens; used when none is given */

enum llm_provider { LLM_OPENAI, LLM_ANTHROPIC };

/* Every way a call can fail. Retryable ones are infrastructure. */
enum llm_error {
	LLM_OK = 0,
	LLM_ERR_AUTH,           /* 401/403, or an account that cannot be used (no quota) */
	LLM_ERR_CONTEXT_LENGTH, /* the conversation does not fit the model's context */
	LLM_ERR_RATE_LIMIT,     /* 429 */
	LLM_ERR_SERVER,         /* 5xx, 529 overloaded, 409 */
	LLM_ERR_MALFORMED,      /* a success status whose body we cannot read, or too big */
	LLM_ERR_NETWORK,        /* refused, reset, dropped before a reply */
	LLM_ERR_TIMEOUT,        /* no complete reply in time (or 408) */
	LLM_ERR_BAD_REQUEST,    /* any other refusal of the request (4xx), bad URL */
};

/* Is a failure of this class worth another try? (rate limit, server, network, timeout) */
int llm_error_retryable(enum llm_error e);
/* "auth", "context_length", ... ("ok" for LLM_OK). */
const char *llm_error_name(enum llm_error e);

struct llm_model {
	enum llm_provider provider;
	char *name; /* as the provider spells it */
};

/* Parse "openai:MODEL" or "anthropic:MODEL" into m (m->name is the caller's
 * to free with llm_model_release). 0, or -1 (error printed). */
int llm_model_parse(const char *spec, struct llm_model *m);
void llm_model_release(struct llm_model *m);
const char *llm_provider_name(enum llm_provider p);

enum llm_role { LLM_USER, LLM_ASSISTANT };

struct llm_message {
	enum llm_role role;
	char *content;
};

/* A provider-neutral conversation: the system text and the turns after it. */
struct llm_conversation {
	char *system; /* NULL: none */
	struct llm_message *items;
	size_t n, alloc;
};

#define LLM_CONVERSATION_INIT { NULL, NULL, 0, 0 }

void llm_conversation_init(struct llm_conversation *c);
/* Copies text. */
void llm_conversation_set_system(struct llm_conversation *c, const char *text);
void llm_conversation_add(struct llm_conversation *c, enum llm_role role, const char *content);
/* Keep the first n turns. */
void llm_conversation_truncate(struct llm_conversation *c, size_t n);
void llm_conversation_release(struct llm_conversation *c);

/* Constrained replies (ours, off by default: Terminus-2 asks for its JSON in
 * the prompt only). With a format other than TEXT, a call that carries a
 * schema asks the server to decode only replies that match it (a grammar
 * compiled from the schema, in llama.cpp's servers); the OpenAI client
 * sends it as response_format, the Anthropic one refuses it. */
enum llm_reply_format {
	LLM_REPLY_TEXT,        /* nothing sent */
	LLM_REPLY_JSON_SCHEMA, /* {"type": "json_schema", "json_schema": {"name", "strict", "schema"}}:
				* OpenAI's structured outputs, vLLM, SGLang, llama.cpp's llama-server */
	LLM_REPLY_JSON_OBJECT, /* {"type": "json_object", "schema": S}: JSON mode with a schema,
				* as llama-cpp-python's server reads it */
};

/* Decoding settings; a field left at its "unset" value is not sent, so the
 * provider's default applies (some models refuse a temperature at all). */
struct llm_decoding {
	double temperature; /* < 0: unset */
	double top_p;       /* < 0: unset */
	long max_tokens;    /* 0: unset (Anthropic: LLM_ANTHROPIC_MAX_TOKENS) */
	enum llm_reply_format format;
	/* The schema a constrained reply must match (JSON text) and its name
	 * ([A-Za-z0-9_-]); set per call by the caller, who knows which replies
	 * are structured (the agent's turns, not its free-text hand-off).
	 * NULL: the call is not constrained, whatever format says. */
	const char *schema, *schema_name;
};

#define LLM_DECODING_INIT { -1, -1, 0, LLM_REPLY_TEXT, NULL, NULL }

/* Prices in US dollars per million tokens. */
struct llm_price {
	double input_per_mtok;
	double cached_input_per_mtok;
	double output_per_mtok;
};

/* Token counts as the provider reported them, on one scale for both:
 * input_tokens counts every prompt token, cached ones included (OpenAI's
 * prompt_tokens; Anthropic's input_tokens + cache_read_input_tokens +
 * cache_creation_input_tokens). -1: not reported. */
struct llm_usage {
	long input_tokens;
	long cached_input_tokens;
	long output_tokens;
};

/* Cost of usage at price p: uncached input, cached input and output each at
 * their price. -1 when a count is unknown. */
double llm_cost_usd(const struct llm_price *p, const struct llm_usage *u);

/* Read model's price from a prices file, {"MODEL": {"input_per_mtok": X,
 * "cached_input_per_mtok": Y, "output_per_mtok": Z}, ...}, MODEL being the
 * spec ("openai:gpt-4o") or the bare name ("gpt-4o"); a missing
 * cached_input_per_mtok is the input price. 0 found, 1 no entry for the
 * model, -1 unreadable (error printed). */
int llm_price_load(const char *path, const char *spec, const struct llm_model *m,
		   struct llm_price *out);

struct llm_response {
	char *text;              /* the reply's text, "" when none */
	char *stop_reason;       /* as the provider says it: "stop", "length", "end_turn", ... */
	struct llm_usage usage;
	char *usage_json;        /* the provider's usage object verbatim, or NULL */
	double latency_ms;       /* the last request, sent to reply read */
	double elapsed_ms;       /* the whole call, retries and waits included */
	int attempts;            /* requests sent */
	double cost_usd;         /* -1: no price given, or usage unknown */
	long http_status;        /* of the last response, 0 when none came back */
	enum llm_error error;
	char *error_message;     /* NULL when error is LLM_OK */
};

void llm_response_init(struct llm_response *r);
void llm_response_release(struct llm_response *r);

struct llm_options {
	const char *base_url;        /* NULL: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, then the default */
	int retries;                 /* retries after the first request */
	double retry_delay_s;        /* between attempts */
	double retry_after_max_s;    /* cap on a server's Retry-After */
	double timeout_s;
	double connect_timeout_s;
	size_t max_response;
	const struct llm_price *price; /* NULL: no cost */
	/* On now_ms()'s clock; 0: none. No request runs, and no wait for a
	 * retry ends, past it (an agent's wall clock bounds its model calls);
	 * one that would is not made: the last failure stands, or "timeout". */
	double deadline_ms;
	/* Called before each wait for a retry; NULL prints a warning. */
	void (*on_retry)(void *data, int attempt, enum llm_error e, const char *message, double wait_s);
	void *on_retry_data;
};

void llm_options_init(struct llm_options *o);

/* One client per thread: it holds a connection cache. */
struct llm_client {
	struct llm_model model;
	char *url;            /* the endpoint requests go to */
	struct llm_options opts;
	struct http_client http;
};

/* A client for spec with options o (copied; o->price must outlive the
 * client). 0, or -1 (error printed, nothing to release). */
int llm_client_init(struct llm_client *c, const char *spec, const struct llm_options *o);
void llm_client_release(struct llm_client *c);

/* Send the conversation and fill out (released first). 0 with the reply, or
 * -1 with out->error and out->error_message set (nothing printed except the
 * retry notices of on_retry). */
int llm_chat(struct llm_client *c, const struct llm_conversation *conv,
	     const struct llm_decoding *d, struct llm_response *out);

/* Seconds to wait before the next attempt: the configured delay, or the
 * server's Retry-After (< 0: none) when longer, capped. */
double llm_retry_wait(const struct llm_options *o, double retry_after_s);

/* Replace each occurrence of secret in s with "[redacted]"; returns s (a
 * fresh string when anything was replaced; the old one is freed). */
char *llm_redact(char *s, const char *secret);

#endif
