/* The judge: grades one candidate kernel.py in a fresh grader process.
 *
 * Pre-checks (size, UTF-8, Python syntax) run first; a kernel that fails them
 * is REJECTED and does not count as a submission. Then, holding the GPU's
 * lock (one evaluation at a time per GPU), the judge starts
 * `python -m mkb_grader` in its own process group, sends one JSON request and
 * reads stage events and one result as JSON lines. At the timeout the whole
 * group is killed and the kernel is HUNG at its last stage; a grader that dies
 * by a signal CRASHED at its last stage. Nothing the grader started outlives
 * the evaluation. */
#ifndef MKB_JUDGE_H
#define MKB_JUDGE_H

#include "catalog.h"
#include "judge_queue.h"
#include "mkb_limits.h"
#include "verdict.h"

/* The request/result protocol with the grader (docs/judge.md, "Protocol"):
 * bumped whenever a field changes meaning; a grader of another version
 * answers infra_error instead of guessing. */
#define JUDGE_PROTOCOL_VERSION 2
/* The default floor of the DSL's share of a call's kernel time: a token DSL
 * kernel beside eager torch doing the work breaks it; every shipped solution
 * is at 0.51 or more on the H200 (docs/launch-attribution.md). */
#define JUDGE_DSL_MIN_SHARE 0.25

struct judge_opts {
	const char *root;        /* the repository: never visible to a candidate */
	const char *python;      /* interpreter with torch (and the DSL) */
	const char *python_real; /* the interpreter itself (python may be a wrapper
				    script), run directly inside the sandbox */
	const char *const *python_trees; /* its prefixes and site folders, readable
					    by the candidate; NULL-terminated */
	unsigned sandbox_off;    /* sandbox layers not to apply ($MKB_SANDBOX_OFF) */
	double sol_floor_ms;     /* speed-of-light floor on this GPU, 0 if unknown */
	const char *grader_dir;  /* folder holding the mkb_grader package */
	const char *device;      /* "cuda" or "cpu" */
	int gpu;                 /* CUDA device index (cuda only) */
	const char *lock_dir;    /* where the per-GPU lock files live */
	int slots;               /* the judge queue's size (judge_queue.h); 0: none */
	int gpus[JUDGE_QUEUE_MAX_GPUS]; /* with a queue: the GPUs its slots grade on */
	int ngpus;               /* 0: every slot grades on gpu */
	const char *workload;    /* visible | heldout | smoke */
	double timeout_s;
	long max_kernel_bytes;
	int draws, warmup, timed, rechecks;
	double until_ci;         /* (ours) > 0: more timed calls while the kernel
				    median's 95% interval is wider than this share
				    of it, up to max_timed; 0: the paper's count */
	int max_timed;
	/* (ours, each off by default: docs/judge.md "Noise") less run-to-run
	 * noise, the figure unchanged */
	const char *pin_cpus;    /* "auto" or "A,B": checker's and candidate's core; NULL: not pinned */
	double warmup_until;     /* > 0: warm-up calls beyond warmup (at most 100 in all)
				    until the median of the last 10 is within this
				    share of the 10 before */
	int gc_freeze;           /* no garbage collection while timing, in either process */
	int fixed_layout;        /* checker and candidate without address-space
				    randomisation and with hash seed 0 */
	const char *zygote;      /* (ours) socket of `mkb zygote`: the candidate is forked
				    from its pre-imported parent; NULL: started cold */
	const char *seed;        /* fixed seed (tests), or NULL for OS entropy */
	const char *rules;       /* "enforce" (default): the DSL rules' static checks
				    reject a kernel; "paper": stated, not enforced,
				    as the published benchmark */
	const char *launches;    /* run-time DSL rules (launch attribution, GPU
				    only): "enforce", "record" or "off"; NULL:
				    enforce, or record with rules "paper" */
	double dsl_min_share;    /* (ours) run-time rule: the variant's DSL kernels
				    take at least this share of each solve call's
				    kernel time; 0: no floor (JUDGE_DSL_MIN_SHARE) */
};

void judge_opts_init(struct judge_opts *o);

/* Grade kernel_path for problem p in dsl. Always fills *v (init'ed by the
 * caller) with a verdict; returns 0, or -1 when the request itself is bad
 * (e.g. an unknown workload), with an error printed. */
int judge_evaluate(const struct judge_opts *o, const struct problem *p, const char *dsl,
		   const char *kernel_path, struct verdict *v);

/* `mkb zygote`: replace this process with the zygote (grader/mkb_grader/
 * zygote.py) listening at socket_path, in the candidate's environment.
 * Returns only on failure (-1, error printed). */
int judge_zygote_exec(const struct judge_opts *o, const char *socket_path);

#endif
