/* Confinement of an untrusted process (a candidate kernel's process, an
 * agent's commands): one module for both, applied in the child between fork
 * and exec. Every layer the kernel offers is used; a layer the kernel lacks
 * is skipped and the applied set is reported, so a verdict can say what was
 * in force (docs/judge.md, "Confinement").
 *
 * Layers: user, mount, pid, network, IPC and UTS namespaces (a fresh /proc
 * for the new pid namespace); resource limits; no_new_privs; Landlock
 * (file access limited to the listed trees, no TCP, no signals or abstract
 * sockets outside the sandbox); a seccomp filter (no ptrace, no access to
 * other processes' memory, no mounts, no kernel modules, no sockets but
 * AF_UNIX). */
#ifndef MKB_SANDBOX_H
#define MKB_SANDBOX_H

#include <stddef.h>

enum sandbox_layer {
	SB_USERNS = 1 << 0,
	SB_MOUNTNS = 1 << 1,
	SB_PIDNS = 1 << 2,
	SB_NETNS = 1 << 3,
	SB_IPCNS = 1 << 4,
	SB_UTSNS = 1 << 5,
	SB_RLIMITS = 1 << 6,
	SB_NO_NEW_PRIVS = 1 << 7,
	SB_LANDLOCK_FS = 1 << 8,
	SB_LANDLOCK_NET = 1 << 9,
	SB_LANDLOCK_SCOPE = 1 << 10,
	SB_SECCOMP = 1 << 11,
	SB_CGROUP = 1 << 12,  /* a pids cgroup holding the whole tree (fork bombs) */
	/* Not a layer but how seccomp was installed: with SECCOMP_FILTER_FLAG_SPEC_ALLOW,
	 * so the kernel does not force its speculation mitigations (SSBD, STIBP)
	 * on the confined process, which slow the candidate's own code (timed).
	 * They guard a process against others in its address space: here the
	 * candidate only. "spec_allow" in the disable list installs without it. */
	SB_SPEC_ALLOW = 1 << 13,
};
#define SB_LAYER_COUNT 14

#define SANDBOX_MAX_PATHS 32

struct sandbox {
	const char *read[SANDBOX_MAX_PATHS];  /* trees readable and executable */
	const char *write[SANDBOX_MAX_PATHS]; /* trees readable and writable */
	size_t nread, nwrite;
	int allow_network;  /* keep the host's network (diagnosis only) */
	int inet_port;      /* > 0: TCP sockets allowed, to and from this port only
			       (Landlock), in the empty network namespace: an
			       external agent's relay to its model (mkb-relay) */
	int thread_names;   /* may write /proc/<own pid>/task/<tid>/comm: CUDA's
			       cuInit names its threads and fails (error 304)
			       when it cannot */
	unsigned disable;   /* layers not to apply (diagnosis: $MKB_SANDBOX_OFF) */
	/* Resource limits; 0 leaves one as it is. */
	long long mem_bytes;  /* address space (RLIMIT_AS), or data with mem_data */
	int mem_data;         /* limit RLIMIT_DATA instead: CUDA reserves huge
				 address ranges that RLIMIT_AS would refuse */
	long long file_bytes; /* largest file it may write (RLIMIT_FSIZE) */
	long open_files;      /* RLIMIT_NOFILE */
	long processes;       /* RLIMIT_NPROC (not enforced for root: see docs) */
	int cpus;             /* pinned to this many of the CPUs it may use (part of
				 the rlimits layer); 0: all */
	/* Tasks (processes and threads) of the whole tree, counted by a pids
	 * cgroup that sandbox_cgroup_create makes (RLIMIT_NPROC does not hold
	 * root back). 0: none. */
	long max_tasks;
	char cgroup[256];     /* the cgroup's folder, "" when none was made */
};

void sandbox_init(struct sandbox *sb);
/* Add a tree (borrowed: it must outlive the sandbox; one already listed is
 * not added twice); paths that do not exist are skipped at apply time. -1
 * when full. */
int sandbox_allow_read(struct sandbox *sb, const char *path);
int sandbox_allow_write(struct sandbox *sb, const char *path);
/* The system's trees, readable: /usr, /lib*, /bin, /sbin, /etc, /opt, /proc,
 * /sys (what any program of the machine needs). 0, or -1 when full. */
int sandbox_allow_system(struct sandbox *sb);
/* Parse a comma list of layer names ("pid,net") into a mask; -1 on an
 * unknown name. */
int sandbox_parse_layers(const char *list, unsigned *mask);

/* Before starting the child: make a pids cgroup for its tree with
 * sb->max_tasks (where cgroups can be written: v1's pids hierarchy, or v2
 * with the pids controller). 0 made, -1 not available (not an error: the
 * layer is then not in force). */
int sandbox_cgroup_create(struct sandbox *sb);
/* After the child is gone: kill whatever is left in the cgroup, remove it. */
void sandbox_cgroup_remove(struct sandbox *sb);

/* In the child after fork, before exec: apply every layer that can be
 * applied. Only async-signal-safe calls (no allocation). With a pid
 * namespace this forks twice: the process that returns runs inside it under
 * a small init, and the process our parent started waits outside and ends
 * the way the returning one ends. Returns the mask of layers in force, or -1 when a
 * layer that was available failed half-way (the child must not exec). */
int sandbox_apply(const struct sandbox *sb);

/* "userns,mountns,..." for a mask, into out (always terminated). */
void sandbox_describe(unsigned layers, char *out, size_t size);

/* The layers this machine offers, probed once by applying them in a
 * throwaway child. */
unsigned sandbox_available(void);

#endif
