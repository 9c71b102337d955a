#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "util.h"

int unit_failures;

/* Every suite the build found in tests/unit/test_*.c (unit_suites.h). */
#define UNIT_SUITE(name) extern const struct unit_test name##_tests[]; extern const size_t name##_ntests;
#include "unit_suites.h"
#undef UNIT_SUITE

char *unit_tmpdir(void)
{
	char *tmpl = xstrfmt("%s/mkb-unit.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpl))
		die("mkdtemp failed");
	return tmpl;
}

void unit_rmtree(const char *dir)
{
	char *cmd = xstrfmt("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		warning("cannot remove '%s'", dir);
	free(cmd);
}

void unit_write(const char *dir, const char *name, const char *text)
{
	char *path = xstrfmt("%s/%s", dir, name);
	for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		die("cannot write '%s'", path);
	free(path);
}

int main(int argc, char **argv)
{
	const struct { const struct unit_test *t; size_t n; } suites[] = {
#define UNIT_SUITE(name) {name##_tests, name##_ntests},
#include "unit_suites.h"
#undef UNIT_SUITE
	};
	int passed = 0, failed = 0;
	for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++) {
		for (size_t i = 0; i < suites[s].n; i++) {
			const struct unit_test *t = &suites[s].t[i];
			if (argc > 1 && !strstr(t->name, argv[1]))
				continue;
			unit_failures = 0;
			t->fn();
			if (unit_failures) {
				failed++;
				printf("FAIL %s\n", t->name);
			} else {
				passed++;
				printf("ok   %s\n", t->name);
			}
		}
	}
	printf("unit: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
