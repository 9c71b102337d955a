/* Spawning and supervising child processes (git's run-command idea): one
 * module owns fork/exec, pipes, process groups and reaping. */
#ifndef MKB_PROC_H
#define MKB_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "sandbox.h"

/* A child that is not ours to wait for (a zygote's: src/zygote.h): how to
 * learn that it ended and how to kill it. reap returns 1 when it has ended
 * (*status set), 0 not yet; block waits for it. */
struct child_remote {
	int (*reap)(void *ctx, int block, int *status);
	void (*kill)(void *ctx);
	void *ctx;
};

struct child {
	const char *const *argv;  /* argv[0] is looked up in PATH */
	const char *const *env;   /* NULL-terminated changes to the environment, or NULL:
				     "NAME=value" sets, a bare "NAME" removes */
	int clean_env;            /* start from an empty environment, not ours */
	const char *dir;          /* working directory, or NULL */
	int new_group;            /* run in its own session/process group */
	int pass_fd;              /* becomes the child's fd 3, or -1 */
	int out_to;               /* the child's stdout and stderr instead of pipes, or -1 */
	const struct sandbox *sandbox; /* confine the child (sandbox.h), or NULL */
	/* filled by child_start */
	pid_t pid;
	int in_fd, out_fd, err_fd; /* parent's ends; -1 once closed */
	int extra_fd;             /* another stream whose bytes join err_tail (set by
				     the caller, closed by child_finish), or -1 */
	unsigned layers;          /* sandbox layers in force in the child */
	long long err_bytes;      /* bytes read from err_fd and extra_fd */
	int reaped, status;       /* set once waitpid has collected it */
	/* set by the caller instead of child_start: someone else's child, whose
	 * pipes (in_fd, out_fd, err_fd) the caller filled; pid is for messages */
	const struct child_remote *remote;
	int fixed_layout;         /* no address-space randomisation in the child
				     (proc_fix_layout before exec) */
};

#define CHILD_INIT { NULL, NULL, 0, NULL, 0, -1, -1, NULL, -1, -1, -1, -1, -1, 0, 0, 0, 0, NULL, 0 }

/* c's environment as child_start would give it (env's changes over ours, or
 * env alone with clean_env): a NULL-terminated array the caller frees, its
 * strings borrowed. */
char **child_env(const struct child *c);

/* Programs this process executes from now on, and their children, get the
 * same memory layout every time: personality ADDR_NO_RANDOMIZE (what
 * `setarch -R` does). Async-signal-safe. 0, or -1 with errno set. */
int proc_fix_layout(void);

/* Start the child with three pipes (stdout and stderr: out_to, when set).
 * Every descriptor of ours but those is closed in the child. The child dies
 * with SIGKILL if this process dies. Returns 0, or -1 (error printed,
 * nothing left running). */
int child_start(struct child *c);

/* Write all of data to the child's stdin and close it. 0 or -1. */
int child_feed(struct child *c, const char *data, size_t len);

/* Read the child's stdout and stderr until the child has exited and its pipes
 * are drained, or the monotonic clock (now_ms) passes deadline_ms. Each
 * stdout chunk goes to on_out; stderr is kept as a bounded tail in err_tail.
 * A child that closes its pipes but keeps running, or exits leaving a
 * descendant that holds them, is still bounded by the deadline / its exit.
 * Returns 0 when the child exited, 1 on the deadline, 2 when more than
 * err_cap bytes (> 0) arrived on stderr and extra_fd, 3 when a signal caught
 * by proc_catch_interrupts() came, -1 on a poll error. */
int child_pump(struct child *c, double deadline_ms,
	       void (*on_out)(void *ctx, const char *data, size_t len), void *ctx,
	       struct buf *err_tail, long long err_cap);

/* Start c, close its stdin, collect its stdout into out and its stderr into
 * err (either may be NULL: dropped; both bounded by their caps) until it
 * exits or timeout_s passes (then it is killed). *status gets waitpid's
 * status. 0 when it exited, 1 on the timeout, 2 when a signal caught by
 * proc_catch_interrupts() came, -1 when it could not start (error printed). */
int child_run(struct child *c, double timeout_s, struct buf *out, struct buf *err, int *status);

/* Kill the child's whole process group (or the child alone) with SIGKILL. */
void child_kill(struct child *c);

/* Wait for the child; *status gets waitpid's status. Closes the pipes. */
int child_finish(struct child *c, int *status);

/* Catch SIGINT, SIGTERM and SIGHUP: child_pump then stops (returning 3) so
 * that the caller can kill what it started and record the interruption
 * before it exits. proc_interrupted() says which signal came (0: none). */
void proc_catch_interrupts(void);
int proc_interrupted(void);

/* Make this process the reaper of orphaned descendants, so that a grandchild
 * that left the child's process group still comes back to us. */
void proc_become_subreaper(void);
/* Kill and reap every remaining child of this process (after an evaluation,
 * nothing it started may outlive it) but the one spared. Returns how many
 * were killed. */
int proc_kill_descendants(void);
/* The child that proc_kill_descendants leaves alone: a zygote the command
 * started for its whole duration (zygote_auto.h), not the evaluation; 0:
 * none. */
void proc_spare_child(pid_t pid);

/* Start time of process pid in clock ticks since boot (field 22 of
 * /proc/PID/stat), or -1 when there is no such process. With the boot id
 * it names a process uniquely: pids are reused. */
long long proc_start_ticks(long long pid);
/* Is pid the process that started at start_ticks? */
int proc_alive(long long pid, long long start_ticks);
/* This boot's id (/proc/sys/kernel/random/boot_id) into out; "" if unknown. */
void proc_boot_id(char *out, size_t size);

/* Describe a waitpid status: "exit code 3", "signal 11 (SIGSEGV)". */
void proc_describe_status(int status, char *out, size_t size);

#endif
