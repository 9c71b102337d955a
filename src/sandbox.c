#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <time.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

/* Landlock's UAPI, spelled out: the build machines' headers predate the
 * network (ABI 4), device ioctl (ABI 5) and scope (ABI 6) parts. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_ABI1_ALL ((1ULL << 13) - 1) /* execute .. make_sym */
#define LL_FS_REFER (1ULL << 13)          /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)       /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15)      /* ABI 5 */
#define LL_FS_FILE_ONLY (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | \
			 LL_FS_IOCTL_DEV)
#define LL_NET_BIND_TCP (1ULL << 0)       /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_RULE_NET_PORT 2
struct ll_net_port {
	uint64_t allowed_access;
	uint64_t port;
};

static const char *const layer_names[SB_LAYER_COUNT] = {
	"userns", "mountns", "pidns", "netns", "ipcns", "utsns",
	"rlimits", "no_new_privs", "landlock_fs", "landlock_net", "landlock_scope", "seccomp",
	"cgroup", "spec_allow",
};

void sandbox_init(struct sandbox *sb)
{
	memset(sb, 0, sizeof(*sb));
}

/* A tree already listed is not listed again. */
static int allow(const char **list, size_t *n, const char *path, const char *what)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(list[i], path))
			return 0;
	if (*n >= SANDBOX_MAX_PATHS)
		return error("sandbox: more than %d %s trees", SANDBOX_MAX_PATHS, what);
	list[(*n)++] = path;
	return 0;
}

int sandbox_allow_read(struct sandbox *sb, const char *path)
{
	return allow(sb->read, &sb->nread, path, "readable");
}

int sandbox_allow_write(struct sandbox *sb, const char *path)
{
	return allow(sb->write, &sb->nwrite, path, "writable");
}

int sandbox_allow_system(struct sandbox *sb)
{
	static const char *const trees[] = {
		"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
	};
	int rc = 0;
	for (size_t i = 0; i < ARRAY_SIZE(trees); i++)
		rc |= sandbox_allow_read(sb, trees[i]);
	return rc;
}

int sandbox_parse_layers(const char *list, unsigned *mask)
{
	*mask = 0;
	const char *p = list;
	while (p && *p) {
		size_t n = strcspn(p, ",");
		int found = 0;
		for (int i = 0; i < SB_LAYER_COUNT && !found; i++) {
			const char *name = layer_names[i];
			/* "pid" names "pidns", "landlock" every landlock layer */
			size_t m = strlen(name);
			if ((n == m && !strncmp(p, name, n)) ||
			    (n + 2 == m && !strncmp(p, name, n) && !strcmp(name + n, "ns")) ||
			    (n == 8 && !strncmp(p, "landlock", 8) && !strncmp(name, "landlock", 8))) {
				*mask |= 1u << i;
				found = n != 8 || strncmp(p, "landlock", 8);
			}
		}
		if (!found && !(n == 8 && !strncmp(p, "landlock", 8)))
			return error("unknown sandbox layer '%.*s'", (int)n, p);
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

void sandbox_describe(unsigned layers, char *out, size_t size)
{
	size_t used = 0;
	if (size)
		out[0] = '\0';
	for (int i = 0; i < SB_LAYER_COUNT; i++) {
		if (!(layers & (1u << i)))
			continue;
		int n = snprintf(out + used, size - used, "%s%s", used ? "," : "", layer_names[i]);
		if (n < 0 || (size_t)n >= size - used)
			return;
		used += (size_t)n;
	}
}

/* ---- pieces applied in the child (async-signal-safe only) ----------------- */

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* "0 <id> 1\n" without stdio. */
static void id_map_line(char *out, unsigned id)
{
	char digits[16];
	int n = 0;
	do {
		digits[n++] = (char)('0' + id % 10);
		id /= 10;
	} while (id && n < 15);
	char *p = out;
	*p++ = '0';
	*p++ = ' ';
	while (n)
		*p++ = digits[--n];
	*p++ = ' ';
	*p++ = '1';
	*p++ = '\n';
	*p = '\0';
}

static unsigned enter_namespaces(const struct sandbox *sb)
{
	unsigned want = (SB_USERNS | SB_MOUNTNS | SB_PIDNS | SB_NETNS | SB_IPCNS | SB_UTSNS) & ~sb->disable;
	if (sb->allow_network)
		want &= ~SB_NETNS;
	if (!(want & SB_USERNS) && geteuid() != 0)
		want = 0; /* without a user namespace the others need privilege */
	uid_t uid = geteuid();
	gid_t gid = getegid();
	static const struct { unsigned layer; int flag; } flags[] = {
		{SB_USERNS, CLONE_NEWUSER}, {SB_MOUNTNS, CLONE_NEWNS}, {SB_PIDNS, CLONE_NEWPID},
		{SB_NETNS, CLONE_NEWNET}, {SB_IPCNS, CLONE_NEWIPC}, {SB_UTSNS, CLONE_NEWUTS},
	};
	int all = 0;
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (want & flags[i].layer)
			all |= flags[i].flag;
	if (all && unshare(all) == 0) {
		/* fall through with every namespace */
	} else if ((want & SB_USERNS) && geteuid() == 0 && unshare(all & ~CLONE_NEWUSER) == 0) {
		want &= ~SB_USERNS; /* root without user namespaces: the rest still work */
	} else {
		/* one at a time: keep what the kernel allows */
		unsigned got = 0;
		for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
			if ((want & flags[i].layer) && unshare(flags[i].flag) == 0)
				got |= flags[i].layer;
		want = got;
	}
	if (want & SB_USERNS) {
		char line[40];
		id_map_line(line, uid);
		if (write_file("/proc/self/uid_map", line) < 0)
			return want; /* unmapped: still confined, but mounts will fail */
		/* A group mapping that fails leaves the overflow group: still
		 * confined, only group-readable files are lost; nothing to undo. */
		id_map_line(line, gid);
		if (write_file("/proc/self/setgroups", "deny") == 0)
			(void)write_file("/proc/self/gid_map", line);
	}
	if (want & SB_MOUNTNS) {
		/* Our mounts (the new /proc) must not propagate back to the host. */
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			want &= ~SB_MOUNTNS;
	}
	return want;
}

/* Wait for pid; its wait status, or -1. */
static int wait_status(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

/* End this process the way status says (a signal is raised again). */
static _Noreturn void exit_like(int status)
{
	if (status >= 0 && WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		prctl(PR_SET_DUMPABLE, 0); /* no core file of ours */
		kill(getpid(), WTERMSIG(status));
	}
	_exit(status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

/* The pid namespace takes effect for children. Three processes: this one
 * stays outside and waits; its child becomes the namespace's init (pid 1),
 * which mounts the namespace's /proc, waits, and takes every process of the
 * namespace with it when it ends; init's child (pid 2) returns from here to
 * exec. The program is not pid 1 on purpose: pid 1 ignores signals it has
 * no handler for, so a kernel's SIGSEGV would not end it. init hands the
 * program's wait status to the outside process through a pipe, which ends
 * the same way. Only the returning process comes back, with 1 when /proc
 * is the namespace's own. */
static int enter_pid_namespace(int mount_proc)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		_exit(126);
	pid_t init = fork();
	if (init < 0)
		_exit(126);
	if (init > 0) { /* outside: hold nothing, so the exec report reaches our parent */
		close_range(0, (unsigned)p[0] - 1, 0);
		close_range((unsigned)p[0] + 1, ~0U, 0);
		int status = -1;
		ssize_t r = read(p[0], &status, sizeof(status));
		int own = wait_status(init);
		exit_like(r == (ssize_t)sizeof(status) ? status : own);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(p[0]);
	int own_proc = mount_proc &&
		       mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0;
	pid_t prog = fork();
	if (prog < 0)
		_exit(126);
	if (prog == 0) {
		close(p[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		return own_proc;
	}
	close_range(0, (unsigned)p[1] - 1, 0);
	close_range((unsigned)p[1] + 1, ~0U, 0);
	int status = wait_status(prog);
	ssize_t w = write(p[1], &status, sizeof(status));
	(void)w;
	_exit(0);
}

static int set_limit(int resource, long long value)
{
	struct rlimit r = {(rlim_t)value, (rlim_t)value};
	return value > 0 ? setrlimit(resource, &r) : 0;
}

static int apply_rlimits(const struct sandbox *sb)
{
	int rc = 0;
	rc |= set_limit(sb->mem_data ? RLIMIT_DATA : RLIMIT_AS, sb->mem_bytes);
	rc |= set_limit(RLIMIT_FSIZE, sb->file_bytes);
	rc |= set_limit(RLIMIT_NOFILE, sb->open_files);
	rc |= set_limit(RLIMIT_NPROC, sb->processes);
	struct rlimit none = {0, 0};
	rc |= setrlimit(RLIMIT_CORE, &none);
	/* CPUs: the first sb->cpus of those we may use */
	cpu_set_t set;
	if (sb->cpus > 0 && sched_getaffinity(0, sizeof(set), &set) == 0) {
		int kept = 0;
		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (!CPU_ISSET(c, &set))
				continue;
			if (kept < sb->cpus)
				kept++;
			else
				CPU_CLR(c, &set);
		}
		rc |= sched_setaffinity(0, sizeof(set), &set);
	}
	return rc;
}

static int landlock_rule(int ruleset, const char *path, uint64_t access, uint64_t handled)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return 0; /* a tree that does not exist here grants nothing */
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= LL_FS_FILE_ONLY;
	struct ll_path_beneath rule = {access & handled, fd};
	long rc = syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0);
	close(fd);
	return rc < 0 ? -1 : 0;
}

/* Returns the Landlock layers applied, or -1 when the ruleset could not be
 * completed (never exec half-confined). */
static int apply_landlock(const struct sandbox *sb, int own_proc)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0;
	struct ll_ruleset_attr attr = {0, 0, 0};
	unsigned layers = 0;
	if (!(sb->disable & SB_LANDLOCK_FS)) {
		attr.handled_access_fs = LL_FS_ABI1_ALL;
		if (abi >= 2)
			attr.handled_access_fs |= LL_FS_REFER;
		if (abi >= 3)
			attr.handled_access_fs |= LL_FS_TRUNCATE;
		if (abi >= 5)
			attr.handled_access_fs |= LL_FS_IOCTL_DEV;
		layers |= SB_LANDLOCK_FS;
	}
	if (abi >= 4 && !sb->allow_network && !(sb->disable & SB_LANDLOCK_NET)) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		layers |= SB_LANDLOCK_NET;
	}
	if (abi >= 6 && !(sb->disable & SB_LANDLOCK_SCOPE)) {
		attr.scoped = LL_SCOPE_SIGNAL | LL_SCOPE_ABSTRACT_UNIX;
		layers |= SB_LANDLOCK_SCOPE;
	}
	if (!layers)
		return 0;
	int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return -1;
	uint64_t fs = attr.handled_access_fs;
	uint64_t read = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
	int rc = 0;
	if (fs) {
		for (size_t i = 0; i < sb->nread && rc == 0; i++)
			rc = landlock_rule(ruleset, sb->read[i], read, fs);
		for (size_t i = 0; i < sb->nwrite && rc == 0; i++)
			rc = landlock_rule(ruleset, sb->write[i], fs, fs);
		/* Threads' names. In our own pid namespace with its own /proc, the
		 * whole /proc holds only our processes, and what is global in it
		 * needs capabilities of the host's user namespace: writable. Else
		 * only this process's task folder, resolved here, in the process
		 * that will exec (a rule binds to the inode it names). */
		if (rc == 0 && sb->thread_names)
			rc = landlock_rule(ruleset, own_proc ? "/proc" : "/proc/self/task",
					   LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_READ_DIR, fs);
	}
	/* An external agent's relay: TCP on its one port (the namespace holds
	 * nothing else to reach). */
	if (rc == 0 && sb->inet_port > 0 && attr.handled_access_net) {
		struct ll_net_port rule = {LL_NET_BIND_TCP | LL_NET_CONNECT_TCP, (uint64_t)sb->inet_port};
		if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &rule, 0) < 0)
			rc = -1;
	}
	if (rc == 0 && syscall(__NR_landlock_restrict_self, ruleset, 0) < 0)
		rc = -1;
	close(ruleset);
	return rc < 0 ? -1 : (int)layers;
}

#if defined(__x86_64__)
#define SECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ARCH AUDIT_ARCH_AARCH64
#endif

/* System calls an untrusted process never needs, and that reach other
 * processes or the kernel's configuration. */
static const int denied_syscalls[] = {
	__NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev, __NR_mount, __NR_umount2,
	__NR_pivot_root, __NR_setns, __NR_unshare, __NR_bpf, __NR_perf_event_open,
	__NR_kexec_load, __NR_init_module, __NR_finit_module, __NR_delete_module, __NR_keyctl,
	__NR_add_key, __NR_request_key, __NR_userfaultfd, __NR_acct, __NR_swapon, __NR_swapoff,
	__NR_reboot, __NR_settimeofday, __NR_clock_settime, __NR_open_by_handle_at,
	__NR_name_to_handle_at, __NR_quotactl, __NR_syslog, __NR_pidfd_getfd,
#ifdef __NR_kexec_file_load
	__NR_kexec_file_load,
#endif
#ifdef __NR_iopl
	__NR_iopl, __NR_ioperm,
#endif
#ifdef __NR_fsopen
	__NR_fsopen, __NR_fsmount, __NR_move_mount, __NR_open_tree,
#endif
};

static int apply_seccomp(int inet, int spec_allow)
{
#ifdef SECCOMP_ARCH
	/* arch check, x32 check, one test per denied call, socket(): AF_UNIX only */
	struct sock_filter f[8 + 2 * ARRAY_SIZE(denied_syscalls) + 8];
	size_t n = 0;
	const unsigned deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_ARCH, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deny);
#endif
	for (size_t i = 0; i < ARRAY_SIZE(denied_syscalls); i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)denied_syscalls[i], 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deny);
		if (n + 8 > ARRAY_SIZE(f))
			return -1;
	}
	/* socket(): AF_UNIX allowed (and AF_INET for a relay's loopback), any
	 * other family refused; then allow all */
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 5);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 2, 0);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, inet ? AF_INET : AF_UNIX, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EAFNOSUPPORT & SECCOMP_RET_DATA));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {(unsigned short)n, f};
#if defined(SYS_seccomp) && defined(SECCOMP_FILTER_FLAG_SPEC_ALLOW)
	if (spec_allow) {
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog) == 0)
			return 2;
		if (errno != EINVAL)
			return -1; /* EINVAL: a kernel before 4.17, without the flag */
	}
#else
	(void)spec_allow;
#endif
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0 ? -1 : 0;
#else
	return 1; /* not built for this architecture: skipped */
#endif
}

int sandbox_apply(const struct sandbox *sb)
{
	/* Into the tree's cgroup first, while we are still ourselves. */
	unsigned in_cgroup = 0;
	if (sb->cgroup[0] && !(sb->disable & SB_CGROUP)) {
		char procs[sizeof(sb->cgroup) + 16];
		size_t n = strlen(sb->cgroup);
		memcpy(procs, sb->cgroup, n);
		memcpy(procs + n, "/cgroup.procs", sizeof("/cgroup.procs"));
		if (write_file(procs, "0\n") < 0)
			return -1; /* a cgroup was made for us: never run outside it */
		in_cgroup = SB_CGROUP;
	}
	unsigned layers = enter_namespaces(sb) | in_cgroup;
	/* With a /proc of the new namespace, other processes are invisible. */
	int own_proc = 0;
	if (layers & SB_PIDNS)
		own_proc = enter_pid_namespace(layers & SB_MOUNTNS);
	if (!(sb->disable & SB_RLIMITS)) {
		if (apply_rlimits(sb) < 0)
			return -1;
		layers |= SB_RLIMITS;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	layers |= SB_NO_NEW_PRIVS;
	int ll = apply_landlock(sb, own_proc);
	if (ll < 0)
		return -1;
	layers |= (unsigned)ll;
	if (!(sb->disable & SB_SECCOMP)) {
		int sc = apply_seccomp(sb->inet_port > 0, !(sb->disable & SB_SPEC_ALLOW));
		if (sc < 0)
			return -1;
		if (sc == 0 || sc == 2)
			layers |= SB_SECCOMP;
		if (sc == 2)
			layers |= SB_SPEC_ALLOW;
	}
	return (int)layers;
}

unsigned sandbox_available(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return 0;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return 0;
	}
	if (pid == 0) {
		struct sandbox sb;
		sandbox_init(&sb);
		int layers = sandbox_apply(&sb);
		ssize_t w = write(p[1], &layers, sizeof(layers));
		(void)w;
		_exit(0);
	}
	close(p[1]);
	int layers = 0;
	ssize_t r = read(p[0], &layers, sizeof(layers));
	close(p[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return r == (ssize_t)sizeof(layers) && layers > 0 ? (unsigned)layers : 0;
}

/* ---- the pids cgroup (parent side) ----------------------------------------- */

/* Our own cgroup path in the hierarchy named by controller ("pids" for v1,
 * "" for the v2 line "0::"), into out. 0 or -1. */
static int own_cgroup(const char *controller, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -1;
	char line[512];
	int rc = -1;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *a = strchr(line, ':');
		char *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		const char *ctrls = a + 1;
		int match = !*controller ? !strcmp(line, "0") && !*ctrls : 0;
		for (const char *c = ctrls; *controller && *c && !match;) {
			size_t len = strcspn(c, ",");
			match = len == strlen(controller) && !strncmp(c, controller, len);
			c += len + (c[len] == ',');
		}
		if (match && (size_t)snprintf(out, size, "%s", b + 1) < size)
			rc = 0;
	}
	fclose(f);
	return rc;
}

int sandbox_cgroup_create(struct sandbox *sb)
{
	static unsigned serial;
	sb->cgroup[0] = '\0';
	if (sb->max_tasks <= 0 || (sb->disable & SB_CGROUP))
		return -1;
	char own[256], dir[256], file[320];
	const char *bases[][2] = {{"/sys/fs/cgroup/pids", "pids"}, {"/sys/fs/cgroup", ""}};
	for (size_t i = 0; i < ARRAY_SIZE(bases); i++) {
		if (own_cgroup(bases[i][1], own, sizeof(own)) < 0)
			continue;
		int n = snprintf(dir, sizeof(dir), "%s%s%smkb-%d-%u", bases[i][0], own,
				 own[strlen(own) - 1] == '/' ? "" : "/", (int)getpid(), serial++);
		if (n < 0 || (size_t)n >= sizeof(dir) || mkdir(dir, 0755) < 0)
			continue;
		char max[32];
		snprintf(max, sizeof(max), "%ld\n", sb->max_tasks);
		snprintf(file, sizeof(file), "%s/pids.max", dir);
		if (write_file(file, max) == 0) {
			memcpy(sb->cgroup, dir, (size_t)n + 1);
			return 0;
		}
		rmdir(dir);
	}
	return -1;
}

void sandbox_cgroup_remove(struct sandbox *sb)
{
	if (!sb->cgroup[0])
		return;
	char procs[320];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", sb->cgroup);
	for (int round = 0; round < 100; round++) {
		FILE *f = fopen(procs, "re");
		int left = 0;
		long pid;
		while (f && fscanf(f, "%ld", &pid) == 1) {
			kill((pid_t)pid, SIGKILL);
			left++;
		}
		if (f)
			fclose(f);
		if (!left && rmdir(sb->cgroup) == 0)
			break;
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	sb->cgroup[0] = '\0';
}
