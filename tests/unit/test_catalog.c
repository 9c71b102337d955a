/* catalog: loading problems from folders, and refusing malformed ones. */
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "unit.h"
#include "util.h"

static const char good[] =
	"{\"format\": 1, \"number\": 7, \"name\": \"toy\", \"family\": \"moe\", \"description\": \"a toy\","
	" \"workloads\": {\"visible\": {\"n\": 1}, \"heldout\": {\"n\": 2}, \"smoke\": {\"n\": 3}},"
	" \"flops\": \"2 * n\", \"bytes\": \"n * 4\"}";

static void add_problem(const char *root, const char *rel, const char *json)
{
	char *p = xstrfmt("%s/problem.json", rel), *r = xstrfmt("%s/reference.py", rel);
	unit_write(root, p, json);
	unit_write(root, r, "def reference(x):\n    return x\n");
	free(p);
	free(r);
}

static int load(const char *root, struct catalog *cat)
{
	return catalog_load(root, cat);
}

static void test_loads_and_sorts(void)
{
	char *root = unit_tmpdir();
	add_problem(root, "moe/07_toy", good);
	add_problem(root, "attention/03_att",
		    "{\"format\": 1, \"number\": 3, \"name\": \"att\", \"family\": \"attention\", \"description\": \"d\","
		    " \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}");
	struct catalog cat = CATALOG_INIT;
	CHECK(load(root, &cat) == 0);
	CHECK(cat.n == 2);
	if (cat.n == 2) {
		CHECK(cat.items[0].number == 3 && cat.items[1].number == 7);
		CHECK_STR(cat.items[1].family, "moe");
		CHECK(catalog_find(&cat, 7) == &cat.items[1]);
		CHECK(catalog_find(&cat, 8) == NULL);
		json_t *wl = problem_workload(&cat.items[1], "heldout");
		CHECK(json_integer_value(json_object_get(wl, "n")) == 2);
		CHECK(problem_workload(&cat.items[1], "huge") == NULL);
	}
	catalog_release(&cat);
	unit_rmtree(root);
	free(root);
}

/* Each malformed variant must be refused with an empty catalog. */
static void expect_refused(const char *rel, const char *json, int with_reference)
{
	char *root = unit_tmpdir();
	add_problem(root, "moe/07_toy", good);
	if (with_reference) {
		add_problem(root, rel, json);
	} else {
		char *p = xstrfmt("%s/problem.json", rel);
		unit_write(root, p, json);
		free(p);
	}
	struct catalog cat = CATALOG_INIT;
	CHECK(load(root, &cat) == -1);
	CHECK(cat.n == 0 && cat.items == NULL);
	unit_rmtree(root);
	free(root);
}

static void test_refuses_malformed(void)
{
	/* duplicate number */
	expect_refused("moe/07_other", "{\"format\": 1, \"number\": 7, \"name\": \"other\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}", 1);
	/* folder name does not match */
	expect_refused("moe/09_wrong", good, 1);
	/* family not its folder */
	expect_refused("attention/07_toy", good, 1);
	/* unknown family */
	expect_refused("cooking/08_x", "{\"format\": 1, \"number\": 8, \"name\": \"x\", \"family\": \"cooking\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}", 1);
	/* missing held-out workload */
	expect_refused("moe/08_x", "{\"format\": 1, \"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"smoke\": {}}}", 1);
	/* a formula naming an unknown parameter */
	expect_refused("moe/08_x", "{\"format\": 1, \"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {\"n\": 1}, \"heldout\": {\"n\": 1},"
		       " \"smoke\": {\"n\": 1}}, \"flops\": \"n * m\", \"bytes\": \"n\"}", 1);
	/* a formula that is not positive on one workload */
	expect_refused("moe/08_x", "{\"format\": 1, \"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {\"n\": 1}, \"heldout\": {\"n\": 1},"
		       " \"smoke\": {\"n\": 0}}, \"flops\": \"n\", \"bytes\": \"1\"}", 1);
	/* no format, another format, a format that is not an integer */
	expect_refused("moe/08_x", "{\"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}", 1);
	expect_refused("moe/08_x", "{\"format\": 2, \"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}", 1);
	expect_refused("moe/08_x", "{\"format\": \"1\", \"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}", 1);
	/* not JSON */
	expect_refused("moe/08_x", "{\"format\": 1, \"number\": 8,", 1);
	/* no reference.py */
	expect_refused("moe/08_x", "{\"format\": 1, \"number\": 8, \"name\": \"x\", \"family\": \"moe\","
		       " \"description\": \"d\", \"workloads\": {\"visible\": {}, \"heldout\": {}, \"smoke\": {}}, \"flops\": \"1\", \"bytes\": \"1\"}", 0);
}

static void test_project_catalog(void)
{
	/* The shipped problems load and include the first three of the issue. */
	struct catalog cat = CATALOG_INIT;
	CHECK(catalog_load(MKB_SOURCE_ROOT "/problems", &cat) == 0);
	CHECK(catalog_find(&cat, 28) && catalog_find(&cat, 36) && catalog_find(&cat, 32));
	for (size_t i = 0; i < cat.n; i++)
		CHECK(family_is_known(cat.items[i].family));
	catalog_release(&cat);
}

const struct unit_test catalog_tests[] = {
	{"catalog loads problems sorted by number", test_loads_and_sorts},
	{"catalog refuses malformed problems", test_refuses_malformed},
	{"the project's own catalog loads", test_project_catalog},
};
const size_t catalog_ntests = sizeof(catalog_tests) / sizeof(catalog_tests[0]);
