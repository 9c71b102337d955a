/* mkb worker --store postgres://...: run the queued trials of a shared store
 * until none is left (worker.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt_flags.h"
#include "cmd.h"
#include "judge_flags.h"
#include "llm_flags.h"
#include "paths.h"
#include "proc.h"
#include "util.h"
#include "worker.h"
#include "zygote_auto.h"

static const char worker_help[] =
	"usage: mkb worker --store postgres://... [--lease S] [options as mkb run]\n"
	"\n"
	"Claims the queued trials of a shared PostgreSQL store one at a time (mkb run\n"
	"--enqueue put them there) and runs each as mkb run does, until none is left.\n"
	"Run any number of workers on any number of machines. A worker holds a lease on\n"
	"its trial and renews it every lease/3 seconds; when a worker dies, its trial is\n"
	"claimed again by another once the lease expires (the old record archived as\n"
	"interrupted). The model and its decoding come from each trial; the budgets,\n"
	"workload and device must be the planner's (the trial's fingerprint is checked).\n"
	"\n"
	"  --store URL           postgres://USER@HOST:PORT/DB (default $MKB_STORE)\n"
	"  --lease S             seconds a claim holds without renewal (60)\n"
	"  --runs-dir DIR        the attempts' folders (default <root>/runs)\n"
	ATTEMPT_FLAGS_HELP
	"  --base-url URL, --retries N, --retry-delay S, --prices FILE: as mkb run\n"
	JUDGE_FLAGS_HELP
	"\n"
	"Exit: 0 nothing left in the queue, 1 a trial this worker cannot run as planned\n"
	"(given back), 2 bad usage, 3 infrastructure.\n";

enum { OPT_LEASE = 256, OPT_RUNS_DIR, OPT_HELP };

struct worker_args {
	struct llm_flags llm;
	struct judge_opts judge;
	struct worker_opts w;
	const char *runs_dir;
};

static int parse_args(int argc, char **argv, struct worker_args *x)
{
	static const struct option opts[] = {
		LLM_LONG_OPTIONS,
		JUDGE_LONG_OPTIONS,
		ATTEMPT_LONG_OPTIONS,
		{"lease", required_argument, NULL, OPT_LEASE},
		{"runs-dir", required_argument, NULL, OPT_RUNS_DIR},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_LEASE:
			if (number_arg("--lease", optarg, 1, 86400, &x->w.lease_s) < 0)
				return usage_error("worker", NULL);
			break;
		case OPT_RUNS_DIR: x->runs_dir = optarg; break;
		case OPT_HELP: case 'h': fputs(worker_help, stdout); return -1;
		case LLM_OPT_MODEL: case LLM_OPT_TEMPERATURE: case LLM_OPT_TOP_P: case LLM_OPT_MAX_TOKENS:
			return usage_error("worker", "the model and its decoding come from each trial "
					   "(mkb run --enqueue set them)");
		default: {
			int taken = llm_flag(c, optarg, &x->llm);
			if (!taken)
				taken = judge_flag(c, optarg, &x->judge);
			if (!taken)
				taken = attempt_flag(c, optarg, &x->w.run.attempt, &x->judge);
			if (taken < 0)
				return usage_error("worker", NULL);
			if (!taken)
				return usage_error("worker", "bad option");
		}
		}
	}
	if (argc != optind)
		return usage_error("worker", "unexpected argument '%s'", argv[optind]);
	if (judge_flags_check(&x->judge) < 0)
		return usage_error("worker", NULL);
	return 0;
}

int cmd_worker(int argc, char **argv)
{
	struct worker_args x;
	memset(&x, 0, sizeof(x));
	llm_flags_init(&x.llm);
	judge_opts_init(&x.judge);
	x.judge.python = NULL;
	attempt_opts_init(&x.w.run.attempt);
	x.w.lease_s = WORKER_LEASE_S;
	int rc = parse_args(argc, argv, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE;
	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	char *store = x.w.run.attempt.store_path ? xstrdup(x.w.run.attempt.store_path) : paths_store(env.root);
	char *runs_dir = x.runs_dir ? xstrdup(x.runs_dir) : xstrfmt("%s/runs", env.root);
	struct run_opts *r = &x.w.run;
	r->attempt.root = env.root;
	r->attempt.judge = &x.judge;
	r->attempt.store_path = store;
	r->catalog = &env.catalog;
	r->runs_dir = runs_dir;
	x.w.llm = &x.llm;
	x.w.store_path = store;
	const char *off = getenv("MKB_SANDBOX_OFF");
	if (off && *off && sandbox_parse_layers(off, &r->attempt.sandbox_off) < 0)
		rc = usage_error("worker", "MKB_SANDBOX_OFF names an unknown layer");
	if (!rc && gpu_check(&x.judge) < 0)
		rc = EXIT_INFRA;
	/* Workers of one machine share its judge queue, as mkb run's trials in
	 * flight do. */
	if (!rc && !x.judge.slots) {
		if (!strcmp(x.judge.device, "cuda") && !x.judge.ngpus)
			x.judge.ngpus = judge_queue_detect_gpus(x.judge.gpus, JUDGE_QUEUE_MAX_GPUS);
		x.judge.slots = 2 * (x.judge.ngpus > 0 ? x.judge.ngpus : 1);
	}
	if (!rc) {
		proc_catch_interrupts();
		struct zygote_auto za = ZYGOTE_AUTO_INIT; /* --zygote auto: one for the worker's life */
		zygote_auto_start(&za, &x.judge);
		rc = worker_run(&x.w);
		zygote_auto_stop(&za);
	}
	free(store);
	free(runs_dir);
	mkb_env_release(&env);
	return rc;
}
