/* mkb report --format html: one self-contained page (no script, no external
 * file) with inline SVG figures and the text report's tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mkb_limits.h"
#include "report.h"
#include "store.h"
#include "util.h"

#define COLOR_HELPED "#2e7d32"
#define COLOR_NEUTRAL "#9e9e9e"
#define COLOR_HARMED "#c62828"

static double num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static int put_escaped(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;" : NULL;
		if (e ? fputs(e, f) == EOF : fputc(*s, f) == EOF)
			return -1;
	}
	return 0;
}

/* The interval of stat in group g: the bootstrap's, else Wilson's (rates). */
static int interval(const json_t *g, const char *stat, const char *wilson, double *lo, double *hi)
{
	const json_t *ci = json_object_get(json_object_get(g, "bootstrap_ci"), stat);
	if (!json_is_array(ci) && wilson)
		ci = json_object_get(g, wilson);
	if (!json_is_array(ci) || json_array_size(ci) != 2)
		return 0;
	*lo = json_number_value(json_array_get(ci, 0));
	*hi = json_number_value(json_array_get(ci, 1));
	return 1;
}

/* Figure 1: T, H and dGM per direction with interval bars. */
static int fig_rates(FILE *f, const json_t *pa)
{
	static const char *const stats[] = {"T", "H", "dGM"};
	static const char *const wilson[] = {"T_wilson", "H_wilson", NULL};
	static const char *const colors[] = {COLOR_HELPED, COLOR_HARMED, "#1565c0"};
	const json_t *groups = json_object_get(pa, "groups");
	int bad = 0, W = 720, H = 240, panel = W / 3, top = 30, plot = 160;
	bad |= fprintf(f, "<svg class=\"fig\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		       "viewBox=\"0 0 %d %d\" role=\"img\">\n", W, H, W, H) < 0;
	for (int s = 0; s < 3; s++) {
		int x0 = s * panel + 40;
		/* rates on [0, 1]; dGM on [-1, max(1, hi)] */
		double ymin = s == 2 ? -1 : 0, ymax = 1;
		const char *k;
		json_t *g;
		json_object_foreach((json_t *)groups, k, g) {
			double lo, hi;
			if (s == 2 && interval(g, "dGM", NULL, &lo, &hi) && hi > ymax)
				ymax = hi;
			if (s == 2 && num(g, "dGM") > ymax)
				ymax = num(g, "dGM");
		}
#define Y(v) (top + plot - ((v) - ymin) / (ymax - ymin) * plot)
		bad |= fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\">%s%s</text>\n", x0,
			       stats[s], s == 2 ? " (geometric mean of r - 1)" : " (share)") < 0;
		bad |= fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n", x0,
			       Y(s == 2 ? 0 : ymin), x0 + panel - 60, Y(s == 2 ? 0 : ymin)) < 0;
		bad |= fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>"
			       "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>\n",
			       x0 - 4, Y(ymin) + 3, ymin, x0 - 4, Y(ymax) + 3, ymax) < 0;
		int i = 0;
		json_object_foreach((json_t *)groups, k, g) {
			double v = num(g, stats[s]), lo, hi;
			int bx = x0 + 10 + i * 60;
			if (isfinite(v)) {
				double y0 = Y(s == 2 ? 0 : ymin), y1 = Y(v);
				bad |= fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"36\" height=\"%.1f\" fill=\"%s\">"
					       "<title>%s %s = %.3f</title></rect>\n", bx, y1 < y0 ? y1 : y0,
					       fabs(y0 - y1), colors[s], k, stats[s], v) < 0;
				if (interval(g, stats[s], wilson[s], &lo, &hi))
					bad |= fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>"
						       "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>"
						       "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>\n",
						       bx + 18, Y(lo), bx + 18, Y(hi), bx + 12, Y(lo), bx + 24, Y(lo),
						       bx + 12, Y(hi), bx + 24, Y(hi)) < 0;
			}
			bad |= fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">%s</text>\n",
				       bx + 18, top + plot + 14 + (i % 2) * 10, k) < 0;
			i++;
		}
#undef Y
	}
	bad |= fputs("</svg>\n", f) == EOF;
	return bad ? -1 : 0;
}

/* Figure 2: per-problem paired ratios (log2 r), one dot per comparison. */
static int fig_ratios(FILE *f, const json_t *list, const char *direction)
{
	size_t i;
	json_t *c;
	/* problems of this direction in order, and the range of log2 r */
	int nums[100] = {0}, nprob = 0, col[100];
	double lim = 1;
	json_array_foreach(list, i, c) {
		if (strcmp(json_string_value(json_object_get(c, "direction")), direction))
			continue;
		int p = (int)json_integer_value(json_object_get(c, "number"));
		if (p >= 0 && p < 100 && !nums[p]) {
			nums[p] = 1;
			nprob++;
		}
		double l = fabs(log2(num(c, "ratio")));
		if (isfinite(l) && l > lim)
			lim = l;
	}
	for (int p = 0, k = 0; p < 100; p++)
		col[p] = nums[p] ? k++ : -1;
	int left = 40, step = nprob > 60 ? 9 : 14, W = left + 20 + (nprob ? nprob : 1) * step, H = 220, top = 20,
	    plot = 160, bad = 0;
	lim = ceil(lim);
	bad |= fprintf(f, "<svg class=\"fig\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		       "viewBox=\"0 0 %d %d\" role=\"img\">\n<text x=\"%d\" y=\"14\" font-size=\"12\">%s: "
		       "log2 of e_skill / e_solo per problem</text>\n", W, H, W, H, left, direction) < 0;
#define Y(v) (top + plot / 2.0 - (v) / lim * (plot / 2.0))
	bad |= fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>"
		       "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">+%g</text>"
		       "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">0</text>"
		       "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">-%g</text>\n",
		       left, Y(0), W - 10, Y(0), left - 4, Y(lim) + 8, lim, left - 4, Y(0) + 3, left - 4,
		       Y(-lim), lim) < 0;
	json_array_foreach(list, i, c) {
		if (strcmp(json_string_value(json_object_get(c, "direction")), direction))
			continue;
		int p = (int)json_integer_value(json_object_get(c, "number"));
		double l = log2(num(c, "ratio"));
		if (p < 0 || p >= 100 || !isfinite(l))
			continue;
		const char *cls = json_string_value(json_object_get(c, "class"));
		const char *color = !strcmp(cls, "helped") ? COLOR_HELPED : !strcmp(cls, "harmed") ? COLOR_HARMED
												 : COLOR_NEUTRAL;
		bad |= fprintf(f, "<circle cx=\"%d\" cy=\"%.1f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.7\"><title>", left + 10 +
			       col[p] * step, Y(l), color) < 0;
		bad |= put_escaped(f, json_string_value(json_object_get(c, "problem")));
		bad |= fprintf(f, " r%lld: ratio %.3f (%s)</title></circle>\n",
			       (long long)json_integer_value(json_object_get(c, "replicate")), num(c, "ratio"), cls) < 0;
	}
	for (int p = 0; p < 100; p++)
		if (col[p] >= 0 && (nprob <= 40 || col[p] % 5 == 0))
			bad |= fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"8\" text-anchor=\"middle\">%02d</text>\n",
				       left + 10 + col[p] * step, top + plot + 14, p) < 0;
#undef Y
	bad |= fputs("</svg>\n", f) == EOF;
	return bad ? -1 : 0;
}

/* Figure 3: helped / neutral / harmed shares by source standing. */
static int fig_standing(FILE *f, const json_t *pa)
{
	const json_t *st = json_object_get(pa, "by_source_standing");
	int W = 560, H = 130, left = 70, width = 420, bad = 0, i = 0;
	bad |= fprintf(f, "<svg class=\"fig\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		       "viewBox=\"0 0 %d %d\" role=\"img\">\n<text x=\"%d\" y=\"14\" font-size=\"12\">outcomes "
		       "by the source's standing (green helped, grey neutral, red harmed)</text>\n",
		       W, H, W, H, left) < 0;
	const char *k;
	json_t *g;
	json_object_foreach((json_t *)st, k, g) {
		double n = num(g, "n"), parts[3] = {num(g, "helped"), num(g, "neutral"), num(g, "harmed")};
		static const char *const colors[] = {COLOR_HELPED, COLOR_NEUTRAL, COLOR_HARMED};
		int y = 26 + i * 32;
		bad |= fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%s (n=%.0f)</text>\n",
			       left - 4, y + 15, k, n) < 0;
		double x = left;
		for (int j = 0; j < 3 && n > 0; j++) {
			double w = parts[j] / n * width;
			if (w > 0)
				bad |= fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"22\" fill=\"%s\">"
					       "<title>%.0f of %.0f</title></rect>\n", x, y, w, colors[j], parts[j], n) < 0;
			x += w;
		}
		i++;
	}
	bad |= fputs("</svg>\n", f) == EOF;
	return bad ? -1 : 0;
}

/* ---- (ours) a page per trial --------------------------------------------- */

/* text escaped in a <pre>, at most REPORT_TEXT_SHOWN bytes of it (cut on a UTF-8
 * boundary), saying how much is not shown. */
static int put_pre(FILE *f, const char *text)
{
	size_t len = text ? strlen(text) : 0, shown = len;
	if (shown > REPORT_TEXT_SHOWN) {
		shown = REPORT_TEXT_SHOWN;
		while (shown > 0 && ((unsigned char)text[shown] & 0xC0) == 0x80)
			shown--;
	}
	int bad = fputs("<pre>", f) == EOF;
	char *part = xstrfmt("%.*s", (int)shown, text ? text : "");
	bad |= put_escaped(f, part);
	free(part);
	if (shown < len)
		bad |= fprintf(f, "\n[... %zu more bytes in the store]", len - shown) < 0;
	bad |= fputs("</pre>\n", f) == EOF;
	return bad;
}

static int put_details(FILE *f, const char *summary, const char *text)
{
	int bad = fputs("<details><summary>", f) == EOF;
	bad |= put_escaped(f, summary);
	bad |= fputs("</summary>", f) == EOF;
	bad |= put_pre(f, text);
	bad |= fputs("</details>\n", f) == EOF;
	return bad;
}

static int put_json_details(FILE *f, const char *summary, const json_t *v)
{
	char *text = v ? json_dumps(v, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
	int bad = put_details(f, summary, text ? text : "null");
	free(text);
	return bad;
}

/* One event of the transcript. */
static int put_event(FILE *f, const json_t *e)
{
	const char *kind = json_string_value(json_object_get(e, "kind"));
	const json_t *b = json_object_get(e, "body");
	char head[160];
	snprintf(head, sizeof(head), "%.1f s  %s", num(e, "elapsed_s"), kind ? kind : "?");
	if (kind && !strcmp(kind, "start"))
		return put_details(f, "Instruction (with the attached skill, if any)",
				   json_string_value(json_object_get(b, "instruction")));
	if (kind && !strcmp(kind, "response") && json_is_string(json_object_get(b, "text")))
		return put_details(f, head, json_string_value(json_object_get(b, "text")));
	if (kind && !strcmp(kind, "submission")) {
		int bad = put_details(f, head, json_string_value(json_object_get(b, "feedback")));
		if (json_is_string(json_object_get(b, "kernel")))
			bad |= put_details(f, "  the kernel submitted", json_string_value(json_object_get(b, "kernel")));
		return bad;
	}
	return put_json_details(f, head, b);
}

struct pages {
	FILE *f;
	struct store *s;
	int bad;
	size_t n;
};

static int put_trial(const struct trial_result *t, void *arg)
{
	struct pages *pg = arg;
	FILE *f = pg->f;
	int bad = fprintf(f, "<section class=\"trial\" id=\"t-%zu\"><h3>", ++pg->n) < 0;
	bad |= put_escaped(f, t->name);
	bad |= fputs(" <small>", f) == EOF;
	bad |= put_escaped(f, t->model);
	bad |= fprintf(f, "</small></h3>\n<p>status <b>%s</b>", t->status ? t->status : "?") < 0;
	if (t->passed == 1 && t->speedup > 0)
		bad |= fprintf(f, ", speedup %.3fx (kernel %.4f ms, eager %.4f ms)", t->speedup, t->kernel_ms,
			       t->eager_ms) < 0;
	if (t->note && *t->note) {
		bad |= fputs("; ", f) == EOF;
		bad |= put_escaped(f, t->note);
	}
	bad |= fputs("</p>\n", f) == EOF;
	json_t *a = t->attempt > 0 ? store_load_attempt(pg->s, t->attempt) : NULL;
	if (a) {
		const char *inst = NULL;
		size_t i;
		json_t *e;
		json_array_foreach(json_object_get(a, "events"), i, e) {
			if (!strcmp(json_string_value(json_object_get(e, "kind")) ?: "", "start"))
				inst = json_string_value(json_object_get(json_object_get(e, "body"), "instruction"));
		}
		const char *skill = inst ? strstr(inst, "## Skill from a prior attempt") : NULL;
		if (skill)
			bad |= put_details(f, "Skill attached", skill);
		if (json_is_string(json_object_get(a, "skill_out")))
			bad |= put_details(f, "SKILL.md it left", json_string_value(json_object_get(a, "skill_out")));
		bad |= put_json_details(f, "Final verdict", json_object_get(a, "final_verdict"));
		bad |= fputs("<h4>Transcript</h4>\n", f) == EOF;
		json_array_foreach(json_object_get(a, "events"), i, e)
			bad |= put_event(f, e);
		json_decref(a);
	}
	bad |= fputs("</section>\n", f) == EOF;
	pg->bad |= bad;
	return 0;
}

/* The index of the trials, then their pages. */
static int put_index_row(const struct trial_result *t, void *arg)
{
	struct pages *pg = arg;
	int bad = fprintf(pg->f, "<tr><td><a href=\"#t-%zu\">", ++pg->n) < 0;
	bad |= put_escaped(pg->f, t->name);
	bad |= fputs("</a></td><td>", pg->f) == EOF;
	bad |= put_escaped(pg->f, t->model);
	bad |= fprintf(pg->f, "</td><td>%s</td><td>", t->status ? t->status : "?") < 0;
	if (t->passed == 1 && t->speedup > 0)
		bad |= fprintf(pg->f, "%.3f", t->speedup) < 0;
	bad |= fputs("</td></tr>\n", pg->f) == EOF;
	pg->bad |= bad;
	return 0;
}

static int trial_pages(FILE *f, const struct report *r)
{
	const char *model = NULL;
	struct store *s = report_trial_store(r, &model);
	if (!s)
		return 0;
	struct pages pg = {f, s, 0, 0};
	pg.bad |= fputs("<section class=\"trials\"><h2>Trials</h2>\n<table><tr><th>trial</th><th>model</th>"
			"<th>status</th><th>speedup</th></tr>\n", f) == EOF;
	if (store_trial_results(s, model, 0, put_index_row, &pg) < 0)
		return -1;
	pg.bad |= fputs("</table>\n", f) == EOF;
	pg.n = 0;
	if (store_trial_results(s, model, 0, put_trial, &pg) < 0)
		return -1;
	pg.bad |= fputs("</section>\n", f) == EOF;
	return pg.bad ? -1 : 0;
}

int report_write_html(FILE *f, const struct report *r)
{
	const json_t *results = report_summary(r);
	int bad = 0;
	bad |= fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		     "<title>MetaKernelBench report</title>\n<style>body{font-family:sans-serif;margin:2em;"
		     "max-width:1100px}pre{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}"
		     "svg.fig{display:block;margin:1em 0;font-family:sans-serif}section.trial{border-top:1px solid #ccc}"
		     "details pre{max-height:30em}</style></head><body>\n"
		     "<h1>MetaKernelBench report</h1>\n<p>Store <code>", f) == EOF;
	bad |= put_escaped(f, json_string_value(json_object_get(results, "store")));
	bad |= fputs("</code>. Every number is defined in docs/report.md.</p>\n", f) == EOF;
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(results, "models"), i, m) {
		const json_t *pa = json_object_get(m, "paired");
		bad |= fputs("<section class=\"model\"><h2>", f) == EOF;
		bad |= put_escaped(f, json_string_value(json_object_get(m, "model")));
		bad |= fputs(" <small>", f) == EOF;
		bad |= put_escaped(f, json_string_value(json_object_get(m, "decoding")));
		bad |= fputs("</small></h2>\n<h3>Help, harm and paired lift per direction</h3>\n", f) == EOF;
		bad |= fig_rates(f, pa);
		bad |= fputs("<h3>Per-problem paired ratios</h3>\n", f) == EOF;
		json_t *list = report_comparisons(r, i);
		bad |= fig_ratios(f, list, "cutedsl2tirx");
		bad |= fig_ratios(f, list, "tirx2cutedsl");
		json_decref(list);
		bad |= fputs("<h3>Outcomes by source standing</h3>\n", f) == EOF;
		bad |= fig_standing(f, pa);
		/* the tables: the text report of this model */
		json_t *one = json_pack("{s:O, s:[O]}", "store", json_object_get(results, "store"), "models", m);
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);
		if (!mem || !one) {
			bad = 1;
		} else {
			bad |= report_write_text(mem, one, 0);
			bad |= fclose(mem) != 0;
			bad |= fputs("<h3>Tables</h3>\n<pre>", f) == EOF;
			bad |= put_escaped(f, text);
			bad |= fputs("</pre>\n", f) == EOF;
		}
		free(text);
		json_decref(one);
		bad |= fputs("</section>\n", f) == EOF;
	}
	bad |= trial_pages(f, r) < 0;
	bad |= fputs("</body></html>\n", f) == EOF;
	return bad ? -1 : 0;
}
