#include "llm_flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void llm_flags_init(struct llm_flags *f)
{
	memset(f, 0, sizeof(*f));
	llm_options_init(&f->opts);
	f->dec = (struct llm_decoding)LLM_DECODING_INIT;
}

int number_arg(const char *flag, const char *s, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < min || v > max)
		return error("%s wants a number in %g..%g, not '%s'", flag, min, max, s);
	*out = v;
	return 0;
}

int llm_flag(int c, const char *arg, struct llm_flags *f)
{
	long n;
	switch (c) {
	case LLM_OPT_MODEL: f->model = arg; return 1;
	case LLM_OPT_BASE_URL: f->opts.base_url = arg; return 1;
	case LLM_OPT_PRICES: f->prices = arg; return 1;
	case LLM_OPT_MAX_TOKENS:
		if (parse_long(arg, 1, 10000000, &f->dec.max_tokens) < 0)
			return error("--max-tokens wants an integer in 1..10000000, not '%s'", arg);
		return 1;
	case LLM_OPT_RETRIES:
		if (parse_long(arg, 0, 100, &n) < 0)
			return error("--retries wants an integer in 0..100, not '%s'", arg);
		f->opts.retries = (int)n;
		return 1;
	case LLM_OPT_TEMPERATURE:
		if (!strcmp(arg, "none")) {
			f->dec.temperature = -1;
			return 1;
		}
		return number_arg("--temperature", arg, 0, 2, &f->dec.temperature) < 0 ? -1 : 1;
	case LLM_OPT_TOP_P:
		return number_arg("--top-p", arg, 0, 1, &f->dec.top_p) < 0 ? -1 : 1;
	case LLM_OPT_RESPONSE_FORMAT:
		for (int i = LLM_REPLY_TEXT; i <= LLM_REPLY_JSON_OBJECT; i++)
			if (!strcmp(arg, llm_reply_format_name(i))) {
				f->dec.format = i;
				return 1;
			}
		return error("--response-format wants text, json-schema or json-object, not '%s'", arg);
	case LLM_OPT_RETRY_DELAY:
		return number_arg("--retry-delay", arg, 0, 3600, &f->opts.retry_delay_s) < 0 ? -1 : 1;
	default:
		return 0;
	}
}

int llm_flags_prices(struct llm_flags *f)
{
	if (!f->prices)
		return 0;
	struct llm_model m;
	if (llm_model_parse(f->model, &m) < 0)
		return -1;
	int found = llm_price_load(f->prices, f->model, &m, &f->price);
	if (found == 1)
		warning("prices '%s' have no entry for '%s' or '%s': no cost", f->prices, f->model, m.name);
	else if (found == 0)
		f->opts.price = &f->price;
	llm_model_release(&m);
	return found < 0 ? -1 : 0;
}

int llm_flags_check(struct llm_flags *f)
{
	if (f->dec.format != LLM_REPLY_TEXT && f->model && !strncmp(f->model, "anthropic:", 10))
		return error("--response-format %s is for openai: models only (the Messages API has no "
			     "response_format)", llm_reply_format_name(f->dec.format));
	return llm_flags_prices(f);
}

const char *llm_reply_format_name(enum llm_reply_format f)
{
	switch (f) {
	case LLM_REPLY_TEXT: return "text";
	case LLM_REPLY_JSON_SCHEMA: return "json-schema";
	case LLM_REPLY_JSON_OBJECT: return "json-object";
	}
	return "unknown";
}

json_t *llm_decoding_json(const struct llm_decoding *d)
{
	json_t *o = json_object();
	if (d->temperature >= 0)
		json_object_set_new(o, "temperature", json_real(d->temperature));
	if (d->top_p >= 0)
		json_object_set_new(o, "top_p", json_real(d->top_p));
	if (d->max_tokens > 0)
		json_object_set_new(o, "max_tokens", json_integer(d->max_tokens));
	/* Absent when text, so the keys of trials run before the option existed stay valid. */
	if (d->format != LLM_REPLY_TEXT)
		json_object_set_new(o, "response_format", json_string(llm_reply_format_name(d->format)));
	return o;
}

int llm_decoding_from_json(json_t *o, struct llm_decoding *d)
{
	*d = (struct llm_decoding)LLM_DECODING_INIT;
	if (!json_is_object(o))
		return error("decoding settings that are not a JSON object");
	json_t *v;
	if ((v = json_object_get(o, "temperature")) && json_is_number(v))
		d->temperature = json_number_value(v);
	if ((v = json_object_get(o, "top_p")) && json_is_number(v))
		d->top_p = json_number_value(v);
	if ((v = json_object_get(o, "max_tokens")) && json_is_integer(v))
		d->max_tokens = (long)json_integer_value(v);
	if ((v = json_object_get(o, "response_format"))) {
		int i;
		for (i = LLM_REPLY_TEXT; i <= LLM_REPLY_JSON_OBJECT; i++)
			if (json_is_string(v) && !strcmp(json_string_value(v), llm_reply_format_name(i)))
				break;
		if (i > LLM_REPLY_JSON_OBJECT)
			return error("decoding settings with an unknown response_format");
		d->format = i;
	}
	return 0;
}
