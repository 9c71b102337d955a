/* proc: spawning, pumping, deadlines, killing, statuses. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "unit.h"
#include "util.h"

static void collect(void *ctx, const char *data, size_t len)
{
	buf_add(ctx, data, len);
}

static void test_run_and_capture(void)
{
	const char *argv[] = {"sh", "-c", "read x; echo \"got $x $MKB_T\"; echo oops >&2; exit 3", NULL};
	const char *env[] = {"MKB_T=yes", "HOME", NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.env = env;
	CHECK(child_start(&c) == 0);
	CHECK(child_feed(&c, "hello\n", 6) == 0);
	struct buf out = BUF_INIT(1024), err = BUF_INIT(1024);
	CHECK(child_pump(&c, now_ms() + 10000, collect, &out, &err, 0) == 0);
	int status = 0;
	CHECK(child_finish(&c, &status) == 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	CHECK_STR(buf_str(&out), "got hello yes\n");
	CHECK_STR(buf_str(&err), "oops\n");
	buf_release(&out);
	buf_release(&err);
}

static void test_env_removal(void)
{
	setenv("MKB_SECRET_FOR_TEST", "s3cret", 1);
	const char *argv[] = {"sh", "-c", "echo \"[${MKB_SECRET_FOR_TEST-unset}]\"", NULL};
	const char *env[] = {"MKB_SECRET_FOR_TEST", NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.env = env;
	CHECK(child_start(&c) == 0);
	child_feed(&c, "", 0);
	struct buf out = BUF_INIT(1024);
	CHECK(child_pump(&c, now_ms() + 10000, collect, &out, NULL, 0) == 0);
	int status;
	child_finish(&c, &status);
	CHECK_STR(buf_str(&out), "[unset]\n");
	buf_release(&out);
	unsetenv("MKB_SECRET_FOR_TEST");
}

static void test_missing_program(void)
{
	const char *argv[] = {"/nonexistent/mkb-no-such-program", NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	CHECK(child_start(&c) == -1);
	CHECK(c.pid == -1 && c.out_fd == -1);
}

static void test_deadline_and_group_kill(void)
{
	/* The shell's own child keeps the pipes open; the group kill ends both. */
	const char *argv[] = {"sh", "-c", "sleep 30 & sleep 30", NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.new_group = 1;
	CHECK(child_start(&c) == 0);
	child_feed(&c, "", 0);
	struct buf out = BUF_INIT(64);
	double t0 = now_ms();
	CHECK(child_pump(&c, t0 + 300, collect, &out, NULL, 0) == 1);
	CHECK(now_ms() - t0 < 2000);
	pid_t pgid = c.pid;
	child_kill(&c);
	int status = 0;
	CHECK(child_finish(&c, &status) == 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* Nobody left in the group (killed members may linger briefly as zombies
	 * until init reaps them). */
	int gone = 0;
	for (int i = 0; i < 200 && !gone; i++) {
		gone = kill(-pgid, 0) == -1;
		if (!gone) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	CHECK(gone);
	buf_release(&out);
}

static void test_exit_while_grandchild_holds_pipes(void)
{
	/* The child exits at once, but a grandchild keeps stdout open for 30 s:
	 * the pump must return soon after the child's exit, not at the deadline. */
	const char *argv[] = {"sh", "-c", "echo done; sleep 30 &", NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.new_group = 1;
	CHECK(child_start(&c) == 0);
	child_feed(&c, "", 0);
	struct buf out = BUF_INIT(64);
	double t0 = now_ms();
	CHECK(child_pump(&c, t0 + 20000, collect, &out, NULL, 0) == 0);
	CHECK(now_ms() - t0 < 5000);
	CHECK_STR(buf_str(&out), "done\n");
	int status = 0;
	CHECK(child_finish(&c, &status) == 0 && WIFEXITED(status));
	buf_release(&out);
}

static void test_describe_status(void)
{
	char s[64];
	proc_describe_status(3 << 8, s, sizeof(s));
	CHECK_STR(s, "exit code 3");
	proc_describe_status(SIGSEGV, s, sizeof(s));
	CHECK_STR(s, "signal 11 (SIGSEGV)");
}

/* Field 22 of /proc/self/stat, read by sscanf (an independent parse). */
static long long start_field(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &start) != 1)
		return -2;
	return (long long)start;
}

static void test_start_ticks(void)
{
	long long before = proc_start_ticks(getpid());
	CHECK(before == start_field());
	/* the start time, not the size: growing the process changes nothing */
	size_t big = 64u << 20;
	char *mem = malloc(big);
	CHECK(mem != NULL);
	if (mem)
		memset(mem, 1, big);
	CHECK(proc_start_ticks(getpid()) == before);
	CHECK(proc_alive(getpid(), before));
	free(mem);
	CHECK(proc_start_ticks(0x7ffffff0) == -1);
}

const struct unit_test proc_tests[] = {
	{"the start time of a process (field 22 of its stat), whatever its size", test_start_ticks},
	{"child output, stderr, exit code and env", test_run_and_capture},
	{"a bare NAME removes it from the child's env", test_env_removal},
	{"a program that cannot run is an error", test_missing_program},
	{"the deadline stops the pump; group kill ends all", test_deadline_and_group_kill},
	{"pump ends at the child's exit despite a grandchild", test_exit_while_grandchild_holds_pipes},
	{"wait statuses are described", test_describe_status},
};
const size_t proc_ntests = sizeof(proc_tests) / sizeof(proc_tests[0]);
