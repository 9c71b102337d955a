/* mkb run: the four-arm transfer protocol (PROTOCOL.md "Arms and trials")
 * over problems x replicates for one model, resumable. A plan lists every
 * trial p<NN>_r<k>_<arm> with what will happen to it:
 *
 *   RUN     no record yet
 *   REUSE   a final record whose fingerprint matches what would run
 *   RERUN   its record errored (infra_error) or was interrupted: redone,
 *           the old record archived
 *   STALE   what would run changed (problem, grader, templates, budgets):
 *           blocks the run unless --rerun-stale (old record archived)
 *   WAIT    a skill arm whose source solo is not final yet
 *
 * Solos run first; a skill arm runs once its source solo is final, with the
 * source's SKILL.md whether the source passed or not, and is recorded as
 * `skipped` when the source left none. Every trial's row is written before
 * its attempt starts and completed after, so a killed run loses nothing
 * final: the next one archives what was left running and redoes it. */
#ifndef MKB_RUN_H
#define MKB_RUN_H

#include <stddef.h>

#include "attempt.h"
#include "catalog.h"

/* The arms, one row each (a control arm is a row, not new code). */
struct arm {
	const char *name;
	const char *dsl;          /* target DSL */
	const char *skill_from;   /* the arm whose SKILL.md it gets, or NULL (a solo) */
	int other_problem;        /* the skill comes from another problem of the family */
	int by_default;           /* part of the paper's four */
};

extern const struct arm run_arms[];
extern const size_t run_narms;
const struct arm *run_arm_find(const char *name);

struct run_opts {
	struct attempt_opts attempt;  /* model, budgets, judge (problem, dsl, skill, workdir set per trial) */
	const struct catalog *catalog;
	const int *problems;          /* numbers, in order */
	size_t nproblems;
	const struct arm **arms;
	size_t narms;
	int replicates;
	int dry_run, rerun_stale;
	int concurrency;              /* trials in flight at once (1: one after another) */
	double max_cost;              /* USD; no new trial starts once spent (0: none) */
	const char *runs_dir;         /* where the attempts' folders go */
};

/* Plan, print the plan, and (unless dry_run) run it to the end. Returns the
 * exit code: 0 every trial final, 1 some trial failed to run or is stale,
 * 3 infrastructure. */
int run_protocol(const struct run_opts *o);

/* "p28_r1_solo_cutedsl" into out. */
void run_trial_name(char *out, size_t size, int problem, int replicate, const char *arm);

#endif
