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
#include "paths.h"
#include "proc.h"
#include "store.h"
#include "util.h"

static const char eval_help[] =
	"usage: mkb eval NN --dsl cutedsl|tirx [options] KERNEL.py\n"
	"\n"
	"  --device cuda|cpu     where to run (cpu: a test mode, DSL rules unchecked)\n"
	"  --gpu N               CUDA device index (default 0)\n"
	"  --workload W          visible (default), heldout or smoke\n"
	"  --timeout S           seconds before the evaluation is killed as hung (600)\n"
	"  --json                print one JSON object instead of the feedback text\n"
	"  --store PATH          results store (default $MKB_STORE or <root>/mkb.db)\n"
	"  --no-store            do not record the evaluation\n"
	"  --python PATH         the grader's interpreter (default $MKB_PYTHON)\n"
	"  --draws N             correctness draws (5)\n"
	"  --warmup N            warm-up calls (10)\n"
	"  --timed N             timed calls (50; 0 skips timing)\n"
	"  --rechecks N          timed calls re-checked for correctness (3)\n"
	"  --seed N              fixed seed for every draw (tests only)\n"
	"  --max-kernel-bytes N  size limit of the kernel file (300000)\n";

enum { OPT_STORE = 256, OPT_NO_STORE, OPT_PYTHON, OPT_DRAWS, OPT_WARMUP, OPT_TIMED,
       OPT_RECHECKS, OPT_SEED, OPT_MAX_BYTES, OPT_GPU };

struct eval_args {
	struct judge_opts judge;
	const char *dsl_id, *store_path, *kernel;
	int as_json, no_store;
};

static int parse_int_opt(const char *name, const char *s, long min, long max, int *out)
{
	long v;
	if (parse_long(s, min, max, &v) < 0)
		return usage_error("eval", "%s wants an integer in %ld..%ld, not '%s'", name, min, max, s);
	*out = (int)v;
	return 0;
}

/* 0: parsed; -1: --help was printed; EXIT_USAGE: bad usage (printed). */
static int parse_args(int argc, char **argv, struct eval_args *a)
{
	static const struct option opts[] = {
		{"dsl", required_argument, NULL, 'd'},
		{"device", required_argument, NULL, 'D'},
		{"workload", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"store", required_argument, NULL, OPT_STORE},
		{"no-store", no_argument, NULL, OPT_NO_STORE},
		{"python", required_argument, NULL, OPT_PYTHON},
		{"draws", required_argument, NULL, OPT_DRAWS},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"timed", required_argument, NULL, OPT_TIMED},
		{"rechecks", required_argument, NULL, OPT_RECHECKS},
		{"seed", required_argument, NULL, OPT_SEED},
		{"max-kernel-bytes", required_argument, NULL, OPT_MAX_BYTES},
		{"gpu", required_argument, NULL, OPT_GPU},
		{NULL, 0, NULL, 0},
	};
	int c;
	long n;
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:D:w:t:jh", opts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case 'd': a->dsl_id = optarg; break;
		case 'D': a->judge.device = optarg; break;
		case 'w': a->judge.workload = optarg; break;
		case 't':
			if (parse_positive_double(optarg, &a->judge.timeout_s) < 0)
				rc = usage_error("eval", "--timeout wants seconds > 0, not '%s'", optarg);
			break;
		case 'j': a->as_json = 1; break;
		case 'h': fputs(eval_help, stdout); return -1;
		case OPT_STORE: a->store_path = optarg; break;
		case OPT_NO_STORE: a->no_store = 1; break;
		case OPT_PYTHON: a->judge.python = optarg; break;
		case OPT_DRAWS: rc = parse_int_opt("--draws", optarg, 1, 1000, &a->judge.draws); break;
		case OPT_WARMUP: rc = parse_int_opt("--warmup", optarg, 0, 100000, &a->judge.warmup); break;
		case OPT_TIMED: rc = parse_int_opt("--timed", optarg, 0, 100000, &a->judge.timed); break;
		case OPT_RECHECKS: rc = parse_int_opt("--rechecks", optarg, 0, 100000, &a->judge.rechecks); break;
		case OPT_GPU: rc = parse_int_opt("--gpu", optarg, 0, 1023, &a->judge.gpu); break;
		case OPT_SEED:
			if (parse_long(optarg, 0, 0x7fffffffffffffffL, &n) < 0)
				rc = usage_error("eval", "--seed wants a non-negative integer, not '%s'", optarg);
			a->judge.seed = optarg;
			break;
		case OPT_MAX_BYTES:
			if (parse_long(optarg, 1, 1L << 30, &a->judge.max_kernel_bytes) < 0)
				rc = usage_error("eval", "--max-kernel-bytes wants a positive integer");
			break;
		default: return usage_error("eval", "bad option");
		}
		if (rc)
			return rc;
	}
	if (argc - optind != 2)
		return usage_error("eval", "give a problem number and a kernel file");
	if (!a->dsl_id)
		return usage_error("eval", "--dsl is required");
	if (!dsl_find(a->dsl_id))
		return usage_error("eval", "unknown DSL '%s' (%s)", a->dsl_id, dsl_choices());
	if (strcmp(a->judge.device, "cuda") && strcmp(a->judge.device, "cpu"))
		return usage_error("eval", "--device is cuda or cpu, not '%s'", a->judge.device);
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
	if (!strcmp(a.judge.device, "cuda") && !have_gpu(a.judge.gpu)) {
		error("no NVIDIA GPU %d on this machine (/dev/nvidia%d is missing); "
		      "'--device cpu' runs the CPU test mode", a.judge.gpu, a.judge.gpu);
		return EXIT_INFRA;
	}
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
	char *python = a.judge.python ? NULL : paths_python(env.root);
	char *grader_dir = xstrfmt("%s/grader", env.root);
	if (python)
		a.judge.python = python;
	a.judge.grader_dir = grader_dir;

	struct store *st = NULL;
	int64_t id = 0;
	rc = EXIT_INFRA;
	if (!a.no_store) {
		char *path = a.store_path ? xstrdup(a.store_path) : paths_store(env.root);
		int opened = store_open(path, &st);
		free(path);
		if (opened < 0)
			goto out;
	}

	proc_become_subreaper();
	struct verdict v;
	verdict_init(&v);
	int graded = grade(env.root, &a.judge, p, a.dsl_id, a.kernel, st, &v, &id);
	rc = graded == -1 ? EXIT_USAGE : graded == -2 ? EXIT_INFRA : exit_code_for(&v);
	if (a.as_json) {
		json_t *j = verdict_to_json(&v, p->number, a.dsl_id, a.judge.workload, a.judge.device);
		if (st)
			json_object_set_new(j, "evaluation_id", json_integer(id));
		if (json_dumpf(j, stdout, JSON_COMPACT) < 0)
			rc = EXIT_INFRA;
		putchar('\n');
		json_decref(j);
	} else {
		char *text = feedback_format(&v, NULL, a.judge.device);
		fputs(text, stdout);
		free(text);
	}
	verdict_release(&v);
out:
	store_close(st);
	free(python);
	free(grader_dir);
	mkb_env_release(&env);
	return rc;
}
