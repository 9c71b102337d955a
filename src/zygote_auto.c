#define _GNU_SOURCE
#include "zygote_auto.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "sandbox.h"
#include "util.h"
#include "zygote.h"

/* The longest line a zygote prints when it listens is far shorter. */
#define LISTEN_LINE_MAX 4096

int zygote_is_auto(const char *name)
{
	return name && !strcmp(name, ZYGOTE_AUTO);
}

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
	nanosleep(&ts, NULL); /* an interrupt only shortens it */
}

/* Child side after fork: only async-signal-safe calls until exec. Its own
 * session (a Ctrl-C at the terminal is the command's to handle: it ends the
 * zygote itself), killed when the command dies, stdout into out. */
static _Noreturn void exec_zygote(const char *const *argv, int out, pid_t parent)
{
	if (setsid() < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(127);
	if (getppid() != parent) /* the command died before prctl took effect */
		_exit(127);
	if (dup2(out, STDOUT_FILENO) < 0)
		_exit(127);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0)
		_exit(127);
	/* nothing of the command's (its store, its pipes) reaches the zygote */
	if (close_range(3, ~0U, 0) < 0)
		_exit(127);
	sigset_t none;
	if (sigemptyset(&none) < 0 || sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		_exit(127);
	signal(SIGPIPE, SIG_DFL);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* A line the zygotes print once they listen: {"zygote": NAME, "role":
 * "candidate", ...} or {"zygote": NAME:checker, "role": "checker", "pid":
 * N, ...}; seen[0] and seen[1] mark which. */
static void listen_line(struct zygote_auto *za, const char *line, int seen[2])
{
	json_t *j = json_loads(line, 0, NULL);
	const char *name = json_string_value(json_object_get(j, "zygote"));
	const char *role = json_string_value(json_object_get(j, "role"));
	json_t *pid = json_object_get(j, "pid");
	size_t len = strlen(za->name);
	/* the checkers' zygote listens by NAME:checker */
	if (name && role && !strncmp(name, za->name, len)) {
		if (!strcmp(role, "candidate") && !name[len]) {
			seen[0] = 1;
		} else if (!strcmp(role, "checker") && !strcmp(name + len, ":checker")) {
			seen[1] = 1;
			long long start = json_is_integer(pid) && json_integer_value(pid) > 1 &&
						  json_integer_value(pid) <= INT_MAX
					  ? proc_start_ticks(json_integer_value(pid)) : -1;
			if (start > 0) { /* known: waited for when it is ended */
				za->checker_pid = (pid_t)json_integer_value(pid);
				za->checker_start = start;
			}
		}
	}
	json_decref(j);
}

/* Read the zygotes' lines from fd until both listen: 0, or -1 with why
 * (timeout, interrupt, the zygote ended: *ended). */
static int wait_listening(struct zygote_auto *za, int fd, int *ended, char *why, size_t whysize)
{
	char buf[LISTEN_LINE_MAX + 1];
	size_t used = 0;
	int seen[2] = {0, 0};
	double deadline = now_ms() + ZYGOTE_AUTO_WAIT_S * 1e3;
	*ended = 0;
	while (!seen[0] || !seen[1]) {
		if (proc_interrupted()) {
			snprintf(why, whysize, "interrupted while it started");
			return -1;
		}
		double left = deadline - now_ms();
		if (left <= 0) {
			snprintf(why, whysize, "it did not say it listens within %d s", ZYGOTE_AUTO_WAIT_S);
			return -1;
		}
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, left > 1000 ? 1000 : (int)left + 1);
		if (r < 0 && errno != EINTR) {
			snprintf(why, whysize, "poll: %s", strerror(errno));
			return -1;
		}
		if (r <= 0)
			continue;
		ssize_t n = read(fd, buf + used, LISTEN_LINE_MAX - used);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			snprintf(why, whysize, "reading its output: %s", strerror(errno));
			return -1;
		}
		if (n == 0) {
			*ended = 1;
			snprintf(why, whysize, "it ended before it listened");
			return -1;
		}
		used += (size_t)n;
		buf[used] = '\0';
		char *start = buf, *nl;
		while ((nl = strchr(start, '\n'))) {
			*nl = '\0';
			listen_line(za, start, seen);
			start = nl + 1;
		}
		used -= (size_t)(start - buf);
		memmove(buf, start, used);
		if (used == LISTEN_LINE_MAX) /* no line of the zygote's is this long: dropped */
			used = 0;
	}
	return 0;
}

/* A name no other command's zygote has: mkb-<pid>-<16 random hex digits>. */
static void unique_name(char *out, size_t size)
{
	unsigned char r[8];
	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		/* no entropy yet (early boot): the clock, with the pid, is unique enough */
		struct timespec ts;
		if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
			memset(&ts, 0, sizeof(ts));
		unsigned long long v = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(v >> (8 * i));
	}
	snprintf(out, size, "mkb-%ld-%02x%02x%02x%02x%02x%02x%02x%02x", (long)getpid(), r[0], r[1], r[2], r[3],
		 r[4], r[5], r[6], r[7]);
}

/* The sandbox layers turned off for this command: o's and $MKB_SANDBOX_OFF's
 * (read here: most commands parse it into o only when they first grade).
 * -1 when the variable names an unknown layer (error printed). */
static int layers_off(const struct judge_opts *o, unsigned *off)
{
	unsigned env = 0;
	const char *list = getenv("MKB_SANDBOX_OFF");
	if (list && *list && sandbox_parse_layers(list, &env) < 0)
		return -1;
	*off = o->sandbox_off | env;
	return 0;
}

void zygote_auto_start(struct zygote_auto *za, struct judge_opts *o)
{
	*za = (struct zygote_auto)ZYGOTE_AUTO_INIT;
	if (!zygote_is_auto(o->zygote))
		return;
	o->zygote = NULL; /* until it listens: cold */
	/* Its socket is abstract: out of a candidate's reach only in another
	 * network namespace or under Landlock's scope layer (`mkb zygote`
	 * refuses to start without either; the judge does not use it with both
	 * off). */
	unsigned off;
	if (layers_off(o, &off) < 0) {
		warning("--zygote auto: no zygote ($MKB_SANDBOX_OFF is not understood); every evaluation starts cold");
		return;
	}
	if (!zygote_guarded(off)) {
		warning("--zygote auto: candidates are confined here without a network namespace and without "
			"Landlock's scope layer%s, so a candidate could reach a zygote: none is started; every "
			"evaluation starts cold", off & (SB_NETNS | SB_LANDLOCK_SCOPE) ? " ($MKB_SANDBOX_OFF)" : "");
		return;
	}
	unique_name(za->name, sizeof(za->name));
	char *self = realpath("/proc/self/exe", NULL);
	if (!self) {
		warning("--zygote auto: cannot find this program's path (%s); every evaluation starts cold",
			strerror(errno));
		return;
	}
	char gpu[16];
	snprintf(gpu, sizeof(gpu), "%d", o->gpu);
	const char *argv[12];
	size_t n = 0;
	argv[n++] = self;
	argv[n++] = "zygote";
	argv[n++] = "--socket";
	argv[n++] = za->name;
	argv[n++] = "--device";
	argv[n++] = o->device;
	argv[n++] = "--gpu";
	argv[n++] = gpu;
	if (o->python) {
		argv[n++] = "--python";
		argv[n++] = o->python;
	}
	if (o->fixed_layout) /* its forks keep its layout: fixed only if it is */
		argv[n++] = "--fixed-layout";
	argv[n] = NULL;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		warning("--zygote auto: cannot make a pipe: %s; every evaluation starts cold", strerror(errno));
		free(self);
		return;
	}
	fflush(NULL);
	pid_t parent = getpid();
	double t0 = now_ms();
	pid_t pid = fork();
	if (pid == 0)
		exec_zygote(argv, p[1], parent);
	free(self);
	close(p[1]);
	if (pid < 0) {
		warning("--zygote auto: cannot start the zygote: %s; every evaluation starts cold", strerror(errno));
		close(p[0]);
		return;
	}
	za->pid = pid;
	/* an evaluation run by this process kills every child left (judge.c):
	 * not this one */
	proc_spare_child(pid);
	char why[256];
	int ended;
	int rc = wait_listening(za, p[0], &ended, why, sizeof(why));
	close(p[0]); /* the zygotes print nothing more */
	if (rc < 0) {
		int status = 0;
		pid_t r = 0;
		/* it closed its output: it is ending; say how */
		for (double end = now_ms() + ZYGOTE_AUTO_STOP_S * 1e3; ended && r == 0 && now_ms() < end;)
			if ((r = waitpid(pid, &status, WNOHANG)) == 0)
				pause_ms(20);
		if (r == pid) {
			char how[64];
			proc_describe_status(status, how, sizeof(how));
			size_t at = strlen(why);
			snprintf(why + at, sizeof(why) - at, " (%s)", how);
			za->pid = -1;
			proc_spare_child(0);
		}
		zygote_auto_stop(za);
		warning("--zygote auto: the zygote %s did not start: %s; every evaluation starts cold", za->name, why);
		return;
	}
	o->zygote = za->name;
	fprintf(stderr, "zygote: %s listens (candidates and checkers, %.1f s); this command's evaluations "
		"are forked from it\n", za->name, (now_ms() - t0) / 1e3);
}

/* pid's state in /proc/<pid>/stat ('Z': a zombie), or 0 when it is gone. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* after the command's name, which may hold anything */
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Our child pid: SIGTERM, SIGKILL if it is not gone in time; reaped. */
static void end_child(pid_t pid)
{
	int status;
	/* != 0: ended and reaped now, or reaped already (ECHILD: mkb run's
	 * scheduler waits for any child) */
	if (waitpid(pid, &status, WNOHANG) != 0)
		return;
	if (kill(pid, SIGTERM) < 0)
		warning("cannot end the zygote (pid %ld): %s", (long)pid, strerror(errno));
	double end = now_ms() + ZYGOTE_AUTO_STOP_S * 1e3;
	pid_t r;
	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < end)
		pause_ms(20);
	if (r != 0)
		return;
	warning("the zygote (pid %ld) did not end within %d s of SIGTERM: killed", (long)pid, ZYGOTE_AUTO_STOP_S);
	if (kill(pid, SIGKILL) < 0)
		warning("cannot kill the zygote (pid %ld): %s", (long)pid, strerror(errno));
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

/* The checkers' zygote, the candidates' zygote's child: it dies with its
 * parent (parent-death signal); wait until it has, killing it if it has not
 * in time. start (its start time) tells it from a process that got its pid
 * since. */
static void end_checker(pid_t pid, long long start)
{
	double end = now_ms() + ZYGOTE_AUTO_STOP_S * 1e3;
	for (;;) {
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) /* left to us, a subreaper */
			return;
		if (!proc_alive(pid, start) || proc_state(pid) == 'Z' || proc_state(pid) == 0)
			return;
		if (now_ms() >= end)
			break;
		pause_ms(20);
	}
	warning("the checkers' zygote (pid %ld) outlived the candidates' zygote: killed", (long)pid);
	if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
		warning("cannot kill the checkers' zygote (pid %ld): %s", (long)pid, strerror(errno));
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) /* ECHILD: not ours to reap */
		;
}

void zygote_auto_stop(struct zygote_auto *za)
{
	if (za->pid > 0) {
		end_child(za->pid);
		proc_spare_child(0);
		za->pid = -1;
	}
	if (za->checker_pid > 0) {
		end_checker(za->checker_pid, za->checker_start);
		za->checker_pid = -1;
	}
}
