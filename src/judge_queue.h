/* The judge queue: at most N evaluations at once on this machine, shared by
 * every mkb process that grades (attempts in flight, mkb eval, validate),
 * and each evaluation's GPU.
 *
 * A slot is a flock on <dir>/mkb-judge-slot-K.lock, K in 0..N-1, held for
 * the whole evaluation and released by the kernel when its holder dies, so
 * a crashed mkb never leaks one. Slot K grades on GPU gpus[K % ngpus]:
 * with N = 2 x the GPUs, each GPU has two evaluations in flight, one
 * compiling and checking while the other times (the GPU's own lock, in the
 * grader, keeps timing exclusive). Without a queue (N = 0) an evaluation
 * starts at once on the GPU it was given, as before. */
#ifndef MKB_JUDGE_QUEUE_H
#define MKB_JUDGE_QUEUE_H

#include "mkb_limits.h"

struct judge_slot {
	int fd;           /* the held lock, or -1 */
	int index;        /* K */
	int gpu;          /* the GPU this slot grades on */
	double queue_ms;  /* how long the evaluation waited for a slot */
};

/* Take a free slot of the nslots under dir, polling until one is free or a
 * signal caught by proc_catch_interrupts() comes. gpus (ngpus entries; NULL
 * or 0: keep default_gpu) map the slot to its GPU. 0, or -1 when
 * interrupted or a lock file cannot be opened (error printed). */
int judge_queue_take(const char *dir, int nslots, const int *gpus, int ngpus, int default_gpu,
		     struct judge_slot *slot);
void judge_queue_release(struct judge_slot *slot);

/* The GPUs of this machine into gpus (at most max): /dev/nvidia0, 1, ...
 * that exist. Returns the count (0: none). */
int judge_queue_detect_gpus(int *gpus, int max);

/* Parse "0,1,3" into gpus (at most max). Returns the count, or -1 (error
 * printed). */
int judge_queue_parse_gpus(const char *list, int *gpus, int max);

#endif
