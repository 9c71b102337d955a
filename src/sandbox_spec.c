#include "sandbox_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int path_line(struct buf *out, const char *key, const char *path)
{
	if (strchr(path, '\n'))
		return -1;
	return buf_printf(out, "%s %s\n", key, path);
}

int sandbox_spec_write(const struct sandbox *sb, struct buf *out)
{
	int rc = 0;
	for (size_t i = 0; i < sb->nread; i++)
		rc |= path_line(out, "read", sb->read[i]);
	for (size_t i = 0; i < sb->nwrite; i++)
		rc |= path_line(out, "write", sb->write[i]);
	rc |= buf_printf(out, "network %d\ninet_port %d\nthread_names %d\ndisable %u\n"
			      "mem_bytes %lld\nmem_data %d\nfile_bytes %lld\nopen_files %ld\n"
			      "processes %ld\ncpus %d\nmax_tasks %ld\n",
			 sb->allow_network, sb->inet_port, sb->thread_names, sb->disable,
			 sb->mem_bytes, sb->mem_data, sb->file_bytes, sb->open_files,
			 sb->processes, sb->cpus, sb->max_tasks);
	if (sb->cgroup[0])
		rc |= path_line(out, "cgroup", sb->cgroup);
	return rc ? -1 : 0;
}

/* The whole of s as a number in [lo, hi]. */
static int number(const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int field(struct sandbox *sb, const char *key, char *val)
{
	long long v;
	if (!strcmp(key, "read"))
		return sb->nread < SANDBOX_MAX_PATHS ? (sb->read[sb->nread++] = val, 0) : -1;
	if (!strcmp(key, "write"))
		return sb->nwrite < SANDBOX_MAX_PATHS ? (sb->write[sb->nwrite++] = val, 0) : -1;
	if (!strcmp(key, "cgroup")) {
		size_t n = strlen(val);
		if (n >= sizeof(sb->cgroup))
			return -1;
		memcpy(sb->cgroup, val, n + 1);
		return 0;
	}
	static const struct {
		const char *key;
		long long lo, hi;
	} nums[] = {
		{"network", 0, 1}, {"inet_port", 0, 65535}, {"thread_names", 0, 1},
		{"disable", 0, (1LL << SB_LAYER_COUNT) - 1}, {"mem_bytes", 0, 1LL << 60},
		{"mem_data", 0, 1}, {"file_bytes", 0, 1LL << 60}, {"open_files", 0, 1 << 30},
		{"processes", 0, 1 << 30}, {"cpus", 0, 1 << 16}, {"max_tasks", 0, 1 << 30},
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(key, nums[i].key))
			continue;
		if (number(val, nums[i].lo, nums[i].hi, &v) < 0)
			return -1;
		switch (i) {
		case 0: sb->allow_network = (int)v; break;
		case 1: sb->inet_port = (int)v; break;
		case 2: sb->thread_names = (int)v; break;
		case 3: sb->disable = (unsigned)v; break;
		case 4: sb->mem_bytes = v; break;
		case 5: sb->mem_data = (int)v; break;
		case 6: sb->file_bytes = v; break;
		case 7: sb->open_files = (long)v; break;
		case 8: sb->processes = (long)v; break;
		case 9: sb->cpus = (int)v; break;
		default: sb->max_tasks = (long)v; break;
		}
		return 0;
	}
	return -1;
}

int sandbox_spec_read(struct sandbox *sb, char *text)
{
	sandbox_init(sb);
	for (char *line = text; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *space = strchr(line, ' ');
		if (!space)
			return -1;
		*space = '\0';
		if (field(sb, line, space + 1) < 0)
			return -1;
		line = next;
	}
	return 0;
}
