#include "attempt_flags.h"

#include "llm_flags.h"
#include "util.h"

int attempt_flag(int c, const char *arg, struct attempt_opts *a, struct judge_opts *j)
{
	long n;
	switch (c) {
	case ATTEMPT_OPT_WALL:
		return number_arg("--wall", arg, 1, 7 * 86400, &a->wall_s) < 0 ? -1 : 1;
	case ATTEMPT_OPT_SUBMISSIONS:
		if (parse_long(arg, 0, 1000, &n) < 0)
			return error("--submissions wants an integer in 0..1000, not '%s'", arg);
		a->submissions = (int)n;
		return 1;
	case ATTEMPT_OPT_CONTEXT:
		if (parse_long(arg, 1000, 100000000, &a->context_tokens) < 0)
			return error("--context-tokens wants an integer in 1000..100000000, not '%s'", arg);
		return 1;
	case ATTEMPT_OPT_MAX_TURNS:
		if (parse_long(arg, 1, 1000000, &a->max_turns) < 0)
			return error("--max-turns wants an integer in 1..1000000, not '%s'", arg);
		return 1;
	case ATTEMPT_OPT_WORKLOAD: j->workload = arg; return 1;
	case ATTEMPT_OPT_STORE: a->store_path = arg; return 1;
	case ATTEMPT_OPT_UNSAFE: a->unsafe = 1; return 1;
	case ATTEMPT_OPT_FINAL_HELDOUT: a->final_heldout = 1; return 1;
	default: return 0;
	}
}
