/* The built-in agent: a Terminus-2 compatible loop (docs/agent.md says where
 * ours differs). Each turn the model gets the terminal's new output and
 * answers in agent_parse.h's JSON schema; its keystrokes go to the sandboxed
 * terminal, each followed by the wait it asked for (at most 60 s). A
 * task_complete must be said twice in a row. When the conversation nears
 * the model's context window, a three-call hand-off summary replaces it.
 *
 * The loop knows nothing of submissions, budgets or the store: the attempt
 * around it (attempt.h) services `submit` while the loop waits, keeps the
 * wall clock, and records what the loop reports. */
#ifndef MKB_AGENT_H
#define MKB_AGENT_H

#include <jansson.h>

#include "llm.h"
#include "mkb_limits.h"
#include "terminal.h"

/* Terminus-2's constants (docs/agent.md). */
#define AGENT_SUMMARIZE_MARGIN 8000 /* tokens free before a hand-off summary */
#define AGENT_UNWIND_MARGIN 4000    /* tokens freed after an overflow */
#define AGENT_UNKNOWN_CONTEXT 1000000 /* context window assumed when none is given */
#define AGENT_SEND_CHUNK 16000      /* bytes of keystrokes per send-keys */
#define AGENT_TEMPERATURE 0.7       /* Terminus-2's default when the paper ran */

struct agent_host {
	struct terminal *term;
	/* Wait seconds, serving the attempt meanwhile. 1 when its wall clock
	 * has run out (the loop then ends), else 0. */
	int (*wait)(void *ctx, double seconds);
	double (*seconds_left)(void *ctx);
	/* One event of the transcript (body borrowed). */
	void (*record)(void *ctx, const char *kind, json_t *body);
	void *ctx;
};

struct agent_opts {
	struct llm_client *llm;
	struct llm_decoding decoding;
	const char *instruction;
	long context_tokens;  /* the model's window; 0: AGENT_UNKNOWN_CONTEXT */
	long max_turns;       /* 0: no limit (Terminus-2's default) */
};

enum agent_end {
	AGENT_COMPLETED,     /* task_complete, confirmed */
	AGENT_OUT_OF_TIME,   /* the wall clock ran out */
	AGENT_TURN_LIMIT,
	AGENT_MODEL_ERROR,   /* a refusal that is the model's or the request's (auth, context, malformed) */
	AGENT_INFRA_ERROR,   /* retries ran out on a transient failure, or the terminal broke */
};

struct agent_result {
	enum agent_end end;
	char *reason;         /* NULL when completed */
	int turns, calls, summaries;
	long long input_tokens, cached_tokens, output_tokens; /* -1: some call did not say */
	double cost_usd;      /* -1: unknown */
};

const char *agent_end_name(enum agent_end e);

/* Run the loop to its end. Fills res (released by agent_result_release). */
void agent_run(const struct agent_opts *o, const struct agent_host *h, struct agent_result *res);
void agent_result_release(struct agent_result *res);

/* Exposed for tests: the output limiter (first and last half of cap bytes,
 * cut at UTF-8 boundaries, a marker between) and the new output between two
 * captures of the whole history (NULL when prev is not found in cur). */
char *agent_limit_output(const char *text, size_t cap);
char *agent_new_output(const char *prev, const char *cur);

#endif
