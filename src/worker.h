/* mkb worker: drains the trial queue of a shared PostgreSQL store, on any
 * number of machines at once (`mkb run --enqueue` fills it; run.h).
 *
 * Loop: claim the next ready trial (store_trial_claim: a transaction with
 * SELECT ... FOR UPDATE SKIP LOCKED, so two workers never take the same
 * one; solos first, a skill arm once its source is final), which sets a
 * lease (this worker, an expiry); run it in a child process with
 * run_trial_execute, exactly as mkb run runs a trial, while this process
 * renews the lease every lease/3 seconds; the child writes the final record
 * (which clears the lease). Until no trial is left: none queued and none
 * running under a lease. When nothing is ready but some are left (skill
 * arms waiting on sources that others run), it waits and asks again.
 *
 * A worker that dies (kill -9, a machine lost) stops renewing: once its
 * lease expires another worker's claim archives that trial's row as
 * interrupted, marks its attempt abandoned and runs it afresh. A worker
 * whose lease was taken from it (it stalled past the expiry) interrupts its
 * trial. Before running a trial, the worker checks that what it would run
 * has the fingerprint the planner recorded (same problem files, grader,
 * templates, budgets, workload, device); if not, it gives the trial back
 * and stops: its flags or checkout differ from the planner's. */
#ifndef MKB_WORKER_H
#define MKB_WORKER_H

#include "llm_flags.h"
#include "mkb_limits.h"
#include "run.h"

struct worker_opts {
	struct run_opts run;          /* budgets, judge, catalog, runs_dir (model and decoding per trial) */
	const struct llm_flags *llm;  /* endpoint, retries, prices (for every model) */
	const char *store_path;       /* a postgres:// URL */
	double lease_s;
};

/* Drain the queue. Returns the exit code: 0 nothing left, 1 a trial this
 * worker cannot run as planned (given back), 2 not a shared store,
 * 3 infrastructure, 128+N a signal. */
int worker_run(const struct worker_opts *o);

#endif
