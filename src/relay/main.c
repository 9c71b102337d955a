/* mkb-relay: the only way out of an external agent's sandbox. Inside the
 * sandbox's empty network namespace it brings the loopback up, listens on
 * 127.0.0.1:PORT, runs the agent's program, and carries every connection
 * made to that port, byte for byte, to the Unix socket SOCKET, where the
 * attempt's model proxy (outside, src/model_proxy.c) adds the API key and
 * talks to the one endpoint it allows. No key and no other address is
 * reachable from inside. Ends the way the program ends.
 *
 *     mkb-relay PORT SOCKET -- PROGRAM [ARGS...]
 *
 * Built without sanitizers, like mkb-submit: it runs under the sandbox's
 * memory limit. */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int usage(void)
{
	fputs("usage: mkb-relay PORT SOCKET -- PROGRAM [ARGS...]\n", stderr);
	return 2;
}

/* Loopback up (an empty network namespace starts with it down). Failure is
 * not fatal: where the namespace is the host's, it is up already. */
static void loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			fprintf(stderr, "mkb-relay: cannot bring the loopback up: %s\n", strerror(errno));
	}
	close(s);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Carry bytes both ways between a and b until both directions are closed. */
static void pump(int a, int b)
{
	struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
	int open_dirs = 2;
	char buf[65536];
	while (open_dirs > 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int to = i == 0 ? b : a;
			ssize_t r = read(p[i].fd, buf, sizeof(buf));
			if (r > 0 && write_all(to, buf, (size_t)r) == 0)
				continue;
			/* this direction is over: pass the end on */
			shutdown(to, SHUT_WR);
			p[i].fd = -1;
			open_dirs--;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 5 || strcmp(argv[3], "--"))
		return usage();
	char *end;
	long port = strtol(argv[1], &end, 10);
	if (*end || port < 1 || port > 65535)
		return usage();
	struct sockaddr_un un;
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	if (strlen(argv[2]) >= sizeof(un.sun_path)) {
		fprintf(stderr, "mkb-relay: socket path too long\n");
		return 2;
	}
	memcpy(un.sun_path, argv[2], strlen(argv[2]) + 1);

	loopback_up();
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in in;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons((unsigned short)port);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&in, sizeof(in)) < 0 || listen(ls, 64) < 0) {
		fprintf(stderr, "mkb-relay: cannot listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
		return 3;
	}
	pid_t prog = fork();
	if (prog < 0) {
		fprintf(stderr, "mkb-relay: fork: %s\n", strerror(errno));
		return 3;
	}
	if (prog == 0) {
		execvp(argv[4], argv + 4);
		fprintf(stderr, "mkb-relay: cannot run '%s': %s\n", argv[4], strerror(errno));
		_exit(127);
	}
	for (;;) {
		int status;
		pid_t done;
		while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
			if (done != prog)
				continue; /* a pump */
			if (WIFSIGNALED(status)) {
				signal(WTERMSIG(status), SIG_DFL);
				kill(getpid(), WTERMSIG(status));
			}
			return WIFEXITED(status) ? WEXITSTATUS(status) : 126;
		}
		struct pollfd p = {ls, POLLIN, 0};
		if (poll(&p, 1, 200) <= 0)
			continue;
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		pid_t w = fork();
		if (w == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (u < 0 || connect(u, (struct sockaddr *)&un, sizeof(un)) < 0) {
				static const char bad[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
							  "Connection: close\r\n\r\n";
				(void)write_all(c, bad, sizeof(bad) - 1);
				_exit(1);
			}
			pump(c, u);
			_exit(0);
		}
		close(c);
	}
}
