#define _GNU_SOURCE
#include "zygote.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "sandbox_spec.h"
#include "util.h"

#define ZYGOTE_REPLY_MAX 4096

/* One message within timeout_ms, parsed as a JSON object, or NULL. */
static json_t *receive(int sock, int timeout_ms)
{
	struct pollfd p = {sock, POLLIN, 0};
	int r;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return NULL;
	char msg[ZYGOTE_REPLY_MAX + 1];
	ssize_t n = recv(sock, msg, ZYGOTE_REPLY_MAX, 0);
	if (n <= 0)
		return NULL;
	msg[n] = '\0';
	json_t *o = json_loads(msg, 0, NULL);
	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

static int send_request(int sock, const char *text, const int *fds, size_t nfds)
{
	struct iovec iov = {(void *)text, strlen(text)};
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} control;
	memset(&control, 0, sizeof(control));
	struct msghdr m = {0};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = control.buf;
	m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	ssize_t n;
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)iov.iov_len ? 0 : -1;
}

static char *request_text(const struct sandbox *sb, const char *const *env, const char *dir)
{
	struct buf spec = BUF_INIT(1 << 20);
	if (sb && sandbox_spec_write(sb, &spec) < 0) {
		buf_release(&spec);
		return NULL;
	}
	json_t *req = json_object();
	json_t *e = json_array();
	for (size_t i = 0; env && env[i]; i++)
		json_array_append_new(e, json_string(env[i]));
	json_object_set_new(req, "env", e);
	json_object_set_new(req, "dir", json_string(dir));
	if (sb)
		json_object_set_new(req, "sandbox", json_string(buf_str(&spec)));
	buf_release(&spec);
	char *text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return text;
}

/* The zygote's abstract address for name (grader/mkb_grader/zygote.py's
 * abstract_address): no file, out of reach of every confined process. */
static int zygote_address(const char *name, struct sockaddr_un *addr, socklen_t *len)
{
	static const char prefix[] = "mkb-zygote:";
	size_t n = strlen(name);
	if (1 + sizeof(prefix) - 1 + n > sizeof(addr->sun_path))
		return -1;
	addr->sun_path[0] = '\0';
	memcpy(addr->sun_path + 1, prefix, sizeof(prefix) - 1);
	memcpy(addr->sun_path + sizeof(prefix), name, n);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(prefix) + n);
	return 0;
}

static int spawn(const char *name, const struct sandbox *sb, const char *const *env, const char *dir,
		 const int *fds, size_t nfds, struct zygote_child *zc, char *why, size_t whysize)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	socklen_t len;
	zc->sock = -1;
	zc->ended = 0;
	if (zygote_address(name, &addr, &len) < 0) {
		snprintf(why, whysize, "socket name too long");
		return -1;
	}
	int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&addr, len) < 0) {
		snprintf(why, whysize, "cannot connect: %s", strerror(errno));
		if (sock >= 0)
			close(sock);
		return -1;
	}
	char *text = request_text(sb, env, dir);
	if (!text || send_request(sock, text, fds, nfds) < 0) {
		snprintf(why, whysize, "cannot send the request%s", text ? "" : " (a sandbox path has a newline)");
		free(text);
		close(sock);
		return -1;
	}
	free(text);
	/* a candidate's sandbox is applied before the reply: seconds at most */
	json_t *r = receive(sock, 60 * 1000);
	json_t *pid = r ? json_object_get(r, "pid") : NULL, *layers = r ? json_object_get(r, "layers") : NULL;
	if (!json_is_integer(pid) || !json_is_integer(layers) || json_integer_value(layers) < 0) {
		json_t *err = r ? json_object_get(r, "error") : NULL;
		snprintf(why, whysize, "%s", json_is_string(err) ? json_string_value(err) : "no answer");
		json_decref(r);
		close(sock);
		return -1;
	}
	zc->sock = sock;
	zc->pid = (long)json_integer_value(pid);
	zc->layers = (unsigned)json_integer_value(layers);
	json_decref(r);
	return 0;
}

int zygote_spawn(const char *path, const struct sandbox *sb, const char *const *env, const char *dir,
		 int peer, int out, struct zygote_child *zc, char *why, size_t whysize)
{
	int fds[2] = {peer, out};
	return spawn(path, sb, env, dir, fds, 2, zc, why, whysize);
}

int zygote_spawn_checker(const char *path, char *const *env, const char *dir, int in, int out, int err,
			 int peer, struct zygote_child *zc, char *why, size_t whysize)
{
	char *name = xstrfmt("%s:checker", path);
	int fds[4] = {in, out, err, peer};
	int rc = spawn(name, NULL, (const char *const *)env, dir, fds, 4, zc, why, whysize);
	free(name);
	return rc;
}

void zygote_kill(struct zygote_child *zc)
{
	if (zc->sock >= 0) {
		ssize_t n = send(zc->sock, "\"kill\"", 6, MSG_NOSIGNAL);
		(void)n; /* a zygote gone has killed it already (its session dies with it) */
	}
}

int zygote_poll(struct zygote_child *zc, int timeout_ms, int *status)
{
	if (zc->ended) {
		*status = zc->status;
		return 1;
	}
	if (zc->sock < 0)
		return -1;
	struct pollfd p = {zc->sock, POLLIN, 0};
	int r;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0;
	json_t *o = receive(zc->sock, 0);
	json_t *e = o ? json_object_get(o, "exit") : NULL;
	int said = json_is_integer(e);
	if (said)
		zc->status = (int)json_integer_value(e);
	json_decref(o);
	close(zc->sock); /* the zygote kills whatever is left of it */
	zc->sock = -1;
	if (!said)
		return -1;
	zc->ended = 1;
	*status = zc->status;
	return 1;
}

int zygote_reap(void *ctx, int block, int *status)
{
	struct zygote_child *zc = ctx;
	int rc = zygote_poll(zc, block ? 30 * 1000 : 0, status);
	if (rc != 1 && block)
		warning("the zygote did not say how its child %ld ended", zc->pid);
	if (rc < 0) { /* gone without a word: its children died with it */
		zc->ended = 1;
		zc->status = *status = 0;
		return 1;
	}
	return rc;
}

void zygote_kill_ctx(void *ctx)
{
	zygote_kill(ctx);
}

int zygote_guarded(unsigned off)
{
	return (sandbox_available() & ~off & (SB_NETNS | SB_LANDLOCK_SCOPE)) != 0;
}
