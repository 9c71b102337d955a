/* The command-line flags of the judge's limits, shared by every command that
 * grades kernels (eval, validate): each limit has a name, a default from
 * PROTOCOL.md (judge_opts_init) and a flag. */
#ifndef MKB_JUDGE_FLAGS_H
#define MKB_JUDGE_FLAGS_H

#include <getopt.h>

#include "judge.h"

enum {
	JUDGE_OPT_DEVICE = 512, JUDGE_OPT_GPU, JUDGE_OPT_TIMEOUT, JUDGE_OPT_PYTHON, JUDGE_OPT_DRAWS,
	JUDGE_OPT_WARMUP, JUDGE_OPT_TIMED, JUDGE_OPT_RECHECKS, JUDGE_OPT_SEED, JUDGE_OPT_MAX_BYTES,
	JUDGE_OPT_RULES, JUDGE_OPT_LAUNCHES, JUDGE_OPT_DSL_MIN_SHARE, JUDGE_OPT_UNTIL_CI, JUDGE_OPT_MAX_TIMED,
	JUDGE_OPT_SLOTS, JUDGE_OPT_GPUS, JUDGE_OPT_PIN_CPUS, JUDGE_OPT_WARMUP_UNTIL, JUDGE_OPT_GC_FREEZE, JUDGE_OPT_ZYGOTE,
	JUDGE_OPT_FIXED_LAYOUT,
};

/* Entries for a getopt_long table. */
#define JUDGE_LONG_OPTIONS                                                           \
	{"device", required_argument, NULL, JUDGE_OPT_DEVICE},                       \
	{"gpu", required_argument, NULL, JUDGE_OPT_GPU},                             \
	{"timeout", required_argument, NULL, JUDGE_OPT_TIMEOUT},                     \
	{"python", required_argument, NULL, JUDGE_OPT_PYTHON},                       \
	{"draws", required_argument, NULL, JUDGE_OPT_DRAWS},                         \
	{"warmup", required_argument, NULL, JUDGE_OPT_WARMUP},                       \
	{"timed", required_argument, NULL, JUDGE_OPT_TIMED},                         \
	{"rechecks", required_argument, NULL, JUDGE_OPT_RECHECKS},                   \
	{"seed", required_argument, NULL, JUDGE_OPT_SEED},                           \
	{"max-kernel-bytes", required_argument, NULL, JUDGE_OPT_MAX_BYTES},                \
	{"rules", required_argument, NULL, JUDGE_OPT_RULES},                        \
	{"launches", required_argument, NULL, JUDGE_OPT_LAUNCHES},                  \
	{"dsl-min-share", required_argument, NULL, JUDGE_OPT_DSL_MIN_SHARE},        \
	{"until-ci", required_argument, NULL, JUDGE_OPT_UNTIL_CI},                  \
	{"max-timed", required_argument, NULL, JUDGE_OPT_MAX_TIMED},                \
	{"slots", required_argument, NULL, JUDGE_OPT_SLOTS},                        \
	{"gpus", required_argument, NULL, JUDGE_OPT_GPUS},                          \
	{"pin-cpus", required_argument, NULL, JUDGE_OPT_PIN_CPUS},                  \
	{"warmup-until", required_argument, NULL, JUDGE_OPT_WARMUP_UNTIL},          \
	{"gc-freeze", no_argument, NULL, JUDGE_OPT_GC_FREEZE},                      \
	{"fixed-layout", no_argument, NULL, JUDGE_OPT_FIXED_LAYOUT},                \
	{"zygote", required_argument, NULL, JUDGE_OPT_ZYGOTE}

/* The help lines of those flags. */
#define JUDGE_FLAGS_HELP                                                                    \
	"  --device cuda|cpu     where to run (cpu: a test mode, DSL rules unchecked)\n"    \
	"  --gpu N               CUDA device index (default 0)\n"                           \
	"  --timeout S           seconds before an evaluation is killed as hung (600)\n"    \
	"  --python PATH         the grader's interpreter (default $MKB_PYTHON)\n"          \
	"  --draws N             correctness draws (5)\n"                                   \
	"  --warmup N            warm-up calls (10)\n"                                      \
	"  --timed N             timed calls (50; 0 skips timing)\n"                        \
	"  --rechecks N          timed calls re-checked for correctness (3)\n"              \
	"  --seed N              fixed seed for every draw (tests only)\n"                  \
	"  --max-kernel-bytes N  size limit of the kernel file (300000)\n"                 \
	"  --rules enforce|paper DSL rules checked in the source before it runs (enforce),\n" \
	"                        or stated only, as the published benchmark (paper)\n"       \
	"  --launches MODE       run-time DSL rules from the kernels each call launched (GPU\n" \
	"                        only): enforce (default), record (reported, not enforced;\n" \
	"                        the default with --rules paper) or off (recorder not loaded)\n" \
	"  --dsl-min-share F     (ours) run-time rule: the variant's DSL kernels take at least\n" \
	"                        this share of each call's kernel time (0.25; 0: no floor)\n" \
	"  --until-ci F          more timed calls, 10 at a time, while the kernel median's\n" \
	"                        95% interval is wider than +-F of it (e.g. 0.01; off)\n"    \
	"  --max-timed N         at most this many timed calls with --until-ci (200)\n"      \
	"  --slots N             at most N evaluations at once on this machine, shared by\n" \
	"                        every mkb (flock files in $MKB_LOCK_DIR or /tmp; default: none)\n" \
	"  --gpus LIST           the GPUs the queue's slots grade on, e.g. 0,1 (slot K on\n" \
	"                        GPU K mod the count; --slots defaults to 2 per GPU)\n"  \
	"  --pin-cpus auto|A,B   pin the checker's timing thread (A) and the candidate's (B)\n" \
	"                        to one core each (auto: chosen from those allowed; off)\n" \
	"  --warmup-until F      more warm-up calls (up to 100) until the median of the\n"  \
	"                        last 10 is within F of the 10 before (e.g. 0.02; off)\n"   \
	"  --gc-freeze           no Python garbage collection while timing (off)\n"      \
	"  --fixed-layout        checker and candidate with the same memory layout every\n" \
	"                        time: no address randomisation, hash seed 0 (off)\n"     \
	"  --zygote NAME|auto    (ours) fork the candidate from `mkb zygote --socket NAME`'s\n" \
	"                        pre-imported parent ($MKB_ZYGOTE; a cold start if unreachable);\n" \
	"                        auto (run, validate, worker, attempt): start one for this\n" \
	"                        command alone and end it with the command (default: none)\n"

/* Apply option c (from JUDGE_LONG_OPTIONS) with its argument to o.
 * Returns 1 when applied, 0 when c is not a judge flag, -1 on a bad value
 * (error printed). */
int judge_flag(int c, const char *arg, struct judge_opts *o);
/* Checks that need all the flags, and defaults that follow from others
 * (--gpus without --slots: 2 slots per GPU): 0, or -1 (error printed). */
int judge_flags_check(struct judge_opts *o);

/* The flags of o that change how an evaluation draws and times (--draws,
 * --warmup, --timed, --rechecks, --seed, --max-kernel-bytes and the noise
 * flags: --until-ci, --max-timed, --pin-cpus, --warmup-until, --gc-freeze,
 * --fixed-layout),
 * as `mkb eval` arguments, for a command that grades through `mkb eval`
 * (an attempt): only those that differ from judge_opts_init's. Numbers
 * are written into t; argv[*n] on are appended, at most JUDGE_TIMING_ARGS. */
#define JUDGE_TIMING_ARGS 22
struct judge_timing_text {
	char draws[16], warmup[16], timed[16], rechecks[16], max_bytes[24], until_ci[32], max_timed[16],
		warmup_until[32];
};
void judge_timing_argv(const struct judge_opts *o, struct judge_timing_text *t, const char **argv, size_t *n);

#endif
