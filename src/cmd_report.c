/* mkb report: the store's trials as scores, paired analysis and intervals. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "paths.h"
#include "report.h"
#include "stats.h"
#include "store.h"
#include "util.h"

static const char report_help[] =
	"usage: mkb report [--store FILE] [--model M] [--format text|md|csv|json|html] [--e-fail X]\n"
	"                  [--delta D] [--calls paper|intervals] [--time e2e|device] [--seed N]\n"
	"                  [--bootstrap N] [--trials] [-o FILE]\n"
	"\n"
	"Every number of PROTOCOL.md's \"Scores\" and \"Paired transfer analysis\" from the\n"
	"store's live trials, per model and decoding settings (docs/report.md defines them):\n"
	"R@t and S per arm and their lift, overall, by direction, by family, by the source's\n"
	"verdict and where a skill existed; coverage; usage per arm; help and harm rates,\n"
	"paired lift dGM, source standing and reverse-direction consistency, with Wilson\n"
	"intervals, sign, Wilcoxon and McNemar tests, and, where replicates exist, paired\n"
	"bootstrap intervals. The store is only read.\n"
	"\n"
	"  --store FILE     the store (default $MKB_STORE, else mkb.db in the project root)\n"
	"  --model M        only model M's trials\n"
	"  --format F       text (default: tables), md, csv (a number a row), json (the\n"
	"                   published results.json's fields plus ours), html (one page, SVG)\n"
	"  --e-fail X       effective speedup of a failed attempt (0.1)\n"
	"  --delta D        helped: ratio >= 1 + D; harmed: ratio <= 1 / (1 + D) (0.05)\n"
	"  --calls RULE     paper (default): the ratio rule alone; intervals: where both arms\n"
	"                   passed with a speedup interval (the grader's speedup_ci), helped or\n"
	"                   harmed also needs the intervals to separate, else neutral\n"
	"  --time BASIS     what the paired comparisons compare: e2e (default, the paper's\n"
	"                   end-to-end speedup) or (ours) device: eager ms over the kernels'\n"
	"                   GPU time (the final evaluation's timing.device_ms, recorded with\n"
	"                   the DSL rules on a GPU); comparisons lacking it stay end to end\n"
	"  --seed N         the bootstrap's seed (1)\n"
	"  --bootstrap N    bootstrap resamples, 0 for none (1000)\n"
	"  --trials         (html) a page per trial: instruction, attached skill, transcript,\n"
	"                   submissions with their kernels and feedback, the final verdict\n"
	"  -o FILE          write to FILE (atomically) instead of stdout\n";

/* --stats-stdin (for tests/python/test_stats_scipy.py): the statistics of
 * stats.c on JSON read from stdin, printed at full precision. */
static int stats_stdin(void)
{
	json_error_t jerr;
	json_t *in = json_loadf(stdin, 0, &jerr);
	if (!json_is_object(in)) {
		json_decref(in);
		error("--stats-stdin: cannot read JSON: %s", jerr.text);
		return EXIT_USAGE;
	}
	json_t *out = json_object(), *v, *arr;
	size_t i;
	arr = json_array();
	json_array_foreach(json_object_get(in, "sign"), i, v)
		json_array_append_new(arr, json_real(stats_sign_test((long)json_integer_value(json_array_get(v, 0)),
								     (long)json_integer_value(json_array_get(v, 1)))));
	json_object_set_new(out, "sign", arr);
	arr = json_array();
	json_array_foreach(json_object_get(in, "mcnemar"), i, v)
		json_array_append_new(arr, json_real(stats_mcnemar_exact(
			(long)json_integer_value(json_array_get(v, 0)), (long)json_integer_value(json_array_get(v, 1)))));
	json_object_set_new(out, "mcnemar", arr);
	arr = json_array();
	json_array_foreach(json_object_get(in, "wilson"), i, v) {
		double lo, hi;
		stats_wilson((long)json_integer_value(json_array_get(v, 0)), (long)json_integer_value(json_array_get(v, 1)),
			     STATS_Z95, &lo, &hi);
		json_array_append_new(arr, json_pack("[f, f]", lo, hi));
	}
	json_object_set_new(out, "wilson", arr);
	arr = json_array();
	json_array_foreach(json_object_get(in, "wilcoxon"), i, v) {
		json_t *d = json_object_get(v, "d");
		const char *method = json_string_value(json_object_get(v, "method"));
		size_t n = json_array_size(d);
		double *x = xmalloc((n ? n : 1) * sizeof(*x));
		for (size_t k = 0; k < n; k++)
			x[k] = json_number_value(json_array_get(d, k));
		struct wilcoxon_result w;
		int force = !method || !strcmp(method, "auto") ? -1 : !strcmp(method, "exact") ? 1 : 0;
		int rc = stats_wilcoxon(x, n, force, &w);
		free(x);
		json_array_append_new(arr, rc < 0 ? json_null() :
			json_pack("{s:f, s:f, s:f, s:s, s:I, s:I}", "statistic", w.statistic, "p", w.p, "z", w.z,
				  "method", w.exact ? "exact" : "approx", "n", (json_int_t)w.n, "zeros", (json_int_t)w.zeros));
	}
	json_object_set_new(out, "wilcoxon", arr);
	/* bootstrap of the mean of clustered values: [[v, ...], ...] a cluster each */
	arr = json_array();
	json_array_foreach(json_object_get(in, "bootstrap"), i, v) {
		json_t *clusters = json_object_get(v, "clusters"), *c;
		size_t nc = json_array_size(clusters), k, nunits = 0;
		size_t *start = xmalloc((nc + 1) * sizeof(*start));
		json_array_foreach(clusters, k, c) {
			start[k] = nunits;
			nunits += json_array_size(c);
		}
		start[nc] = nunits;
		double *val = xmalloc((nunits ? nunits : 1) * sizeof(*val));
		json_array_foreach(clusters, k, c)
			for (size_t u = 0; u < json_array_size(c); u++)
				val[start[k] + u] = json_number_value(json_array_get(c, u));
		long B = (long)json_integer_value(json_object_get(v, "resamples"));
		B = B > 0 && B <= 1000000 ? B : 1000;
		struct stats_rng rng;
		stats_rng_seed(&rng, (uint64_t)json_integer_value(json_object_get(v, "seed")));
		uint32_t *w = xmalloc((nunits ? nunits : 1) * sizeof(*w));
		double *means = xmalloc((size_t)B * sizeof(*means));
		for (long b = 0; b < B; b++) {
			double s = 0, n = 0;
			if (nc)
				stats_bootstrap_draw(&rng, start, nc, w);
			for (size_t u = 0; u < nunits && nc; u++) {
				s += w[u] * val[u];
				n += w[u];
			}
			means[b] = n > 0 ? s / n : NAN;
		}
		size_t ok = stats_sort(means, (size_t)B);
		json_array_append_new(arr, json_pack("{s:o, s:o}",
			"lo", ok ? json_real(stats_quantile_sorted(means, ok, 0.025)) : json_null(),
			"hi", ok ? json_real(stats_quantile_sorted(means, ok, 0.975)) : json_null()));
		free(means);
		free(w);
		free(val);
		free(start);
	}
	json_object_set_new(out, "bootstrap", arr);
	int rc = json_dumpf(out, stdout, JSON_COMPACT | JSON_REAL_PRECISION(17)) < 0 ? EXIT_INFRA : EXIT_OK;
	putchar('\n');
	json_decref(out);
	json_decref(in);
	return rc;
}

static int parse_seed(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	enum { OPT_STORE = 256, OPT_MODEL, OPT_FORMAT, OPT_EFAIL, OPT_DELTA, OPT_SEED, OPT_BOOT, OPT_STATS,
	       OPT_TRIALS, OPT_CALLS, OPT_TIME };
	static const struct option opts[] = {
		{"store", required_argument, NULL, OPT_STORE},
		{"model", required_argument, NULL, OPT_MODEL},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"e-fail", required_argument, NULL, OPT_EFAIL},
		{"delta", required_argument, NULL, OPT_DELTA},
		{"calls", required_argument, NULL, OPT_CALLS},
		{"time", required_argument, NULL, OPT_TIME},
		{"seed", required_argument, NULL, OPT_SEED},
		{"bootstrap", required_argument, NULL, OPT_BOOT},
		{"stats-stdin", no_argument, NULL, OPT_STATS},
		{"trials", no_argument, NULL, OPT_TRIALS},
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static const char *const formats[] = {"text", "md", "csv", "json", "html"};
	struct report_opts o = REPORT_OPTS_INIT;
	enum report_format format = REPORT_TEXT;
	const char *store_path = NULL, *output = NULL;
	long n;
	int c, found, trials = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (c) {
		case OPT_STORE: store_path = optarg; break;
		case OPT_MODEL: o.model = optarg; break;
		case OPT_FORMAT:
			found = 0;
			for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
				if (!strcmp(optarg, formats[i])) {
					format = (enum report_format)i;
					found = 1;
				}
			if (!found)
				return usage_error("report", "unknown format '%s' (text, md, csv, json, html)", optarg);
			break;
		case OPT_EFAIL:
			if (parse_positive_double(optarg, &o.e_fail) < 0)
				return usage_error("report", "--e-fail must be a number > 0, not '%s'", optarg);
			break;
		case OPT_DELTA:
			if (parse_positive_double(optarg, &o.delta) < 0)
				return usage_error("report", "--delta must be a number > 0, not '%s'", optarg);
			break;
		case OPT_CALLS: /* the rule of the paired calls, and the figure they compare (ours) */
		case OPT_TIME: {
			const char *const *names = c == OPT_CALLS ? (const char *const[]){"paper", "intervals"}
								  : (const char *const[]){"e2e", "device"};
			int which = !strcmp(optarg, names[0]) ? 0 : !strcmp(optarg, names[1]) ? 1 : -1;
			if (which < 0)
				return usage_error("report", "--%s must be %s or %s, not '%s'",
						   c == OPT_CALLS ? "calls" : "time", names[0], names[1], optarg);
			if (c == OPT_CALLS)
				o.calls = which ? REPORT_CALLS_INTERVALS : REPORT_CALLS_PAPER;
			else
				o.time = which ? REPORT_TIME_DEVICE : REPORT_TIME_E2E;
			break;
		}
		case OPT_SEED:
			if (parse_seed(optarg, &o.seed) < 0)
				return usage_error("report", "--seed must be an integer >= 0, not '%s'", optarg);
			break;
		case OPT_BOOT:
			if (parse_long(optarg, 0, 1000000, &n) < 0)
				return usage_error("report", "--bootstrap must be 0..1000000, not '%s'", optarg);
			o.bootstrap = (int)n;
			break;
		case OPT_STATS: return stats_stdin();
		case OPT_TRIALS: trials = 1; break;
		case 'o': output = optarg; break;
		case 'h': fputs(report_help, stdout); return EXIT_OK;
		default: return usage_error("report", NULL);
		}
	}
	if (argc != optind)
		return usage_error("report", "unexpected argument '%s'", argv[optind]);
	if (o.time == REPORT_TIME_DEVICE && o.calls == REPORT_CALLS_INTERVALS)
		return usage_error("report", "--calls intervals uses the end-to-end speedup's intervals: "
				   "not with --time device");
	if (trials && format != REPORT_HTML)
		return usage_error("report", "--trials adds pages to the HTML report: give --format html");

	struct mkb_env env;
	if (mkb_env_load(&env) < 0)
		warning("no catalog: problems are reported by number, their family 'unknown'");
	char *path = store_path ? xstrdup(store_path) : paths_store(env.root);
	int rc = EXIT_INFRA;
	struct store *st = NULL;
	struct report *results = NULL;
	/* the report reads; it never creates a store file (a PostgreSQL
	 * database is named by a URL: opening it makes at most empty tables) */
	if (!store_path_is_url(path) && !is_file(path)) {
		error("no store at '%s'", path);
		goto out;
	}
	if (store_open(path, &st) < 0)
		goto out;
	results = report_compute(st, &env.catalog, &o, path);
	if (!results)
		goto out;
	if (trials)
		report_set_trial_pages(results, st, o.model);
	if (!output) {
		rc = report_write(stdout, results, format) < 0 ? EXIT_INFRA : EXIT_OK;
		goto out;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem) {
		error("cannot buffer the report: %s", strerror(errno));
		goto out;
	}
	int wrc = report_write(mem, results, format);
	if (fclose(mem) != 0 || wrc < 0)
		error("cannot render the report");
	else if (write_file_atomic(output, text, len) == 0)
		rc = EXIT_OK;
	free(text);
out:
	report_free(results);
	store_close(st);
	free(path);
	mkb_env_release(&env);
	return rc;
}
