/* mkb run --model SPEC: the four-arm protocol over problems and replicates
 * (run.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "cmd.h"
#include "attempt_flags.h"
#include "judge_flags.h"
#include "llm_flags.h"
#include "paths.h"
#include "proc.h"
#include "run.h"
#include "util.h"
#include "zygote_auto.h"

static const char run_help[] =
	"usage: mkb run --model SPEC [--problems N,N | --family F] [--arms A,A] [--replicates N]\n"
	"               [--dry-run] [--rerun-stale] [options]\n"
	"\n"
	"Plans every trial p<NN>_r<k>_<arm> (RUN, REUSE, RERUN, STALE), prints the plan,\n"
	"and runs it: solos first, a skill arm once its source solo is final. Resumable:\n"
	"run it again after a crash or Ctrl-C and it continues.\n"
	"\n"
	"  --model SPEC          openai:M, anthropic:M, or a control agent: oracle, null, eager\n"
	"  --problems N,N        problem numbers (default: every problem with a shipped solution\n"
	"                        in both DSLs)\n"
	"  --family F            every problem of a family\n"
	"  --arms A,A            default: solo_cutedsl,solo_tirx,cutedsl2tirx_skill,tirx2cutedsl_skill;\n"
	"                        also placebo_tirx, placebo_cutedsl (a skill from another problem\n"
	"                        of the same family)\n"
	"  --replicates N        replicates per problem and arm (1)\n"
	"  --concurrency N       trials in flight at once, each in a worker process (1); their\n"
	"                        evaluations share one judge queue (--slots, default 2 per GPU,\n"
	"                        2 on the CPU) over every GPU (--gpus, default all)\n"
	"  --dry-run             print the plan only\n"
	"  --enqueue             put the trials into the queue of a shared PostgreSQL store\n"
	"                        (--store postgres://...) for mkb worker, run none\n"
	"  --rerun-stale         archive stale trials' records and run them again\n"
	"  --max-cost USD        no new trial starts once the model's attempts in the store cost\n"
	"                        this much (needs --prices); running ones finish\n"
	"  --runs-dir DIR        the attempts' folders (default <root>/runs)\n"
	ATTEMPT_FLAGS_HELP
	LLM_FLAGS_HELP
	JUDGE_FLAGS_HELP
	"\n"
	"Exit: 0 every trial final, 1 some not (stale, interrupted), 2 bad usage,\n"
	"3 infrastructure.\n";

enum {
	OPT_PROBLEMS = 256, OPT_FAMILY, OPT_ARMS, OPT_REPLICATES, OPT_DRY_RUN, OPT_RERUN_STALE,
	OPT_RUNS_DIR, OPT_HELP, OPT_MAX_COST, OPT_CONCURRENCY, OPT_ENQUEUE,
};

struct run_args {
	struct llm_flags llm;
	struct judge_opts judge;
	struct run_opts r;
	const char *problems, *family, *arms, *runs_dir;
};

static int parse_args(int argc, char **argv, struct run_args *x)
{
	static const struct option opts[] = {
		LLM_LONG_OPTIONS,
		JUDGE_LONG_OPTIONS,
		ATTEMPT_LONG_OPTIONS,
		{"problems", required_argument, NULL, OPT_PROBLEMS},
		{"family", required_argument, NULL, OPT_FAMILY},
		{"arms", required_argument, NULL, OPT_ARMS},
		{"replicates", required_argument, NULL, OPT_REPLICATES},
		{"dry-run", no_argument, NULL, OPT_DRY_RUN},
		{"enqueue", no_argument, NULL, OPT_ENQUEUE},
		{"concurrency", required_argument, NULL, OPT_CONCURRENCY},
		{"rerun-stale", no_argument, NULL, OPT_RERUN_STALE},
		{"runs-dir", required_argument, NULL, OPT_RUNS_DIR},
		{"max-cost", required_argument, NULL, OPT_MAX_COST},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	int c;
	long n;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_PROBLEMS: x->problems = optarg; break;
		case OPT_FAMILY: x->family = optarg; break;
		case OPT_ARMS: x->arms = optarg; break;
		case OPT_DRY_RUN: x->r.dry_run = 1; break;
		case OPT_ENQUEUE: x->r.enqueue = 1; break;
		case OPT_RERUN_STALE: x->r.rerun_stale = 1; break;
		case OPT_RUNS_DIR: x->runs_dir = optarg; break;
		case OPT_HELP: case 'h': fputs(run_help, stdout); return -1;
		case OPT_CONCURRENCY:
			if (parse_long(optarg, 1, 4096, &n) < 0)
				return usage_error("run", "--concurrency wants an integer in 1..4096");
			x->r.concurrency = (int)n;
			break;
		case OPT_REPLICATES:
			if (parse_long(optarg, 1, 1000, &n) < 0)
				return usage_error("run", "--replicates wants an integer in 1..1000");
			x->r.replicates = (int)n;
			break;
		case OPT_MAX_COST:
			if (number_arg("--max-cost", optarg, 1e-9, 1e9, &x->r.max_cost) < 0)
				return usage_error("run", NULL);
			break;
		default: {
			int taken = llm_flag(c, optarg, &x->llm);
			if (!taken)
				taken = judge_flag(c, optarg, &x->judge);
			if (!taken)
				taken = attempt_flag(c, optarg, &x->r.attempt, &x->judge);
			if (taken < 0)
				return usage_error("run", NULL);
			if (!taken)
				return usage_error("run", "bad option");
		}
		}
	}
	if (argc != optind)
		return usage_error("run", "unexpected argument '%s'", argv[optind]);
	if (!x->llm.model)
		return usage_error("run", "--model is required");
	if (x->problems && x->family)
		return usage_error("run", "give --problems or --family, not both");
	if (judge_flags_check(&x->judge) < 0)
		return usage_error("run", NULL);
	if (x->r.enqueue && x->r.max_cost > 0)
		return usage_error("run", "--max-cost applies to trials run here, not to --enqueue");
	if (x->r.max_cost > 0 && !x->llm.prices)
		return usage_error("run", "--max-cost needs --prices (what the model's tokens cost)");
	return 0;
}

/* Problems with a shipped solution in both DSLs. */
static int has_both_solutions(const char *root, const struct problem *p)
{
	int both = 1;
	static const char *const dsls[] = {"cutedsl", "tirx"};
	for (size_t i = 0; i < 2; i++) {
		char *k = xstrfmt("%s/solutions/%02d_%s/%s/kernel.py", root, p->number, p->name, dsls[i]);
		both &= is_file(k);
		free(k);
	}
	return both;
}

/* The selection into numbers (caller frees). NULL on bad input (printed). */
static int *select_problems(const struct run_args *x, const struct mkb_env *env, size_t *n)
{
	const struct catalog *cat = &env->catalog;
	int *out = xcalloc(cat->n + 1, sizeof(*out));
	*n = 0;
	if (x->problems) {
		for (const char *p = x->problems; *p;) {
			size_t len = strcspn(p, ",");
			char *item = xstrfmt("%.*s", (int)len, p);
			const struct problem *pr = mkb_env_problem(env, item);
			free(item);
			if (!pr) {
				free(out);
				return NULL;
			}
			for (size_t k = 0; k < *n; k++)
				if (out[k] == pr->number)
					pr = NULL;
			if (pr && *n < cat->n)
				out[(*n)++] = pr->number;
			p += len + (p[len] == ',');
		}
	} else {
		for (size_t i = 0; i < cat->n; i++) {
			const struct problem *pr = &cat->items[i];
			if (x->family ? !strcmp(pr->family, x->family) : has_both_solutions(env->root, pr))
				out[(*n)++] = pr->number;
		}
	}
	if (!*n) {
		free(out);
		error("no problems selected%s%s", x->family ? " in family " : "", x->family ? x->family : "");
		return NULL;
	}
	return out;
}

static const struct arm **select_arms(const char *list, size_t *n)
{
	const struct arm **out = xcalloc(run_narms, sizeof(*out));
	*n = 0;
	if (!list) {
		for (size_t i = 0; i < run_narms; i++)
			if (run_arms[i].by_default)
				out[(*n)++] = &run_arms[i];
		return out;
	}
	/* in the table's order, whatever the list's (solos lead) */
	for (size_t i = 0; i < run_narms; i++)
		for (const char *p = list; *p;) {
			size_t len = strcspn(p, ",");
			if (len == strlen(run_arms[i].name) && !strncmp(p, run_arms[i].name, len))
				out[(*n)++] = &run_arms[i];
			p += len + (p[len] == ',');
		}
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		char *item = xstrfmt("%.*s", (int)len, p);
		if (!run_arm_find(item)) {
			error("unknown arm '%s'", item);
			free(item);
			free(out);
			return NULL;
		}
		free(item);
		p += len + (p[len] == ',');
	}
	return out;
}

int cmd_run(int argc, char **argv)
{
	struct run_args x;
	memset(&x, 0, sizeof(x));
	llm_flags_init(&x.llm);
	x.llm.dec.temperature = AGENT_TEMPERATURE;
	judge_opts_init(&x.judge);
	x.judge.python = NULL;
	attempt_opts_init(&x.r.attempt);
	x.r.replicates = 1;
	int rc = parse_args(argc, argv, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE;
	if (llm_flags_check(&x.llm) < 0)
		return EXIT_USAGE;
	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	size_t np = 0, na = 0;
	int *problems = select_problems(&x, &env, &np);
	const struct arm **arms = problems ? select_arms(x.arms, &na) : NULL;
	if (!arms || !na) {
		free(problems);
		free(arms);
		mkb_env_release(&env);
		return usage_error("run", NULL);
	}
	char *runs_dir = x.runs_dir ? xstrdup(x.runs_dir) : xstrfmt("%s/runs", env.root);
	x.r.attempt.root = env.root;
	x.r.attempt.model = x.llm.model;
	x.r.attempt.llm = x.llm.opts;
	x.r.attempt.decoding = x.llm.dec;
	x.r.attempt.judge = &x.judge;
	const char *off = getenv("MKB_SANDBOX_OFF");
	if (off && *off && sandbox_parse_layers(off, &x.r.attempt.sandbox_off) < 0)
		rc = usage_error("run", "MKB_SANDBOX_OFF names an unknown layer");
	x.r.catalog = &env.catalog;
	x.r.problems = problems;
	x.r.nproblems = np;
	x.r.arms = arms;
	x.r.narms = na;
	x.r.runs_dir = runs_dir;
	if (!rc && !x.r.dry_run && !x.r.enqueue && gpu_check(&x.judge) < 0)
		rc = EXIT_INFRA;
	/* Trials in flight share one judge queue over every GPU of the machine. */
	if (!rc && x.r.concurrency > 1 && !x.judge.slots) {
		if (!strcmp(x.judge.device, "cuda") && !x.judge.ngpus)
			x.judge.ngpus = judge_queue_detect_gpus(x.judge.gpus, JUDGE_QUEUE_MAX_GPUS);
		x.judge.slots = 2 * (x.judge.ngpus > 0 ? x.judge.ngpus : 1);
	}
	if (!rc) {
		proc_catch_interrupts();
		/* --zygote auto: one zygote for the whole run, ended with it */
		struct zygote_auto za = ZYGOTE_AUTO_INIT;
		if (!x.r.dry_run && !x.r.enqueue)
			zygote_auto_start(&za, &x.judge);
		rc = run_protocol(&x.r);
		zygote_auto_stop(&za);
	}
	free(runs_dir);
	free(problems);
	free(arms);
	mkb_env_release(&env);
	return rc;
}
