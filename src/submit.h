/* The agent's `submit` command and the attempt's end of it. Inside the
 * sandbox, `submit` (this same binary, called by that name) connects to the
 * Unix socket named by $MKB_SUBMIT_SOCKET, asks for kernel.py in the
 * workspace to be graded, and prints the feedback it gets back. The attempt
 * (outside, trusted) reads the kernel from the workspace itself: the client
 * sends nothing but the request line, so nothing it says can change what is
 * graded or how.
 *
 *   client -> attempt   "submit\n"
 *   attempt -> client   {"exit": N, "text": "..."} and the connection closes
 */
#ifndef MKB_SUBMIT_H
#define MKB_SUBMIT_H

#include <stddef.h>

#include "mkb_limits.h"

#define SUBMIT_ENV "MKB_SUBMIT_SOCKET"
#define SUBMIT_REQUEST "submit\n"

struct submit_server {
	int fd;      /* listening, non-blocking */
	char *path;
};

/* Listen on a fresh socket at path. 0 or -1 (error printed). */
int submit_listen(struct submit_server *s, const char *path);
/* A client with a complete request, or -1 when none is waiting (or it sent
 * something else: it is told so and dropped). Never blocks for long. */
int submit_accept(struct submit_server *s);
/* Answer a client and close it. 0 or -1 (the client went away). */
int submit_reply(int fd, int exit_code, const char *text);
void submit_close(struct submit_server *s);

/* The client: connect to path, ask, print the reply's text to stdout.
 * Returns the exit code the reply carries, or 3 when the attempt could not
 * be reached (message on stderr). */
int submit_request(const char *path);

#endif
