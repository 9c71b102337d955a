#define _GNU_SOURCE
#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "instruction.h"
#include "mkb_limits.h"
#include "util.h"

/* The fields of problem.json an agent may see. */
static const char *const public_fields[] = {
	"number", "name", "family", "source", "description", "dtypes", "inputs", "outputs",
};
static const char *const public_workloads[] = {"visible", "smoke"};

static int dir_is_empty_or_absent(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT;
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

static int write_text(const char *dir, const char *name, const char *text)
{
	char *path = xstrfmt("%s/%s", dir, name);
	int rc = write_file_atomic(path, text, strlen(text));
	free(path);
	return rc;
}

static int copy_into(const char *src, const char *dir, const char *name)
{
	char *dst = xstrfmt("%s/%s", dir, name);
	int rc = copy_file(src, dst, WORKSPACE_FILE_MAX);
	free(dst);
	return rc;
}

static int write_workload(const struct problem *p, const char *task)
{
	json_t *o = json_object(), *wl = json_object();
	for (size_t i = 0; i < ARRAY_SIZE(public_fields); i++) {
		json_t *v = json_object_get(p->meta, public_fields[i]);
		if (v)
			json_object_set(o, public_fields[i], v);
	}
	for (size_t i = 0; i < ARRAY_SIZE(public_workloads); i++)
		json_object_set(wl, public_workloads[i], problem_workload(p, public_workloads[i]));
	json_object_set_new(o, "workloads", wl);
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return error("cannot encode the workload of problem %d", p->number);
	char *with_nl = xstrfmt("%s\n", text);
	free(text);
	int rc = write_text(task, "workload.json", with_nl);
	free(with_nl);
	return rc;
}

static int fill(const char *root, const struct problem *p, const struct dsl *d, const char *dir)
{
	char *task = xstrfmt("%s/task", dir);
	char *docs = xstrfmt("%s/docs/%s", dir, d->id);
	char *src = NULL, *text = NULL;
	int rc = -1;
	if (make_dirs(task, 0755) < 0 || make_dirs(docs, 0755) < 0)
		goto out;
	if (!(text = instruction_render(root, "instruction.md", p, d)) ||
	    write_text(dir, "INSTRUCTION.md", text) < 0)
		goto out;
	free(text);
	if (!(text = instruction_render(root, "CONTRACT.md", p, d)) ||
	    write_text(task, "CONTRACT.md", text) < 0)
		goto out;
	src = xstrfmt("%s/reference.py", p->dir);
	if (copy_into(src, task, "reference.py") < 0 || write_workload(p, task) < 0)
		goto out;
	free(src);
	src = xstrfmt("%s/grader/mkb_grader/correctness.py", root);
	if (copy_into(src, task, "contract.py") < 0)
		goto out;
	free(src);
	src = xstrfmt("%s/templates/check.py", root);
	if (copy_into(src, task, "check.py") < 0)
		goto out;
	free(src);
	src = xstrfmt("%s/docs/%s/primer.md", root, d->id);
	if (copy_into(src, docs, "primer.md") < 0)
		goto out;
	free(src);
	/* The index of the DSL installed for the grader's Python (make builds
	 * it): the instruction tells the agent to grep it, so a workspace
	 * without one is not made. */
	src = xstrfmt("%s/build/docs/%s/api-index.txt", root, d->id);
	if (!is_file(src)) {
		error("no API index of %s ('%s'): 'make api-index' generates it from the installed "
		      "package", d->name, src);
		goto out;
	}
	if (copy_into(src, docs, "api-index.txt") < 0)
		goto out;
	rc = 0;
out:
	free(src);
	free(text);
	free(task);
	free(docs);
	return rc;
}

int workspace_create(const char *root, const struct problem *p, const struct dsl *d,
		     const char *dir)
{
	if (!dir_is_empty_or_absent(dir))
		return error("workspace '%s' exists and is not empty", dir);
	if (make_dirs(dir, 0755) < 0)
		return -1;
	if (fill(root, p, d, dir) < 0) {
		/* A half-built workspace must not be used. */
		if (remove_tree(dir) < 0)
			warning("cannot remove the half-built workspace '%s'", dir);
		return -1;
	}
	return 0;
}
