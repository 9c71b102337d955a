/* What differs between the model providers, one table each (llm_openai.c,
 * llm_anthropic.c): where requests go, how the key travels, the request and
 * response bodies, and how a provider says "context too long". llm.c holds
 * everything they share (retries, classification by status, usage, cost).
 * Exposed for llm.c and the unit tests only. */
#ifndef MKB_LLM_PROVIDER_H
#define MKB_LLM_PROVIDER_H

#include <jansson.h>

#include "llm.h"

#define LLM_MAX_HEADERS 4

struct llm_provider_ops {
	enum llm_provider id;
	const char *name;         /* "openai", the spec's prefix */
	const char *key_env;      /* the environment variable holding the key */
	const char *base_env;     /* the environment variable of the base URL */
	const char *default_base;
	const char *path;         /* appended to the base URL */

	/* The request body as compact JSON (caller frees), or NULL with *why set
	 * to a static message (text that is not UTF-8). */
	char *(*request)(const struct llm_model *m, const char *base_url, const struct llm_conversation *c,
			 const struct llm_decoding *d, const char **why);
	/* Fill lines with "Name: value" headers (each freed by the caller), the
	 * key's header only when key is non-NULL; returns how many. */
	size_t (*headers)(const char *key, char *lines[LLM_MAX_HEADERS]);
	/* Read a success body into r's text, stop_reason, usage and usage_json.
	 * 0, or -1 with *why (caller frees) saying what is missing. */
	int (*parse)(const char *body, struct llm_response *r, char **why);
	/* Does this error response say the conversation is too long? */
	int (*context_overflow)(long status, const char *type, const char *code, const char *message);
};

extern const struct llm_provider_ops llm_openai_ops, llm_anthropic_ops;

const struct llm_provider_ops *llm_provider_ops(enum llm_provider p);

/* The class of a response with a status other than 2xx, and in *message
 * (caller frees) the provider's own words ("HTTP <status>" when the body has
 * none), cut to a few hundred bytes. */
enum llm_error llm_classify(const struct llm_provider_ops *ops, long status, const char *body,
			    char **message);

/* Shared by the providers. A non-negative integer field of obj, or -1 when
 * absent or not one. */
long llm_json_count(json_t *obj, const char *key);
/* Set obj[key] to the string; -1 when value is not valid UTF-8. */
int llm_json_set_string(json_t *obj, const char *key, const char *value);
/* The turns as [{"role", "content"}], the system text first as a "system"
 * turn when with_system; NULL when some text is not valid UTF-8. */
json_t *llm_json_messages(const struct llm_conversation *c, int with_system);
/* The request body of a provider's built object o (consumed): compact JSON,
 * reals to 15 digits; NULL with *why when building failed (rc != 0) or the
 * dump did. */
char *llm_json_finish(json_t *o, int rc, const char **why);
/* A string field of obj, or NULL. */
const char *llm_json_str(json_t *obj, const char *key);

#endif
