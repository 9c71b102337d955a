/* mkb attempt NN --dsl D --model SPEC: one attempt of a model at a variant
 * (attempt.h); mkb attempt show ID: its transcript. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "attempt.h"
#include "cmd.h"
#include "attempt_flags.h"
#include "judge_flags.h"
#include "llm_flags.h"
#include "paths.h"
#include "proc.h"
#include "store.h"
#include "util.h"
#include "zygote_auto.h"

static const char attempt_help[] =
	"usage: mkb attempt NN --dsl cutedsl|tirx --model SPEC [options]\n"
	"       mkb attempt show ID [--json] [--store PATH]\n"
	"\n"
	"A model works on one variant in a sandboxed terminal (the built-in Terminus-2\n"
	"compatible agent), submits kernel.py to the judge for feedback, and leaves\n"
	"kernel.py and SKILL.md; the final kernel.py is graded once more and that\n"
	"verdict is the attempt's. Everything lands in the store as it happens.\n"
	"\n"
	LLM_FLAGS_HELP
	ATTEMPT_FLAGS_HELP
	"  --skill FILE          a skill arm: attach this SKILL.md (PROTOCOL.md)\n"
	"  --skill-from DSL      the DSL the skill was distilled in (default: the other one)\n"
	"  --arm LABEL           a label recorded with the attempt\n"
	"  --workdir DIR         the attempt's folder (default runs/attempts/<time>-pNN-<dsl>)\n"
	"  --json                print the attempt's record as one JSON object\n"
	JUDGE_FLAGS_HELP
	"\n"
	"Keys come from the environment only (OPENAI_API_KEY, ANTHROPIC_API_KEY) and\n"
	"never reach the sandbox, the store or the transcript.\n"
	"Exit: 0 passed, 1 failed or timed out, 2 bad usage, 3 infrastructure error,\n"
	"4 model error.\n";

enum {
	OPT_DSL = 256, OPT_SKILL, OPT_SKILL_FROM, OPT_ARM, OPT_WORKDIR, OPT_JSON, OPT_HELP,
};

struct attempt_args {
	struct llm_flags llm;
	struct judge_opts judge;
	struct attempt_opts a;
	const char *dsl_id, *skill_from;
	int as_json;
};

static int parse_args(int argc, char **argv, struct attempt_args *x)
{
	static const struct option opts[] = {
		LLM_LONG_OPTIONS,
		JUDGE_LONG_OPTIONS,
		ATTEMPT_LONG_OPTIONS,
		{"dsl", required_argument, NULL, OPT_DSL},
		{"skill", required_argument, NULL, OPT_SKILL},
		{"skill-from", required_argument, NULL, OPT_SKILL_FROM},
		{"arm", required_argument, NULL, OPT_ARM},
		{"workdir", required_argument, NULL, OPT_WORKDIR},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_DSL: x->dsl_id = optarg; break;
		case OPT_SKILL: x->a.skill_path = optarg; break;
		case OPT_SKILL_FROM: x->skill_from = optarg; break;
		case OPT_ARM: x->a.arm = optarg; break;
		case OPT_WORKDIR: x->a.workdir = optarg; break;
		case OPT_JSON: x->as_json = 1; break;
		case OPT_HELP: case 'h': fputs(attempt_help, stdout); return -1;
		default: {
			int taken = llm_flag(c, optarg, &x->llm);
			if (!taken)
				taken = judge_flag(c, optarg, &x->judge);
			if (!taken)
				taken = attempt_flag(c, optarg, &x->a, &x->judge);
			if (taken < 0)
				return usage_error("attempt", NULL);
			if (!taken)
				return usage_error("attempt", "bad option");
		}
		}
	}
	if (argc - optind != 1)
		return usage_error("attempt", "give one problem number");
	if (!x->llm.model)
		return usage_error("attempt", "--model is required");
	if (judge_flags_check(&x->judge) < 0)
		return usage_error("attempt", NULL);
	return 0;
}

static const char *count(json_t *v, char *buf, size_t size)
{
	if (!json_is_integer(v))
		return "?";
	snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	return buf;
}

static void print_summary(const struct attempt_result *r)
{
	json_t *s = r->summary;
	char in[32], cached[32], out[32];
	printf("attempt %lld: %s\n", (long long)r->id, r->status);
	if (r->reason && *r->reason)
		printf("reason: %s\n", r->reason);
	printf("turns: %d, submissions used: %d, agent time: %.1f s\n", r->turns, r->submissions,
	       r->agent_s);
	printf("tokens: %s in (%s cached), %s out", count(json_object_get(s, "input_tokens"), in, sizeof(in)),
	       count(json_object_get(s, "cached_tokens"), cached, sizeof(cached)),
	       count(json_object_get(s, "output_tokens"), out, sizeof(out)));
	json_t *cost = json_object_get(s, "cost_usd");
	if (json_is_number(cost))
		printf(", $%.4f", json_number_value(cost));
	putchar('\n');
	if (r->final) {
		json_t *f = r->final;
		printf("final kernel: %s", json_string_value(json_object_get(f, "status")));
		if (json_is_number(json_object_get(f, "speedup")))
			printf(", kernel %.4f ms, eager %.4f ms, speedup %.3fx",
			       json_number_value(json_object_get(f, "kernel_ms")),
			       json_number_value(json_object_get(f, "eager_ms")),
			       json_number_value(json_object_get(f, "speedup")));
		putchar('\n');
	}
	json_t *skill = json_object_get(s, "skill_out_tokens");
	printf("SKILL.md: %s\n", json_is_integer(skill) ? "written" : "none");
	printf("folder: %s\n", json_string_value(json_object_get(s, "workdir")));
	printf("transcript: mkb attempt show %lld\n", (long long)r->id);
}

static char *default_workdir(const char *root, int number, const char *dsl)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	return xstrfmt("%s/runs/attempts/%s-p%02d-%s-%d", root, stamp, number, dsl, (int)getpid());
}

static int exit_for(const char *status)
{
	if (!strcmp(status, "passed"))
		return EXIT_OK;
	if (!strcmp(status, "infra_error"))
		return EXIT_INFRA;
	if (!strcmp(status, "model_error"))
		return EXIT_MODEL;
	return EXIT_NEGATIVE;
}

/* ---- show --------------------------------------------------------------- */

static void print_event(json_t *e)
{
	const char *kind = json_string_value(json_object_get(e, "kind"));
	json_t *b = json_object_get(e, "body");
	printf("\n--- [%7.1f s] %s", json_number_value(json_object_get(e, "elapsed_s")), kind);
	json_t *turn = json_object_get(b, "turn");
	if (json_is_integer(turn))
		printf(" (turn %lld)", (long long)json_integer_value(turn));
	putchar('\n');
	const char *fields[] = {"purpose", "prompt", "text", "keystrokes", "feedback", "error",
				"error_message", "reason", "agent_end", "next_prompt"};
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		json_t *v = json_object_get(b, fields[i]);
		if (json_is_string(v) && *json_string_value(v))
			printf("%s: %s\n", fields[i], json_string_value(v));
	}
	json_t *usage = json_object_get(b, "usage");
	if (usage) {
		char in[32], out[32];
		printf("usage: %s in, %s out, %.0f ms\n", count(json_object_get(usage, "input_tokens"), in, sizeof(in)),
		       count(json_object_get(usage, "output_tokens"), out, sizeof(out)),
		       json_number_value(json_object_get(b, "latency_ms")));
	}
	json_t *v = json_object_get(b, "verdict");
	if (json_is_object(v) && !json_object_get(b, "feedback"))
		printf("verdict: %s %s\n", json_string_value(json_object_get(v, "status")),
		       json_string_value(json_object_get(v, "reason")) ?: "");
}

static int attempt_show(int argc, char **argv)
{
	static const struct option opts[] = {
		{"store", required_argument, NULL, ATTEMPT_OPT_STORE},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	const char *store_path = NULL;
	int as_json = 0, c;
	long id;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case ATTEMPT_OPT_STORE: store_path = optarg; break;
		case OPT_JSON: as_json = 1; break;
		case OPT_HELP: case 'h': fputs(attempt_help, stdout); return EXIT_OK;
		default: return usage_error("attempt", "bad option");
		}
	}
	if (argc - optind != 1 || parse_long(argv[optind], 1, 1L << 62, &id) < 0)
		return usage_error("attempt", "show takes one attempt id");
	char *root = paths_root();
	char *path = store_path ? xstrdup(store_path) : paths_store(root);
	free(root);
	struct store *st;
	if (store_open(path, &st) < 0) {
		free(path);
		return EXIT_INFRA;
	}
	free(path);
	json_t *a = store_load_attempt(st, id);
	store_close(st);
	if (!a)
		return EXIT_USAGE;
	if (as_json) {
		json_dumpf(a, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		printf("attempt %ld: problem %lld, %s, %s, %s\n", id,
		       (long long)json_integer_value(json_object_get(a, "problem")),
		       json_string_value(json_object_get(a, "dsl")),
		       json_string_value(json_object_get(a, "model")),
		       json_string_value(json_object_get(a, "status")));
		json_t *e;
		size_t i;
		json_array_foreach(json_object_get(a, "events"), i, e)
			print_event(e);
	}
	json_decref(a);
	return EXIT_OK;
}

int cmd_attempt(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "show"))
		return attempt_show(argc - 1, argv + 1);
	struct attempt_args x;
	memset(&x, 0, sizeof(x));
	llm_flags_init(&x.llm);
	x.llm.dec.temperature = AGENT_TEMPERATURE;
	judge_opts_init(&x.judge);
	x.judge.python = NULL;
	attempt_opts_init(&x.a);
	int rc = parse_args(argc, argv, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE;
	const struct dsl *dsl;
	if (dsl_arg("attempt", x.dsl_id, 1, &dsl))
		return EXIT_USAGE;
	if (gpu_check(&x.judge) < 0)
		return EXIT_INFRA;
	if (llm_flags_check(&x.llm) < 0)
		return EXIT_USAGE;
	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	const struct problem *p = mkb_env_problem(&env, argv[optind]);
	if (!p) {
		mkb_env_release(&env);
		return EXIT_USAGE;
	}
	const struct dsl *from = NULL;
	if (x.skill_from && dsl_arg("attempt", x.skill_from, 1, &from)) {
		mkb_env_release(&env);
		return EXIT_USAGE;
	}
	if (x.a.skill_path && !from)
		from = dsl_other(dsl);
	char *workdir = x.a.workdir ? NULL : default_workdir(env.root, p->number, dsl->id);
	x.a.root = env.root;
	x.a.problem = p;
	x.a.dsl = dsl;
	x.a.model = x.llm.model;
	x.a.llm = x.llm.opts;
	x.a.decoding = x.llm.dec;
	x.a.skill_from = from ? from->name : NULL;
	x.a.workdir = workdir ? workdir : x.a.workdir;
	x.a.judge = &x.judge;
	const char *off = getenv("MKB_SANDBOX_OFF");
	if (off && *off && sandbox_parse_layers(off, &x.a.sandbox_off) < 0) {
		free(workdir);
		mkb_env_release(&env);
		return usage_error("attempt", "MKB_SANDBOX_OFF names an unknown layer");
	}
	struct attempt_result r;
	proc_catch_interrupts();
	struct zygote_auto za = ZYGOTE_AUTO_INIT; /* --zygote auto: one for the attempt's evaluations */
	zygote_auto_start(&za, &x.judge);
	rc = attempt_run(&x.a, &r) < 0 ? EXIT_INFRA : exit_for(r.status);
	zygote_auto_stop(&za);
	if (r.status) {
		if (x.as_json) {
			json_t *o = json_deep_copy(r.summary);
			json_object_del(o, "events");
			json_object_set(o, "final_verdict", r.final ? r.final : json_null());
			json_dumpf(o, stdout, JSON_COMPACT);
			putchar('\n');
			json_decref(o);
		} else {
			print_summary(&r);
		}
	}
	attempt_result_release(&r);
	free(workdir);
	mkb_env_release(&env);
	if (proc_interrupted())
		rc = 128 + proc_interrupted();
	return rc;
}
