#define _GNU_SOURCE
#include "judge_queue.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "mkb_limits.h"
#include "proc.h"
#include "util.h"

int judge_queue_take(const char *dir, int nslots, const int *gpus, int ngpus, int default_gpu,
		     struct judge_slot *slot)
{
	slot->fd = -1;
	slot->index = -1;
	slot->gpu = default_gpu;
	slot->queue_ms = 0;
	if (nslots <= 0)
		return 0;
	if (nslots > JUDGE_QUEUE_MAX_SLOTS)
		return error("at most %d judge slots, not %d", JUDGE_QUEUE_MAX_SLOTS, nslots);
	int fds[JUDGE_QUEUE_MAX_SLOTS];
	for (int k = 0; k < nslots; k++) {
		char path[4096];
		if ((size_t)snprintf(path, sizeof(path), "%s/mkb-judge-slot-%d.lock", dir, k) >= sizeof(path)) {
			for (int j = 0; j < k; j++)
				close(fds[j]);
			return error("judge queue folder '%s': path too long", dir);
		}
		fds[k] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fds[k] < 0) {
			int rc = error("judge queue: cannot open '%s': %s", path, strerror(errno));
			for (int j = 0; j < k; j++)
				close(fds[j]);
			return rc;
		}
	}
	/* Start the scan at a slot of our own so that waiters spread out. */
	int first = (int)(getpid() % nslots), got = -1;
	double t0 = now_ms();
	while (got < 0) {
		for (int i = 0; i < nslots && got < 0; i++) {
			int k = (first + i) % nslots;
			if (flock(fds[k], LOCK_EX | LOCK_NB) == 0)
				got = k;
		}
		if (got >= 0)
			break;
		if (proc_interrupted())
			break;
		struct timespec ts = {0, JUDGE_QUEUE_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	for (int k = 0; k < nslots; k++)
		if (k != got)
			close(fds[k]);
	if (got < 0)
		return -1;
	slot->fd = fds[got];
	slot->index = got;
	slot->queue_ms = now_ms() - t0;
	if (gpus && ngpus > 0)
		slot->gpu = gpus[got % ngpus];
	return 0;
}

void judge_queue_release(struct judge_slot *slot)
{
	if (slot->fd >= 0)
		close(slot->fd); /* the flock goes with the last descriptor */
	slot->fd = -1;
}

int judge_queue_parse_gpus(const char *list, int *gpus, int max)
{
	int n = 0;
	const char *p = list;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[16];
		long v;
		if (len == 0 || len >= sizeof(item))
			return error("--gpus wants GPU indices like 0,1, not '%s'", list);
		memcpy(item, p, len);
		item[len] = '\0';
		if (parse_long(item, 0, 1023, &v) < 0)
			return error("--gpus wants GPU indices like 0,1, not '%s'", list);
		if (n == max)
			return error("--gpus: at most %d GPUs", max);
		gpus[n++] = (int)v;
		p += len;
		if (*p == ',')
			p++;
	}
	if (n == 0)
		return error("--gpus wants GPU indices like 0,1, not '%s'", list);
	return n;
}

int judge_queue_detect_gpus(int *gpus, int max)
{
	int n = 0;
	for (int i = 0; i < 1024 && n < max; i++) {
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/nvidia%d", i);
		if (access(dev, F_OK) == 0)
			gpus[n++] = i;
	}
	return n;
}
