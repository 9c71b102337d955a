#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"
#include "sandbox_spec.h"
#include "unit.h"
#include "util.h"

static void test_layer_names(void)
{
	unsigned mask = 0;
	CHECK(sandbox_parse_layers("pid,net,seccomp", &mask) == 0);
	CHECK(mask == (SB_PIDNS | SB_NETNS | SB_SECCOMP));
	CHECK(sandbox_parse_layers("landlock", &mask) == 0);
	CHECK(mask == (SB_LANDLOCK_FS | SB_LANDLOCK_NET | SB_LANDLOCK_SCOPE));
	CHECK(sandbox_parse_layers("userns,landlock_net", &mask) == 0);
	CHECK(mask == (SB_USERNS | SB_LANDLOCK_NET));
	CHECK(sandbox_parse_layers("pid,bogus", &mask) < 0);
	char out[256];
	sandbox_describe(SB_USERNS | SB_SECCOMP, out, sizeof(out));
	CHECK_STR(out, "userns,seccomp");
	sandbox_describe(0, out, sizeof(out));
	CHECK_STR(out, "");
	sandbox_describe(~0u, out, 10); /* bounded: cut, still terminated */
	CHECK(strlen(out) < 10);
}

/* In a child: apply sb, run probe (0, or the errno it met), and report it
 * with the layers that were in force. -1 when the child did not report. */
static int probe_under_sandbox(const struct sandbox *sb, int (*probe)(const void *),
			       const void *arg, unsigned *layers)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		int result[2] = {sandbox_apply(sb), 0};
		result[1] = probe(arg);
		ssize_t w = write(p[1], result, sizeof(result));
		_exit(w == (ssize_t)sizeof(result) ? 0 : 1);
	}
	close(p[1]);
	int result[2] = {-1, -1};
	ssize_t r = read(p[0], result, sizeof(result));
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	if (r != (ssize_t)sizeof(result))
		return -1;
	*layers = (unsigned)result[0];
	return result[1];
}

static int open_for_reading(const void *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? 0 : errno;
}

static int open_under_sandbox(const char *allowed, const char *probe, unsigned *layers)
{
	struct sandbox sb;
	sandbox_init(&sb);
	sandbox_allow_read(&sb, allowed);
	return probe_under_sandbox(&sb, open_for_reading, probe, layers);
}

static void test_files_outside_the_allowed_trees_are_refused(void)
{
	char *dir = unit_tmpdir();
	unit_write(dir, "inside/ok.txt", "yes");
	unit_write(dir, "outside/secret.txt", "no");
	char *inside = xstrfmt("%s/inside", dir);
	char *ok = xstrfmt("%s/inside/ok.txt", dir);
	char *secret = xstrfmt("%s/outside/secret.txt", dir);
	unsigned layers = 0;
	CHECK(open_under_sandbox(inside, ok, &layers) == 0);
	if (layers & SB_LANDLOCK_FS)
		CHECK(open_under_sandbox(inside, secret, &layers) == EACCES);
	else
		fprintf(stderr, "  (no Landlock here: file refusal not checked)\n");
	CHECK(layers & SB_NO_NEW_PRIVS);
	free(inside);
	free(ok);
	free(secret);
	unit_rmtree(dir);
	free(dir);
}

/* CUDA names its threads through /proc/<pid>/task/<tid>/comm: allowed with
 * thread_names, refused without (where Landlock is in force). */
static int name_this_thread(const void *unused)
{
	(void)unused;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)gettid());
	/* as fopen(path, "w") opens it: truncating needs its own right */
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, "mkb-test", 8) == 8;
	return ok ? 0 : errno;
}

static int name_thread_under_sandbox(int thread_names, unsigned *layers)
{
	struct sandbox sb;
	sandbox_init(&sb);
	sb.thread_names = thread_names;
	sandbox_allow_read(&sb, "/proc");
	return probe_under_sandbox(&sb, name_this_thread, NULL, layers);
}

static void test_thread_names_for_cuda(void)
{
	unsigned layers = 0;
	CHECK(name_thread_under_sandbox(1, &layers) == 0);
	if (layers & SB_LANDLOCK_FS)
		CHECK(name_thread_under_sandbox(0, &layers) == EACCES);
}

static void test_available_layers_include_the_basics(void)
{
	unsigned layers = sandbox_available();
	CHECK(layers & SB_RLIMITS);
	CHECK(layers & SB_NO_NEW_PRIVS);
}

/* What the judge writes for the zygote is what the zygote's child applies. */
static void test_spec_round_trip(void)
{
	struct sandbox sb, back;
	sandbox_init(&sb);
	CHECK(sandbox_allow_system(&sb) == 0);
	CHECK(sandbox_allow_read(&sb, "/opt/dsl site") == 0);
	CHECK(sandbox_allow_write(&sb, "/tmp/mkb-candidate-x") == 0);
	sb.thread_names = 1;
	sb.disable = SB_PIDNS | SB_SPEC_ALLOW;
	sb.mem_bytes = 96LL << 30;
	sb.mem_data = 1;
	sb.file_bytes = 1 << 30;
	sb.open_files = 1024;
	sb.processes = 256;
	sb.inet_port = 8123;
	sb.max_tasks = 77;
	memcpy(sb.cgroup, "/sys/fs/cgroup/x", sizeof("/sys/fs/cgroup/x"));
	struct buf text = BUF_INIT(1 << 16);
	CHECK(sandbox_spec_write(&sb, &text) == 0);
	char *copy = buf_detach(&text);
	CHECK(sandbox_spec_read(&back, copy) == 0);
	CHECK(back.nread == sb.nread && back.nwrite == sb.nwrite);
	for (size_t i = 0; i < sb.nread && i < back.nread; i++)
		CHECK_STR(back.read[i], sb.read[i]);
	CHECK_STR(back.write[0], "/tmp/mkb-candidate-x");
	CHECK(back.thread_names == 1 && back.disable == sb.disable);
	CHECK(back.mem_bytes == sb.mem_bytes && back.mem_data == 1);
	CHECK(back.file_bytes == sb.file_bytes && back.open_files == 1024);
	CHECK(back.processes == 256 && back.inet_port == 8123 && back.max_tasks == 77);
	CHECK(back.allow_network == 0 && back.cpus == 0);
	CHECK_STR(back.cgroup, "/sys/fs/cgroup/x");
	free(copy);

	/* refused: a path with a newline out, unknown keys and bad numbers in */
	CHECK(sandbox_allow_read(&sb, "/tmp/a\nwrite /") == 0);
	CHECK(sandbox_spec_write(&sb, &text) < 0);
	buf_release(&text);
	char bad1[] = "read /usr\nbogus 1\n", bad2[] = "mem_bytes 12x\n", bad3[] = "network 2\n",
	     bad4[] = "noval\n";
	CHECK(sandbox_spec_read(&back, bad1) < 0);
	CHECK(sandbox_spec_read(&back, bad2) < 0);
	CHECK(sandbox_spec_read(&back, bad3) < 0);
	CHECK(sandbox_spec_read(&back, bad4) < 0);
}

const struct unit_test sandbox_tests[] = {
	{"sandbox spec: written by the judge, read back by the zygote's child", test_spec_round_trip},
	{"sandbox layer names parse and print", test_layer_names},
	{"sandbox refuses files outside its trees", test_files_outside_the_allowed_trees_are_refused},
	{"sandbox applies at least limits and no_new_privs", test_available_layers_include_the_basics},
	{"sandbox lets CUDA name its threads only when asked", test_thread_names_for_cuda},
};
const size_t sandbox_ntests = ARRAY_SIZE(sandbox_tests);
