#define _GNU_SOURCE
#include "grade.h"

#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

#include "fingerprint.h"
#include "paths.h"
#include "proc.h"
#include "sha256.h"
#include "sol.h"
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
	json_object_set_new(j, "rules", json_string(o->rules ? o->rules : "enforce"));
	json_object_set_new(j, "until_ci", o->until_ci > 0 ? json_real(o->until_ci) : json_null());
	json_object_set_new(j, "max_timed", json_integer(o->max_timed));
	/* the noise measures only when asked for: default records stay as they were */
	if (o->pin_cpus)
		json_object_set_new(j, "pin_cpus", json_string(o->pin_cpus));
	if (o->warmup_until > 0)
		json_object_set_new(j, "warmup_until", json_real(o->warmup_until));
	if (o->gc_freeze)
		json_object_set_new(j, "gc_freeze", json_true());
	if (o->fixed_layout)
		json_object_set_new(j, "fixed_layout", json_true());
	if (o->launches) /* run-time DSL rules: recorded only when not the default */
		json_object_set_new(j, "launches", json_string(o->launches));
	if (o->dsl_min_share != JUDGE_DSL_MIN_SHARE) /* likewise */
		json_object_set_new(j, "dsl_min_share", json_real(o->dsl_min_share));
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
		/* kept whole: a NUL byte must not cut it (it becomes '?', like
		 * any byte that is not UTF-8) */
		for (size_t i = 0; i < len; i++)
			if (!src[i])
				src[i] = '?';
		utf8_sanitize(src);
	}
	char boot[64];
	proc_boot_id(boot, sizeof(boot));
	json_t *oj = options_json(o);
	char *options = json_dumps(oj, JSON_COMPACT);
	json_decref(oj);
	struct eval_record rec = {
		.problem = p->number, .dsl = dsl, .workload = o->workload, .device = o->device,
		.kernel_path = kernel, .kernel_source = src,
		.owner_pid = (long long)getpid(), .owner_boot = boot,
		.owner_start = proc_start_ticks((long long)getpid()),
		.kernel_sha256 = *kernel_hash ? kernel_hash : NULL,
		.problem_sha256 = problem_hash, .grader_sha256 = grader_hash, .options_json = options,
	};
	rc = store_begin_evaluation(st, &rec, id);
	free(options);
	free(src);
	return rc;
}

enum grade_rc grade(const char *root, const struct judge_opts *opts, const struct problem *p, const char *dsl,
		    const char *kernel, struct store *st, struct verdict *v, int64_t *id)
{
	*id = 0;
	struct judge_opts local = *opts;
	const struct judge_opts *o = &local;
	/* The floor no kernel can beat on the H200 (the checker applies it only
	 * there); unknown formulas leave it off. */
	struct ceilings h200 = CEILINGS_H200;
	if (!strcmp(o->device, "cuda") && sol_ms(p, o->workload, &h200, &local.sol_floor_ms) < 0)
		local.sol_floor_ms = 0;
	if (st && begin_record(root, o, p, dsl, kernel, st, id) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot record the evaluation in the store");
		return GRADE_STORE_FAILED;
	}
	if (judge_evaluate(o, p, dsl, kernel, v) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "the evaluation could not be set up");
		if (st)
			store_finish_evaluation(st, *id, v);
		return GRADE_BAD_REQUEST;
	}
	if (st && store_finish_evaluation(st, *id, v) < 0)
		return GRADE_STORE_FAILED;
	return GRADE_OK;
}

static void collect_out(void *ctx, const char *data, size_t len)
{
	buf_add(ctx, data, len);
}

/* Ask the interpreter where it lives: the candidate process runs it
 * directly (o->python may be a wrapper script inside the repository) and
 * may read its prefixes and site folders. A probe that fails leaves the
 * defaults; the evaluation then reports what breaks. */
static void probe_python(struct grade_env *g, struct judge_opts *o)
{
	static const char code[] =
		"import os,site,sys\n"
		"print(os.path.abspath(sys.executable))\n"
		"seen=[]\n"
		"for p in [sys.prefix,sys.base_prefix,sys.exec_prefix,sys.base_exec_prefix,"
		"*site.getsitepackages()]:\n"
		"    p=os.path.realpath(p)\n"
		"    if p not in seen: seen.append(p); print(p)\n";
	const char *argv[] = {o->python, "-c", code, NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.new_group = 1;
	struct buf out = BUF_INIT(1 << 16);
	if (child_start(&c) < 0)
		return;
	child_feed(&c, "", 0);
	if (child_pump(&c, now_ms() + 30e3, collect_out, &out, NULL, 0) != 0)
		child_kill(&c);
	int status = 0;
	child_finish(&c, &status);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		char *text = xstrdup(buf_str(&out));
		size_t n = 0;
		for (char *line = text, *next; line && *line; line = next) {
			next = strchr(line, '\n');
			if (next)
				*next++ = '\0';
			if (!g->python_real)
				g->python_real = xstrdup(line);
			/* a tree inside the repository (a venv in build/) would
			 * show the candidate the repository: left out */
			else if (n < GRADE_PYTHON_TREES && !paths_within(line, g->root))
				g->trees[n++] = xstrdup(line);
		}
		free(text);
		o->python_real = g->python_real;
		o->python_trees = (const char *const *)g->trees;
	}
	buf_release(&out);
}

int grade_env_open(struct grade_env *g, const char *root, struct judge_opts *o,
		   const char *store_path, int no_store)
{
	memset(g, 0, sizeof(*g));
	if (!o->python)
		o->python = g->python = paths_python(root);
	o->grader_dir = g->grader_dir = xstrfmt("%s/grader", root);
	o->root = g->root = realpath(root, NULL);
	if (!g->root)
		o->root = g->root = xstrdup(root);
	const char *off = getenv("MKB_SANDBOX_OFF");
	if (off && *off && sandbox_parse_layers(off, &o->sandbox_off) < 0) {
		grade_env_close(g);
		return -1;
	}
	probe_python(g, o);
	/* Ctrl-C or a SIGTERM ends the evaluation under way cleanly: its
	 * processes killed, its row recorded as interrupted. */
	proc_catch_interrupts();
	if (!no_store) {
		char *path = store_path ? xstrdup(store_path) : paths_store(root);
		int rc = store_open(path, &g->store);
		free(path);
		if (rc < 0) {
			grade_env_close(g);
			return -1;
		}
		char boot[64];
		proc_boot_id(boot, sizeof(boot));
		long stale = store_reclaim_abandoned(g->store, boot, proc_alive);
		if (stale > 0)
			warning("store: %ld row%s (evaluations, attempts) left running by an mkb process "
				"that ended (killed?) marked infra_error (abandoned)", stale, stale == 1 ? "" : "s");
	}
	proc_become_subreaper();
	return 0;
}

void grade_env_close(struct grade_env *g)
{
	store_close(g->store);
	free(g->python);
	free(g->grader_dir);
	free(g->root);
	free(g->python_real);
	for (size_t i = 0; g->trees[i]; i++)
		free(g->trees[i]);
	memset(g, 0, sizeof(*g));
}
