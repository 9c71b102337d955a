#define _GNU_SOURCE
#include "catalog.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "util.h"

const char *const catalog_families[] = {
	"attention", "kv_cache", "mlp_norm", "moe", "quantization", "linear_attention",
};
const size_t catalog_nfamilies = ARRAY_SIZE(catalog_families);

static const char *const required_workloads[] = {"visible", "heldout", "smoke"};

int family_is_known(const char *family)
{
	for (size_t i = 0; i < catalog_nfamilies; i++)
		if (!strcmp(family, catalog_families[i]))
			return 1;
	return 0;
}

static void problem_release(struct problem *p)
{
	free(p->name);
	free(p->family);
	free(p->description);
	free(p->dir);
	json_decref(p->meta);
	memset(p, 0, sizeof(*p));
}

void catalog_release(struct catalog *cat)
{
	for (size_t i = 0; i < cat->n; i++)
		problem_release(&cat->items[i]);
	free(cat->items);
	cat->items = NULL;
	cat->n = 0;
}

static const char *get_string(json_t *meta, const char *key)
{
	json_t *v = json_object_get(meta, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Check one problem.json against its directory; fill *p on success. */
static int load_problem(const char *dir, const char *family_dir, const char *entry,
			struct problem *p)
{
	char *path = xstrfmt("%s/problem.json", dir);
	json_error_t jerr;
	json_t *meta = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!meta) {
		int rc = error("'%s' line %d: %s", path, jerr.line, jerr.text);
		free(path);
		return rc;
	}
	int rc = -1;
	json_t *format = json_object_get(meta, "format");
	json_t *num = json_object_get(meta, "number");
	const char *name = get_string(meta, "name");
	const char *family = get_string(meta, "family");
	const char *desc = get_string(meta, "description");
	json_t *wl = json_object_get(meta, "workloads");
	char expect_dir[300];

	if (!json_is_integer(format) || json_integer_value(format) != PROBLEM_FORMAT) {
		error("'%s': \"format\" must be %d, the problem.json format this mkb reads "
		      "(docs/problem-format.md)", path, PROBLEM_FORMAT);
		goto out;
	}
	if (!json_is_integer(num) || json_integer_value(num) < 1 || json_integer_value(num) > 99) {
		error("'%s': \"number\" must be an integer in 1..99", path);
		goto out;
	}
	if (!name || !family || !desc) {
		error("'%s': \"name\", \"family\" and \"description\" are required strings", path);
		goto out;
	}
	if (!family_is_known(family) || strcmp(family, family_dir)) {
		error("'%s': family '%s' is unknown or not its folder '%s'", path, family, family_dir);
		goto out;
	}
	snprintf(expect_dir, sizeof(expect_dir), "%02d_%s", (int)json_integer_value(num), name);
	if (strcmp(expect_dir, entry)) {
		error("'%s': folder should be named '%s'", path, expect_dir);
		goto out;
	}
	if (!json_is_object(wl)) {
		error("'%s': \"workloads\" must be an object", path);
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(required_workloads); i++) {
		if (!json_is_object(json_object_get(wl, required_workloads[i]))) {
			error("'%s': workload '%s' is missing", path, required_workloads[i]);
			goto out;
		}
	}
	/* The speed-of-light formulas must give a positive number everywhere. */
	static const char *const formulas[] = {"flops", "bytes"};
	for (size_t f = 0; f < ARRAY_SIZE(formulas); f++) {
		const char *text = get_string(meta, formulas[f]);
		if (!text) {
			error("'%s': \"%s\" formula is missing", path, formulas[f]);
			goto out;
		}
		for (size_t i = 0; i < ARRAY_SIZE(required_workloads); i++) {
			char msg[200];
			double value;
			if (expr_eval(text, json_object_get(wl, required_workloads[i]), &value, msg, sizeof(msg)) < 0 ||
			    value <= 0) {
				error("'%s': \"%s\" on workload '%s': %s", path, formulas[f], required_workloads[i],
				      *msg ? msg : "not positive");
				goto out;
			}
		}
	}
	char *ref = xstrfmt("%s/reference.py", dir);
	int has_ref = is_file(ref);
	free(ref);
	if (!has_ref) {
		error("'%s': reference.py is missing beside it", path);
		goto out;
	}
	p->number = (int)json_integer_value(num);
	p->name = xstrdup(name);
	p->family = xstrdup(family);
	p->description = xstrdup(desc);
	p->dir = xstrdup(dir);
	p->meta = json_incref(meta);
	rc = 0;
out:
	json_decref(meta);
	free(path);
	return rc;
}

static int by_number(const void *a, const void *b)
{
	const struct problem *x = a, *y = b;
	return (x->number > y->number) - (x->number < y->number);
}

static int name_sort(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_hidden(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

int catalog_load(const char *problems_dir, struct catalog *cat)
{
	struct dirent **fams = NULL;
	int nf = scandir(problems_dir, &fams, not_hidden, name_sort);
	if (nf < 0)
		return error("cannot read problems folder '%s': %s", problems_dir, strerror(errno));
	struct catalog c = CATALOG_INIT;
	size_t cap = 0;
	int rc = 0;
	for (int i = 0; i < nf; i++) {
		char *fdir = xstrfmt("%s/%s", problems_dir, fams[i]->d_name);
		struct dirent **ents = NULL;
		int ne = is_dir(fdir) ? scandir(fdir, &ents, not_hidden, name_sort) : -1;
		if (ne < 0 && is_dir(fdir))
			rc = error("cannot read '%s': %s", fdir, strerror(errno));
		for (int j = 0; j < ne; j++) {
			char *pdir = xstrfmt("%s/%s", fdir, ents[j]->d_name);
			if (is_dir(pdir) && rc == 0) {
				if (c.n == cap) {
					cap = cap ? 2 * cap : 32;
					c.items = xrealloc(c.items, cap * sizeof(*c.items));
				}
				memset(&c.items[c.n], 0, sizeof(c.items[c.n]));
				if (load_problem(pdir, fams[i]->d_name, ents[j]->d_name, &c.items[c.n]) < 0)
					rc = -1;
				else
					c.n++;
			}
			free(pdir);
			free(ents[j]);
		}
		free(ents);
		free(fdir);
		free(fams[i]);
	}
	free(fams);
	if (rc == 0) {
		qsort(c.items, c.n, sizeof(*c.items), by_number);
		for (size_t i = 1; i < c.n; i++)
			if (c.items[i].number == c.items[i - 1].number)
				rc = error("problem %d is defined twice ('%s' and '%s')", c.items[i].number,
					   c.items[i - 1].dir, c.items[i].dir);
	}
	if (rc < 0) {
		catalog_release(&c);
		return -1;
	}
	*cat = c;
	return 0;
}

const struct problem *catalog_find(const struct catalog *cat, int number)
{
	for (size_t i = 0; i < cat->n; i++)
		if (cat->items[i].number == number)
			return &cat->items[i];
	return NULL;
}

json_t *problem_workload(const struct problem *p, const char *workload)
{
	return json_object_get(json_object_get(p->meta, "workloads"), workload);
}
