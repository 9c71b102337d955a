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

/* Grade kernel for (p, dsl) under o. With st non-NULL the evaluation is
 * recorded (its row id in *id). Always fills *v (init'ed by the caller).
 * Returns 0; -1 when the request itself is bad (error printed, v says why);
 * -2 when the store failed (the verdict in *v is still valid). */
int grade(const char *root, const struct judge_opts *o, const struct problem *p, const char *dsl,
	  const char *kernel, struct store *st, struct verdict *v, int64_t *id);

#endif
