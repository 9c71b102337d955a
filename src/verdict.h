/* The outcome of one evaluation: what the grader reported plus what the judge
 * saw of the process (stage, signal, timeout, output tail). */
#ifndef MKB_VERDICT_H
#define MKB_VERDICT_H

#include <jansson.h>

enum verdict_status {
	VERDICT_PASSED,
	VERDICT_FAILED,      /* ran, but wrong, or raised, or did not import */
	VERDICT_CRASHED,     /* died by a signal, or a CUDA fault */
	VERDICT_HUNG,        /* killed at the timeout */
	VERDICT_INFRA_ERROR, /* the benchmark's fault: never counted against a model */
	VERDICT_REJECTED,    /* refused unrun (size, syntax, DSL rules) or its timing impossible */
};

struct verdict {
	enum verdict_status status;
	char *reason;        /* one line, "" when passed */
	char *stage;         /* last stage the grader entered */
	int imported, correct, passed;
	int draws_passed, draws_total;
	double kernel_ms, eager_ms, speedup; /* < 0 when not measured */
	char *gpu;
	int term_signal;     /* > 0 when the grader died by a signal */
	int exit_code;       /* grader's exit code, -1 when none */
	double wait_ms;      /* queued behind another evaluation of the same GPU */
	double queue_ms;     /* (ours) waited for a slot of the judge queue */
	double hold_ms;      /* (ours) held the GPU alone (timing), -1 when not */
	int gpu_index;       /* CUDA device index graded on, -1 on the CPU */
	int slot;            /* the judge queue's slot, -1 without a queue */
	double eval_ms;      /* wall time of the grader process */
	unsigned sandbox_layers; /* confinement of the candidate process (sandbox.h) */
	int from_zygote;     /* (ours) the candidate was forked from `mkb zygote`'s
				pre-imported parent, not started cold */
	int checker_from_zygote; /* (ours) the checker too, from the checkers' zygote */
	int not_counted;     /* the file was oversized, unreadable or not valid Python:
				an attempt does not count it as a submission (PROTOCOL.md) */
	char *output_tail;   /* last bytes of the grader's stderr */
	json_t *result;      /* the grader's result object, or NULL (owned) */
	json_t *stages;      /* array of stage events (owned) */
};

void verdict_init(struct verdict *v);
void verdict_release(struct verdict *v);
const char *verdict_status_name(enum verdict_status s);
/* Set status and reason (printf-style). */
void verdict_set(struct verdict *v, enum verdict_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Fill the fields from a grader "result" object (takes a reference). */
void verdict_from_result(struct verdict *v, json_t *result);
/* The --json object of `mkb eval` (new reference). */
json_t *verdict_to_json(const struct verdict *v, int problem, const char *dsl,
			const char *workload, const char *device);

#endif
