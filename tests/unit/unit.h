/* A minimal unit-test harness: each test is a function; CHECK records a
 * failure with its location and goes on. main.c lists the tests and prints
 * "N passed, N failed". */
#ifndef MKB_UNIT_H
#define MKB_UNIT_H

#include <stdio.h>
#include <string.h>

extern int unit_failures; /* failures in the running test */

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__,    \
				__LINE__, #cond);                                   \
			unit_failures++;                                        \
		}                                                               \
	} while (0)

#define CHECK_STR(a, b)                                                         \
	do {                                                                    \
		const char *a_ = (a), *b_ = (b);                                \
		if (!a_ || !b_ || strcmp(a_, b_)) {                             \
			fprintf(stderr, "  %s:%d: \"%s\" != \"%s\"\n", __FILE__,    \
				__LINE__, a_ ? a_ : "(null)", b_ ? b_ : "(null)");  \
			unit_failures++;                                        \
		}                                                               \
	} while (0)

struct unit_test {
	const char *name;
	void (*fn)(void);
};

/* Each test file exports its table and its size, by name:
 *     const struct unit_test foo_tests[] = {...};
 *     const size_t foo_ntests = ARRAY_SIZE(foo_tests);
 * The build finds the tables (a generated unit_suites.h of UNIT_SUITE(foo)
 * lines, Makefile) and main.c runs them: a new test file needs no other
 * registration. */

/* A fresh temporary directory for a test (removed by unit_rmtree). */
char *unit_tmpdir(void);
void unit_rmtree(const char *dir);
/* Write text to dir/name, creating parent folders. */
void unit_write(const char *dir, const char *name, const char *text);

#endif
