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
 * final: the next one archives what was left running and redoes it.
 *
 * Many machines (a shared PostgreSQL store): `mkb run --enqueue` plans the
 * same way and puts the trials into the store's queue ("queued", a skill
 * arm naming its source trial) instead of running them; `mkb worker`
 * processes anywhere claim them one at a time (worker.h) and run each with
 * run_trial_execute, the very function mkb run runs a trial with. A plan
 * shows a trial already in the queue as QUEUED. */
#ifndef MKB_RUN_H
#define MKB_RUN_H

#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

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
	int enqueue;                  /* queue the trials for mkb worker, run none */
	int concurrency;              /* trials in flight at once (1: one after another) */
	double max_cost;              /* USD; no new trial starts once spent (0: none) */
	const char *runs_dir;         /* where the attempts' folders go */
};

/* Plan, print the plan, and (unless dry_run) run it to the end. Returns the
 * exit code: 0 every trial final, 1 some trial failed to run or is stale,
 * 3 infrastructure. */
int run_protocol(const struct run_opts *o);

/* One trial as mkb run or a worker hands it to run_trial_execute. */
struct run_trial {
	const char *name;
	const struct problem *problem;
	int replicate;
	const struct arm *arm;
	const char *fingerprint, *decoding;
	int64_t id;                   /* its row (a worker's claim), or 0: inserted as it starts */
	/* a skill arm's source trial: its name (NULL when it has none, *why
	 * says so), its arm's DSL and its attempt (0: none) */
	const char *source, *source_dsl, *why;
	int64_t source_attempt;
};

/* What a trial's run came to: printed by whoever runs it, sent back from a
 * worker process through a pipe as it is (fixed size, no pointers). */
struct run_outcome {
	int64_t id, attempt;
	char status[24];
	char note[200];
	int ran;                    /* an attempt ran (turns, submissions, speedup mean something) */
	int turns, submissions;
	double speedup;             /* < 0: not passed */
	double seconds;
};

struct store;
/* Run t to a final record in store (its attempt under o->attempt, a skill
 * arm with its source's SKILL.md, or skipped when there is none), described
 * in *out. -1 only when the store fails. */
int run_trial_execute(const struct run_opts *o, struct store *store, const struct run_trial *t,
		      struct run_outcome *out);
/* Run t to its final record in a process of its own (forked; it opens its
 * own connection to store_path and dies with this process), which sends
 * its outcome back. Its pid, with *fd the pipe to give run_trial_collect
 * once it has ended; -1 when it cannot start (error printed). */
pid_t run_trial_start(const struct run_opts *o, const char *store_path, const struct run_trial *t, int *fd);
/* The outcome that process sent (fd is closed): 0, or -1 when it ended
 * without one. */
int run_trial_collect(int fd, struct run_outcome *out);
/* What t would run (problem, templates, grader, primer, agent, budgets,
 * model) as hex: a final record with another is stale. 0 or -1. */
int run_trial_fingerprint(const struct run_opts *o, const struct problem *p, const struct arm *arm,
			  char hex[65]);
/* "[3/16] p28_r1_solo_tirx: passed, speedup 9.1x, ..." ("[3/16] " only when total > 0). */
void run_print_outcome(const char *name, const struct run_outcome *out, size_t done, size_t total);

/* "p28_r1_solo_cutedsl" into out. */
void run_trial_name(char *out, size_t size, int problem, int replicate, const char *arm);

#endif
