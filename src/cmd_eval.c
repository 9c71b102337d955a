/* mkb eval NN --dsl D KERNEL.py: grade one kernel, print its feedback (or one
 * JSON object with --json), and record the evaluation in the store. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "dsl.h"
#include "feedback.h"
#include "grade.h"
#include "judge_flags.h"
#include "proc.h"
#include "util.h"
#include "zygote_auto.h"

static const char eval_help[] =
	"usage: mkb eval NN --dsl cutedsl|tirx [options] KERNEL.py\n"
	"\n"
	"  --workload W          visible (default), heldout or smoke\n"
	"  --json                print one JSON object instead of the feedback text\n"
	"  --store PATH          results store (default $MKB_STORE or <root>/mkb.db)\n"
	"  --no-store            do not record the evaluation\n"
	"  --submission K/N      the feedback says \"submission K of N\" (an attempt's)\n"
	"  --minutes-left M      ... and the minutes the attempt has left\n"
	JUDGE_FLAGS_HELP;

enum { OPT_STORE = 256, OPT_NO_STORE, OPT_SUBMISSION, OPT_MINUTES_LEFT };

struct eval_args {
	struct judge_opts judge;
	const char *dsl_id, *store_path, *kernel;
	int as_json, no_store;
	struct submission_ctx sub;
	int has_sub;
};

/* "K/N" with 1 <= K <= N. */
static int parse_submission(const char *s, struct submission_ctx *sub)
{
	const char *slash = strchr(s, '/');
	long k, n;
	if (!slash || slash == s)
		return -1;
	char *head = xstrfmt("%.*s", (int)(slash - s), s);
	int rc = parse_long(head, 1, 1000000, &k) < 0 || parse_long(slash + 1, 1, 1000000, &n) < 0 ||
		 k > n ? -1 : 0;
	free(head);
	if (!rc) {
		sub->index = (int)k;
		sub->limit = (int)n;
	}
	return rc;
}

/* 0: parsed; -1: --help was printed; EXIT_USAGE: bad usage (printed). */
static int parse_args(int argc, char **argv, struct eval_args *a)
{
	static const struct option opts[] = {
		{"dsl", required_argument, NULL, 'd'},
		{"workload", required_argument, NULL, 'w'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"store", required_argument, NULL, OPT_STORE},
		{"no-store", no_argument, NULL, OPT_NO_STORE},
		{"submission", required_argument, NULL, OPT_SUBMISSION},
		{"minutes-left", required_argument, NULL, OPT_MINUTES_LEFT},
		JUDGE_LONG_OPTIONS,
		{NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:w:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'd': a->dsl_id = optarg; break;
		case 'w': a->judge.workload = optarg; break;
		case 'j': a->as_json = 1; break;
		case 'h': fputs(eval_help, stdout); return -1;
		case OPT_STORE: a->store_path = optarg; break;
		case OPT_NO_STORE: a->no_store = 1; break;
		case OPT_SUBMISSION:
			if (parse_submission(optarg, &a->sub) < 0)
				return usage_error("eval", "--submission takes K/N with 1 <= K <= N");
			a->has_sub = 1;
			break;
		case OPT_MINUTES_LEFT: {
			double m = 0;
			if (strcmp(optarg, "0") && parse_positive_double(optarg, &m) < 0)
				return usage_error("eval", "--minutes-left takes a number of minutes >= 0");
			a->sub.minutes_left = m;
			break;
		}
		default: {
			int taken = judge_flag(c, optarg, &a->judge);
			if (taken < 0)
				return usage_error("eval", NULL);
			if (!taken)
				return usage_error("eval", "bad option");
		}
		}
	}
	if (argc - optind != 2)
		return usage_error("eval", "give a problem number and a kernel file");
	const struct dsl *dsl;
	if (dsl_arg("eval", a->dsl_id, 1, &dsl))
		return EXIT_USAGE;
	if (judge_flags_check(&a->judge) < 0)
		return usage_error("eval", NULL);
	a->kernel = argv[optind + 1];
	return 0;
}

static int exit_code_for(const struct verdict *v)
{
	if (v->status == VERDICT_PASSED)
		return EXIT_OK;
	if (v->status == VERDICT_INFRA_ERROR)
		return EXIT_INFRA;
	return EXIT_NEGATIVE;
}

int cmd_eval(int argc, char **argv)
{
	struct eval_args a = {0};
	judge_opts_init(&a.judge);
	a.judge.python = NULL; /* resolved below unless --python names one */
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE; /* -1: --help was shown */
	if (zygote_is_auto(a.judge.zygote)) { /* a zygote of its own would cost what it saves */
		warning("--zygote auto starts a zygote for commands that grade many kernels (run, validate, "
			"worker, attempt); this one evaluation starts cold (or start `mkb zygote --socket NAME`)");
		a.judge.zygote = NULL;
	}
	if (gpu_check(&a.judge) < 0)
		return EXIT_INFRA;
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
	if (!problem_workload(p, a.judge.workload)) {
		rc = usage_error("eval", "problem %d has no workload '%s' (visible, heldout, smoke)",
				 p->number, a.judge.workload);
		mkb_env_release(&env);
		return rc;
	}
	struct grade_env g;
	int64_t id = 0;
	if (grade_env_open(&g, env.root, &a.judge, a.store_path, a.no_store) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	struct verdict v;
	verdict_init(&v);
	enum grade_rc graded = grade(env.root, &a.judge, p, a.dsl_id, a.kernel, g.store, &v, &id);
	rc = graded == GRADE_BAD_REQUEST ? EXIT_USAGE : graded == GRADE_STORE_FAILED ? EXIT_INFRA : exit_code_for(&v);
	char *text = feedback_format(&v, a.has_sub ? &a.sub : NULL, a.judge.device);
	if (a.as_json) {
		json_t *j = verdict_to_json(&v, p->number, a.dsl_id, a.judge.workload, a.judge.device);
		if (g.store)
			json_object_set_new(j, "evaluation_id", json_integer(id));
		json_object_set_new(j, "feedback", json_string(text)); /* what an agent reads */
		if (json_dumpf(j, stdout, JSON_COMPACT) < 0)
			rc = EXIT_INFRA;
		putchar('\n');
		json_decref(j);
	} else {
		fputs(text, stdout);
	}
	free(text);
	verdict_release(&v);
	grade_env_close(&g);
	mkb_env_release(&env);
	if (proc_interrupted())
		rc = 128 + proc_interrupted();
	return rc;
}
