/* The command-line flags of a model client, shared by every command that
 * talks to a model (chat, attempt): provider and model, endpoint, decoding,
 * retries, prices. */
#ifndef MKB_LLM_FLAGS_H
#define MKB_LLM_FLAGS_H

#include <getopt.h>
#include <jansson.h>

#include "llm.h"

enum {
	LLM_OPT_MODEL = 768, LLM_OPT_BASE_URL, LLM_OPT_MAX_TOKENS, LLM_OPT_TEMPERATURE, LLM_OPT_TOP_P,
	LLM_OPT_RETRIES, LLM_OPT_RETRY_DELAY, LLM_OPT_REQUEST_TIMEOUT, LLM_OPT_PRICES,
	LLM_OPT_RESPONSE_FORMAT,
};

#define LLM_LONG_OPTIONS                                                          \
	{"model", required_argument, NULL, LLM_OPT_MODEL},                        \
	{"base-url", required_argument, NULL, LLM_OPT_BASE_URL},                  \
	{"max-tokens", required_argument, NULL, LLM_OPT_MAX_TOKENS},              \
	{"temperature", required_argument, NULL, LLM_OPT_TEMPERATURE},            \
	{"top-p", required_argument, NULL, LLM_OPT_TOP_P},                        \
	{"response-format", required_argument, NULL, LLM_OPT_RESPONSE_FORMAT},    \
	{"retries", required_argument, NULL, LLM_OPT_RETRIES},                    \
	{"retry-delay", required_argument, NULL, LLM_OPT_RETRY_DELAY},            \
	{"prices", required_argument, NULL, LLM_OPT_PRICES}

#define LLM_FLAGS_HELP                                                                            \
	"  --model SPEC          openai:MODEL (any OpenAI-compatible endpoint) or anthropic:MODEL\n" \
	"  --base-url URL        endpoint base (default $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL,\n"  \
	"                        then https://api.openai.com/v1 or https://api.anthropic.com)\n"     \
	"  --max-tokens N        reply length cap (provider's default; Anthropic 4096)\n"            \
	"  --temperature T|none  0..2; none sends no temperature\n"                                  \
	"  --top-p P             0..1 (provider's default)\n"                                        \
	"  --response-format F   text (default), json-schema or json-object: the server decodes\n"  \
	"                        only replies in the agent's JSON (ours; openai: models only)\n"    \
	"  --retries N           retries of a transient failure: 429, 5xx, timeout, network (3)\n"   \
	"  --retry-delay S       seconds between attempts, longer if the server asks (30)\n"         \
	"  --prices FILE         JSON prices per model, for cost_usd\n"

struct llm_flags {
	const char *model, *prices;
	struct llm_options opts;
	struct llm_decoding dec;
	struct llm_price price; /* filled by llm_flags_prices */
};

void llm_flags_init(struct llm_flags *f);
/* Take option c if it is one of LLM_LONG_OPTIONS: 1 taken, 0 not ours, -1
 * bad value (error printed). */
int llm_flag(int c, const char *arg, struct llm_flags *f);
/* Read --prices for the model of spec into f->price and point f->opts.price
 * at it. 0 (a missing entry is a warning: no cost), -1 unreadable. */
int llm_flags_prices(struct llm_flags *f);
/* After parsing: refuse flags that do not go together (a reply format for
 * an anthropic: model), then llm_flags_prices. 0, or -1 (error printed). */
int llm_flags_check(struct llm_flags *f);

/* "text", "json-schema", "json-object" (the flag's values). */
const char *llm_reply_format_name(enum llm_reply_format f);
/* The decoding settings as an attempt records them and trials are keyed:
 * only those set (temperature, top_p, max_tokens, response_format when not
 * text; the per-call schema is the agent's, not a setting). */
json_t *llm_decoding_json(const struct llm_decoding *d);
/* Back from that JSON. 0, or -1 (error printed). */
int llm_decoding_from_json(json_t *o, struct llm_decoding *d);
/* A number in [min, max]: 0, or -1 (error printed). */
int number_arg(const char *flag, const char *s, double min, double max, double *out);

#endif
