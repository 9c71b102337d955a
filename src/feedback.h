/* The feedback text an agent reads after a submission (PROTOCOL.md). */
#ifndef MKB_FEEDBACK_H
#define MKB_FEEDBACK_H

#include <stddef.h>

#include "mkb_limits.h"
#include "verdict.h"

/* Where a submission stands in its attempt; NULL when graded on its own. */
struct submission_ctx {
	int index, limit;      /* submission k of limit */
	double minutes_left;
};

/* Render the feedback for v; caller frees. At most FEEDBACK_MAX_CHARS bytes. */
char *feedback_format(const struct verdict *v, const struct submission_ctx *sub,
		      const char *device);

#endif
