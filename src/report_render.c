/* mkb report's text, Markdown and CSV: drawn from the results object alone. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "util.h"

#define MAXCOLS 12
#define CELL 64

struct table {
	int markdown;
	size_t ncols, nrows;
	char head[MAXCOLS][CELL];
	char (*cells)[MAXCOLS][CELL];
	size_t cap;
};

static void table_init(struct table *t, int markdown, const char *const *head, size_t ncols)
{
	memset(t, 0, sizeof(*t));
	t->markdown = markdown;
	t->ncols = ncols < MAXCOLS ? ncols : MAXCOLS;
	for (size_t i = 0; i < t->ncols; i++)
		snprintf(t->head[i], CELL, "%s", head[i]);
}

/* A new row; returns its cells (empty strings). */
static char (*table_row(struct table *t))[CELL]
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->cells = xrealloc(t->cells, t->cap * sizeof(*t->cells));
	}
	memset(t->cells[t->nrows], 0, sizeof(*t->cells));
	return t->cells[t->nrows++];
}

static int table_print(FILE *f, struct table *t)
{
	size_t w[MAXCOLS];
	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = strlen(t->head[c]);
		for (size_t r = 0; r < t->nrows; r++)
			if (strlen(t->cells[r][c]) > w[c])
				w[c] = strlen(t->cells[r][c]);
	}
	int bad = 0;
	for (size_t r = 0; r <= t->nrows + (t->markdown ? 1 : 0); r++) {
		int sep = t->markdown && r == 1;
		size_t row = t->markdown ? (r >= 2 ? r - 2 : 0) : (r >= 1 ? r - 1 : 0);
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = r == 0 ? t->head[c] : t->cells[row][c];
			if (t->markdown) {
				if (sep)
					bad |= fprintf(f, c ? "---:|" : "|---|") < 0;
				else
					bad |= fprintf(f, "%s %s |", c ? "" : "|", s) < 0;
			} else {
				/* first column left-aligned, numbers right-aligned */
				bad |= fprintf(f, c ? "  %*s" : "%-*s", (int)w[c], s) < 0;
			}
		}
		bad |= fputc('\n', f) == EOF;
	}
	free(t->cells);
	t->cells = NULL;
	t->nrows = t->cap = 0;
	return bad ? -1 : 0;
}

static double num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static long long count(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

static void fmt_num(char *out, const char *fmt, double v)
{
	if (isfinite(v))
		snprintf(out, CELL, fmt, v);
	else
		snprintf(out, CELL, "-");
}

/* "0.34 [0.26, 0.42]": v and its interval ci ([lo, hi], or none). */
static void fmt_interval(char *out, double v, const json_t *ci, int percent)
{
	if (!isfinite(v)) {
		snprintf(out, CELL, "-");
		return;
	}
	double k = percent ? 100 : 1;
	const char *f1 = percent ? "%+.1f%%" : "%.2f";
	char a[16], b[16], c[16];
	snprintf(a, sizeof(a), f1, k * v);
	if (json_is_array(ci) && json_array_size(ci) == 2) {
		snprintf(b, sizeof(b), f1, k * json_number_value(json_array_get(ci, 0)));
		snprintf(c, sizeof(c), f1, k * json_number_value(json_array_get(ci, 1)));
		snprintf(out, CELL, "%s [%s, %s]", a, b, c);
	} else {
		snprintf(out, CELL, "%s", a);
	}
}

/* A rate with its interval from bootstrap_ci or the Wilson one. */
static void fmt_rate(char *out, const json_t *g, const char *stat, const char *wilson, int percent)
{
	const json_t *ci = json_object_get(json_object_get(g, "bootstrap_ci"), stat);
	if (!json_is_array(ci) && wilson)
		ci = json_object_get(g, wilson);
	fmt_interval(out, num(g, stat), ci, percent);
}

static void fmt_p(char *out, const json_t *g, const char *test)
{
	double p = num(json_object_get(g, test), "p");
	if (!isfinite(p))
		snprintf(out, CELL, "-");
	else if (p < 1e-4)
		snprintf(out, CELL, "%.1e", p);
	else
		snprintf(out, CELL, "%.4f", p);
}

static void score_row(struct table *t, const char *label, const json_t *g)
{
	char (*r)[CELL] = table_row(t);
	const json_t *lift = json_object_get(g, "lift");
	snprintf(r[0], CELL, "%s", label);
	const json_t *n = json_object_get(g, "n_resolved");
	if (!n)
		n = json_object_get(g, "n");
	snprintf(r[1], CELL, "%lld", (long long)json_integer_value(n));
	fmt_num(r[2], "%.1f", num(json_object_get(g, "base"), "S"));
	fmt_num(r[3], "%.1f", num(json_object_get(g, "skill"), "S"));
	fmt_num(r[4], "%+.1f", num(lift, "S"));
	static const char *const keys[] = {"R@0", "R@0.5", "R@1", "R@2", "R@4"};
	for (int k = 0; k < 5; k++)
		fmt_num(r[5 + k], "%+.3f", num(lift, keys[k]));
}

static void paired_row(struct table *t, const char *label, const json_t *g)
{
	char (*r)[CELL] = table_row(t);
	snprintf(r[0], CELL, "%s", label);
	snprintf(r[1], CELL, "%lld", (long long)json_integer_value(json_object_get(g, "n")));
	fmt_rate(r[2], g, "T", "T_wilson", 0);
	fmt_rate(r[3], g, "H", "H_wilson", 0);
	fmt_rate(r[4], g, "neutral_share", "neutral_wilson", 0);
	fmt_rate(r[5], g, "dGM", NULL, 1);
	fmt_p(r[6], g, "sign_test");
	fmt_p(r[7], g, "wilcoxon");
	fmt_p(r[8], g, "mcnemar");
}

static int write_model(FILE *f, const json_t *m, int md)
{
	const json_t *ov = json_object_get(m, "overall"), *pa = json_object_get(m, "paired");
	int bad = 0;
	const char *h = md ? "## " : "== ", *h2 = md ? "### " : "";
	bad |= fprintf(f, "%smodel %s, decoding %s\n\n", h, json_string_value(json_object_get(m, "model")),
		       json_string_value(json_object_get(m, "decoding"))) < 0;
	bad |= fprintf(f, "%lld live trials; %lld cells, %lld cell-replicates, %lld resolved; "
		       "source coverage %.3f, skill coverage %.3f\n\n",
		       (long long)json_integer_value(json_object_get(m, "n_trials")),
		       (long long)json_integer_value(json_object_get(ov, "n_cells")),
		       (long long)json_integer_value(json_object_get(ov, "n_cell_replicates")),
		       (long long)json_integer_value(json_object_get(ov, "n_resolved")),
		       num(ov, "source_coverage"), num(ov, "skill_coverage")) < 0;

	static const char *const shead[] = {"scores", "n", "solo S", "skill S", "lift S", "lift R@0",
					    "lift R@0.5", "lift R@1", "lift R@2", "lift R@4"};
	struct table t;
	bad |= fprintf(f, "%sScores: R@t the share passed with speedup >= t, S = 100 x mean over t, "
		       "lift = skill - solo\n%s", h2, md ? "\n" : "") < 0;
	table_init(&t, md, shead, 10);
	score_row(&t, "overall", ov);
	const char *k;
	json_t *g;
	json_object_foreach((json_t *)json_object_get(ov, "by_direction"), k, g)
		score_row(&t, k, g);
	score_row(&t, "with skill", json_object_get(ov, "with_skill"));
	score_row(&t, "source passed", json_object_get(json_object_get(ov, "by_source_verdict"), "passed"));
	score_row(&t, "source failed", json_object_get(json_object_get(ov, "by_source_verdict"), "failed"));
	json_object_foreach((json_t *)json_object_get(ov, "by_category"), k, g) {
		char label[CELL];
		snprintf(label, sizeof(label), "family %s", k);
		score_row(&t, label, g);
	}
	bad |= table_print(f, &t);

	const json_t *boot = json_object_get(pa, "bootstrap"), *calls = json_object_get(pa, "calls");
	const json_t *on_device = json_object_get(pa, "time");
	bad |= fprintf(f, "\n%sPaired transfer: e = %s if passed else %g; r = e_skill / e_solo; helped "
		       "r >= %g, harmed r <= 1/%g%s; 95%% intervals: %s\n%s", h2,
		       on_device ? "eager ms / the kernels' GPU time (device_ms)" : "speedup", num(pa, "e_fail"),
		       1 + num(pa, "delta"), 1 + num(pa, "delta"),
		       calls ? " and the speedup intervals separate where both arms passed with one" : "",
		       json_is_object(boot) ? "bootstrap over problems and replicates"
					    : "Wilson (rates; a single replicate: no bootstrap)",
		       md ? "\n" : "") < 0;
	static const char *const phead[] = {"comparisons", "n", "T", "H", "neutral", "dGM", "sign p",
					    "Wilcoxon p", "McNemar p"};
	table_init(&t, md, phead, 9);
	json_object_foreach((json_t *)json_object_get(pa, "groups"), k, g)
		paired_row(&t, k, g);
	json_object_foreach((json_t *)json_object_get(pa, "by_source_standing"), k, g) {
		char label[CELL];
		snprintf(label, sizeof(label), "source %s", k);
		paired_row(&t, label, g);
	}
	bad |= table_print(f, &t);
	const json_t *rv = json_object_get(pa, "reverse");
	bad |= fprintf(f, "\nReverse direction: of %lld helped comparisons, the reverse was helped in %lld, "
		       "harmed in %lld, neutral in %lld, unresolved in %lld\n\n",
		       count(rv, "helped"), count(rv, "reverse_helped"), count(rv, "reverse_harmed"),
		       count(rv, "reverse_neutral"), count(rv, "reverse_unresolved")) < 0;
	if (on_device)
		bad |= fprintf(f, "On the kernels' GPU time: %lld comparisons; %lld stayed on the end-to-end "
			       "speedup (a passing arm without device_ms)\n\n",
			       count(on_device, "on_device"), count(on_device, "end_to_end")) < 0;
	if (calls)
		bad |= fprintf(f, "Calls by intervals: %lld comparisons had both arms passed with a speedup "
			       "interval (the rest by the ratio alone); the intervals turned %lld calls neutral "
			       "(%lld helped, %lld harmed) and %lld source standings same\n\n",
			       count(calls, "n_by_intervals"), count(calls, "turned_neutral"),
			       count(calls, "turned_neutral_helped"), count(calls, "turned_neutral_harmed"),
			       count(calls, "standing_turned_same")) < 0;

	static const char *const uhead[] = {"usage", "trials", "cost USD", "input tok", "cached tok",
					    "output tok", "agent s (mean)"};
	bad |= fprintf(f, "%sUsage per arm\n%s", h2, md ? "\n" : "") < 0;
	table_init(&t, md, uhead, 7);
	json_object_foreach((json_t *)json_object_get(ov, "usage"), k, g) {
		char (*r)[CELL] = table_row(&t);
		snprintf(r[0], CELL, "%s", k);
		snprintf(r[1], CELL, "%lld", (long long)json_integer_value(json_object_get(g, "n_trials")));
		fmt_num(r[2], "%.2f", num(g, "cost_usd"));
		fmt_num(r[3], "%.0f", num(g, "n_input_tokens"));
		fmt_num(r[4], "%.0f", num(g, "n_cache_tokens"));
		fmt_num(r[5], "%.0f", num(g, "n_output_tokens"));
		fmt_num(r[6], "%.1f", num(g, "agent_sec"));
	}
	bad |= table_print(f, &t);
	bad |= fputc('\n', f) == EOF;
	const json_t *held = json_object_get(ov, "heldout");
	if (json_is_object(held)) {
		static const char *const hhead[] = {"held-out", "trials", "R@0", "R@0.5", "R@1", "R@2", "R@4", "S"};
		bad |= fprintf(f, "%sHeld-out (ours): the final kernels graded on the held-out workload too\n%s",
			       h2, md ? "\n" : "") < 0;
		table_init(&t, md, hhead, 8);
		json_object_foreach((json_t *)held, k, g) {
			char (*r)[CELL] = table_row(&t);
			snprintf(r[0], CELL, "%s", k);
			snprintf(r[1], CELL, "%lld", (long long)json_integer_value(json_object_get(g, "n_trials")));
			static const char *const keys[] = {"R@0", "R@0.5", "R@1", "R@2", "R@4"};
			for (int i = 0; i < 5; i++)
				fmt_num(r[2 + i], "%.3f", num(g, keys[i]));
			fmt_num(r[7], "%.1f", num(g, "S"));
		}
		bad |= table_print(f, &t);
		bad |= fputc('\n', f) == EOF;
	}
	const json_t *sol = json_object_get(ov, "sol");
	if (json_is_object(sol)) {
		static const char *const head[] = {"speed of light", "trials", "floor / kernel (geomean)"};
		int with_ci = 0;
		json_object_foreach((json_t *)sol, k, g)
			with_ci |= json_is_array(json_object_get(g, "ci"));
		bad |= fprintf(f, "%sSpeed of light (ours): the floor / the kernel median of passing trials whose "
			       "floor is known%s\n%s", h2, with_ci ? "; 95% bootstrap intervals" : "",
			       md ? "\n" : "") < 0;
		table_init(&t, md, head, 3);
		json_object_foreach((json_t *)sol, k, g) {
			char (*r)[CELL] = table_row(&t);
			snprintf(r[0], CELL, "%s", k);
			snprintf(r[1], CELL, "%lld", (long long)json_integer_value(json_object_get(g, "n_trials")));
			fmt_interval(r[2], num(g, "fraction"), json_object_get(g, "ci"), 0);
		}
		bad |= table_print(f, &t);
		bad |= fputc('\n', f) == EOF;
	}
	return bad ? -1 : 0;
}

int report_write_text(FILE *f, const json_t *results, int markdown)
{
	const json_t *models = json_object_get(results, "models");
	if (markdown && fprintf(f, "# MetaKernelBench report\n\nStore `%s`.\n\n",
				json_string_value(json_object_get(results, "store"))) < 0)
		return -1;
	if (!json_array_size(models))
		return fprintf(f, "no trials in %s (mkb run starts some)\n",
			       json_string_value(json_object_get(results, "store"))) < 0 ? -1 : 0;
	size_t i;
	json_t *m;
	json_array_foreach(models, i, m)
		if (write_model(f, m, markdown) < 0)
			return -1;
	return 0;
}

/* ---- CSV: one number a row ------------------------------------------------- */

static int csv_str(FILE *f, const char *s)
{
	if (fputc('"', f) == EOF)
		return -1;
	for (; *s; s++)
		if ((*s == '"' && fputc('"', f) == EOF) || fputc(*s, f) == EOF)
			return -1;
	return fputc('"', f) == EOF ? -1 : 0;
}

struct csv {
	FILE *f;
	const char *model, *decoding;
	int bad;
};

static void csv_row(struct csv *c, const char *section, const char *group, const char *metric, double v,
		    const json_t *ci)
{
	c->bad |= csv_str(c->f, c->model) | (fputc(',', c->f) == EOF) | csv_str(c->f, c->decoding) |
		  (fputc(',', c->f) == EOF) | csv_str(c->f, section) | (fputc(',', c->f) == EOF) |
		  csv_str(c->f, group) | (fputc(',', c->f) == EOF) | csv_str(c->f, metric);
	char a[32] = "", lo[32] = "", hi[32] = "";
	if (isfinite(v))
		snprintf(a, sizeof(a), "%.10g", v);
	if (json_is_array(ci) && json_array_size(ci) == 2) {
		snprintf(lo, sizeof(lo), "%.10g", json_number_value(json_array_get(ci, 0)));
		snprintf(hi, sizeof(hi), "%.10g", json_number_value(json_array_get(ci, 1)));
	}
	c->bad |= fprintf(c->f, ",%s,%s,%s\n", a, lo, hi) < 0;
}

static void csv_scores(struct csv *c, const char *group, const json_t *g)
{
	static const char *const keys[] = {"R@0", "R@0.5", "R@1", "R@2", "R@4", "S"};
	static const char *const parts[] = {"base", "skill", "lift"};
	const json_t *n = json_object_get(g, "n_resolved");
	csv_row(c, "scores", group, "n", json_number_value(n ? n : json_object_get(g, "n")), NULL);
	if (json_object_get(g, "source_coverage")) {
		csv_row(c, "scores", group, "source_coverage", num(g, "source_coverage"), NULL);
		csv_row(c, "scores", group, "skill_coverage", num(g, "skill_coverage"), NULL);
	}
	for (int p = 0; p < 3; p++)
		for (int k = 0; k < 6; k++) {
			char metric[32];
			snprintf(metric, sizeof(metric), "%s %s", parts[p], keys[k]);
			csv_row(c, "scores", group, metric, num(json_object_get(g, parts[p]), keys[k]), NULL);
		}
}

static void csv_paired(struct csv *c, const char *group, const json_t *g)
{
	static const char *const stats[] = {"T", "H", "neutral_share", "dGM", "lift_S"};
	static const char *const wilson[] = {"T_wilson", "H_wilson", "neutral_wilson", NULL, NULL};
	csv_row(c, "paired", group, "n", num(g, "n"), NULL);
	for (int s = 0; s < 5; s++) {
		const json_t *ci = json_object_get(json_object_get(g, "bootstrap_ci"), stats[s]);
		if (!json_is_array(ci) && wilson[s])
			ci = json_object_get(g, wilson[s]);
		csv_row(c, "paired", group, stats[s], num(g, stats[s]), ci);
	}
	csv_row(c, "paired", group, "sign_p", num(json_object_get(g, "sign_test"), "p"), NULL);
	csv_row(c, "paired", group, "wilcoxon_p", num(json_object_get(g, "wilcoxon"), "p"), NULL);
	csv_row(c, "paired", group, "mcnemar_p", num(json_object_get(g, "mcnemar"), "p"), NULL);
}

int report_write_csv(FILE *f, const json_t *results)
{
	if (fputs("model,decoding,section,group,metric,value,lo,hi\n", f) == EOF)
		return -1;
	size_t i;
	json_t *m;
	int bad = 0;
	json_array_foreach(json_object_get(results, "models"), i, m) {
		struct csv c = {f, json_string_value(json_object_get(m, "model")),
				json_string_value(json_object_get(m, "decoding")), 0};
		const json_t *ov = json_object_get(m, "overall"), *pa = json_object_get(m, "paired");
		const char *k;
		json_t *g;
		csv_scores(&c, "overall", ov);
		json_object_foreach((json_t *)json_object_get(ov, "by_direction"), k, g)
			csv_scores(&c, k, g);
		csv_scores(&c, "with_skill", json_object_get(ov, "with_skill"));
		csv_scores(&c, "source_passed", json_object_get(json_object_get(ov, "by_source_verdict"), "passed"));
		csv_scores(&c, "source_failed", json_object_get(json_object_get(ov, "by_source_verdict"), "failed"));
		json_object_foreach((json_t *)json_object_get(ov, "by_category"), k, g) {
			char label[64];
			snprintf(label, sizeof(label), "family %s", k);
			csv_scores(&c, label, g);
		}
		json_object_foreach((json_t *)json_object_get(pa, "groups"), k, g)
			csv_paired(&c, k, g);
		json_object_foreach((json_t *)json_object_get(pa, "by_source_standing"), k, g) {
			char label[64];
			snprintf(label, sizeof(label), "source %s", k);
			csv_paired(&c, label, g);
		}
		json_object_foreach((json_t *)json_object_get(pa, "calls"), k, g)
			if (json_is_integer(g))
				csv_row(&c, "paired", "calls", k, json_number_value(g), NULL); /* --calls intervals */
		json_object_foreach((json_t *)json_object_get(ov, "usage"), k, g) {
			static const char *const u[] = {"n_trials", "cost_usd", "n_input_tokens", "n_cache_tokens",
							"n_output_tokens", "agent_sec"};
			for (size_t j = 0; j < ARRAY_SIZE(u); j++)
				csv_row(&c, "usage", k, u[j], num(g, u[j]), NULL);
		}
		json_object_foreach((json_t *)json_object_get(ov, "sol"), k, g) {
			csv_row(&c, "sol", k, "n_trials", num(g, "n_trials"), NULL);
			csv_row(&c, "sol", k, "fraction", num(g, "fraction"), json_object_get(g, "ci"));
		}
		bad |= c.bad;
	}
	return bad ? -1 : 0;
}
