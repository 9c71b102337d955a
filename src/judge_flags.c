#include "judge_flags.h"

#include <string.h>

#include "util.h"

static int int_flag(const char *name, const char *s, long min, long max, int *out)
{
	long v;
	if (parse_long(s, min, max, &v) < 0)
		return error("%s wants an integer in %ld..%ld, not '%s'", name, min, max, s);
	*out = (int)v;
	return 1;
}

int judge_flag(int c, const char *arg, struct judge_opts *o)
{
	long n;
	switch (c) {
	case JUDGE_OPT_DEVICE: o->device = arg; return 1;
	case JUDGE_OPT_PYTHON: o->python = arg; return 1;
	case JUDGE_OPT_GPU: return int_flag("--gpu", arg, 0, 1023, &o->gpu);
	case JUDGE_OPT_DRAWS: return int_flag("--draws", arg, 1, 1000, &o->draws);
	case JUDGE_OPT_WARMUP: return int_flag("--warmup", arg, 0, 100000, &o->warmup);
	case JUDGE_OPT_TIMED: return int_flag("--timed", arg, 0, 100000, &o->timed);
	case JUDGE_OPT_RECHECKS: return int_flag("--rechecks", arg, 0, 100000, &o->rechecks);
	case JUDGE_OPT_TIMEOUT:
		if (parse_positive_double(arg, &o->timeout_s) < 0)
			return error("--timeout wants seconds > 0, not '%s'", arg);
		return 1;
	case JUDGE_OPT_SEED:
		if (parse_long(arg, 0, 0x7fffffffffffffffL, &n) < 0)
			return error("--seed wants a non-negative integer, not '%s'", arg);
		o->seed = arg;
		return 1;
	case JUDGE_OPT_UNTIL_CI:
		if (parse_positive_double(arg, &o->until_ci) < 0 || o->until_ci >= 1)
			return error("--until-ci wants a share in (0, 1), e.g. 0.01, not '%s'", arg);
		return 1;
	case JUDGE_OPT_MAX_TIMED: return int_flag("--max-timed", arg, 1, 100000, &o->max_timed);
	case JUDGE_OPT_PIN_CPUS: {
		long a, b;
		const char *comma = strchr(arg, ',');
		char first[32];
		if (!strcmp(arg, "auto")) {
			o->pin_cpus = arg;
			return 1;
		}
		if (comma && (size_t)(comma - arg) < sizeof(first)) {
			memcpy(first, arg, (size_t)(comma - arg));
			first[comma - arg] = '\0';
			if (parse_long(first, 0, 4095, &a) == 0 && parse_long(comma + 1, 0, 4095, &b) == 0 && a != b) {
				o->pin_cpus = arg;
				return 1;
			}
		}
		return error("--pin-cpus is auto or two different cores A,B (checker, candidate), not '%s'", arg);
	}
	case JUDGE_OPT_WARMUP_UNTIL:
		if (parse_positive_double(arg, &o->warmup_until) < 0 || o->warmup_until >= 1)
			return error("--warmup-until wants a share in (0, 1), e.g. 0.02, not '%s'", arg);
		return 1;
	case JUDGE_OPT_GC_FREEZE: o->gc_freeze = 1; return 1;
	case JUDGE_OPT_FIXED_LAYOUT: o->fixed_layout = 1; return 1;
	case JUDGE_OPT_ZYGOTE: o->zygote = *arg ? arg : NULL; return 1;
	case JUDGE_OPT_SLOTS: return int_flag("--slots", arg, 0, JUDGE_QUEUE_MAX_SLOTS, &o->slots);
	case JUDGE_OPT_GPUS: {
		int count = judge_queue_parse_gpus(arg, o->gpus, JUDGE_QUEUE_MAX_GPUS);
		if (count < 0)
			return -1;
		o->ngpus = count;
		return 1;
	}
	case JUDGE_OPT_RULES:
		if (strcmp(arg, "enforce") && strcmp(arg, "paper"))
			return error("--rules is enforce or paper, not '%s'", arg);
		o->rules = arg;
		return 1;
	case JUDGE_OPT_LAUNCHES:
		if (strcmp(arg, "enforce") && strcmp(arg, "record") && strcmp(arg, "off"))
			return error("--launches is enforce, record or off, not '%s'", arg);
		o->launches = arg;
		return 1;
	case JUDGE_OPT_DSL_MIN_SHARE:
		if (!strcmp(arg, "0")) /* no floor */
			o->dsl_min_share = 0;
		else if (parse_positive_double(arg, &o->dsl_min_share) < 0 || o->dsl_min_share >= 1)
			return error("--dsl-min-share wants a share in [0, 1), e.g. 0.25, not '%s'", arg);
		return 1;
	case JUDGE_OPT_MAX_BYTES:
		if (parse_long(arg, 1, 1L << 30, &o->max_kernel_bytes) < 0)
			return error("--max-kernel-bytes wants a positive integer, not '%s'", arg);
		return 1;
	default:
		return 0;
	}
}

int judge_flags_check(struct judge_opts *o)
{
	if (strcmp(o->device, "cuda") && strcmp(o->device, "cpu"))
		return error("--device is cuda or cpu, not '%s'", o->device);
	if (o->ngpus && !o->slots)
		o->slots = 2 * o->ngpus; /* one compiling and checking while one times */
	return 0;
}

void judge_timing_argv(const struct judge_opts *o, struct judge_timing_text *t, const char **argv, size_t *n)
{
	struct judge_opts d;
	judge_opts_init(&d);
#define INT_ARG(flag, field, text)                                              \
	if (o->field != d.field) {                                              \
		snprintf(t->text, sizeof(t->text), "%ld", (long)o->field);      \
		argv[(*n)++] = flag;                                             \
		argv[(*n)++] = t->text;                                          \
	}
#define SHARE_ARG(flag, field, text)                                            \
	if (o->field > 0) {                                                     \
		snprintf(t->text, sizeof(t->text), "%.17g", o->field);          \
		argv[(*n)++] = flag;                                             \
		argv[(*n)++] = t->text;                                          \
	}
	INT_ARG("--draws", draws, draws)
	INT_ARG("--warmup", warmup, warmup)
	INT_ARG("--timed", timed, timed)
	INT_ARG("--rechecks", rechecks, rechecks)
	INT_ARG("--max-kernel-bytes", max_kernel_bytes, max_bytes)
	INT_ARG("--max-timed", max_timed, max_timed)
	SHARE_ARG("--until-ci", until_ci, until_ci)
	SHARE_ARG("--warmup-until", warmup_until, warmup_until)
#undef INT_ARG
#undef SHARE_ARG
	if (o->seed) {
		argv[(*n)++] = "--seed";
		argv[(*n)++] = o->seed;
	}
	if (o->pin_cpus) {
		argv[(*n)++] = "--pin-cpus";
		argv[(*n)++] = o->pin_cpus;
	}
	if (o->gc_freeze)
		argv[(*n)++] = "--gc-freeze";
	if (o->fixed_layout)
		argv[(*n)++] = "--fixed-layout";
}
