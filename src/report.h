/* mkb report: the store's trials turned into every number of PROTOCOL.md
 * ("Scores", "Paired transfer analysis"), with intervals and tests. The
 * report only reads: store -> results (a JSON tree, the published
 * results.json's fields plus ours) -> text, Markdown, CSV, JSON or HTML.
 * docs/report.md defines each number. */
#ifndef MKB_REPORT_H
#define MKB_REPORT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "catalog.h"
#include "store.h"

#define REPORT_NTHRESHOLDS 5
extern const double report_thresholds[REPORT_NTHRESHOLDS]; /* 0, 0.5, 1, 2, 4 */

/* How a comparison is called helped or harmed (--calls). */
/* What the paired comparisons compare. */
enum report_time {
	REPORT_TIME_E2E,     /* the paper's end-to-end kernel median (the speedup over eager) */
	REPORT_TIME_DEVICE,  /* (ours) the kernels' GPU time (timing.device_ms): eager / device
				ms, where every passing arm of a comparison has it */
};

enum report_calls {
	REPORT_CALLS_PAPER,      /* the ratio rule alone (PROTOCOL.md's fixed delta) */
	REPORT_CALLS_INTERVALS,  /* the ratio rule, and the arms' speedup intervals separate */
};

struct report_opts {
	const char *model;       /* only this model's trials (NULL: every model) */
	double e_fail;           /* effective speedup of a failed attempt (0.1) */
	double delta;            /* helped: r >= 1 + delta; harmed: r <= 1 / (1 + delta) (0.05) */
	uint64_t seed;           /* of the bootstrap's generator */
	int bootstrap;           /* resamples (0: none); drawn only where replicates exist */
	enum report_calls calls; /* REPORT_CALLS_PAPER */
	enum report_time time;   /* REPORT_TIME_E2E */
};

#define REPORT_OPTS_INIT { NULL, 0.1, 0.05, 1, 1000, REPORT_CALLS_PAPER, REPORT_TIME_E2E }

struct report;

/* Read the store's live trials and compute every number. catalog (may be
 * NULL) names problems and their families. NULL on a store error (printed).
 * report_free releases it. */
struct report *report_compute(struct store *s, const struct catalog *catalog, const struct report_opts *o,
			      const char *store_path);
void report_free(struct report *r);
/* Everything but the cells' records and the comparisons: legend, options,
 * models (overall, paired), the published top level for one model. */
const json_t *report_summary(const struct report *r);
/* The comparisons of the i-th model (number, problem, direction,
 * replicate, ratio, class): a new reference. */
json_t *report_comparisons(const struct report *r, size_t model);

/* (ours) The HTML report ends with a page per trial (a section with its
 * anchor: instruction, attached skill, transcript, submissions, verdict),
 * read from s (which must stay open until the report is written). */
void report_set_trial_pages(struct report *r, struct store *s, const char *model);
struct store *report_trial_store(const struct report *r, const char **model);

enum report_format { REPORT_TEXT, REPORT_MD, REPORT_CSV, REPORT_JSON, REPORT_HTML };

/* Write the report in the format to f. 0, or -1 when writing failed. */
int report_write(FILE *f, const struct report *r, enum report_format format);
/* The renderers (report_render.c, report_html.c). */
int report_write_text(FILE *f, const json_t *summary, int markdown);
int report_write_csv(FILE *f, const json_t *summary);
int report_write_html(FILE *f, const struct report *r);

#endif
