#define _GNU_SOURCE
#include "terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mkb_limits.h"
#include "util.h"

#define SESSION "main"

/* The server's configuration: nothing from the client's environment reaches
 * the shell (update-environment empty), no status line on the screen the
 * model reads, and the pane keeps its scrollback. */
static char *config_text(const struct terminal_opts *o)
{
	return xstrfmt("set -g update-environment ''\n"
		       "set -g status off\n"
		       "set -g history-limit %ld\n"
		       "set -g default-terminal screen\n"
		       "set -g escape-time 0\n"
		       "set -g remain-on-exit off\n",
		       o->history);
}

/* Run one tmux client command, confined like the server. Its stdout goes
 * to out (NULL: dropped). 0, or -1 (error printed with what tmux said). */
static int client(struct terminal *t, const char *const *args, size_t nargs, struct buf *out,
		  int quiet)
{
	const char **argv = xcalloc(nargs + 4, sizeof(*argv));
	size_t n = 0;
	argv[n++] = "tmux";
	argv[n++] = "-S";
	argv[n++] = t->socket;
	for (size_t i = 0; i < nargs; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	/* Confined like the server, but outside the tree's pids cgroup: a
	 * fork bomb of the agent's must not stop us reading its screen. */
	struct sandbox sb = *t->opts.sandbox;
	sb.cgroup[0] = '\0';
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.env = t->opts.env;
	c.clean_env = 1;
	c.new_group = 1;
	c.sandbox = &sb;
	struct buf err = BUF_INIT(TERMINAL_CLIENT_ERR_MAX);
	int status = 0;
	int rc = child_run(&c, TERMINAL_CLIENT_TIMEOUT_S, out, &err, &status);
	free(argv);
	if (rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		buf_release(&err);
		return 0;
	}
	if (!quiet) {
		char how[64];
		proc_describe_status(status, how, sizeof(how));
		utf8_sanitize(err.data ? err.data : (char[]){0});
		error("tmux %s: %s%s%.*s", args[0], rc == 1 ? "no answer in time" : how,
		      err.len ? ": " : "", (int)strcspn(buf_str(&err), "\n"), buf_str(&err));
	}
	buf_release(&err);
	return -1;
}

static int new_session(struct terminal *t)
{
	char cols[16], rows[16];
	snprintf(cols, sizeof(cols), "%d", t->opts.cols);
	snprintf(rows, sizeof(rows), "%d", t->opts.rows);
	const char *args[] = {"new-session", "-d", "-s", SESSION, "-x", cols, "-y", rows,
			      "-c", t->opts.workdir, t->opts.shell};
	return client(t, args, ARRAY_SIZE(args), NULL, 0);
}

static int has_session(struct terminal *t)
{
	const char *args[] = {"has-session", "-t", SESSION};
	return client(t, args, ARRAY_SIZE(args), NULL, 1) == 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int terminal_start(struct terminal *t, const struct terminal_opts *o)
{
	memset(t, 0, sizeof(*t));
	t->server.pid = -1;
	t->opts = *o;
	if (!t->opts.shell)
		t->opts.shell = "bash --noprofile --norc";
	if (t->opts.cols <= 0)
		t->opts.cols = TERMINAL_COLS;
	if (t->opts.rows <= 0)
		t->opts.rows = TERMINAL_ROWS;
	if (t->opts.history <= 0)
		t->opts.history = TERMINAL_HISTORY;
	t->socket = xstrfmt("%s/tmux.sock", o->dir);
	t->config = xstrfmt("%s/tmux.conf", o->dir);
	t->log = xstrfmt("%s/tmux.log", o->dir);
	char *conf = config_text(&t->opts);
	int rc = write_file_atomic(t->config, conf, strlen(conf));
	free(conf);
	if (rc < 0)
		goto fail;
	int log = open(t->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (log < 0) {
		error("cannot create '%s': %s", t->log, strerror(errno));
		goto fail;
	}
	const char *argv[] = {"tmux", "-S", t->socket, "-f", t->config, "-D", NULL};
	t->server = (struct child)CHILD_INIT;
	t->server.argv = argv;
	t->server.env = o->env;
	t->server.clean_env = 1;
	t->server.new_group = 1;
	t->server.dir = o->workdir;
	t->server.out_to = log;
	t->server.sandbox = o->sandbox;
	rc = child_start(&t->server);
	close(log);
	if (rc < 0)
		goto fail;
	t->server.argv = NULL; /* argv was on this stack */
	child_feed(&t->server, "", 0);
	t->layers = t->server.layers;
	t->running = 1;
	struct stat st;
	double end = now_ms() + TERMINAL_SERVER_START_S * 1e3;
	while (stat(t->socket, &st) < 0) {
		int status;
		if (now_ms() > end || waitpid(t->server.pid, &status, WNOHANG) != 0) {
			char *text = NULL;
			if (read_file(t->log, 4096, &text, NULL) == 0)
				utf8_sanitize(text);
			error("the terminal's tmux server did not start%s%s", text && *text ? ": " : "",
			      text ? text : "");
			free(text);
			goto fail;
		}
		sleep_ms(10);
	}
	if (new_session(t) < 0)
		goto fail;
	return 0;
fail:
	terminal_stop(t);
	return -1;
}

int terminal_send(struct terminal *t, const char *const *keys, size_t n, int literal)
{
	if (!t->running)
		return error("the terminal is not running");
	/* The agent may have ended its shell (exit, exec): a fresh one. */
	if (!has_session(t) && new_session(t) < 0)
		return -1;
	const char **args = xcalloc(n + 5, sizeof(*args));
	size_t k = 0;
	args[k++] = "send-keys";
	args[k++] = "-t";
	args[k++] = SESSION;
	if (literal)
		args[k++] = "-l";
	args[k++] = "--";
	for (size_t i = 0; i < n; i++)
		args[k++] = keys[i];
	int rc = client(t, args, k, NULL, 0);
	free(args);
	return rc;
}

int terminal_capture(struct terminal *t, int scrollback, struct buf *out)
{
	if (!t->running)
		return error("the terminal is not running");
	buf_release(out);
	if (!has_session(t) && new_session(t) < 0)
		return -1;
	const char *args[] = {"capture-pane", "-p", "-J", "-t", SESSION, "-S", "-"};
	return client(t, args, scrollback ? 7 : 5, out, 0);
}

int terminal_clear_history(struct terminal *t)
{
	if (!t->running)
		return error("the terminal is not running");
	const char *args[] = {"clear-history", "-t", SESSION};
	return client(t, args, ARRAY_SIZE(args), NULL, 0);
}

void terminal_stop(struct terminal *t)
{
	if (t->running) {
		/* The server is the sandbox's last process: killing it (and its
		 * group) ends the pid namespace and everything in it. */
		child_kill(&t->server);
		int status;
		child_finish(&t->server, &status);
		t->running = 0;
	}
	if (t->socket)
		unlink(t->socket);
	free(t->socket);
	free(t->config);
	free(t->log);
	t->socket = t->config = t->log = NULL;
}
