/* The results store. Every evaluation is recorded as it starts (status
 * "running") and completed when its verdict is known, so a killed run leaves
 * a visible trace rather than nothing. store_sqlite.c is the only file that
 * speaks SQL. */
#ifndef MKB_STORE_H
#define MKB_STORE_H

#include <stdint.h>

#include "verdict.h"

struct store;

struct eval_record {
	int problem;
	const char *dsl, *workload, *device;
	const char *kernel_path;
	const char *kernel_source;    /* may be NULL when unreadable */
	const char *kernel_sha256;
	const char *problem_sha256;   /* problem.json + reference.py */
	const char *grader_sha256;    /* the grader package's sources */
	const char *options_json;     /* limits the evaluation ran under */
	long long owner_pid;          /* the mkb process recording it, and its */
	const char *owner_boot;       /* machine's boot id and its start time, */
	long long owner_start;        /* so an abandoned row can be told apart */
};

/* Open (creating if needed) the store at path. 0 or -1 (error printed). */
int store_open(const char *path, struct store **out);
void store_close(struct store *s);

/* Insert a "running" evaluation; *id receives its row id. */
int store_begin_evaluation(struct store *s, const struct eval_record *rec, int64_t *id);
/* Record the verdict of evaluation id. */
int store_finish_evaluation(struct store *s, int64_t id, const struct verdict *v);
/* Mark "running" rows whose mkb process is gone (another boot of the
 * machine, or alive(pid, start) false) as abandoned infra errors. Returns
 * how many (at most 256 a call), or -1. Rows of other machines that share
 * the file keep their status unless their boot id is ours. */
long store_reclaim_abandoned(struct store *s, const char *boot,
			     int (*alive)(long long pid, long long start));
/* Number of evaluations in the store with the given status ("" for all); -1 on error. */
long store_count_evaluations(struct store *s, const char *status);

#endif
