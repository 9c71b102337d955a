/* Grading one kernel with its record: fingerprint what is graded, record the
 * evaluation as running, judge it, record the verdict. Shared by `mkb eval`,
 * `mkb validate` and (later) the trial runner, so every graded kernel lands
 * in the store the same way. */
#ifndef MKB_GRADE_H
#define MKB_GRADE_H

#include <stdint.h>

#include "catalog.h"
#include "judge.h"
#include "store.h"
#include "verdict.h"

/* What every grading command sets up before its first evaluation. */
#define GRADE_PYTHON_TREES 8

struct grade_env {
	char *python;      /* owned, when resolved here */
	char *grader_dir;  /* owned */
	struct store *store; /* NULL with no_store */
	char *root;        /* owned copy */
	/* What the interpreter told us of itself (probed once): */
	char *python_real;
	char *trees[GRADE_PYTHON_TREES + 1]; /* NULL-terminated */
};

/* Point o at the grader (and at the default interpreter unless o->python is
 * set), open the store (store_path, else $MKB_STORE / <root>/mkb.db) unless
 * no_store, and make this process the reaper of what graders leave behind.
 * 0 or -1 (error printed; g is released). */
int grade_env_open(struct grade_env *g, const char *root, struct judge_opts *o,
		   const char *store_path, int no_store);
void grade_env_close(struct grade_env *g);

/* What grade() returns besides the verdict. */
enum grade_rc {
	GRADE_OK = 0,
	GRADE_BAD_REQUEST = -1,  /* the request itself is bad (error printed, v says why) */
	GRADE_STORE_FAILED = -2, /* the store failed (the verdict in *v is still valid) */
};

/* Grade kernel for (p, dsl) under o. With st non-NULL the evaluation is
 * recorded (its row id in *id). Always fills *v (init'ed by the caller). */
enum grade_rc grade(const char *root, const struct judge_opts *o, const struct problem *p, const char *dsl,
	  const char *kernel, struct store *st, struct verdict *v, int64_t *id);

#endif
