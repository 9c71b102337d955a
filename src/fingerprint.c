#define _GNU_SOURCE
#include "fingerprint.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mkb_limits.h"
#include "sha256.h"
#include "util.h"

static int add_file(struct sha256 *c, const char *dir, const char *name)
{
	char *path = xstrfmt("%s/%s", dir, name);
	char *data;
	size_t len;
	if (read_file(path, FINGERPRINT_FILE_MAX, &data, &len) < 0) {
		int rc = error("cannot read '%s': %s", path, strerror(errno));
		free(path);
		return rc;
	}
	sha256_update(c, name, strlen(name) + 1);
	sha256_update(c, data, len);
	sha256_update(c, "", 1);
	free(data);
	free(path);
	return 0;
}

int fingerprint_files(const char *dir, const char *const *names, int n, char hex[65])
{
	struct sha256 c;
	sha256_init(&c);
	for (int i = 0; i < n; i++)
		if (add_file(&c, dir, names[i]) < 0)
			return -1;
	sha256_final_hex(&c, hex);
	return 0;
}

static int has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	return name[0] != '.' && n >= k && !strcmp(name + n - k, suffix);
}

static int name_order(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int fingerprint_dir(const char *dir, const char *suffix, char hex[65])
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, name_order);
	if (n < 0)
		return error("cannot read '%s': %s", dir, strerror(errno));
	struct sha256 c;
	sha256_init(&c);
	int rc = 0;
	for (int i = 0; i < n; i++) {
		if (rc == 0 && has_suffix(ents[i]->d_name, suffix) && add_file(&c, dir, ents[i]->d_name) < 0)
			rc = -1;
		free(ents[i]);
	}
	free(ents);
	if (rc == 0)
		sha256_final_hex(&c, hex);
	return rc;
}
