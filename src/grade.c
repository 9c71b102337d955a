#include "grade.h"

#include <stdlib.h>
#include <string.h>

#include "fingerprint.h"
#include "paths.h"
#include "proc.h"
#include "sha256.h"
#include "util.h"

static json_t *options_json(const struct judge_opts *o)
{
	json_t *j = json_object();
	json_object_set_new(j, "timeout_s", json_real(o->timeout_s));
	json_object_set_new(j, "draws", json_integer(o->draws));
	json_object_set_new(j, "warmup", json_integer(o->warmup));
	json_object_set_new(j, "timed", json_integer(o->timed));
	json_object_set_new(j, "rechecks", json_integer(o->rechecks));
	json_object_set_new(j, "max_kernel_bytes", json_integer(o->max_kernel_bytes));
	json_object_set_new(j, "gpu_index", json_integer(o->gpu));
	json_object_set_new(j, "fixed_seed", o->seed ? json_string(o->seed) : json_null());
	return j;
}

/* Record the evaluation as running. 0 or -1 (error printed). */
static int begin_record(const char *root, const struct judge_opts *o, const struct problem *p,
			const char *dsl, const char *kernel, struct store *st, int64_t *id)
{
	char problem_hash[65], grader_hash[65], kernel_hash[65] = "";
	static const char *const problem_files[] = {"problem.json", "reference.py"};
	char *grader_dir = xstrfmt("%s/grader/mkb_grader", root);
	int rc = fingerprint_files(p->dir, problem_files, 2, problem_hash);
	if (rc == 0)
		rc = fingerprint_dir(grader_dir, ".py", grader_hash);
	free(grader_dir);
	if (rc < 0)
		return -1;
	char *src = NULL;
	size_t len = 0;
	/* The source is kept when it is within the limit: it is what was graded. */
	if (read_file(kernel, (size_t)o->max_kernel_bytes, &src, &len) == 0) {
		sha256_hex(src, len, kernel_hash);
		utf8_sanitize(src);
	}
	json_t *oj = options_json(o);
	char *options = json_dumps(oj, JSON_COMPACT);
	json_decref(oj);
	struct eval_record rec = {
		.problem = p->number, .dsl = dsl, .workload = o->workload, .device = o->device,
		.kernel_path = kernel, .kernel_source = src,
		.kernel_sha256 = *kernel_hash ? kernel_hash : NULL,
		.problem_sha256 = problem_hash, .grader_sha256 = grader_hash, .options_json = options,
	};
	rc = store_begin_evaluation(st, &rec, id);
	free(options);
	free(src);
	return rc;
}

int grade(const char *root, const struct judge_opts *o, const struct problem *p, const char *dsl,
	  const char *kernel, struct store *st, struct verdict *v, int64_t *id)
{
	*id = 0;
	if (st && begin_record(root, o, p, dsl, kernel, st, id) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot record the evaluation in the store");
		return -2;
	}
	if (judge_evaluate(o, p, dsl, kernel, v) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "the evaluation could not be set up");
		if (st)
			store_finish_evaluation(st, *id, v);
		return -1;
	}
	if (st && store_finish_evaluation(st, *id, v) < 0)
		return -2;
	return 0;
}

int grade_env_open(struct grade_env *g, const char *root, struct judge_opts *o,
		   const char *store_path, int no_store)
{
	memset(g, 0, sizeof(*g));
	if (!o->python)
		o->python = g->python = paths_python(root);
	o->grader_dir = g->grader_dir = xstrfmt("%s/grader", root);
	if (!no_store) {
		char *path = store_path ? xstrdup(store_path) : paths_store(root);
		int rc = store_open(path, &g->store);
		free(path);
		if (rc < 0) {
			grade_env_close(g);
			return -1;
		}
	}
	proc_become_subreaper();
	return 0;
}

void grade_env_close(struct grade_env *g)
{
	store_close(g->store);
	free(g->python);
	free(g->grader_dir);
	memset(g, 0, sizeof(*g));
}
