/* mkb validate: run every shipped solution (solutions/<NN>_<name>/<dsl>/kernel.py)
 * through the judge and print one table with speed of light; the proof that
 * each family is solvable in both DSLs on our GPU. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "dsl.h"
#include "grade.h"
#include "judge_flags.h"
#include "proc.h"
#include "sol.h"
#include "util.h"
#include "zygote_auto.h"

static const char validate_help[] =
	"usage: mkb validate [options]\n"
	"\n"
	"  --problems N,N,...    only these problems (default: every problem with a solution)\n"
	"  --dsl cutedsl|tirx    only this DSL (default: both)\n"
	"  --workload W          visible, heldout or smoke; repeatable (default: visible and heldout)\n"
	"  --solutions DIR       where the solutions live (default <root>/solutions)\n"
	"  --store PATH | --no-store\n"
	"  --hbm-tbps X, --bf16-tflops X, --fp32-tflops X\n"
	"                        the GPU's ceilings for the speed-of-light column\n"
	"                        (default: the H200's, measured in results/h200-catalog.md)\n"
	"  --json                one JSON object per evaluation instead of the table\n"
	JUDGE_FLAGS_HELP;

enum { OPT_SOLUTIONS = 256, OPT_STORE, OPT_NO_STORE, OPT_HBM, OPT_BF16, OPT_FP32, OPT_PROBLEMS };

#define MAX_WORKLOADS 3

struct validate_args {
	struct judge_opts judge;
	const char *dsl_id, *solutions, *store_path, *problems;
	const char *workloads[MAX_WORKLOADS];
	int nworkloads, as_json, no_store;
	struct ceilings ceil;
};

/* One row of the table. */
struct row {
	int problem;
	const char *dsl, *workload;
	struct verdict v;
	double sol_ms; /* < 0 when unknown */
};

static int parse_rate(const char *name, const char *s, double scale, double *out)
{
	double v;
	if (parse_positive_double(s, &v) < 0)
		return usage_error("validate", "%s wants a positive number, not '%s'", name, s);
	*out = v * scale;
	return 0;
}

/* 0, -1 after --help, or EXIT_USAGE. */
static int parse_args(int argc, char **argv, struct validate_args *a)
{
	static const struct option opts[] = {
		{"problems", required_argument, NULL, OPT_PROBLEMS},
		{"dsl", required_argument, NULL, 'd'},
		{"workload", required_argument, NULL, 'w'},
		{"solutions", required_argument, NULL, OPT_SOLUTIONS},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"store", required_argument, NULL, OPT_STORE},
		{"no-store", no_argument, NULL, OPT_NO_STORE},
		JUDGE_LONG_OPTIONS,
		{"hbm-tbps", required_argument, NULL, OPT_HBM},
		{"bf16-tflops", required_argument, NULL, OPT_BF16},
		{"fp32-tflops", required_argument, NULL, OPT_FP32},
		{NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:w:jh", opts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case OPT_PROBLEMS: a->problems = optarg; break;
		case 'd': a->dsl_id = optarg; break;
		case 'w':
			if (a->nworkloads == MAX_WORKLOADS)
				return usage_error("validate", "at most %d --workload", MAX_WORKLOADS);
			a->workloads[a->nworkloads++] = optarg;
			break;
		case OPT_SOLUTIONS: a->solutions = optarg; break;
		case 'j': a->as_json = 1; break;
		case 'h': fputs(validate_help, stdout); return -1;
		case OPT_STORE: a->store_path = optarg; break;
		case OPT_NO_STORE: a->no_store = 1; break;
		case OPT_HBM: rc = parse_rate("--hbm-tbps", optarg, 1e12, &a->ceil.hbm_bytes_per_s); break;
		case OPT_BF16: rc = parse_rate("--bf16-tflops", optarg, 1e12, &a->ceil.bf16_flops_per_s); break;
		case OPT_FP32: rc = parse_rate("--fp32-tflops", optarg, 1e12, &a->ceil.fp32_flops_per_s); break;
		default: {
			int taken = judge_flag(c, optarg, &a->judge);
			if (taken < 0)
				return usage_error("validate", NULL);
			if (!taken)
				return usage_error("validate", "bad option");
		}
		}
		if (rc)
			return rc;
	}
	if (optind < argc)
		return usage_error("validate", "unexpected argument '%s'", argv[optind]);
	const struct dsl *dsl;
	if (dsl_arg("validate", a->dsl_id, 0, &dsl))
		return EXIT_USAGE;
	if (judge_flags_check(&a->judge) < 0)
		return usage_error("validate", NULL);
	if (!a->nworkloads) {
		a->workloads[a->nworkloads++] = "visible";
		a->workloads[a->nworkloads++] = "heldout";
	}
	return 0;
}

/* Mark the problems of a list like "28,36" in want[1..99]; a NULL list marks
 * every problem. 0, or -1 when the list is malformed. */
static int parse_problem_list(const char *list, char want[100])
{
	memset(want, list == NULL, 100);
	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, ",");
		char num[16];
		long v;
		if (!len || len >= sizeof(num))
			return -1;
		memcpy(num, p, len);
		num[len] = '\0';
		if (parse_long(num, 1, 99, &v) < 0)
			return -1;
		want[v] = 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

static void print_row(const struct row *r)
{
	char kms[32] = "-", ems[32] = "-", sp[32] = "-", frac[32] = "-";
	if (r->v.kernel_ms >= 0)
		snprintf(kms, sizeof(kms), "%.4f", r->v.kernel_ms);
	if (r->v.eager_ms >= 0)
		snprintf(ems, sizeof(ems), "%.4f", r->v.eager_ms);
	if (r->v.speedup >= 0)
		snprintf(sp, sizeof(sp), "%.2fx", r->v.speedup);
	if (r->v.kernel_ms > 0 && r->sol_ms >= 0)
		snprintf(frac, sizeof(frac), "%.2f", r->sol_ms / r->v.kernel_ms);
	printf("%02d  %-8s %-8s %-11s %10s %10s %9s %8s", r->problem, r->dsl, r->workload,
	       verdict_status_name(r->v.status), kms, ems, sp, frac);
	if (!r->v.passed && *r->v.reason)
		printf("  %.100s", r->v.reason);
	putchar('\n');
}

/* Geometric means per DSL over passed rows of the first workload. */
static void print_summary(const struct row *rows, size_t n, const char *workload)
{
	static const char *const ids[] = {"cutedsl", "tirx"};
	size_t passed = 0;
	for (size_t i = 0; i < n; i++)
		passed += rows[i].v.passed;
	printf("\n%zu of %zu evaluations passed\n", passed, n);
	for (size_t d = 0; d < ARRAY_SIZE(ids); d++) {
		double log_sp = 0, log_sol = 0;
		int k = 0, ks = 0, total = 0;
		for (size_t i = 0; i < n; i++) {
			if (strcmp(rows[i].dsl, ids[d]) || strcmp(rows[i].workload, workload))
				continue;
			total++;
			if (!rows[i].v.passed || rows[i].v.speedup <= 0)
				continue;
			log_sp += log(rows[i].v.speedup);
			k++;
			if (rows[i].sol_ms >= 0 && rows[i].v.kernel_ms > 0) {
				log_sol += log(rows[i].sol_ms / rows[i].v.kernel_ms);
				ks++;
			}
		}
		if (!total)
			continue;
		printf("%-8s %s: %d of %d passed", ids[d], workload, k, total);
		if (k)
			printf(", geomean speedup %.2fx", exp(log_sp / k));
		if (ks)
			printf(", geomean fraction of speed of light %.2f", exp(log_sol / ks));
		putchar('\n');
	}
}

int cmd_validate(int argc, char **argv)
{
	struct validate_args a = {0};
	judge_opts_init(&a.judge);
	a.judge.python = NULL;
	a.ceil = (struct ceilings)CEILINGS_H200;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : EXIT_USAGE;
	char want[100];
	if (parse_problem_list(a.problems, want) < 0)
		return usage_error("validate", "--problems wants numbers like 28,36, not '%s'", a.problems);
	if (gpu_check(&a.judge) < 0)
		return EXIT_INFRA;
	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	char *solutions = a.solutions ? xstrdup(a.solutions) : xstrfmt("%s/solutions", env.root);
	struct grade_env g;
	struct row *rows = NULL;
	size_t n = 0, cap = 0;
	if (grade_env_open(&g, env.root, &a.judge, a.store_path, a.no_store) < 0) {
		free(solutions);
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	/* --zygote auto: one zygote for every solution graded here */
	struct zygote_auto za = ZYGOTE_AUTO_INIT;
	zygote_auto_start(&za, &a.judge);
	rc = EXIT_INFRA;
	if (!a.as_json)
		printf("#   dsl      workload status       kernel ms   eager ms   speedup  frac SOL\n");
	for (size_t i = 0; i < env.catalog.n; i++) {
		const struct problem *p = &env.catalog.items[i];
		if (!want[p->number])
			continue;
		for (const char *const *d = (const char *const[]){"cutedsl", "tirx", NULL}; *d; d++) {
			if (a.dsl_id && strcmp(a.dsl_id, *d))
				continue;
			char *kernel = xstrfmt("%s/%02d_%s/%s/kernel.py", solutions, p->number, p->name, *d);
			for (int w = 0; w < a.nworkloads && is_file(kernel); w++) {
				if (!problem_workload(p, a.workloads[w])) {
					warning("problem %d has no workload '%s'", p->number, a.workloads[w]);
					continue;
				}
				if (n == cap) {
					cap = cap ? 2 * cap : 16;
					rows = xrealloc(rows, cap * sizeof(*rows));
				}
				struct row *r = &rows[n++];
				r->problem = p->number;
				r->dsl = *d;
				r->workload = a.workloads[w];
				verdict_init(&r->v);
				struct judge_opts o = a.judge;
				o.workload = a.workloads[w];
				int64_t id;
				if (grade(env.root, &o, p, *d, kernel, g.store, &r->v, &id) == GRADE_STORE_FAILED)
					warning("evaluation of '%s' not recorded", kernel);
				if (sol_ms(p, o.workload, &a.ceil, &r->sol_ms) < 0)
					r->sol_ms = -1;
				if (a.as_json) {
					json_t *j = verdict_to_json(&r->v, p->number, *d, o.workload, o.device);
					json_object_set_new(j, "sol_ms", r->sol_ms >= 0 ? json_real(r->sol_ms) : json_null());
					json_dumpf(j, stdout, JSON_COMPACT);
					putchar('\n');
					json_decref(j);
				} else {
					print_row(r);
				}
				fflush(stdout);
				if (proc_interrupted()) {
					free(kernel);
					goto stopped; /* the rows so far are still summarised */
				}
			}
			free(kernel);
		}
	}
stopped:
	if (!n) {
		error("no solutions found under '%s' for the problems and DSLs asked for", solutions);
		goto out;
	}
	if (!a.as_json)
		print_summary(rows, n, a.workloads[0]);
	rc = EXIT_OK;
	for (size_t i = 0; i < n; i++)
		if (!rows[i].v.passed)
			rc = EXIT_NEGATIVE;
out:
	for (size_t i = 0; i < n; i++)
		verdict_release(&rows[i].v);
	free(rows);
	zygote_auto_stop(&za);
	grade_env_close(&g);
	free(solutions);
	mkb_env_release(&env);
	return proc_interrupted() ? 128 + proc_interrupted() : rc;
}
