/* An agent's terminal: a tmux server, and the shell in its one pane, run
 * inside the sandbox (sandbox.h). We drive it with tmux's own client
 * (send-keys, capture-pane), and the client runs confined too: the server
 * is the agent's to kill and replace, and a tmux client obeys its server
 * (a server may tell a client to run a shell command), so no client of
 * ours runs outside the sandbox.
 *
 * The server runs in the foreground (tmux -D) as the sandboxed child
 * itself: in a pid namespace, ending it ends every process the agent
 * started. A shell the agent exits is started again on the next keystroke. */
#ifndef MKB_TERMINAL_H
#define MKB_TERMINAL_H

#include "buf.h"
#include "mkb_limits.h"
#include "proc.h"
#include "sandbox.h"

#define TERMINAL_COLS 160
#define TERMINAL_ROWS 40

struct terminal_opts {
	const struct sandbox *sandbox; /* applied to the server and every client */
	const char *const *env;  /* the whole environment of the shell ("NAME=value") */
	const char *dir;         /* a private folder for the socket and config,
				    writable inside the sandbox */
	const char *workdir;     /* the shell's working folder */
	const char *shell;       /* NULL: "bash --noprofile --norc" (strings borrowed:
				    they must outlive the terminal) */
	int cols, rows;          /* 0: the defaults above */
	long history;            /* 0: TERMINAL_HISTORY */
};

struct terminal {
	struct terminal_opts opts;
	char *socket, *config, *log;
	struct child server;
	unsigned layers;         /* sandbox layers in force for the server */
	int running;
};

/* Start the server and its shell. 0, or -1 (error printed, nothing left running). */
int terminal_start(struct terminal *t, const struct terminal_opts *o);

/* Send keys to the pane, as tmux send-keys takes them: each one a key name
 * ("Enter", "C-c") or, with literal set, text typed as it is. 0 or -1
 * (error printed). */
int terminal_send(struct terminal *t, const char *const *keys, size_t n, int literal);

/* The pane's text into out (replaced): the visible screen, or with
 * scrollback the whole history too. Lines wrapped by the terminal are
 * joined. 0 or -1 (error printed). */
int terminal_capture(struct terminal *t, int scrollback, struct buf *out);

/* Clear the scrollback (the screen stays). 0 or -1. */
int terminal_clear_history(struct terminal *t);

/* End the server and everything it started; free. Safe to call twice. */
void terminal_stop(struct terminal *t);

#endif
