/* The problem catalog: problems/<family>/<NN>_<name>/problem.json, read
 * without running Python. Adding a problem is adding such a directory with
 * its reference.py. */
#ifndef MKB_CATALOG_H
#define MKB_CATALOG_H

#include <jansson.h>
#include <stddef.h>

struct problem {
	int number;
	char *name;
	char *family;
	char *description;
	char *dir;        /* absolute path of the problem's directory */
	json_t *meta;     /* the whole problem.json (owned) */
};

struct catalog {
	struct problem *items; /* sorted by number */
	size_t n;
};

#define CATALOG_INIT { NULL, 0 }
/* The problem.json format this mkb reads ("format", docs/problem-format.md):
 * bumped when a field changes meaning; a file of another format is refused
 * rather than read by guesswork. */
#define PROBLEM_FORMAT 1

extern const char *const catalog_families[];
extern const size_t catalog_nfamilies;

/* Load every problem under problems_dir. On any malformed problem prints
 * what is wrong and returns -1 leaving *cat empty. */
int catalog_load(const char *problems_dir, struct catalog *cat);
void catalog_release(struct catalog *cat);
const struct problem *catalog_find(const struct catalog *cat, int number);
/* The workload's parameters object (borrowed) or NULL. */
json_t *problem_workload(const struct problem *p, const char *workload);
int family_is_known(const char *family);

#endif
