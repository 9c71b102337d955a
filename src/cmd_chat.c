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
#include "llm_flags.h"
#include "mkb_limits.h"
#include "util.h"

static const char chat_help[] =
	"usage: mkb chat --model PROVIDER:MODEL [options] MESSAGE|-\n"
	"\n"
	"Sends one user message (- reads it from stdin); prints the reply on stdout\n"
	"and a line of usage on stderr.\n"
	"\n"
	LLM_FLAGS_HELP
	"  --system TEXT         system text\n"
	"  --timeout S           seconds for one request, reply included (600)\n"
	"  --json                one JSON object: text, stop_reason, usage, latency_ms,\n"
	"                        attempts, cost_usd, error_class, ...\n"
	"\n"
	"Keys come from the environment only: OPENAI_API_KEY, ANTHROPIC_API_KEY.\n"
	"Exit: 0 a reply, 2 bad usage, 3 infrastructure (retries ran out: rate limit,\n"
	"server, timeout, network), 4 the provider refused (auth, context length,\n"
	"bad request, a reply that cannot be read).\n";

enum { OPT_SYSTEM = 256, OPT_TIMEOUT, OPT_JSON, OPT_HELP };

struct chat_args {
	struct llm_flags llm;
	const char *system, *message;
	int as_json;
};

/* 0: parsed; -1: --help was printed; EXIT_USAGE: bad usage (printed). */
static int parse_args(int argc, char **argv, struct chat_args *a)
{
	static const struct option opts[] = {
		LLM_LONG_OPTIONS,
		{"system", required_argument, NULL, OPT_SYSTEM},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_SYSTEM: a->system = optarg; break;
		case OPT_JSON: a->as_json = 1; break;
		case OPT_HELP: case 'h': fputs(chat_help, stdout); return -1;
		case OPT_TIMEOUT:
			if (number_arg("--timeout", optarg, 0.001, 86400, &a->llm.opts.timeout_s) < 0)
				return usage_error("chat", NULL);
			break;
		default: {
			int taken = llm_flag(c, optarg, &a->llm);
			if (taken < 0)
				return usage_error("chat", NULL);
			if (!taken)
				return usage_error("chat", "bad option");
		}
		}
	}
	if (!a->llm.model)
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
	json_object_set_new(o, "model", json_string(a->llm.model));
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
	llm_flags_init(&a.llm);
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE; /* -1: --help was shown */
	if (a.llm.dec.format != LLM_REPLY_TEXT) /* it constrains to the agent's schema; chat has none */
		return usage_error("chat", "--response-format is for the agent's replies (mkb attempt, mkb run)");

	struct llm_client client;
	if (llm_client_init(&client, a.llm.model, &a.llm.opts) < 0)
		return usage_error("chat", NULL);
	if (llm_flags_check(&a.llm) < 0) {
		llm_client_release(&client);
		return EXIT_USAGE;
	}
	client.opts.price = a.llm.opts.price;
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
	int ok = llm_chat(&client, &conv, &a.llm.dec, &r) == 0;
	rc = ok ? EXIT_OK : llm_error_retryable(r.error) ? EXIT_INFRA : EXIT_MODEL;
	if (!ok)
		error("%s: %s after %d attempt%s: %s", a.llm.model, llm_error_name(r.error), r.attempts,
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
