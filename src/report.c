/* mkb report's computation: trials -> cells -> scores, paired analysis,
 * intervals. Definitions: docs/report.md. */
#include "report.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sol.h"
#include "stats.h"
#include "util.h"

const double report_thresholds[REPORT_NTHRESHOLDS] = {0, 0.5, 1, 2, 4};
static const char *const rate_keys[REPORT_NTHRESHOLDS] = {"R@0", "R@0.5", "R@1", "R@2", "R@4"};

enum arm_id { ARM_SOLO_CUTE, ARM_SOLO_TIRX, ARM_C2T, ARM_T2C, ARM_PLACEBO_TIRX, ARM_PLACEBO_CUTE, NARMS };
static const char *const arm_names[NARMS] = {"solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill",
					     "tirx2cutedsl_skill", "placebo_tirx", "placebo_cutedsl"};

/* A direction of transfer: source solo, base solo (target DSL), skill arm. */
static const struct direction {
	const char *name, *source_dsl, *target_dsl;
	enum arm_id source, base, skill;
} directions[2] = {
	{"cutedsl2tirx", "cutedsl", "tirx", ARM_SOLO_CUTE, ARM_SOLO_TIRX, ARM_C2T},
	{"tirx2cutedsl", "tirx", "cutedsl", ARM_SOLO_TIRX, ARM_SOLO_CUTE, ARM_T2C},
};

/* One trial's outcome as scored. */
struct rec {
	int present;            /* a live trial exists */
	int error;              /* not final (running, infra_error, model_error, ...) */
	int skipped, timed_out, passed, wrote_skill;
	char status[16];
	int64_t attempt;
	double speedup;         /* < 0: unknown */
	int heldout_passed;     /* (ours) the final kernel on the held-out workload; -1: not graded */
	double heldout_speedup;
	double device_speedup;  /* (ours) eager ms / the kernels' GPU time of a passing final
				 * grading that recorded it; < 0: none */
	double ci[2];           /* the final evaluation's 95% interval of its speedup */
	int has_ci;             /* ci holds one (0: absent or malformed) */
	double sol;             /* (ours) speed-of-light floor / kernel median of a passing final
				 * grading whose floor is known; 0: none */
	long long tokens[3];    /* input (cache included), cached, output; < 0 unknown */
	double cost, agent_s;   /* < 0 unknown */
	char *text;             /* error: "status: reason"; skipped: the note */
};

struct rep {
	int number;
	struct rec arm[NARMS];
	size_t unit;            /* bootstrap unit, or SIZE_MAX */
};

struct prob {
	int number;
	char *label;            /* NN_name */
	const char *family;
	const struct problem *cp;  /* the catalog's, or NULL */
	char *floor_workload;   /* the workload floor_ms is of (NULL: none computed yet) */
	double floor_ms;
	struct rep *reps;
	size_t nreps, cap;
};

struct config {
	char *model, *decoding;
	struct prob *probs;
	size_t nprobs, cap;
	size_t ntrials, nother;  /* live trials; those of arms the report does not know */
};

struct loader {
	const struct catalog *catalog;
	struct config *cfg;
	size_t ncfg, cap;
};

static int is_resolved_status(const char *s)
{
	return !strcmp(s, "passed") || !strcmp(s, "failed") || !strcmp(s, "timed_out") ||
	       !strcmp(s, "skipped");
}

static int arm_index(const char *arm)
{
	for (int i = 0; i < NARMS; i++)
		if (!strcmp(arm_names[i], arm))
			return i;
	return -1;
}

/* (ours) The speed-of-light floor in ms of problem p graded on workload by
 * gpu, as src/grade.c gives it to the judge: the problem's FLOP and byte
 * formulas at the GPU's measured ceilings (src/sol.h), which exist for the
 * H200 only (the name the grader reports contains "H200", the judge's own
 * test); 0 when unknown. Cached per problem for the last workload. */
static double sol_floor_ms(struct prob *p, const char *workload, const char *gpu)
{
	if (!p->cp || !workload || !gpu || !strstr(gpu, "H200"))
		return 0;
	if (!p->floor_workload || strcmp(p->floor_workload, workload)) {
		free(p->floor_workload);
		p->floor_workload = xstrdup(workload);
		p->floor_ms = 0;
		const json_t *meta = p->cp->meta;
		struct ceilings h200 = CEILINGS_H200;
		/* a problem without formulas has no floor (sol_ms would complain) */
		if (problem_workload(p->cp, workload) && json_is_string(json_object_get(meta, "flops")) &&
		    json_is_string(json_object_get(meta, "bytes")) && sol_ms(p->cp, workload, &h200, &p->floor_ms) < 0)
			p->floor_ms = 0;
	}
	return p->floor_ms;
}

/* The speedup interval of a trial's final evaluation, the grader's
 * "speedup_ci" as the store returned its JSON text: 1 and ci set when it is
 * [lo, hi] with 0 <= lo <= hi finite, else 0 (NULL, null, malformed). */
static int speedup_interval(const char *text, double ci[2])
{
	if (!text)
		return 0;
	json_t *v = json_loads(text, 0, NULL);
	int ok = json_is_array(v) && json_array_size(v) == 2 && json_is_number(json_array_get(v, 0)) &&
		 json_is_number(json_array_get(v, 1));
	if (ok) {
		ci[0] = json_number_value(json_array_get(v, 0));
		ci[1] = json_number_value(json_array_get(v, 1));
		ok = isfinite(ci[0]) && isfinite(ci[1]) && 0 <= ci[0] && ci[0] <= ci[1];
	}
	json_decref(v);
	return ok;
}

static int load_row(const struct trial_result *t, void *arg)
{
	struct loader *l = arg;
	const char *model = t->model ? t->model : "", *decoding = t->decoding ? t->decoding : "";
	struct config *c = l->ncfg ? &l->cfg[l->ncfg - 1] : NULL;
	if (!c || strcmp(c->model, model) || strcmp(c->decoding, decoding)) {
		if (l->ncfg == l->cap) {
			l->cap = l->cap ? 2 * l->cap : 4;
			l->cfg = xrealloc(l->cfg, l->cap * sizeof(*l->cfg));
		}
		c = &l->cfg[l->ncfg++];
		memset(c, 0, sizeof(*c));
		c->model = xstrdup(model);
		c->decoding = xstrdup(decoding);
	}
	c->ntrials++;
	int a = arm_index(t->arm ? t->arm : "");
	if (a < 0) {
		c->nother++;
		return 0;
	}
	struct prob *p = c->nprobs ? &c->probs[c->nprobs - 1] : NULL;
	if (!p || p->number != t->problem) {
		if (c->nprobs == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 16;
			c->probs = xrealloc(c->probs, c->cap * sizeof(*c->probs));
		}
		p = &c->probs[c->nprobs++];
		memset(p, 0, sizeof(*p));
		p->number = t->problem;
		const struct problem *cp = l->catalog ? catalog_find(l->catalog, t->problem) : NULL;
		p->label = cp ? xstrfmt("%02d_%s", t->problem, cp->name) : xstrfmt("%02d", t->problem);
		p->family = cp ? cp->family : "unknown";
		p->cp = cp;
	}
	struct rep *r = p->nreps ? &p->reps[p->nreps - 1] : NULL;
	if (!r || r->number != t->replicate) {
		if (p->nreps == p->cap) {
			p->cap = p->cap ? 2 * p->cap : 4;
			p->reps = xrealloc(p->reps, p->cap * sizeof(*p->reps));
		}
		r = &p->reps[p->nreps++];
		memset(r, 0, sizeof(*r));
		r->number = t->replicate;
		r->unit = SIZE_MAX;
	}
	struct rec *e = &r->arm[a];
	if (e->present) { /* the store keeps one live trial per name; never two */
		free(e->text);
		memset(e, 0, sizeof(*e));
	}
	const char *status = t->status ? t->status : "";
	e->present = 1;
	snprintf(e->status, sizeof(e->status), "%s", status);
	e->error = !is_resolved_status(status);
	e->skipped = !strcmp(status, "skipped");
	e->timed_out = !strcmp(status, "timed_out");
	/* the final grading decides, also for a timed-out attempt whose on-disk
	 * kernel was graded (PROTOCOL.md "The attempt") */
	e->passed = !e->error && !e->skipped && (t->passed == 1 || (t->passed < 0 && !strcmp(status, "passed")));
	e->wrote_skill = t->wrote_skill;
	e->attempt = t->attempt;
	e->speedup = t->speedup;
	e->heldout_passed = e->error || e->skipped ? -1 : t->heldout_passed;
	e->heldout_speedup = t->heldout_speedup;
	e->has_ci = speedup_interval(t->speedup_ci, e->ci);
	e->device_speedup = e->passed && t->device_ms > 0 && t->eager_ms > 0 ? t->eager_ms / t->device_ms : -1;
	double floor_ms = e->passed && t->kernel_ms > 0 ? sol_floor_ms(p, t->workload, t->gpu) : 0;
	e->sol = floor_ms > 0 ? floor_ms / t->kernel_ms : 0;
	e->tokens[0] = t->input_tokens;
	e->tokens[1] = t->cached_tokens;
	e->tokens[2] = t->output_tokens;
	e->cost = t->cost_usd;
	e->agent_s = t->agent_s;
	if (e->error)
		e->text = xstrfmt("%s: %s", status, t->reason ? t->reason : t->note ? t->note : "no verdict");
	else if (e->skipped)
		e->text = xstrdup(t->note ? t->note : "skipped: its source left no SKILL.md");
	return 0;
}

static void loader_release(struct loader *l)
{
	for (size_t i = 0; i < l->ncfg; i++) {
		struct config *c = &l->cfg[i];
		for (size_t p = 0; p < c->nprobs; p++) {
			for (size_t r = 0; r < c->probs[p].nreps; r++)
				for (int a = 0; a < NARMS; a++)
					free(c->probs[p].reps[r].arm[a].text);
			free(c->probs[p].reps);
			free(c->probs[p].label);
			free(c->probs[p].floor_workload);
		}
		free(c->probs);
		free(c->model);
		free(c->decoding);
	}
	free(l->cfg);
}

/* ---- scores (the published definitions) ---------------------------------- */

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static int attains(const struct rec *e, double t)
{
	return e->passed && (e->speedup < 0 ? 0.0 : e->speedup) >= t;
}

/* A cell-replicate: one replicate of a problem in one direction. */
struct cref {
	const struct prob *p;
	const struct rep *r;
	int dir;
};

static const struct rec *ref_arm(const struct cref *c, int which)
{
	const struct direction *d = &directions[c->dir];
	return &c->r->arm[which == 0 ? d->source : which == 1 ? d->base : d->skill];
}

static int resolved(const struct cref *c)
{
	for (int i = 0; i < 3; i++) {
		const struct rec *e = ref_arm(c, i);
		if (!e->present || e->error)
			return 0;
	}
	return 1;
}

static const struct rec *skill_outcome(const struct cref *c)
{
	const struct rec *s = ref_arm(c, 2);
	return s->skipped ? ref_arm(c, 1) : s;
}

enum { ONLY_ALL, ONLY_WITH_SKILL, ONLY_SOURCE_PASSED, ONLY_SOURCE_FAILED };

static int keep(const struct cref *c, int only)
{
	if (!resolved(c))
		return 0;
	switch (only) {
	case ONLY_WITH_SKILL: return !ref_arm(c, 2)->skipped;
	case ONLY_SOURCE_PASSED: return ref_arm(c, 0)->passed;
	case ONLY_SOURCE_FAILED: return !ref_arm(c, 0)->passed;
	default: return 1;
	}
}

static json_t *ladder(const double *rates)
{
	json_t *o = json_object();
	double s = 0;
	for (int t = 0; t < REPORT_NTHRESHOLDS; t++) {
		json_object_set_new(o, rate_keys[t], json_real(rates[t]));
		s += rates[t];
	}
	json_object_set_new(o, "S", json_real(100 * s / REPORT_NTHRESHOLDS));
	return o;
}

/* {base, skill, lift} over the resolved cell-replicates kept by `only`. */
static json_t *contrast(const struct cref *refs, size_t n, int only)
{
	double base[REPORT_NTHRESHOLDS] = {0}, skill[REPORT_NTHRESHOLDS] = {0};
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!keep(&refs[i], only))
			continue;
		k++;
		for (int t = 0; t < REPORT_NTHRESHOLDS; t++) {
			base[t] += attains(ref_arm(&refs[i], 1), report_thresholds[t]);
			skill[t] += attains(skill_outcome(&refs[i]), report_thresholds[t]);
		}
	}
	if (!k)
		return json_pack("{s:n, s:n, s:n, s:I}", "base", "skill", "lift", "n", (json_int_t)0);
	double lift[REPORT_NTHRESHOLDS];
	for (int t = 0; t < REPORT_NTHRESHOLDS; t++) {
		base[t] /= (double)k;
		skill[t] /= (double)k;
		lift[t] = skill[t] - base[t];
	}
	json_t *b = ladder(base), *s = ladder(skill), *l = json_object();
	for (int t = 0; t < REPORT_NTHRESHOLDS; t++)
		json_object_set_new(l, rate_keys[t], json_real(lift[t]));
	json_object_set_new(l, "S", json_real(json_real_value(json_object_get(s, "S")) -
					      json_real_value(json_object_get(b, "S"))));
	return json_pack("{s:o, s:o, s:o, s:I}", "base", b, "skill", s, "lift", l, "n", (json_int_t)k);
}

/* The arms of one replicate's trials in refs[i..): the cell-replicates that
 * share refs[i]'s replicate (refs come grouped by replicate), *end set past
 * them. Walking refs by it counts each trial once: a replicate's solos
 * serve both directions. */
static unsigned replicate_arms(const struct cref *refs, size_t n, size_t i, size_t *end)
{
	unsigned mask = 0;
	size_t j = i;
	for (; j < n && refs[j].r == refs[i].r; j++) {
		const struct direction *d = &directions[refs[j].dir];
		mask |= 1u << d->source | 1u << d->base | 1u << d->skill;
	}
	*end = j;
	return mask;
}

/* Usage per arm over the trials of the cell-replicates, each trial once. */
static json_t *usage_by_arm(const struct cref *refs, size_t n)
{
	struct acc {
		size_t trials;
		int null_tok[3], null_cost;
		long long tok[3];
		double cost, agent_s;
	} acc[NARMS];
	memset(acc, 0, sizeof(acc));
	int seen_arm[NARMS] = {0};
	for (size_t i = 0, j; i < n; i = j) {
		unsigned mask = replicate_arms(refs, n, i, &j);
		for (int a = 0; a < NARMS; a++) {
			if (!(mask & (1u << a)))
				continue;
			seen_arm[a] = 1;
			const struct rec *e = &refs[i].r->arm[a];
			if (!e->present || e->attempt <= 0) /* no measured record */
				continue;
			struct acc *u = &acc[a];
			u->trials++;
			for (int k = 0; k < 3; k++) {
				if (e->tokens[k] < 0)
					u->null_tok[k] = 1;
				else
					u->tok[k] += e->tokens[k];
			}
			if (e->cost < 0)
				u->null_cost = 1;
			else
				u->cost += e->cost;
			u->agent_s += e->agent_s > 0 ? e->agent_s : 0;
		}
	}
	json_t *o = json_object();
	for (int a = 0; a < NARMS; a++) {
		if (!seen_arm[a])
			continue;
		struct acc *u = &acc[a];
		int none = u->trials == 0;
		json_object_set_new(o, arm_names[a], json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}",
			"n_trials", (json_int_t)u->trials,
			"cost_usd", none || u->null_cost ? json_null() : json_real(u->cost),
			"n_input_tokens", none || u->null_tok[0] ? json_null() : json_integer(u->tok[0]),
			"n_cache_tokens", none || u->null_tok[1] ? json_null() : json_integer(u->tok[1]),
			"n_output_tokens", none || u->null_tok[2] ? json_null() : json_integer(u->tok[2]),
			"agent_sec", none ? json_null() : json_real(u->agent_s / (double)u->trials)));
	}
	return o;
}

/* (ours) Per arm, R@t and S of the final kernels graded on the held-out
 * workload too (mkb run --final-heldout), each trial counted once; NULL
 * when no trial of the group has such a grading. */
static json_t *heldout_by_arm(const struct cref *refs, size_t n)
{
	size_t cnt[NARMS] = {0}, hit[NARMS][REPORT_NTHRESHOLDS];
	memset(hit, 0, sizeof(hit));
	size_t any = 0;
	for (size_t i = 0, j; i < n; i = j) {
		unsigned mask = replicate_arms(refs, n, i, &j);
		for (int a = 0; a < NARMS; a++) {
			const struct rec *e = &refs[i].r->arm[a];
			if (!(mask & (1u << a)) || !e->present || e->heldout_passed < 0)
				continue;
			cnt[a]++;
			any++;
			for (int t = 0; t < REPORT_NTHRESHOLDS; t++)
				hit[a][t] += e->heldout_passed == 1 && (e->heldout_speedup >= report_thresholds[t] ||
									report_thresholds[t] == 0);
		}
	}
	if (!any)
		return NULL;
	json_t *o = json_object();
	for (int a = 0; a < NARMS; a++) {
		if (!cnt[a])
			continue;
		json_t *g = json_pack("{s:I}", "n_trials", (json_int_t)cnt[a]);
		double sum = 0;
		for (int t = 0; t < REPORT_NTHRESHOLDS; t++) {
			double r = (double)hit[a][t] / (double)cnt[a];
			sum += r;
			json_object_set_new(g, rate_keys[t], json_real(r));
		}
		json_object_set_new(g, "S", json_real(100 * sum / REPORT_NTHRESHOLDS));
		json_object_set_new(o, arm_names[a], g);
	}
	return o;
}

/* (ours) Per arm, the share of the speed-of-light floor its passing trials
 * reached: floor / kernel median, the geometric mean over the trials whose
 * floor is known (each trial once); NULL when no trial of the group has one.
 * The model's overall adds intervals (sol_intervals). */
static json_t *sol_by_arm(const struct cref *refs, size_t n)
{
	size_t cnt[NARMS] = {0}, any = 0;
	double logsum[NARMS] = {0};
	for (size_t i = 0, j; i < n; i = j) {
		unsigned mask = replicate_arms(refs, n, i, &j);
		for (int a = 0; a < NARMS; a++) {
			const struct rec *e = &refs[i].r->arm[a];
			if (!(mask & (1u << a)) || !e->present || !(e->sol > 0))
				continue;
			cnt[a]++;
			any++;
			logsum[a] += log(e->sol);
		}
	}
	if (!any)
		return NULL;
	json_t *o = json_object();
	for (int a = 0; a < NARMS; a++)
		if (cnt[a])
			json_object_set_new(o, arm_names[a], json_pack("{s:I, s:f}", "n_trials", (json_int_t)cnt[a],
				"fraction", exp(logsum[a] / (double)cnt[a])));
	return o;
}

static json_t *group_metrics(const struct cref *refs, size_t n)
{
	size_t nres = 0, src_passed = 0, with_skill = 0;
	for (size_t i = 0; i < n; i++) {
		if (!resolved(&refs[i]))
			continue;
		nres++;
		src_passed += ref_arm(&refs[i], 0)->passed;
		with_skill += !ref_arm(&refs[i], 2)->skipped;
	}
	json_t *o = json_pack("{s:I, s:I, s:o, s:o}", "n_cell_replicates", (json_int_t)n,
			      "n_resolved", (json_int_t)nres,
			      "source_coverage", nres ? json_real((double)src_passed / (double)nres) : json_null(),
			      "skill_coverage", nres ? json_real((double)with_skill / (double)nres) : json_null());
	json_t *all = contrast(refs, n, ONLY_ALL);
	json_object_update(o, all);
	json_decref(all);
	json_object_del(o, "n");
	json_object_set_new(o, "with_skill", contrast(refs, n, ONLY_WITH_SKILL));
	json_object_set_new(o, "by_source_verdict", json_pack("{s:o, s:o}",
		"passed", contrast(refs, n, ONLY_SOURCE_PASSED), "failed", contrast(refs, n, ONLY_SOURCE_FAILED)));
	json_object_set_new(o, "usage", usage_by_arm(refs, n));
	json_t *held = heldout_by_arm(refs, n);
	if (held)
		json_object_set_new(o, "heldout", held);
	json_t *sol = sol_by_arm(refs, n);
	if (sol)
		json_object_set_new(o, "sol", sol);
	return o;
}

/* The cell-replicates of a config matching dir (-1 any) and family (NULL
 * any), in (problem, replicate, direction) order. */
static struct cref *select_refs(const struct config *c, int dir, const char *family, size_t *n)
{
	size_t cap = 0;
	for (size_t p = 0; p < c->nprobs; p++)
		cap += c->probs[p].nreps * 2;
	struct cref *refs = xmalloc((cap ? cap : 1) * sizeof(*refs));
	*n = 0;
	for (size_t p = 0; p < c->nprobs; p++) {
		const struct prob *pr = &c->probs[p];
		if (family && strcmp(pr->family, family))
			continue;
		for (size_t r = 0; r < pr->nreps; r++)
			for (int d = 0; d < 2; d++)
				if (dir < 0 || dir == d)
					refs[(*n)++] = (struct cref){pr, &pr->reps[r], d};
	}
	return refs;
}

/* ---- streamed JSON: the records and comparisons, too many for a tree ---- */

struct out {
	FILE *f;
	size_t len;
	int bad;
	char buf[1 << 16];
};

static void out_flush(struct out *o)
{
	if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
		o->bad = 1;
	o->len = 0;
}

static void out_add(struct out *o, const char *s, size_t n)
{
	if (o->len + n > sizeof(o->buf))
		out_flush(o);
	if (n > sizeof(o->buf)) {
		if (fwrite(s, 1, n, o->f) != n)
			o->bad = 1;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void out_s(struct out *o, const char *s)
{
	out_add(o, s, strlen(s));
}

static void out_fmt(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_fmt(struct out *o, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		BUG("out_fmt: %d bytes", n);
	out_add(o, tmp, (size_t)n);
}

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void out_str(struct out *o, const char *s)
{
	out_add(o, "\"", 1);
	for (;;) {
		size_t run = 0; /* bytes written as they are */
		while (s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20)
			run++;
		out_add(o, s, run);
		s += run;
		if (!*s)
			break;
		if (*s == '"' || *s == '\\')
			out_fmt(o, "\\%c", *s);
		else
			out_fmt(o, "\\u%04x", (unsigned char)*s);
		s++;
	}
	out_add(o, "\"", 1);
}

/* A number as "%.10g" (the summary's JSON_REAL_PRECISION(10)); null when not finite. */
static void out_num(struct out *o, double v)
{
	enum { ROOM = 48 };
	if (!isfinite(v)) {
		out_s(o, "null");
		return;
	}
	if (o->len + ROOM > sizeof(o->buf))
		out_flush(o);
	o->len += stats_format_g(v, 10, o->buf + o->len, ROOM);
}

static void out_int(struct out *o, long long v)
{
	char tmp[24];
	size_t n = sizeof(tmp);
	unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
	do
		tmp[--n] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		tmp[--n] = '-';
	out_add(o, tmp + n, sizeof(tmp) - n);
}

static void out_bool(struct out *o, int v)
{
	out_s(o, v ? "true" : "false");
}

static void out_count(struct out *o, long long v)
{
	if (v < 0)
		out_s(o, "null");
	else
		out_int(o, v);
}

/* A trial's record, the published TrialRecord's fields plus ours. */
static void out_record(struct out *o, const struct prob *p, const struct rep *r, int arm)
{
	const struct rec *e = &r->arm[arm];
	if (!e->present) {
		out_s(o, "null");
		return;
	}
	out_s(o, "{\"rewards\":{");
	if (!e->error && !e->skipped) {
		out_s(o, e->passed ? "\"passed\":1.0" : "\"passed\":0.0");
		if (e->speedup >= 0) {
			out_s(o, ",\"speedup_vs_eager\":");
			out_num(o, e->speedup);
		}
	}
	out_s(o, "},\"timed_out\":");
	out_bool(o, e->timed_out);
	out_s(o, ",\"error\":");
	if (e->error)
		out_str(o, e->text);
	else
		out_s(o, "null");
	out_s(o, ",\"skipped\":");
	if (e->skipped)
		out_str(o, e->text);
	else
		out_s(o, "null");
	out_s(o, ",\"usage\":");
	if (e->attempt > 0) {
		out_s(o, "{\"n_input_tokens\":");
		out_count(o, e->tokens[0]);
		out_s(o, ",\"n_cache_tokens\":");
		out_count(o, e->tokens[1]);
		out_s(o, ",\"n_output_tokens\":");
		out_count(o, e->tokens[2]);
		out_s(o, ",\"cost_usd\":");
		if (e->cost < 0)
			out_s(o, "null");
		else
			out_num(o, e->cost);
		out_s(o, ",\"agent_sec\":");
		out_num(o, e->agent_s > 0 ? e->agent_s : 0.0);
		out_s(o, "}");
	} else {
		out_s(o, "null");
	}
	out_s(o, p->number >= 0 && p->number < 10 ? ",\"trial\":\"p0" : ",\"trial\":\"p"); /* p%02d */
	out_int(o, p->number);
	out_s(o, "_r");
	out_int(o, r->number);
	out_s(o, "_");
	out_s(o, arm_names[arm]);
	out_s(o, "\",\"status\":");
	out_str(o, e->status);
	out_s(o, ",\"attempt\":");
	out_count(o, e->attempt > 0 ? (long long)e->attempt : -1);
	out_s(o, ",\"wrote_skill\":");
	out_bool(o, e->wrote_skill);
	out_s(o, "}");
}

static void out_replicates(struct out *o, const struct prob *pr, int dir)
{
	const struct direction *d = &directions[dir];
	out_s(o, "[");
	for (size_t r = 0; r < pr->nreps; r++) {
		struct cref ref = {pr, &pr->reps[r], dir};
		out_s(o, r ? ",{\"resolved\":" : "{\"resolved\":");
		out_bool(o, resolved(&ref));
		out_s(o, ",\"n_replicate\":");
		out_int(o, pr->reps[r].number);
		out_s(o, ",\"source\":");
		out_record(o, pr, &pr->reps[r], d->source);
		out_s(o, ",\"base\":");
		out_record(o, pr, &pr->reps[r], d->base);
		out_s(o, ",\"skill\":");
		out_record(o, pr, &pr->reps[r], d->skill);
		out_s(o, "}");
	}
	out_s(o, "]");
}

/* A cell's summary; its replicates are streamed when written. */
struct cell {
	json_t *summary;
	const struct prob *p;
	int dir;
};

static void cells_json(const struct config *c, struct cell **cells, size_t *n, size_t *cap)
{
	for (size_t p = 0; p < c->nprobs; p++) {
		const struct prob *pr = &c->probs[p];
		struct cref *refs = xmalloc((pr->nreps ? pr->nreps : 1) * sizeof(*refs));
		for (int d = 0; d < 2; d++) {
			for (size_t r = 0; r < pr->nreps; r++)
				refs[r] = (struct cref){pr, &pr->reps[r], d};
			char *src = xstrfmt("%s_%s", pr->label, directions[d].source_dsl);
			char *dst = xstrfmt("%s_%s", pr->label, directions[d].target_dsl);
			json_t *cell = json_pack("{s:{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s}}", "cell", "problem",
						 pr->label, "category", pr->family, "direction", directions[d].name,
						 "source_task", src, "target_task", dst, "number", pr->number,
						 "model", c->model, "decoding", c->decoding);
			free(src);
			free(dst);
			json_t *m = group_metrics(refs, pr->nreps);
			json_object_update(cell, m);
			json_decref(m);
			if (*n == *cap) {
				*cap = *cap ? 2 * *cap : 64;
				*cells = xrealloc(*cells, *cap * sizeof(**cells));
			}
			(*cells)[(*n)++] = (struct cell){cell, pr, d};
		}
		free(refs);
	}
}

static json_t *overall_json(const struct config *c)
{
	size_t n;
	struct cref *refs = select_refs(c, -1, NULL, &n);
	json_t *o = json_pack("{s:I}", "n_cells", (json_int_t)(2 * c->nprobs));
	json_t *m = group_metrics(refs, n);
	json_object_update(o, m);
	json_decref(m);
	free(refs);
	json_t *bydir = json_object();
	for (int d = 0; d < 2; d++) {
		refs = select_refs(c, d, NULL, &n);
		json_object_set_new(bydir, directions[d].name, group_metrics(refs, n));
		free(refs);
	}
	json_object_set_new(o, "by_direction", bydir);
	/* families in name order */
	const char **fam = xmalloc((c->nprobs ? c->nprobs : 1) * sizeof(*fam));
	size_t nf = 0;
	for (size_t p = 0; p < c->nprobs; p++) {
		size_t k = 0;
		while (k < nf && strcmp(fam[k], c->probs[p].family))
			k++;
		if (k == nf)
			fam[nf++] = c->probs[p].family;
	}
	for (size_t i = 1; i < nf; i++)
		for (size_t j = i; j > 0 && strcmp(fam[j - 1], fam[j]) > 0; j--) {
			const char *t = fam[j];
			fam[j] = fam[j - 1];
			fam[j - 1] = t;
		}
	json_t *bycat = json_object();
	for (size_t f = 0; f < nf; f++) {
		refs = select_refs(c, -1, fam[f], &n);
		json_object_set_new(bycat, fam[f], group_metrics(refs, n));
		free(refs);
	}
	free(fam);
	json_object_set_new(o, "by_category", bycat);
	return o;
}

/* ---- paired transfer analysis (ours) ------------------------------------- */

enum { CLS_HARMED = -1, CLS_NEUTRAL = 0, CLS_HELPED = 1 };
enum { ST_ABOVE, ST_SAME, ST_BELOW, NSTANDING };
static const char *const standing_names[NSTANDING] = {"above", "same", "below"};

/* Groups of comparisons the analysis reports (and the bootstrap resamples). */
enum { G_ALL, G_DIR0, G_DIR1, G_ABOVE, G_SAME, G_BELOW, NGROUPS };
static const char *const group_names[NGROUPS] = {"all", "cutedsl2tirx", "tirx2cutedsl", "above", "same",
						 "below"};

struct cmp {
	const struct prob *p;
	const struct rep *r;
	int dir;
	double e_skill, e_base, e_source, ratio, logr;
	int cls, standing, skipped;
	int paper_cls, paper_standing;  /* the paper's calls (equal to cls, standing under it) */
	int by_intervals;               /* (--calls intervals) both arms' intervals decided it */
	int on_device;                  /* (--time device) compared on the kernels' GPU time */
	int skill_passed, base_passed;
	int dlift[REPORT_NTHRESHOLDS];  /* skill attains - base attains */
	size_t unit;
};

static double effective(const struct rec *e, double e_fail)
{
	return e->passed && e->speedup > 0 ? e->speedup : e_fail;
}

/* (--time device) the same on the kernels' GPU time: eager ms / device ms. */
static double effective_device(const struct rec *e, double e_fail)
{
	return e->passed && e->device_speedup > 0 ? e->device_speedup : e_fail;
}

/* Every passing arm has the kernels' GPU time (a failed one counts e_fail
 * on either basis). */
static int device_known(const struct rec *e)
{
	return !e->passed || e->device_speedup > 0;
}

/* The ratio rule: ratios within 1e-12 (relative) of a threshold reach it,
 * so 1.05 / 1.00 counts as helped at delta 0.05 despite rounding. */
static int classify(double ratio, double delta)
{
	double up = 1 + delta;
	if (ratio >= up * (1 - 1e-12))
		return CLS_HELPED;
	if (ratio <= (1 / up) * (1 + 1e-12))
		return CLS_HARMED;
	return CLS_NEUTRAL;
}

/* Arm a against arm b, whose effective speedups have the ratio ratio
 * (a / b), as o->calls says: the paper's ratio rule, or (intervals) that
 * rule where also a's speedup interval lies wholly above b's (helped) or
 * below it (harmed), neutral otherwise. Where either arm failed or has no
 * interval, the paper's rule alone; *by_intervals says whether the
 * intervals applied. */
static int call(const struct rec *a, const struct rec *b, double ratio, const struct report_opts *o,
		int *by_intervals)
{
	int cls = classify(ratio, o->delta);
	*by_intervals = o->calls == REPORT_CALLS_INTERVALS && a->passed && a->speedup > 0 && a->has_ci &&
			b->passed && b->speedup > 0 && b->has_ci;
	if (!*by_intervals)
		return cls;
	if ((cls == CLS_HELPED && !(a->ci[0] > b->ci[1])) || (cls == CLS_HARMED && !(a->ci[1] < b->ci[0])))
		return CLS_NEUTRAL;
	return cls;
}

struct gsum {                   /* what the statistics of a group need */
	double n, helped, harmed, logr, dlift[REPORT_NTHRESHOLDS];
};

enum { ST_T, ST_H, ST_N, ST_DGM, ST_LIFT0, ST_LIFTS = ST_LIFT0 + REPORT_NTHRESHOLDS, NSTATS };
static const char *const stat_names[NSTATS] = {"T", "H", "neutral_share", "dGM", "lift_R@0", "lift_R@0.5",
					       "lift_R@1", "lift_R@2", "lift_R@4", "lift_S"};

static void gsum_stats(const struct gsum *g, double *out)
{
	if (g->n <= 0) {
		for (int i = 0; i < NSTATS; i++)
			out[i] = NAN;
		return;
	}
	out[ST_T] = g->helped / g->n;
	out[ST_H] = g->harmed / g->n;
	out[ST_N] = 1 - out[ST_T] - out[ST_H];
	out[ST_DGM] = exp(g->logr / g->n) - 1;
	double s = 0;
	for (int t = 0; t < REPORT_NTHRESHOLDS; t++) {
		out[ST_LIFT0 + t] = g->dlift[t] / g->n;
		s += out[ST_LIFT0 + t];
	}
	out[ST_LIFTS] = 100 * s / REPORT_NTHRESHOLDS;
}

/* A comparison of direction dir and source standing st belongs to the
 * group g (all, its direction, its standing). */
static int group_has(int g, int dir, int st)
{
	return g == G_ALL || g == G_DIR0 + dir || g == G_ABOVE + st;
}

static void gsum_add(struct gsum *g, const struct cmp *c, double w)
{
	g->n += w;
	g->helped += w * (c->cls == CLS_HELPED);
	g->harmed += w * (c->cls == CLS_HARMED);
	g->logr += w * c->logr;
	for (int t = 0; t < REPORT_NTHRESHOLDS; t++)
		g->dlift[t] += w * c->dlift[t];
}

static json_t *pair_json(double lo, double hi)
{
	if (!isfinite(lo) || !isfinite(hi))
		return json_null();
	return json_pack("[o, o]", json_real(lo), json_real(hi));
}

static json_t *group_json(const struct cmp *cmps, size_t n, int group, const double (*ci)[NSTATS][2])
{
	struct gsum g = {0};
	size_t m = 0;
	double *logr = xmalloc((n ? n : 1) * sizeof(*logr));
	long pos = 0, neg = 0, b = 0, c = 0;
	for (size_t i = 0; i < n; i++) {
		if (!group_has(group, cmps[i].dir, cmps[i].standing))
			continue;
		gsum_add(&g, &cmps[i], 1);
		logr[m++] = cmps[i].logr;
		pos += cmps[i].logr > 0;
		neg += cmps[i].logr < 0;
		b += cmps[i].skill_passed && !cmps[i].base_passed;
		c += !cmps[i].skill_passed && cmps[i].base_passed;
	}
	double st[NSTATS];
	gsum_stats(&g, st);
	struct wilcoxon_result w;
	if (stats_wilcoxon(logr, m, -1, &w) < 0)
		BUG("automatic Wilcoxon refused");
	free(logr);
	long k = (long)m;
	double lo, hi;
	json_t *o = json_pack("{s:I, s:I, s:I, s:I}", "n", (json_int_t)k, "helped", (json_int_t)g.helped,
			      "harmed", (json_int_t)g.harmed, "neutral", (json_int_t)(k - (long)g.helped - (long)g.harmed));
	for (int s = 0; s < NSTATS; s++)
		json_object_set_new(o, stat_names[s], jnum(st[s]));
	json_object_set_new(o, "geomean_ratio", k ? jnum(st[ST_DGM] + 1) : json_null());
	stats_wilson((long)g.helped, k, STATS_Z95, &lo, &hi);
	json_object_set_new(o, "T_wilson", k ? pair_json(lo, hi) : json_null());
	stats_wilson((long)g.harmed, k, STATS_Z95, &lo, &hi);
	json_object_set_new(o, "H_wilson", k ? pair_json(lo, hi) : json_null());
	stats_wilson(k - (long)g.helped - (long)g.harmed, k, STATS_Z95, &lo, &hi);
	json_object_set_new(o, "neutral_wilson", k ? pair_json(lo, hi) : json_null());
	json_object_set_new(o, "sign_test", json_pack("{s:I, s:I, s:f}", "positive", (json_int_t)pos,
		"negative", (json_int_t)neg, "p", stats_sign_test(pos, neg)));
	json_object_set_new(o, "wilcoxon", json_pack("{s:I, s:I, s:f, s:f, s:s, s:f}", "n", (json_int_t)w.n,
		"zeros", (json_int_t)w.zeros, "statistic", w.statistic, "z", w.z,
		"method", w.exact ? "exact" : "normal", "p", w.p));
	json_object_set_new(o, "mcnemar", json_pack("{s:I, s:I, s:f}", "skill_only_passed", (json_int_t)b,
		"solo_only_passed", (json_int_t)c, "p", stats_mcnemar_exact(b, c)));
	if (ci) {
		json_t *cj = json_object();
		for (int s = 0; s < NSTATS; s++)
			json_object_set_new(cj, stat_names[s], pair_json(ci[group][s][0], ci[group][s][1]));
		json_object_set_new(o, "bootstrap_ci", cj);
	} else {
		json_object_set_new(o, "bootstrap_ci", json_null());
	}
	return o;
}

/* The 95% percentile interval of x[0..B), the resamples' values of a
 * statistic (NaN where its group was empty; x is sorted in place); NaNs
 * when the group is empty in more than half of them. */
static void percentile_ci(double *x, size_t B, double ci[2])
{
	size_t k = stats_sort(x, B);
	int ok = k >= B / 2 && k > 0;
	ci[0] = ok ? stats_quantile_sorted(x, k, 0.025) : NAN;
	ci[1] = ok ? stats_quantile_sorted(x, k, 0.975) : NAN;
}

/* A comparison's cell: its direction and source standing. Every group is a
 * union of cells. */
#define NCELLS (2 * NSTANDING)
/* The whole-number parts of a comparison's sums: n, helped, harmed, dlift[t]. */
#define COUNT_FIELDS (3 + REPORT_NTHRESHOLDS)

/* A kind of comparison: its cell and counts. Comparisons come in few kinds
 * (a cell, a class, a pattern of lifts), so a resample sums their weights
 * per kind. */
struct kind {
	int cell;
	int v[COUNT_FIELDS];
};

/* The index of c's kind in kinds[0..*nkinds), added if new. */
static size_t kind_of(const struct cmp *c, struct kind *kinds, size_t *nkinds)
{
	struct kind k = {c->dir * NSTANDING + c->standing, {1, c->cls == CLS_HELPED, c->cls == CLS_HARMED}};
	for (int t = 0; t < REPORT_NTHRESHOLDS; t++)
		k.v[3 + t] = c->dlift[t];
	size_t i = 0;
	while (i < *nkinds && memcmp(&kinds[i], &k, sizeof(k)))
		i++;
	if (i == *nkinds)
		kinds[(*nkinds)++] = k;
	return i;
}

/* Percentile intervals of every statistic of every group over o->bootstrap
 * two-level resamples: problems, then replicates within a problem. A
 * resample's group sums are the units' sums weighted by how often each
 * unit was drawn. All but the log ratios are whole numbers, summed in
 * integers per kind of comparison (exactly the doubles a per-group sum
 * gives); the log ratios per unit and group, as a weighted sum over the
 * drawn units in unit order. */
static void bootstrap(const struct cmp *cmps, size_t n, const size_t *start, size_t nclusters,
		      const struct report_opts *o, double (*ci)[NSTATS][2])
{
	size_t nunits = start[nclusters], B = (size_t)o->bootstrap, nkinds = 0;
	double *ulogr = xcalloc(nunits * NGROUPS, sizeof(*ulogr));
	struct kind *kinds = xmalloc((n ? n : 1) * sizeof(*kinds));
	size_t *kind = xmalloc((n ? n : 1) * sizeof(*kind)), *unit = xmalloc((n ? n : 1) * sizeof(*unit));
	int finite = 1;
	for (size_t i = 0; i < n; i++) {
		const struct cmp *c = &cmps[i];
		for (int g = 0; g < NGROUPS; g++)
			if (group_has(g, c->dir, c->standing))
				ulogr[c->unit * NGROUPS + (size_t)g] += c->logr;
		finite &= isfinite(c->logr) != 0;
		kind[i] = kind_of(c, kinds, &nkinds);
		unit[i] = c->unit;
	}
	long long *kw = xmalloc((nkinds ? nkinds : 1) * sizeof(*kw));
	uint32_t *w = xmalloc(nunits * sizeof(*w));
	double *samples = xmalloc(B * NGROUPS * NSTATS * sizeof(*samples));
	struct stats_rng rng;
	stats_rng_seed(&rng, o->seed);
	for (size_t b = 0; b < B; b++) {
		stats_bootstrap_draw(&rng, start, nclusters, w);
		double logr[NGROUPS] = {0};
		for (size_t u = 0; u < nunits; u++) {
			/* an undrawn unit adds a zero, exactly nothing, unless some log
			 * ratio is infinite: then skip it as no branch is cheaper */
			if (!finite && !w[u])
				continue;
			double wu = w[u];
			const double *x = &ulogr[u * NGROUPS];
			for (int g = 0; g < NGROUPS; g++)
				logr[g] += wu * x[g];
		}
		memset(kw, 0, nkinds * sizeof(*kw));
		for (size_t i = 0; i < n; i++)
			kw[kind[i]] += w[unit[i]];
		long long cell[NCELLS][COUNT_FIELDS] = {{0}};
		for (size_t k = 0; k < nkinds; k++)
			for (int f = 0; f < COUNT_FIELDS; f++)
				cell[kinds[k].cell][f] += kw[k] * kinds[k].v[f];
		for (int g = 0; g < NGROUPS; g++) {
			long long v[COUNT_FIELDS] = {0};
			for (int k = 0; k < NCELLS; k++)
				if (group_has(g, k / NSTANDING, k % NSTANDING))
					for (int f = 0; f < COUNT_FIELDS; f++)
						v[f] += cell[k][f];
			struct gsum sum = {(double)v[0], (double)v[1], (double)v[2], logr[g], {0}};
			for (int t = 0; t < REPORT_NTHRESHOLDS; t++)
				sum.dlift[t] = (double)v[3 + t];
			double st[NSTATS];
			gsum_stats(&sum, st);
			for (int s = 0; s < NSTATS; s++)
				samples[((size_t)g * NSTATS + (size_t)s) * B + b] = st[s];
		}
	}
	for (int g = 0; g < NGROUPS; g++)
		for (int s = 0; s < NSTATS; s++)
			percentile_ci(&samples[((size_t)g * NSTATS + (size_t)s) * B], B, ci[g][s]);
	free(samples);
	free(w);
	free(kw);
	free(kind);
	free(unit);
	free(kinds);
	free(ulogr);
}

/* (ours) The 95% percentile intervals of each arm's speed-of-light
 * fraction in sol (the model's overall, from sol_by_arm) over o->bootstrap
 * two-level resamples of the trials with a fraction: problems, then
 * replicates within each drawn problem, from the paired bootstrap's seed
 * (a generator of their own: the paired intervals do not move). Only where
 * some problem has 2 or more such replicates; "ci" is null otherwise. */
static void sol_intervals(const struct config *c, const struct report_opts *o, json_t *sol)
{
	if (!sol)
		return;
	size_t nunits = 0, nclusters = 0, max_reps = 0, B = (size_t)o->bootstrap;
	for (size_t p = 0; p < c->nprobs; p++)
		nunits += c->probs[p].nreps;
	/* per unit (replicate) and arm: trials with a fraction (0 or 1), log fraction */
	double (*cnt)[NARMS] = xcalloc(nunits ? nunits : 1, sizeof(*cnt));
	double (*logfrac)[NARMS] = xcalloc(nunits ? nunits : 1, sizeof(*logfrac));
	size_t *start = xmalloc((c->nprobs + 1) * sizeof(*start));
	nunits = 0;
	for (size_t p = 0; p < c->nprobs; p++) {
		size_t first = nunits;
		for (size_t r = 0; r < c->probs[p].nreps; r++) {
			const struct rep *rp = &c->probs[p].reps[r];
			int any = 0;
			for (int a = ARM_SOLO_CUTE; a <= ARM_T2C; a++) {
				if (!rp->arm[a].present || !(rp->arm[a].sol > 0))
					continue;
				cnt[nunits][a] = 1;
				logfrac[nunits][a] = log(rp->arm[a].sol);
				any = 1;
			}
			nunits += (size_t)any;
		}
		if (nunits > first) {
			start[nclusters++] = first;
			if (nunits - first > max_reps)
				max_reps = nunits - first;
		}
	}
	start[nclusters] = nunits;
	double ci[NARMS][2];
	for (int a = 0; a < NARMS; a++)
		ci[a][0] = ci[a][1] = NAN;
	if (B > 0 && max_reps >= 2) {
		uint32_t *w = xmalloc(nunits * sizeof(*w));
		double *samples = xmalloc(NARMS * B * sizeof(*samples));
		struct stats_rng rng;
		stats_rng_seed(&rng, o->seed);
		for (size_t b = 0; b < B; b++) {
			stats_bootstrap_draw(&rng, start, nclusters, w);
			double n[NARMS] = {0}, l[NARMS] = {0};
			for (size_t u = 0; u < nunits; u++)
				for (int a = 0; a < NARMS; a++) {
					n[a] += w[u] * cnt[u][a];
					l[a] += w[u] * logfrac[u][a];
				}
			for (int a = 0; a < NARMS; a++)
				samples[(size_t)a * B + b] = n[a] > 0 ? exp(l[a] / n[a]) : NAN;
		}
		for (int a = 0; a < NARMS; a++)
			percentile_ci(&samples[(size_t)a * B], B, ci[a]);
		free(samples);
		free(w);
	}
	for (int a = 0; a < NARMS; a++) {
		json_t *arm = json_object_get(sol, arm_names[a]);
		if (arm)
			json_object_set_new(arm, "ci", pair_json(ci[a][0], ci[a][1]));
	}
	free(start);
	free(logfrac);
	free(cnt);
}

/* A model's comparisons, the bootstrap's clusters of them, its intervals. */
struct paired {
	struct cmp *cmps;
	size_t n, nunits, nclusters, max_reps;
	size_t *start;                  /* the clusters' first units, then nunits */
	double (*ci)[NSTATS][2];        /* per group and statistic; NULL: no bootstrap */
};

static void paired_prepare(struct config *c, const struct report_opts *o, struct paired *pd)
{
	size_t cap = 0;
	for (size_t p = 0; p < c->nprobs; p++)
		cap += 2 * c->probs[p].nreps;
	struct cmp *cmps = xmalloc((cap ? cap : 1) * sizeof(*cmps));
	size_t n = 0, nunits = 0, nclusters = 0, max_reps = 0;
	size_t *start = xmalloc((c->nprobs + 1) * sizeof(*start));
	for (size_t p = 0; p < c->nprobs; p++) {
		struct prob *pr = &c->probs[p];
		size_t units_before = nunits;
		for (size_t r = 0; r < pr->nreps; r++) {
			struct rep *rp = &pr->reps[r];
			rp->unit = SIZE_MAX;
			for (int d = 0; d < 2; d++) {
				struct cref ref = {pr, rp, d};
				if (!resolved(&ref))
					continue;
				if (rp->unit == SIZE_MAX)
					rp->unit = nunits++;
				struct cmp *x = &cmps[n++];
				memset(x, 0, sizeof(*x));
				x->p = pr;
				x->r = rp;
				x->dir = d;
				x->unit = rp->unit;
				const struct rec *src = ref_arm(&ref, 0), *base = ref_arm(&ref, 1), *sk = skill_outcome(&ref);
				x->skipped = ref_arm(&ref, 2)->skipped;
				x->e_base = effective(base, o->e_fail);
				x->e_skill = effective(sk, o->e_fail);
				x->e_source = effective(src, o->e_fail);
				int unused, s;
				/* the paper's call, on the paper's figure */
				x->paper_cls = x->skipped ? CLS_NEUTRAL : classify(x->e_skill / x->e_base, o->delta);
				x->on_device = o->time == REPORT_TIME_DEVICE && device_known(src) && device_known(base) &&
					       device_known(sk);
				if (x->on_device) {
					x->e_base = effective_device(base, o->e_fail);
					x->e_skill = effective_device(sk, o->e_fail);
					x->e_source = effective_device(src, o->e_fail);
				}
				x->ratio = x->skipped ? 1 : x->e_skill / x->e_base;
				x->logr = log(x->ratio);
				x->cls = x->skipped ? CLS_NEUTRAL : call(sk, base, x->ratio, o, &x->by_intervals);
				s = classify(x->e_source / x->e_base, o->delta);
				x->paper_standing = s == CLS_HELPED ? ST_ABOVE : s == CLS_HARMED ? ST_BELOW : ST_SAME;
				s = call(src, base, x->e_source / x->e_base, o, &unused);
				x->standing = s == CLS_HELPED ? ST_ABOVE : s == CLS_HARMED ? ST_BELOW : ST_SAME;
				x->skill_passed = sk->passed;
				x->base_passed = base->passed;
				for (int t = 0; t < REPORT_NTHRESHOLDS; t++)
					x->dlift[t] = attains(sk, report_thresholds[t]) - attains(base, report_thresholds[t]);
			}
		}
		if (nunits > units_before) {
			start[nclusters++] = units_before;
			if (nunits - units_before > max_reps)
				max_reps = nunits - units_before;
		}
	}
	start[nclusters] = nunits;
	*pd = (struct paired){cmps, n, nunits, nclusters, max_reps, start, NULL};
	if (o->bootstrap > 0 && max_reps >= 2)
		pd->ci = xmalloc(NGROUPS * sizeof(*pd->ci));
}

/* The models' bootstraps, next[0] counting off the ones taken. */
struct boot_queue {
	struct paired *pd;
	size_t n;
	const struct report_opts *o;
	atomic_size_t next;
};

static void *boot_worker(void *arg)
{
	struct boot_queue *q = arg;
	for (size_t i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) {
		struct paired *p = &q->pd[i];
		if (p->ci)
			bootstrap(p->cmps, p->n, p->start, p->nclusters, q->o, p->ci);
	}
	return NULL;
}

/* Every model's bootstrap intervals, computed in threads: the models'
 * bootstraps are independent (each draws from its own generator seeded by
 * --seed), so in any order they give the intervals of one after another.
 * boot_start starts up to a thread per processor but one; boot_finish has
 * the calling thread take what is left, then waits for the others. */
enum { BOOT_MAX_THREADS = 16 };

struct boot_pool {
	struct boot_queue q;
	pthread_t threads[BOOT_MAX_THREADS - 1];
	size_t started;
};

static void boot_start(struct boot_pool *bp, struct paired *pd, size_t n, const struct report_opts *o)
{
	bp->q.pd = pd;
	bp->q.n = n;
	bp->q.o = o;
	atomic_init(&bp->q.next, 0);
	bp->started = 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t extra = cpus > 1 ? (size_t)cpus - 1 : 0;
	if (extra > BOOT_MAX_THREADS - 1)
		extra = BOOT_MAX_THREADS - 1;
	if (extra > n)
		extra = n;
	/* a thread that cannot start leaves its share to the others */
	while (bp->started < extra && pthread_create(&bp->threads[bp->started], NULL, boot_worker, &bp->q) == 0)
		bp->started++;
}

static void boot_finish(struct boot_pool *bp)
{
	boot_worker(&bp->q);
	for (size_t t = 0; t < bp->started; t++)
		if (pthread_join(bp->threads[t], NULL) != 0)
			BUG("pthread_join failed");
}

/* (--calls intervals) What the intervals changed against the paper's
 * rule: the comparisons they decided (both arms passed with an interval),
 * the helped and harmed calls they turned neutral, the source standings
 * they turned "same". */
static json_t *calls_json(const struct cmp *cmps, size_t n)
{
	long decided = 0, from_helped = 0, from_harmed = 0, standing = 0;
	for (size_t i = 0; i < n; i++) {
		decided += cmps[i].by_intervals;
		from_helped += cmps[i].paper_cls == CLS_HELPED && cmps[i].cls == CLS_NEUTRAL;
		from_harmed += cmps[i].paper_cls == CLS_HARMED && cmps[i].cls == CLS_NEUTRAL;
		standing += cmps[i].paper_standing != cmps[i].standing;
	}
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "rule", "intervals",
			 "n_by_intervals", (json_int_t)decided, "n_by_paper_rule", (json_int_t)((long)n - decided),
			 "turned_neutral", (json_int_t)(from_helped + from_harmed),
			 "turned_neutral_helped", (json_int_t)from_helped,
			 "turned_neutral_harmed", (json_int_t)from_harmed,
			 "standing_turned_same", (json_int_t)standing);
}

static json_t *paired_json(const struct paired *pd, const struct report_opts *o)
{
	const struct cmp *cmps = pd->cmps;
	size_t n = pd->n;
	double (*ci)[NSTATS][2] = pd->ci;
	json_t *boot = json_null();
	if (ci)
		boot = json_pack("{s:i, s:I, s:I, s:I, s:f, s:s}", "resamples", o->bootstrap,
				 "seed", (json_int_t)o->seed, "problems", (json_int_t)pd->nclusters,
				 "replicates", (json_int_t)pd->nunits, "level", 0.95, "method",
				 "percentile; problems resampled, then replicates within each drawn problem");
	json_t *groups = json_object(), *standing = json_object();
	for (int g = G_ALL; g <= G_DIR1; g++)
		json_object_set_new(groups, group_names[g], group_json(cmps, n, g, ci));
	for (int g = G_ABOVE; g <= G_BELOW; g++)
		json_object_set_new(standing, group_names[g], group_json(cmps, n, g, ci));

	/* reverse-direction consistency: same problem and replicate, other direction */
	long helped = 0, rev[4] = {0}; /* helped, harmed, neutral, unresolved */
	for (size_t i = 0; i < n; i++) {
		if (cmps[i].cls != CLS_HELPED)
			continue;
		helped++;
		const struct cmp *other = NULL;
		if (i > 0 && cmps[i - 1].r == cmps[i].r)
			other = &cmps[i - 1];
		else if (i + 1 < n && cmps[i + 1].r == cmps[i].r)
			other = &cmps[i + 1];
		rev[!other ? 3 : other->cls == CLS_HELPED ? 0 : other->cls == CLS_HARMED ? 1 : 2]++;
	}
	long known = helped - rev[3];
	json_t *reverse = json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "helped", (json_int_t)helped,
		"reverse_helped", (json_int_t)rev[0], "reverse_harmed", (json_int_t)rev[1],
		"reverse_neutral", (json_int_t)rev[2], "reverse_unresolved", (json_int_t)rev[3],
		"share_helped", known ? json_real((double)rev[0] / (double)known) : json_null(),
		"share_harmed", known ? json_real((double)rev[1] / (double)known) : json_null());

	json_t *paired = json_pack("{s:f, s:f, s:I, s:o, s:o, s:o, s:o}", "e_fail", o->e_fail, "delta", o->delta,
				   "n_comparisons", (json_int_t)n, "bootstrap", boot, "groups", groups,
				   "by_source_standing", standing, "reverse", reverse);
	if (o->calls == REPORT_CALLS_INTERVALS)
		json_object_set_new(paired, "calls", calls_json(cmps, n));
	if (o->time == REPORT_TIME_DEVICE) {
		json_int_t dev = 0;
		for (size_t i = 0; i < n; i++)
			dev += cmps[i].on_device;
		json_object_set_new(paired, "time", json_pack("{s:I, s:I}", "on_device", dev,
							      "end_to_end", (json_int_t)n - dev));
	}
	return paired;
}

/* ---- the results object --------------------------------------------------- */

static json_t *legend(const struct report_opts *o)
{
	json_t *l = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
		"arms", "solo_<dsl> attempts the problem in that DSL from scratch and leaves a SKILL.md; "
		"<a>2<b>_skill attempts it in DSL b with solo_<a>'s SKILL.md attached to the instruction",
		"records", "per cell (problem and direction) and replicate: source is the solo in the source DSL, "
		"base the solo in the target DSL, skill the skill-conditioned attempt; resolved means all three "
		"hold a final verdict (infra_error, model_error and running trials do not); a skill record marked "
		"skipped was not run because its source left no SKILL.md",
		"rates", "R@t is the share of resolved cell-replicates that passed with a speedup over eager "
		"PyTorch of at least t, for t in 0, 0.5, 1, 2, 4 (R@0 is the pass rate); S is 100 times their "
		"mean; lift is skill minus base, a skipped skill arm counting as its base; with_skill repeats the "
		"contrast where the source left a SKILL.md; by_source_verdict splits it by whether the source passed",
		"source_coverage", "the share of resolved cell-replicates whose source solo passed",
		"skill_coverage", "the share of resolved cell-replicates whose source solo left a SKILL.md",
		"usage", "per arm over every trial with an attempt, each counted once: trials, summed cost in "
		"USD and tokens (input including cached, cached, output); a sum is null when a counted attempt "
		"lacks it; agent_sec is the mean agent wall time",
		"paired", "(ours) per comparison (resolved cell-replicate): effective speedup e = speedup if "
		"passed else e_fail; r = e_skill / e_solo; helped if r >= 1 + delta, harmed if r <= 1/(1 + delta), "
		"neutral otherwise (a skipped skill arm is neutral); T, H: helped and harmed shares; dGM: "
		"geometric mean of r minus 1",
		"by_source_standing", "(ours) comparisons split by the source solo's e against the target solo's "
		"e, by the same ratio rule: above, same, below",
		"intervals", "(ours) Wilson 95% intervals for T, H and the neutral share; with replicates, 95% "
		"percentile intervals of a paired bootstrap resampling problems, then replicates within each "
		"problem; sign and Wilcoxon signed-rank tests on log r (zeros dropped), exact McNemar on pass/fail "
		"pairs; see docs/report.md");
	/* the rule the paired comparisons were called by, where not the paper's */
	const char *paired = o->calls == REPORT_CALLS_INTERVALS
		? "(ours) per comparison (resolved cell-replicate): effective speedup e = speedup if passed else "
		  "e_fail; r = e_skill / e_solo; calls by intervals (--calls intervals): where both arms passed "
		  "with a speedup interval (the grader's 95% speedup_ci from the evaluation's own calls), helped "
		  "if r >= 1 + delta and the skill arm's interval lies wholly above the solo's (lower bound > the "
		  "solo's upper), harmed if r <= 1/(1 + delta) and it lies wholly below, neutral otherwise; where "
		  "an arm failed or has no interval, the paper's rule: helped if r >= 1 + delta, harmed if "
		  "r <= 1/(1 + delta), neutral otherwise (a skipped skill arm is neutral); paired.calls counts "
		  "what the intervals changed; T, H: helped and harmed shares; dGM: geometric mean of r minus 1"
		: o->time == REPORT_TIME_DEVICE
		? "(ours) per comparison (resolved cell-replicate), on the kernels' GPU time (--time device): "
		  "effective speedup e = eager ms / the final evaluation's timing.device_ms (the median GPU time "
		  "of a timed call's kernels, from the launch recorder) if passed, else e_fail; a comparison "
		  "where a passing arm lacks device_ms uses the paper's e = speedup for all its arms "
		  "(paired.time counts both); r = e_skill / e_solo; helped if r >= 1 + delta, harmed if "
		  "r <= 1/(1 + delta), neutral otherwise (a skipped skill arm is neutral); T, H: helped and "
		  "harmed shares; dGM: geometric mean of r minus 1; the scores (R@t, S) stay on the paper's "
		  "figure"
		: NULL;
	if (l && paired)
		json_object_set_new(l, "paired", json_string(paired));
	return l;
}

struct report {
	json_t *summary;
	struct loader data;
	struct cell *cells;
	size_t ncells, cap;
	struct cmp **cmps;      /* per model */
	size_t *ncmps;
	struct store *trials;   /* the HTML's trial pages come from here, or NULL */
	const char *trials_model;
	enum report_calls calls;
	enum report_time time;
};

void report_set_trial_pages(struct report *r, struct store *s, const char *model)
{
	r->trials = s;
	r->trials_model = model;
}

struct store *report_trial_store(const struct report *r, const char **model)
{
	*model = r->trials_model;
	return r->trials;
}

struct report *report_compute(struct store *s, const struct catalog *catalog, const struct report_opts *o,
			      const char *store_path)
{
	struct report *rep = xcalloc(1, sizeof(*rep));
	rep->data = (struct loader){catalog, NULL, 0, 0};
	rep->calls = o->calls;
	rep->time = o->time;
	int extras = o->calls == REPORT_CALLS_INTERVALS || o->time == REPORT_TIME_DEVICE;
	if (store_trial_results(s, o->model, extras, load_row, &rep->data) != 0) {
		report_free(rep);
		return NULL;
	}
	size_t nc = rep->data.ncfg;
	rep->cmps = xcalloc(nc ? nc : 1, sizeof(*rep->cmps));
	rep->ncmps = xcalloc(nc ? nc : 1, sizeof(*rep->ncmps));
	struct paired *pd = xcalloc(nc ? nc : 1, sizeof(*pd));
	for (size_t i = 0; i < nc; i++)
		paired_prepare(&rep->data.cfg[i], o, &pd[i]);
	/* the bootstraps run while this thread builds the scores */
	struct boot_pool *pool = xmalloc(sizeof(*pool));
	boot_start(pool, pd, nc, o);
	json_t *models = json_array();
	for (size_t i = 0; i < nc; i++) {
		struct config *c = &rep->data.cfg[i];
		json_t *m = json_pack("{s:s, s:s, s:I, s:I}", "model", c->model, "decoding", c->decoding,
				      "n_trials", (json_int_t)c->ntrials, "n_other_arms", (json_int_t)c->nother);
		json_t *ov = overall_json(c);
		sol_intervals(c, o, json_object_get(ov, "sol"));
		json_object_set_new(m, "overall", ov);
		json_array_append_new(models, m);
		cells_json(c, &rep->cells, &rep->ncells, &rep->cap);
	}
	boot_finish(pool);
	free(pool);
	for (size_t i = 0; i < nc; i++) {
		json_object_set_new(json_array_get(models, i), "paired", paired_json(&pd[i], o));
		rep->cmps[i] = pd[i].cmps;
		rep->ncmps[i] = pd[i].n;
		free(pd[i].start);
		free(pd[i].ci);
	}
	free(pd);
	json_t *r = json_pack("{s:o, s:s, s:s, s:{s:o, s:f, s:f, s:I, s:i}, s:o}", "legend", legend(o),
			      "generator", "mkb report", "store", store_path, "options",
			      "model", o->model ? json_string(o->model) : json_null(), "e_fail", o->e_fail,
			      "delta", o->delta, "seed", (json_int_t)o->seed, "bootstrap", o->bootstrap,
			      "models", models);
	if (o->calls == REPORT_CALLS_INTERVALS)
		json_object_set_new(json_object_get(r, "options"), "calls", json_string("intervals"));
	if (o->time == REPORT_TIME_DEVICE)
		json_object_set_new(json_object_get(r, "options"), "time", json_string("device"));
	/* One model (and decoding): the published results.json's top level too. */
	if (json_array_size(models) == 1) {
		json_t *m = json_array_get(models, 0);
		json_object_set(r, "model", json_object_get(m, "model"));
		json_object_set_new(r, "harbor_version", json_null());
		json_object_set(r, "overall", json_object_get(m, "overall"));
	}
	rep->summary = r;
	return rep;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ncells; i++)
		json_decref(r->cells[i].summary);
	free(r->cells);
	for (size_t i = 0; i < r->data.ncfg && r->cmps; i++)
		free(r->cmps[i]);
	free(r->cmps);
	free(r->ncmps);
	loader_release(&r->data);
	json_decref(r->summary);
	free(r);
}

const json_t *report_summary(const struct report *r)
{
	return r->summary;
}

static const char *const cls_names[] = {"harmed", "neutral", "helped"};

json_t *report_comparisons(const struct report *r, size_t model)
{
	json_t *list = json_array();
	for (size_t i = 0; model < r->data.ncfg && i < r->ncmps[model]; i++) {
		const struct cmp *x = &r->cmps[model][i];
		json_array_append_new(list, json_pack("{s:i, s:s, s:s, s:i, s:f, s:s}", "number", x->p->number,
			"problem", x->p->label, "direction", directions[x->dir].name, "replicate", x->r->number,
			"ratio", x->ratio, "class", cls_names[x->cls + 1]));
	}
	return list;
}

static int dump_piece(const char *s, size_t n, void *arg)
{
	struct out *o = arg;
	out_add(o, s, n);
	return o->bad ? -1 : 0;
}

/* An object's compact JSON without its closing brace, so fields can follow. */
static void out_open_object(struct out *o, const json_t *obj)
{
	size_t mark = o->len;
	if (json_dump_callback(obj, dump_piece, o, JSON_COMPACT | JSON_REAL_PRECISION(10)) < 0) {
		o->bad = 1;
		return;
	}
	if (o->len > mark && o->buf[o->len - 1] == '}')
		o->len--;
	else /* the object spilled past the buffer: cannot reopen it */
		BUG("summary object larger than the output buffer");
}

/* The results.json: the summary's fields, then every cell with its
 * replicates and every comparison, streamed. */
static int write_json(FILE *f, const struct report *r)
{
	struct out *o = xmalloc(sizeof(*o));
	o->f = f;
	o->len = 0;
	o->bad = 0;
	out_flush(o);
	/* the summary can exceed the buffer: dump it apart, then reopen */
	char *head = json_dumps(r->summary, JSON_COMPACT | JSON_REAL_PRECISION(10));
	if (!head) {
		free(o);
		return -1;
	}
	size_t hl = strlen(head);
	out_add(o, head, hl > 0 ? hl - 1 : 0); /* without its closing brace */
	free(head);
	out_s(o, json_object_size(r->summary) ? ",\"cells\":[" : "\"cells\":[");
	for (size_t i = 0; i < r->ncells; i++) {
		out_flush(o);
		if (i)
			out_s(o, ",");
		out_open_object(o, r->cells[i].summary);
		out_s(o, ",\"replicates\":");
		out_replicates(o, r->cells[i].p, r->cells[i].dir);
		out_s(o, "}");
	}
	out_s(o, "],\"comparisons\":[");
	int first = 1;
	for (size_t m = 0; m < r->data.ncfg; m++) {
		const struct config *c = &r->data.cfg[m];
		for (size_t i = 0; i < r->ncmps[m]; i++) {
			const struct cmp *x = &r->cmps[m][i];
			out_s(o, first ? "{\"model\":" : ",{\"model\":");
			first = 0;
			out_str(o, c->model);
			out_s(o, ",\"decoding\":");
			out_str(o, c->decoding);
			out_s(o, ",\"number\":");
			out_int(o, x->p->number);
			out_s(o, ",\"problem\":");
			out_str(o, x->p->label);
			out_s(o, ",\"direction\":\"");
			out_s(o, directions[x->dir].name);
			out_s(o, "\",\"replicate\":");
			out_int(o, x->r->number);
			out_s(o, ",\"e_skill\":");
			out_num(o, x->e_skill);
			out_s(o, ",\"e_solo\":");
			out_num(o, x->e_base);
			out_s(o, ",\"e_source\":");
			out_num(o, x->e_source);
			out_s(o, ",\"ratio\":");
			out_num(o, x->ratio);
			out_s(o, ",\"class\":\"");
			out_s(o, cls_names[x->cls + 1]);
			if (r->calls == REPORT_CALLS_INTERVALS) { /* which rule called it, and the paper's call */
				out_s(o, x->by_intervals ? "\",\"call\":\"intervals" : "\",\"call\":\"paper");
				out_s(o, "\",\"paper_class\":\"");
				out_s(o, cls_names[x->paper_cls + 1]);
			}
			if (r->time == REPORT_TIME_DEVICE) { /* on which figure, and the paper's call */
				out_s(o, x->on_device ? "\",\"on_device\":true,\"paper_class\":\""
						      : "\",\"on_device\":false,\"paper_class\":\"");
				out_s(o, cls_names[x->paper_cls + 1]);
			}
			out_s(o, "\",\"standing\":\"");
			out_s(o, standing_names[x->standing]);
			out_s(o, "\",\"skipped\":");
			out_bool(o, x->skipped);
			out_s(o, "}");
		}
	}
	out_s(o, "]}\n");
	out_flush(o);
	int bad = o->bad;
	free(o);
	return bad ? -1 : 0;
}

int report_write(FILE *f, const struct report *r, enum report_format format)
{
	switch (format) {
	case REPORT_JSON: return write_json(f, r);
	case REPORT_CSV: return report_write_csv(f, r->summary);
	case REPORT_HTML: return report_write_html(f, r);
	case REPORT_MD: return report_write_text(f, r->summary, 1);
	default: return report_write_text(f, r->summary, 0);
	}
}
