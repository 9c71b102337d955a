/* The zygote's forked child, from its Python (grader/mkb_grader/zygote.py,
 * through ctypes) right after fork: what the judge does between fork and exec
 * for a candidate started cold (src/proc.c exec_child), then the sandbox the
 * judge sent as text (src/sandbox_spec.h), or none for the trusted checker's
 * zygote. Built into build/libmkb_zygote.so
 * with sandbox.c, never into mkb. docs/judge.md, "Start-up: the zygote". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "../sandbox.h"
#include "../sandbox_spec.h"

int mkb_zygote_enter(char *spec, const char *dir, int in, int out, int err, int peer, int report)
	__attribute__((visibility("default")));

/* In the forked child: descriptors in (or /dev/null when -1), out, err and
 * peer become 0, 1, 2 and 3, every other is closed, then spec's sandbox is
 * applied (a candidate) or none (spec NULL: the trusted checker). Returns
 * the layers in force (also written to report as an int), or -1: the child
 * must end without running anything. spec is modified in place. */
int mkb_zygote_enter(char *spec, const char *dir, int in, int out, int err, int peer, int report)
{
	static struct sandbox sb; /* its paths point into spec */
	if (spec && sandbox_spec_read(&sb, spec) < 0)
		return -1;
	if (setsid() < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return -1;
	/* out of the way of 0-4 first, so no dup2 below overwrites another */
	int i = in >= 0 ? fcntl(in, F_DUPFD_CLOEXEC, 10) : open("/dev/null", O_RDONLY | O_CLOEXEC);
	int o = fcntl(out, F_DUPFD_CLOEXEC, 10), e = fcntl(err, F_DUPFD_CLOEXEC, 10);
	int p = fcntl(peer, F_DUPFD_CLOEXEC, 10), r = fcntl(report, F_DUPFD_CLOEXEC, 10);
	if (i < 0 || o < 0 || e < 0 || p < 0 || r < 0)
		return -1;
	if (dup2(i, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || dup2(p, 3) < 0 || dup2(r, 4) < 0)
		return -1;
	/* nothing of the zygote's (its socket, other evaluations' connections) stays */
	if (close_range(5, ~0U, 0) < 0)
		return -1;
	if (chdir(dir) < 0)
		return -1;
	int layers = spec ? sandbox_apply(&sb) : 0;
	ssize_t w = write(4, &layers, sizeof(layers));
	close(4);
	return w == (ssize_t)sizeof(layers) ? layers : -1;
}
