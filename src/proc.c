#define _GNU_SOURCE
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

extern char **environ;

/* The one piece of mutable global state here: a signal handler may only set
 * a flag. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

void proc_catch_interrupts(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_interrupt; /* no SA_RESTART: poll returns EINTR */
		sigemptyset(&sa.sa_mask);
		if (sigaction(sigs[i], &sa, NULL) < 0)
			warning("cannot catch signal %d: %s", sigs[i], strerror(errno));
	}
}

int proc_interrupted(void)
{
	return interrupted;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

int proc_fix_layout(void)
{
	int cur = personality(0xffffffff); /* a query: changes nothing */
	if (cur < 0)
		return -1;
	return personality((unsigned long)cur | ADDR_NO_RANDOMIZE) < 0 ? -1 : 0;
}

/* Child side after fork: only async-signal-safe calls until exec. */
static _Noreturn void exec_child(const struct child *c, char **envp, pid_t parent, int in[2],
				 int out[2], int err[2], int report)
{
	if (c->new_group)
		setsid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent) /* the parent died before prctl took effect */
		_exit(127);
	int to_out = c->out_to >= 0 ? c->out_to : out[1];
	int to_err = c->out_to >= 0 ? c->out_to : err[1];
	/* fd 3 first, from wherever the pass_fd is (never 0-2 here) */
	if (c->pass_fd >= 0 && (dup2(c->pass_fd, 3) < 0 || fcntl(3, F_SETFD, 0) < 0))
		goto fail;
	if (dup2(in[0], 0) < 0 || dup2(to_out, 1) < 0 || dup2(to_err, 2) < 0)
		goto fail;
	/* Nothing else we hold may leak into the child (the report pipe is
	 * close-on-exec already and must stay open until exec). */
	if (close_range(c->pass_fd >= 0 ? 4 : 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		goto fail;
	if (c->dir && chdir(c->dir) < 0)
		goto fail;
	signal(SIGPIPE, SIG_DFL);
	if (c->fixed_layout && proc_fix_layout() < 0)
		goto fail;
	if (c->sandbox) {
		int layers = sandbox_apply(c->sandbox);
		ssize_t w = write(report, &layers, sizeof(layers));
		(void)w;
		if (layers < 0)
			_exit(126);
	}
	execvpe(c->argv[0], (char *const *)c->argv, envp);
fail:;
	int e = errno;
	ssize_t w = write(report, &e, sizeof(e));
	(void)w;
	_exit(127);
}

/* environ with c->env's entries replacing those of the same name. Built
 * before fork: the child may not allocate. The array is freed by the caller;
 * its strings are borrowed. */
char **child_env(const struct child *c)
{
	size_t n = 0, extra = 0;
	while (!c->clean_env && environ[n])
		n++;
	if (c->env)
		while (c->env[extra])
			extra++;
	char **envp = xcalloc(n + extra + 1, sizeof(*envp));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		size_t name_len = strcspn(environ[i], "=");
		int replaced = 0;
		for (size_t j = 0; j < extra && !replaced; j++)
			replaced = !strncmp(c->env[j], environ[i], name_len) &&
				   (c->env[j][name_len] == '=' || c->env[j][name_len] == '\0');
		if (!replaced)
			envp[k++] = environ[i];
	}
	for (size_t j = 0; j < extra; j++)
		if (strchr(c->env[j], '='))
			envp[k++] = (char *)c->env[j];
	return envp;
}

int child_start(struct child *c)
{
	/* stdin, stdout, stderr, and a pipe that reports a failed exec */
	int fds[4][2];
	int made = 0;
	for (; made < 4; made++) {
		if (pipe2(fds[made], O_CLOEXEC) < 0) {
			int e = errno;
			for (int i = 0; i < made; i++) {
				close(fds[i][0]);
				close(fds[i][1]);
			}
			return error("pipe: %s", strerror(e));
		}
	}
	int *in = fds[0], *out = fds[1], *err = fds[2], *report = fds[3];
	char **envp = child_env(c);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid != 0)
		free(envp);
	if (pid < 0) {
		int e = errno;
		for (int i = 0; i < 4; i++) {
			close(fds[i][0]);
			close(fds[i][1]);
		}
		return error("fork: %s", strerror(e));
	}
	if (pid == 0)
		exec_child(c, envp, parent, in, out, err, report[1]);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(report[1]);
	c->pid = pid;
	c->in_fd = in[1];
	c->out_fd = out[0];
	c->err_fd = err[0];
	int e = 0;
	ssize_t r;
	if (c->sandbox) {
		int layers = -1;
		do
			r = read(report[0], &layers, sizeof(layers));
		while (r < 0 && errno == EINTR);
		if (r != (ssize_t)sizeof(layers) || layers < 0) {
			r = sizeof(e);
			e = EPERM; /* the sandbox could not be set up: never run unconfined */
			goto failed;
		}
		c->layers = (unsigned)layers;
	}
	do
		r = read(report[0], &e, sizeof(e));
	while (r < 0 && errno == EINTR);
failed:
	close(report[0]);
	if (r == (ssize_t)sizeof(e)) {
		int status;
		waitpid(pid, &status, 0);
		close_fd(&c->in_fd);
		close_fd(&c->out_fd);
		close_fd(&c->err_fd);
		c->pid = -1;
		return error("cannot run '%s': %s", c->argv[0], strerror(e));
	}
	return 0;
}

int child_feed(struct child *c, const char *data, size_t len)
{
	size_t off = 0;
	/* A child that exits without reading must not kill us with SIGPIPE. */
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	int rc = 0;
	while (off < len) {
		ssize_t w = write(c->in_fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = error("cannot write to '%s': %s", c->argv[0], strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	signal(SIGPIPE, old);
	close_fd(&c->in_fd);
	return rc;
}

static int try_reap(struct child *c)
{
	if (c->reaped)
		return 1;
	if (c->remote) {
		c->reaped = c->remote->reap(c->remote->ctx, 0, &c->status) == 1;
		return c->reaped;
	}
	pid_t r = waitpid(c->pid, &c->status, WNOHANG);
	if (r == c->pid)
		c->reaped = 1;
	return c->reaped;
}

/* Read what is available on one pipe; close it at EOF. */
static void drain_one(int *fd, int is_out, void (*on_out)(void *, const char *, size_t),
		      void *ctx, struct buf *err_tail, long long *err_bytes)
{
	char chunk[8192];
	ssize_t r = read(*fd, chunk, sizeof(chunk));
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		close_fd(fd);
		return;
	}
	if (is_out)
		on_out(ctx, chunk, (size_t)r);
	else {
		*err_bytes += r;
		if (err_tail)
			buf_add_tail(err_tail, chunk, (size_t)r);
	}
}

int child_pump(struct child *c, double deadline_ms,
	       void (*on_out)(void *ctx, const char *data, size_t len), void *ctx,
	       struct buf *err_tail, long long err_cap)
{
	double exited_at = -1;
	for (;;) {
		double left = deadline_ms - now_ms();
		if (left <= 0)
			return 1;
		if (err_cap > 0 && c->err_bytes > err_cap)
			return 2;
		if (interrupted)
			return 3;
		if (c->out_fd < 0 && c->err_fd < 0 && c->extra_fd < 0) {
			if (try_reap(c))
				return 0;
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		/* Once the child is gone, keep reading only what is already buffered
		 * (a grandchild may hold the pipes open forever). */
		if (exited_at < 0 && try_reap(c))
			exited_at = now_ms();
		int timeout = exited_at >= 0 ? 50 : left > 200 ? 200 : (int)left + 1;
		struct pollfd pfd[3] = {{c->out_fd, POLLIN, 0}, {c->err_fd, POLLIN, 0},
					{c->extra_fd, POLLIN, 0}};
		int n = poll(pfd, 3, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return error("poll: %s", strerror(errno));
		}
		if (n == 0 && exited_at >= 0) {
			close_fd(&c->out_fd);
			close_fd(&c->err_fd);
			close_fd(&c->extra_fd);
			return 0;
		}
		if (c->out_fd >= 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
			drain_one(&c->out_fd, 1, on_out, ctx, err_tail, &c->err_bytes);
		if (c->err_fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
			drain_one(&c->err_fd, 0, on_out, ctx, err_tail, &c->err_bytes);
		if (c->extra_fd >= 0 && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR)))
			drain_one(&c->extra_fd, 0, on_out, ctx, err_tail, &c->err_bytes);
	}
}

static void keep_out(void *ctx, const char *data, size_t len)
{
	if (ctx)
		buf_add(ctx, data, len); /* past the cap: the rest is dropped */
}

int child_run(struct child *c, double timeout_s, struct buf *out, struct buf *err, int *status)
{
	*status = 0;
	if (child_start(c) < 0)
		return -1;
	child_feed(c, "", 0);
	int rc = child_pump(c, now_ms() + timeout_s * 1e3, keep_out, out, err, 0);
	if (rc != 0)
		child_kill(c);
	child_finish(c, status);
	return rc == 0 || rc == 1 ? rc : rc == 3 ? 2 : -1;
}

void child_kill(struct child *c)
{
	if (c->remote) {
		if (!c->reaped)
			c->remote->kill(c->remote->ctx);
		return;
	}
	if (c->pid <= 0)
		return;
	if (c->new_group)
		kill(-c->pid, SIGKILL);
	kill(c->pid, SIGKILL);
}

int child_finish(struct child *c, int *status)
{
	close_fd(&c->in_fd);
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
	close_fd(&c->extra_fd);
	if (c->remote) {
		if (!c->reaped && c->remote->reap(c->remote->ctx, 1, &c->status) != 1) {
			c->remote->kill(c->remote->ctx);
			c->status = 0;
		}
		c->reaped = 1;
		*status = c->status;
		c->pid = -1;
		return 0;
	}
	if (c->pid <= 0)
		return -1;
	pid_t r = c->pid;
	if (!c->reaped) {
		do
			r = waitpid(c->pid, &c->status, 0);
		while (r < 0 && errno == EINTR);
		c->reaped = r == c->pid;
	}
	*status = c->status;
	/* Whatever the child left in its group dies with it. */
	if (c->new_group)
		kill(-c->pid, SIGKILL);
	c->pid = -1;
	return r < 0 ? error("waitpid: %s", strerror(errno)) : 0;
}

void proc_become_subreaper(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		warning("cannot become a subreaper: %s", strerror(errno));
}

static pid_t spared; /* proc_spare_child's */

void proc_spare_child(pid_t pid)
{
	spared = pid;
}

/* Children of this process as listed by /proc/self/task/<tid>/children,
 * but the one spared. */
static size_t list_children(pid_t *out, size_t max)
{
	size_t n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		if (e->d_name[0] == '.')
			continue;
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/children", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		long pid;
		while (n < max && fscanf(f, "%ld", &pid) == 1)
			if (spared <= 0 || (pid_t)pid != spared)
				out[n++] = (pid_t)pid;
		fclose(f);
	}
	closedir(d);
	return n;
}

int proc_kill_descendants(void)
{
	int killed = 0;
	/* Killed children's own children are re-parented to us; loop until none. */
	for (int round = 0; round < 100; round++) {
		pid_t pids[256];
		size_t n = list_children(pids, ARRAY_SIZE(pids));
		if (!n)
			break;
		for (size_t i = 0; i < n; i++) {
			if (kill(pids[i], SIGKILL) == 0)
				killed++;
			int status;
			while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
				;
		}
	}
	return killed;
}

long long proc_start_ticks(long long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%lld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after the command name in parentheses (which may hold spaces), field
	 * 3 is the state; the start time is field 22 */
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	p++;
	for (int field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoll(p + 1, NULL, 10) : -1;
}

int proc_alive(long long pid, long long start_ticks)
{
	return pid > 0 && proc_start_ticks(pid) == start_ticks;
}

void proc_boot_id(char *out, size_t size)
{
	out[0] = '\0';
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(out, (int)size, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

void proc_describe_status(int status, char *out, size_t size)
{
	if (WIFEXITED(status))
		snprintf(out, size, "exit code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, size, "signal %d (SIG%s)", WTERMSIG(status),
			 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
	else
		snprintf(out, size, "status 0x%x", status);
}
