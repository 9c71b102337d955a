/* One attempt (PROTOCOL.md "The attempt"): a model works on one variant in a
 * sandboxed terminal under a wall clock and a submission budget, submits to
 * the judge for feedback, and leaves kernel.py and SKILL.md; then the
 * on-disk kernel is graded once more and that verdict is the attempt's.
 *
 * Layout of the attempt's folder (--workdir):
 *   workspace/        the agent's: mkb workspace + kernel.py, SKILL.md it writes
 *   bin/submit        the submit client (mkb-submit), read-only inside the sandbox
 *   run/              tmux's and submit's sockets, the agent's TMPDIR
 *   submissions/K/    each submitted kernel.py as graded (outside the sandbox)
 *   final/            kernel.py and SKILL.md as the attempt ended
 * Everything the attempt does is in the store as it happens (attempt_events). */
#ifndef MKB_ATTEMPT_H
#define MKB_ATTEMPT_H

#include <stdint.h>

#include "catalog.h"
#include "dsl.h"
#include "judge.h"
#include "llm.h"
#include "mkb_limits.h"

struct attempt_opts {
	const char *root;
	const struct problem *problem;
	const struct dsl *dsl;
	const char *model;               /* "openai:M", "anthropic:M", or a control agent */
	struct llm_options llm;
	struct llm_decoding decoding;
	long context_tokens, max_turns;
	const char *skill_path;          /* the skill arm's SKILL.md, or NULL */
	const char *skill_from;          /* its DSL's display name (the sentence says it) */
	const char *arm;                 /* a label for the store, or NULL */
	const char *workdir;             /* must not exist or be empty */
	double wall_s;
	int submissions;
	const struct judge_opts *judge;  /* device, python, limits for every grading */
	const char *store_path;          /* NULL: $MKB_STORE / <root>/mkb.db */
	unsigned sandbox_off;            /* layers turned off ($MKB_SANDBOX_OFF) */
	int unsafe;                      /* an external agent without a network namespace */
	int final_heldout;               /* (ours) the final kernel graded on held-out too */
};

void attempt_opts_init(struct attempt_opts *o);

struct attempt_result {
	int64_t id;             /* in the store */
	char *status;           /* passed, failed, timed_out, model_error, infra_error */
	char *reason;
	int submissions, turns;
	double agent_s;
	json_t *final;          /* the final grading's mkb eval --json object, or NULL */
	json_t *summary;        /* the attempt's store row (what --json prints) */
};

/* Run one attempt. 0 when it ran to an outcome (whatever the outcome), -1
 * when it could not start (error printed; nothing recorded but the error). */
int attempt_run(const struct attempt_opts *o, struct attempt_result *res);
void attempt_result_release(struct attempt_result *res);

/* Is model a control agent that needs no model: "oracle" (the shipped
 * solution, or on the CPU a plain-torch stand-in; a fixed skill), "null"
 * (does nothing), "eager" (the stand-in: the judge must refuse it on a GPU)? */
int attempt_is_control(const char *model);

/* The text a skill arm's instruction ends with (PROTOCOL.md): header, one
 * sentence, the skill's body without its frontmatter. */
char *attempt_skill_section(const char *skill, const char *from_dsl_name);
/* The skill's body: SKILL.md without Agent Skills frontmatter. */
const char *attempt_skill_body(const char *skill);

#endif
