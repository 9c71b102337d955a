/* mkb chat --model SPEC MESSAGE: one message to a model, its reply and usage.
 * The model clients' command-line face: try a provider key, an endpoint, a
 * price table. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "llm.h"
#include "util.h"

#define CHAT_MAX_MESSAGE (8u << 20) /* bytes of a message read from stdin */

static const char chat_help[] =
	"usage: mkb chat --model PROVIDER:MODEL [options] MESSAGE|-\n"
	"\n"
	"Sends one user message (- reads it from stdin); prints the reply on stdout\n"
	"and a line of usage on stderr.\n"
	"\n"
	"  --model SPEC          openai:MODEL (any OpenAI-compatible endpoint) or anthropic:MODEL\n"
	"  --base-url URL        endpoint base (default $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL,\n"
	"                        then https://api.openai.com/v1 or https://api.anthropic.com)\n"
	"  --system TEXT         system text\n"
	"  --max-tokens N        reply length cap (provider's default; Anthropic 4096)\n"
	"  --temperature T       0..2 (provider's default)\n"
	"  --top-p P             0..1 (provider's default)\n"
	"  --retries N           retries of a transient failure: 429, 5xx, timeout, network (3)\n"
	"  --retry-delay S       seconds between attempts, longer if the server asks (30)\n"
	"  --timeout S           seconds for one request, reply included (600)\n"
	"  --prices FILE         JSON prices per model, for cost_usd\n"
	"  --json                one JSON object: text, stop_reason, usage, latency_ms,\n"
	"                        attempts, cost_usd, error_class, ...\n"
	"\n"
	"Keys come from the environment only: OPENAI_API_KEY, ANTHROPIC_API_KEY.\n"
	"Exit: 0 a reply, 2 bad usage, 3 infrastructure (retries ran out: rate limit,\n"
	"server, timeout, network), 4 the provider refused (auth, context length,\n"
	"bad request, a reply that cannot be read).\n";

enum {
	OPT_MODEL = 256, OPT_BASE_URL, OPT_SYSTEM, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_P,
	OPT_RETRIES, OPT_RETRY_DELAY, OPT_TIMEOUT, OPT_PRICES, OPT_JSON, OPT_HELP,
};

struct chat_args {
	const char *model, *system, *prices, *message;
	struct llm_options opts;
	struct llm_decoding dec;
	int as_json;
};

/* A number in [min, max]: 0, or -1 (error printed). */
static int number_arg(const char *flag, const char *s, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < min || v > max)
		return error("%s wants a number in %g..%g, not '%s'", flag, min, max, s);
	*out = v;
	return 0;
}

/* 0: parsed; -1: --help was printed; EXIT_USAGE: bad usage (printed). */
static int parse_args(int argc, char **argv, struct chat_args *a)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, OPT_MODEL},
		{"base-url", required_argument, NULL, OPT_BASE_URL},
		{"system", required_argument, NULL, OPT_SYSTEM},
		{"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
		{"temperature", required_argument, NULL, OPT_TEMPERATURE},
		{"top-p", required_argument, NULL, OPT_TOP_P},
		{"retries", required_argument, NULL, OPT_RETRIES},
		{"retry-delay", required_argument, NULL, OPT_RETRY_DELAY},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"prices", required_argument, NULL, OPT_PRICES},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	int c;
	long n;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_MODEL: a->model = optarg; break;
		case OPT_BASE_URL: a->opts.base_url = optarg; break;
		case OPT_SYSTEM: a->system = optarg; break;
		case OPT_PRICES: a->prices = optarg; break;
		case OPT_JSON: a->as_json = 1; break;
		case OPT_HELP: case 'h': fputs(chat_help, stdout); return -1;
		case OPT_MAX_TOKENS:
			if (parse_long(optarg, 1, 10000000, &a->dec.max_tokens) < 0)
				return usage_error("chat", "--max-tokens wants an integer in 1..10000000, not '%s'",
						   optarg);
			break;
		case OPT_RETRIES:
			if (parse_long(optarg, 0, 100, &n) < 0)
				return usage_error("chat", "--retries wants an integer in 0..100, not '%s'", optarg);
			a->opts.retries = (int)n;
			break;
		case OPT_TEMPERATURE:
			if (number_arg("--temperature", optarg, 0, 2, &a->dec.temperature) < 0)
				return usage_error("chat", NULL);
			break;
		case OPT_TOP_P:
			if (number_arg("--top-p", optarg, 0, 1, &a->dec.top_p) < 0)
				return usage_error("chat", NULL);
			break;
		case OPT_RETRY_DELAY:
			if (number_arg("--retry-delay", optarg, 0, 3600, &a->opts.retry_delay_s) < 0)
				return usage_error("chat", NULL);
			break;
		case OPT_TIMEOUT:
			if (number_arg("--timeout", optarg, 0.001, 86400, &a->opts.timeout_s) < 0)
				return usage_error("chat", NULL);
			break;
		default: return usage_error("chat", "bad option");
		}
	}
	if (!a->model)
		return usage_error("chat", "--model is required");
	if (argc - optind != 1)
		return usage_error("chat", "give one message, or - to read it from stdin");
	a->message = argv[optind];
	return 0;
}

/* stdin, at most CHAT_MAX_MESSAGE bytes, into *out. 0 or -1 (error printed). */
static int read_stdin(char **out)
{
	struct buf b = BUF_INIT(CHAT_MAX_MESSAGE);
	char chunk[65536];
	for (;;) {
		ssize_t r = read(STDIN_FILENO, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			buf_release(&b);
			return error("cannot read stdin: %s", strerror(errno));
		}
		if (r == 0)
			break;
		if (buf_add(&b, chunk, (size_t)r) < 0) {
			buf_release(&b);
			return error("the message on stdin is over %u bytes", CHAT_MAX_MESSAGE);
		}
	}
	*out = buf_detach(&b);
	return 0;
}

static json_t *count_json(long n)
{
	return n < 0 ? json_null() : json_integer(n);
}

static int print_json(const struct chat_args *a, const struct llm_response *r)
{
	json_t *usage = json_object(), *o = json_object();
	json_t *raw = r->usage_json ? json_loads(r->usage_json, 0, NULL) : NULL;
	json_object_set_new(usage, "input_tokens", count_json(r->usage.input_tokens));
	json_object_set_new(usage, "cached_input_tokens", count_json(r->usage.cached_input_tokens));
	json_object_set_new(usage, "output_tokens", count_json(r->usage.output_tokens));
	json_object_set_new(o, "model", json_string(a->model));
	json_object_set_new(o, "text", r->text ? json_string(r->text) : json_null());
	json_object_set_new(o, "stop_reason", r->stop_reason ? json_string(r->stop_reason) : json_null());
	json_object_set_new(o, "usage", usage);
	json_object_set_new(o, "provider_usage", raw ? raw : json_null());
	json_object_set_new(o, "latency_ms", json_real(r->latency_ms));
	json_object_set_new(o, "elapsed_ms", json_real(r->elapsed_ms));
	json_object_set_new(o, "attempts", json_integer(r->attempts));
	json_object_set_new(o, "cost_usd", r->cost_usd < 0 ? json_null() : json_real(r->cost_usd));
	json_object_set_new(o, "http_status", r->http_status ? json_integer(r->http_status) : json_null());
	json_object_set_new(o, "error_class", r->error ? json_string(llm_error_name(r->error)) : json_null());
	json_object_set_new(o, "error", r->error_message ? json_string(r->error_message) : json_null());
	int rc = json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	putchar('\n');
	json_decref(o);
	return rc < 0 ? error("cannot write JSON") : 0;
}

/* A token count for people: "?" when the provider reported none. */
static const char *count_text(long n, char *buf, size_t size)
{
	if (n < 0)
		return "?";
	snprintf(buf, size, "%ld", n);
	return buf;
}

static void print_text(const struct llm_response *r)
{
	char in[32], cached[32], out[32];
	size_t n = strlen(r->text);
	fputs(r->text, stdout);
	if (!n || r->text[n - 1] != '\n')
		putchar('\n');
	fprintf(stderr, "tokens: %s in (%s cached), %s out; stop: %s; %.0f ms; %d attempt%s",
		count_text(r->usage.input_tokens, in, sizeof(in)),
		count_text(r->usage.cached_input_tokens, cached, sizeof(cached)),
		count_text(r->usage.output_tokens, out, sizeof(out)),
		*r->stop_reason ? r->stop_reason : "-", r->latency_ms, r->attempts, r->attempts == 1 ? "" : "s");
	if (r->cost_usd >= 0)
		fprintf(stderr, "; $%.6f", r->cost_usd);
	fputc('\n', stderr);
}

int cmd_chat(int argc, char **argv)
{
	struct chat_args a = {0};
	llm_options_init(&a.opts);
	a.dec = (struct llm_decoding)LLM_DECODING_INIT;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE; /* -1: --help was shown */

	struct llm_client client;
	if (llm_client_init(&client, a.model, &a.opts) < 0)
		return usage_error("chat", NULL);
	struct llm_price price;
	if (a.prices) {
		int found = llm_price_load(a.prices, a.model, &client.model, &price);
		if (found < 0) {
			llm_client_release(&client);
			return EXIT_USAGE;
		}
		if (found)
			warning("prices '%s' have no entry for '%s' or '%s': no cost", a.prices, a.model,
				client.model.name);
		else
			client.opts.price = &price;
	}
	char *text = NULL;
	if (!strcmp(a.message, "-") && read_stdin(&text) < 0) {
		llm_client_release(&client);
		return EXIT_INFRA;
	}
	struct llm_conversation conv = LLM_CONVERSATION_INIT;
	llm_conversation_set_system(&conv, a.system);
	llm_conversation_add(&conv, LLM_USER, text ? text : a.message);
	free(text);

	struct llm_response r;
	llm_response_init(&r);
	int ok = llm_chat(&client, &conv, &a.dec, &r) == 0;
	rc = ok ? EXIT_OK : llm_error_retryable(r.error) ? EXIT_INFRA : EXIT_MODEL;
	if (!ok)
		error("%s: %s after %d attempt%s: %s", a.model, llm_error_name(r.error), r.attempts,
		      r.attempts == 1 ? "" : "s", r.error_message);
	if (a.as_json) {
		if (print_json(&a, &r) < 0)
			rc = EXIT_INFRA;
	} else if (ok) {
		print_text(&r);
	}
	llm_response_release(&r);
	llm_conversation_release(&conv);
	llm_client_release(&client);
	return rc;
}
