/* The judge's side of the zygote (grader/mkb_grader/zygote.py, started by
 * `mkb zygote`): a candidate process forked from a parent that has imported
 * torch and the DSLs, instead of a new interpreter (7-8 s of start-up on the
 * GPU machine, results/judge-runs/2026-12-05-s17-startup.md). The sandbox
 * is the one a cold candidate gets, sent as text and applied in the forked
 * child; the candidate is the zygote's child, so the zygote reports how it
 * ended and kills it when asked or when this side goes away. */
#ifndef MKB_ZYGOTE_H
#define MKB_ZYGOTE_H

#include <stddef.h>

#include "sandbox.h"

struct zygote_child {
	int sock;        /* the connection; -1 when none */
	long pid;        /* the child's pid (for messages) */
	unsigned layers; /* sandbox layers in force in the child */
	int ended, status; /* set once the zygote said how it ended */
};
#define ZYGOTE_CHILD_INIT { -1, 0, 0, 0, 0 }

/* Whether candidates confined here, less the layers in off, are kept from a
 * zygote's abstract socket: by their own network namespace or by Landlock's
 * scope layer. Without either a confined process could ask it for an
 * unconfined sibling, so no zygote may start (docs/judge.md). */
int zygote_guarded(unsigned off);

/* Ask the candidates' zygote listening by the name path (an abstract
 * socket) for a candidate: env is its whole environment, dir its working
 * folder, peer its end of the checker's socket (fd 3) and out its stdout
 * and stderr. 0, or -1 with why filled (the caller starts it cold instead). */
int zygote_spawn(const char *path, const struct sandbox *sb, const char *const *env, const char *dir,
		 int peer, int out, struct zygote_child *zc, char *why, size_t whysize);
/* The same of the checkers' zygote (path's ":checker"): no sandbox; in, out
 * and err become its 0-2, peer its 3. */
int zygote_spawn_checker(const char *path, char *const *env, const char *dir, int in, int out, int err,
			 int peer, struct zygote_child *zc, char *why, size_t whysize);
/* Kill the child's session (idempotent). */
void zygote_kill(struct zygote_child *zc);
/* Whether the child has ended (*status: its wait status), waiting up to
 * timeout_ms: 1 ended, 0 not yet, -1 the zygote went away without saying
 * (its children die with it). The connection is closed once it says. */
int zygote_poll(struct zygote_child *zc, int timeout_ms, int *status);
/* A struct child_remote (proc.h) for a child of a zygote: ctx is the
 * struct zygote_child. */
int zygote_reap(void *ctx, int block, int *status);
void zygote_kill_ctx(void *ctx);

#endif
