/* (ours) `--zygote auto`: a command that grades many kernels in one
 * invocation (run, validate, worker, attempt) starts its own zygote for its
 * duration, as `mkb zygote --socket NAME &` would by hand (docs/judge.md,
 * "Start-up: the zygote"), under a name no other command uses, and ends it
 * before it returns. It dies with the command (parent-death signal) when
 * the command is killed. A zygote that cannot start, or does not say that it
 * listens in time, is a warning: every evaluation then starts cold. */
#ifndef MKB_ZYGOTE_AUTO_H
#define MKB_ZYGOTE_AUTO_H

#include <sys/types.h>

#include "judge.h"

#define ZYGOTE_AUTO "auto"
/* How long both zygotes (candidates' and checkers') may take to import and
 * listen (7-8 s on the GPU machine, 1.4-3 s on the CPU one). */
#define ZYGOTE_AUTO_WAIT_S 120
/* How long each may take to end after SIGTERM before it is killed. */
#define ZYGOTE_AUTO_STOP_S 5

struct zygote_auto {
	pid_t pid;               /* `mkb zygote` (the candidates' zygote); -1: none */
	pid_t checker_pid;       /* the checkers' zygote, from its line; -1: unknown */
	long long checker_start; /* its start time (proc_start_ticks), against a reused pid */
	char name[64];           /* the socket's name, o->zygote while it runs */
};
#define ZYGOTE_AUTO_INIT { -1, -1, -1, "" }

/* Whether name asks for a zygote of the command's own. */
int zygote_is_auto(const char *name);

/* When o->zygote is "auto": start `mkb zygote` (this program) with o's
 * python, device and GPU, wait up to ZYGOTE_AUTO_WAIT_S for both zygotes to
 * say they listen, and point o->zygote at it (za->name). Where it cannot (a
 * sandbox that cannot keep candidates from the zygote, a zygote that fails
 * or is late, an interrupt): a warning, o->zygote NULL (every evaluation
 * starts cold), nothing left running. Any other o->zygote is left as it is.
 * Call proc_catch_interrupts() first: an interrupt ends the wait. */
void zygote_auto_start(struct zygote_auto *za, struct judge_opts *o);

/* End what zygote_auto_start started: SIGTERM, then SIGKILL after
 * ZYGOTE_AUTO_STOP_S; reaped. Does nothing when none runs; idempotent. */
void zygote_auto_stop(struct zygote_auto *za);

#endif
