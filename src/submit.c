#define _GNU_SOURCE
#include "submit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "mkb_limits.h"
#include "util.h"

static int unix_address(const char *path, struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(addr->sun_path))
		return error("socket path '%s' is too long", path);
	memcpy(addr->sun_path, path, strlen(path) + 1);
	return 0;
}

int submit_listen(struct submit_server *s, const char *path)
{
	s->fd = -1;
	s->path = NULL;
	struct sockaddr_un addr;
	if (unix_address(path, &addr) < 0)
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error("socket: %s", strerror(errno));
	unlink(path);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 8) < 0) {
		int e = errno;
		close(fd);
		return error("cannot listen on '%s': %s", path, strerror(e));
	}
	s->fd = fd;
	s->path = xstrdup(path);
	return 0;
}

int submit_accept(struct submit_server *s)
{
	int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return -1;
	char req[sizeof(SUBMIT_REQUEST)] = {0};
	size_t got = 0;
	double end = now_ms() + SUBMIT_REQUEST_WAIT_MS;
	while (got < strlen(SUBMIT_REQUEST) && now_ms() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = recv(fd, req + got, strlen(SUBMIT_REQUEST) - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got != strlen(SUBMIT_REQUEST) || memcmp(req, SUBMIT_REQUEST, got)) {
		submit_reply(fd, 2, "submit: not a submission request\n");
		return -1;
	}
	return fd;
}

int submit_reply(int fd, int exit_code, const char *text)
{
	json_t *o = json_pack("{s:i, s:s}", "exit", exit_code, "text", text ? text : "");
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	int rc = -1;
	if (s) {
		(void)socket_send_all(fd, s, strlen(s));
		rc = 0;
	}
	free(s);
	close(fd);
	return rc;
}

void submit_close(struct submit_server *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->path)
		unlink(s->path);
	free(s->path);
	s->fd = -1;
	s->path = NULL;
}

int submit_request(const char *path)
{
	if (!path || !*path) {
		fprintf(stderr, "submit: $%s is not set: run submit inside an attempt's terminal\n",
			SUBMIT_ENV);
		return 3;
	}
	struct sockaddr_un addr;
	if (unix_address(path, &addr) < 0)
		return 3;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		fprintf(stderr, "submit: cannot reach the judge: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		return 3;
	}
	(void)socket_send_all(fd, SUBMIT_REQUEST, strlen(SUBMIT_REQUEST));
	struct buf reply = BUF_INIT(SUBMIT_MAX_REPLY);
	char chunk[4096];
	ssize_t r;
	while ((r = recv(fd, chunk, sizeof(chunk), 0)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || buf_add(&reply, chunk, (size_t)r) < 0)
			break;
	}
	close(fd);
	json_error_t err;
	json_t *o = json_loads(buf_str(&reply), 0, &err);
	buf_release(&reply);
	json_t *text = json_object_get(o, "text"), *code = json_object_get(o, "exit");
	if (!json_is_string(text) || !json_is_integer(code)) {
		json_decref(o);
		fprintf(stderr, "submit: the judge closed the connection without an answer\n");
		return 3;
	}
	fputs(json_string_value(text), stdout);
	int rc = (int)json_integer_value(code);
	json_decref(o);
	return rc;
}
