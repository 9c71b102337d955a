/* The command-line flags of an attempt's budgets and records, shared by
 * every command that makes attempts (attempt, run): wall clock, submissions,
 * context window, turns, workload, store. */
#ifndef MKB_ATTEMPT_FLAGS_H
#define MKB_ATTEMPT_FLAGS_H

#include <getopt.h>

#include "attempt.h"
#include "judge.h"

enum {
	ATTEMPT_OPT_WALL = 1024, ATTEMPT_OPT_SUBMISSIONS, ATTEMPT_OPT_CONTEXT, ATTEMPT_OPT_MAX_TURNS,
	ATTEMPT_OPT_WORKLOAD, ATTEMPT_OPT_STORE, ATTEMPT_OPT_UNSAFE, ATTEMPT_OPT_FINAL_HELDOUT,
};

#define ATTEMPT_LONG_OPTIONS                                                  \
	{"wall", required_argument, NULL, ATTEMPT_OPT_WALL},                  \
	{"submissions", required_argument, NULL, ATTEMPT_OPT_SUBMISSIONS},    \
	{"context-tokens", required_argument, NULL, ATTEMPT_OPT_CONTEXT},     \
	{"max-turns", required_argument, NULL, ATTEMPT_OPT_MAX_TURNS},        \
	{"workload", required_argument, NULL, ATTEMPT_OPT_WORKLOAD},          \
	{"store", required_argument, NULL, ATTEMPT_OPT_STORE},                \
	{"unsafe", no_argument, NULL, ATTEMPT_OPT_UNSAFE},                    \
	{"final-heldout", no_argument, NULL, ATTEMPT_OPT_FINAL_HELDOUT}

#define ATTEMPT_FLAGS_HELP                                                                       \
	"  --wall S              agent wall clock in seconds (2400)\n"                              \
	"  --submissions N       feedback submissions (10)\n"                                       \
	"  --context-tokens N    the model's context window, for the hand-off summary\n"            \
	"                        (default: unknown, as Terminus-2: 1,000,000)\n"                    \
	"  --max-turns N         end after N turns (default: none)\n"                               \
	"  --workload W          what submissions and the final grading run: visible\n"             \
	"                        (default, the paper's) or smoke (CPU tests)\n"                     \
	"  --store PATH          results store (default $MKB_STORE or <root>/mkb.db)\n"        \
	"  --unsafe              run an external agent (cli:) even where this machine cannot\n" \
	"                        give it a network namespace of its own\n"                    \
	"  --final-heldout       (ours) grade the final kernel on the held-out workload too,\n"  \
	"                        after the final grading that decides (mkb report's held-out)\n"

/* Take option c if it is one of ATTEMPT_LONG_OPTIONS (the workload goes to
 * the judge's options): 1 taken, 0 not ours, -1 bad value (error printed). */
int attempt_flag(int c, const char *arg, struct attempt_opts *a, struct judge_opts *j);

#endif
