/* The results store. Every evaluation is recorded as it starts (status
 * "running") and completed when its verdict is known, so a killed run leaves
 * a visible trace rather than nothing.
 *
 * Two backends behind this one API (store.c picks one by the path): a
 * SQLite file, the embedded default (store_sqlite.c), and a PostgreSQL
 * database that machines share, when the path is a URL postgres://... or
 * postgresql://... (store_pg.c, libpq). They are the only files that speak
 * SQL. The PostgreSQL store also holds the queue of trials that `mkb worker`
 * processes on any number of machines drain (store_trial_claim). */
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

/* Is path a PostgreSQL URL (postgres://, postgresql://)? */
int store_path_is_url(const char *path);

/* Open (creating if needed) the store at path. 0 or -1 (error printed). */
int store_open(const char *path, struct store **out);
void store_close(struct store *s);

/* Insert a "running" evaluation; *id receives its row id. */
int store_begin_evaluation(struct store *s, const struct eval_record *rec, int64_t *id);
/* Record the verdict of evaluation id. */
int store_finish_evaluation(struct store *s, int64_t id, const struct verdict *v);
/* Mark "running" rows (evaluations and attempts) whose mkb process is gone (another boot of the
 * machine, or alive(pid, start) false) as abandoned infra errors. Returns
 * how many (at most 256 a call), or -1. Rows of other machines that share
 * the file keep their status unless their boot id is ours. */
long store_reclaim_abandoned(struct store *s, const char *boot,
			     int (*alive)(long long pid, long long start));
/* An attempt (PROTOCOL.md "The attempt"): a row as it starts, its events as
 * they happen, its outcome when it ends. */
struct attempt_record {
	int problem;
	const char *dsl, *model, *arm, *workdir;
	const char *skill_sha256;     /* the skill attached, or NULL */
	long skill_tokens;            /* its body's tokens, -1 when none */
	const char *options_json;     /* budgets, decoding, agent, sandbox layers */
	long long owner_pid;
	const char *owner_boot;
	long long owner_start;
};

struct attempt_outcome {
	const char *status;           /* passed, failed, timed_out, model_error, infra_error */
	const char *reason;
	int64_t final_evaluation;     /* 0: none */
	int64_t heldout_evaluation;   /* (ours) the final kernel on the held-out workload; 0: none */
	int submissions, turns;
	long long input_tokens, cached_tokens, output_tokens; /* -1: unknown */
	double cost_usd;              /* -1: unknown */
	double agent_s;
	const char *kernel_sha256;    /* of the final kernel.py, or NULL */
	const char *skill;            /* SKILL.md as left, or NULL */
	const char *skill_sha256;
	long long skill_tokens;       /* -1: none */
};

int store_begin_attempt(struct store *s, const struct attempt_record *r, int64_t *id);
/* Append one event (kind, body borrowed) to attempt id. */
int store_add_attempt_event(struct store *s, int64_t id, const char *kind, double elapsed_s,
			    json_t *body);
int store_finish_attempt(struct store *s, int64_t id, const struct attempt_outcome *o);
/* Attempt id as one object: its columns and "events" in order. NULL when
 * there is none (error printed). Caller decrefs. */
json_t *store_load_attempt(struct store *s, int64_t id);

/* A trial of mkb run (PROTOCOL.md "Arms and trials"). */
struct trial_record {
	int64_t id;
	char *name, *model, *decoding, *arm, *dsl, *fingerprint, *status;
	int problem, replicate;
	int64_t attempt;              /* 0: none */
	long long owner_pid, owner_start;
	char *owner_boot;
	/* The queue (PostgreSQL only; NULL and 0 in SQLite): */
	char *source;                 /* a skill arm's source trial (its name) */
	char *lease_owner;            /* the mkb worker that holds it, or NULL */
	int lease_live;               /* that lease has not expired */
};

/* The live (not archived) trials of model with decoding, oldest first. */
int store_trials_load(struct store *s, const char *model, const char *decoding,
		      struct trial_record **out, size_t *n);
void trial_records_free(struct trial_record *t, size_t n);
/* Insert a trial (t->status: "running", or "queued" for mkb worker, with
 * t->source); *id gets its row. */
int store_trial_begin(struct store *s, const struct trial_record *t, int64_t *id);
int store_trial_finish(struct store *s, int64_t id, const char *status, int64_t attempt,
		       const char *note);
/* Set a trial aside (kept, never deleted), saying why. */
int store_trial_archive(struct store *s, int64_t id, const char *why);
/* The SKILL.md body an attempt left (NULL: none). Caller frees. */
char *store_attempt_skill(struct store *s, int64_t attempt);

/* US dollars spent on model's attempts (archived ones included: the money
 * is spent), as priced when they ran; -1 on error. */
double store_model_cost(struct store *s, const char *model);

/* Trials per model, decoding and status: [{model, decoding, status, trials
 * (archived included), live, running (names, or null)}]. NULL on error. */
json_t *store_trials_summary(struct store *s);

/* One live trial of mkb run with its attempt's outcome, as `mkb report`
 * reads it. Strings are borrowed for the callback's duration; NULL when
 * absent. Numbers < 0 are unknown. */
struct trial_result {
	const char *name, *model, *decoding, *arm, *dsl, *status, *note, *reason;
	int problem, replicate;
	int64_t attempt;              /* 0: none (a skipped skill arm) */
	int passed;                   /* the final evaluation's; -1: none */
	double speedup, kernel_ms, eager_ms;
	int heldout_passed;           /* (ours) the held-out final evaluation's; -1: none */
	double heldout_speedup;
	const char *gpu, *workload;   /* the final evaluation's (NULL: none) */
	const char *speedup_ci;       /* the final evaluation's 95% interval of its speedup as the
				       * grader's JSON text "[lo, hi]" (result.speedup_ci), NULL
				       * when absent; report.c checks it */
	double device_ms;             /* (ours) the final evaluation's timing.device_ms (the
				       * kernels' GPU time per timed call, from the launch
				       * recorder); < 0 when absent or not read */
	long long input_tokens, cached_tokens, output_tokens;
	double cost_usd, agent_s;
	int wrote_skill;              /* the attempt left a non-empty SKILL.md */
	long long skill_in_tokens, skill_out_tokens;
};

/* Call fn for every live trial (of model, or of all models when NULL),
 * ordered by model, decoding, problem, replicate and arm; fn's nonzero
 * return stops the walk and is returned. 0, or -1 on a store error.
 * extras: also read speedup_ci and device_ms from the final evaluation's
 * stored result (it parses every one: only for `mkb report --calls
 * intervals` or `--time device`); else they are NULL and -1. */
int store_trial_results(struct store *s, const char *model, int extras,
			int (*fn)(const struct trial_result *t, void *arg), void *arg);

/* ---- the queue of mkb worker (PostgreSQL; SQLite says it has none) -------
 * `mkb run --enqueue` inserts a plan's trials as "queued" (a skill arm names
 * its source trial). A worker claims one in a transaction (SELECT ... FOR
 * UPDATE SKIP LOCKED): a live queued trial whose source, if any, is final,
 * or a running one whose worker's lease expired (that row is archived as
 * interrupted, its attempt marked abandoned, and a fresh row claimed in its
 * place). The claim sets a lease (the worker, an expiry by the database's
 * clock) that the worker renews while the attempt runs; the final record
 * (store_trial_finish) clears it. */
struct worker_id {
	const char *name;             /* "<host>:<pid>" */
	long long pid, start;         /* the worker process (owner_pid, owner_start) */
	const char *boot;
};

/* Claim the next ready trial for w for lease_s seconds into *out (its
 * contents freed by trial_record_release). 1 claimed,
 * 0 nothing left (no queued trial, no leased one running), 2 none ready
 * now (waiting on a source or on live leases), -1 error. */
int store_trial_claim(struct store *s, const struct worker_id *w, double lease_s,
		      struct trial_record *out);
/* Renew worker's lease on trial id: 0, 1 when the lease is no longer
 * worker's (it expired and another claimed the trial), -1 error. */
int store_trial_heartbeat(struct store *s, int64_t id, const char *worker, double lease_s);
/* Give trial id back to the queue unrun (worker's lease dropped). */
int store_trial_release(struct store *s, int64_t id, const char *worker, const char *why);
void trial_record_release(struct trial_record *t);

/* Number of evaluations in the store with the given status ("" for all); -1 on error. */
long store_count_evaluations(struct store *s, const char *status);

#endif
