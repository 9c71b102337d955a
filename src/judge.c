#define _GNU_SOURCE
#include "judge.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "mkb_limits.h"
#include "paths.h"
#include "proc.h"
#include "sandbox.h"
#include "util.h"
#include "zygote.h"

#define SYNTAX_MARKER "mkb-syntax: " /* what the grader prints before a syntax error */
#define RULE_MARKER "mkb-rule: "     /* ... and before a broken DSL rule */

/* Variables the candidate never sees: model credentials. */
static const char *const scrubbed_env[] = {
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
	"MKB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY",
};

void judge_opts_init(struct judge_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->python = "python3";
	o->device = "cuda";
	/* one folder per machine: the GPUs' locks and the judge queue's slots */
	const char *locks = getenv("MKB_LOCK_DIR");
	o->lock_dir = locks && *locks ? locks : "/tmp";
	const char *zygote = getenv("MKB_ZYGOTE");
	o->zygote = zygote && *zygote ? zygote : NULL;
	o->workload = "visible";
	o->timeout_s = JUDGE_TIMEOUT_S;
	o->max_kernel_bytes = JUDGE_MAX_KERNEL_BYTES;
	o->draws = 5;
	o->warmup = 10;
	o->timed = 50;
	o->rechecks = 3;
	o->rules = "enforce";
	o->max_timed = 200;
	o->dsl_min_share = JUDGE_DSL_MIN_SHARE;
}

/* Environment changes for every grader process; strings owned by *env_out. */
struct grader_env {
	const char *list[ARRAY_SIZE(scrubbed_env) + 9];
	char *owned[3];
};

static void grader_env_build(struct grader_env *e, const struct judge_opts *o)
{
	size_t n = 0;
	memset(e, 0, sizeof(*e));
	const char *pp = getenv("PYTHONPATH");
	e->owned[0] = pp && *pp ? xstrfmt("PYTHONPATH=%s:%s", o->grader_dir, pp)
				: xstrfmt("PYTHONPATH=%s", o->grader_dir);
	e->list[n++] = e->owned[0];
	e->list[n++] = "PYTHONUNBUFFERED=1";
	e->list[n++] = "PYTHONDONTWRITEBYTECODE=1";
	e->list[n++] = "MKB_PEER_FD=3";
	if (!strcmp(o->device, "cuda")) {
		e->owned[1] = xstrfmt("CUDA_VISIBLE_DEVICES=%d", o->gpu);
		e->list[n++] = e->owned[1];
	} else {
		e->list[n++] = "CUDA_VISIBLE_DEVICES=";
	}
	if (o->fixed_layout)
		e->list[n++] = "PYTHONHASHSEED=0";
	for (size_t i = 0; i < ARRAY_SIZE(scrubbed_env); i++)
		e->list[n++] = scrubbed_env[i];
	e->list[n] = NULL;
}

static void grader_env_release(struct grader_env *e)
{
	for (size_t i = 0; i < ARRAY_SIZE(e->owned); i++)
		free(e->owned[i]);
}

static void collect(void *ctx, const char *data, size_t len)
{
	buf_add_tail(ctx, data, len);
}

/* Size, encoding and syntax. 0 if the kernel may be graded; otherwise the
 * verdict is REJECTED (or INFRA_ERROR when Python itself cannot run). */
static int precheck(const struct judge_opts *o, const char *kernel_path, const char *dsl,
		    struct verdict *v)
{
	char *src = NULL;
	size_t len;
	if (read_file(kernel_path, (size_t)o->max_kernel_bytes, &src, &len) < 0) {
		if (errno == EFBIG)
			verdict_set(v, VERDICT_REJECTED, "kernel file '%s' is over the %ld-byte limit",
				    kernel_path, o->max_kernel_bytes);
		else
			verdict_set(v, VERDICT_REJECTED, "cannot read kernel file '%s': %s", kernel_path,
				    strerror(errno));
		v->not_counted = 1;
		return -1;
	}
	free(src);

	struct grader_env env;
	grader_env_build(&env, o);
	const char *argv[] = {o->python, "-m", "mkb_grader", "--syntax", kernel_path, dsl, o->rules, NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.env = env.list;
	c.new_group = 1;
	struct buf out = BUF_INIT(JUDGE_OUTPUT_TAIL_MAX);
	int rc = -1;
	if (child_start(&c) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot start the Python interpreter '%s'", o->python);
		goto out;
	}
	child_feed(&c, "", 0);
	int timed_out = child_pump(&c, now_ms() + JUDGE_SYNTAX_TIMEOUT_S * 1e3, collect, &out, &out, 0);
	if (timed_out)
		child_kill(&c);
	int status = 0;
	child_finish(&c, &status);
	utf8_sanitize(out.data ? out.data : (char[]){0});
	if (timed_out)
		verdict_set(v, VERDICT_INFRA_ERROR, "syntax check did not finish in %.0f s", JUDGE_SYNTAX_TIMEOUT_S);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
		 !strncmp(buf_str(&out), SYNTAX_MARKER, strlen(SYNTAX_MARKER))) {
		const char *why = buf_str(&out) + strlen(SYNTAX_MARKER);
		verdict_set(v, VERDICT_REJECTED, "kernel file is not valid Python: %.*s",
			    (int)strcspn(why, "\n"), why);
		v->not_counted = 1;
	}
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
		 !strncmp(buf_str(&out), RULE_MARKER, strlen(RULE_MARKER))) {
		const char *why = buf_str(&out) + strlen(RULE_MARKER);
		verdict_set(v, VERDICT_REJECTED, "breaks a DSL rule: %.*s", (int)strcspn(why, "\n"), why);
	}
	else
		verdict_set(v, VERDICT_INFRA_ERROR, "syntax check failed to run: %s", buf_str(&out));
out:
	buf_release(&out);
	grader_env_release(&env);
	return rc;
}

/* The grader's stdout, split into JSON lines. */
struct reader {
	struct buf line;
	struct verdict *v;
	json_t *result;
	int overflow;
};

static void handle_line(struct reader *r, const char *line)
{
	json_error_t jerr;
	json_t *msg = json_loads(line, 0, &jerr);
	const char *type = json_string_value(json_object_get(msg, "type"));
	/* Lines that are not protocol messages are dropped: the candidate's own
	 * stdout is redirected to stderr by the grader, so it cannot forge one. */
	if (!type) {
		json_decref(msg);
		return;
	}
	if (!strcmp(type, "stage")) {
		const char *stage = json_string_value(json_object_get(msg, "stage"));
		const char *gpu = json_string_value(json_object_get(msg, "gpu"));
		if (stage) {
			free(r->v->stage);
			r->v->stage = xstrdup(stage);
			/* What the events prove, for a grader that dies before its result:
			 * any stage after "import" means the kernel imported, and entering
			 * correctness draw k means k - 1 draws passed. */
			if (strcmp(stage, "setup") && strcmp(stage, "import"))
				r->v->imported = 1;
			json_t *draw = json_object_get(msg, "draw");
			if (!strcmp(stage, "correctness") && json_is_integer(draw))
				r->v->draws_passed = (int)json_integer_value(draw) - 1;
			else if (r->v->imported && strcmp(stage, "correctness")) {
				r->v->draws_passed = r->v->draws_total;
				r->v->correct = 1;
			}
		}
		if (gpu) {
			free(r->v->gpu);
			r->v->gpu = xstrdup(gpu);
		}
		json_array_append(r->v->stages, msg);
	} else if (!strcmp(type, "result") && !r->result) {
		json_object_del(msg, "type");
		r->result = json_incref(msg);
	}
	json_decref(msg);
}

static void on_stdout(void *ctx, const char *data, size_t len)
{
	struct reader *r = ctx;
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n') {
			if (buf_add(&r->line, data + i, 1) < 0)
				r->overflow = 1;
			continue;
		}
		if (!r->overflow)
			handle_line(r, buf_str(&r->line));
		r->overflow = 0;
		buf_consume(&r->line, r->line.len);
	}
}

static json_t *build_request(const struct judge_opts *o, const struct problem *p,
			     const char *dsl, const char *kernel_abs)
{
	json_t *req = json_object();
	json_object_set_new(req, "protocol", json_integer(JUDGE_PROTOCOL_VERSION));
	json_object_set_new(req, "problem", json_integer(p->number));
	json_object_set_new(req, "dsl", json_string(dsl));
	json_object_set_new(req, "problem_dir", json_string(p->dir));
	json_object_set_new(req, "kernel", json_string(kernel_abs));
	json_object_set_new(req, "device", json_string(o->device));
	json_object_set_new(req, "workload", json_string(o->workload));
	json_object_set_new(req, "draws", json_integer(o->draws));
	json_object_set_new(req, "warmup", json_integer(o->warmup));
	json_object_set_new(req, "timed", json_integer(o->timed));
	json_object_set_new(req, "rechecks", json_integer(o->rechecks));
	json_object_set_new(req, "timeout_s", json_real(o->timeout_s));
	if (o->until_ci > 0) {
		json_object_set_new(req, "until_ci", json_real(o->until_ci));
		json_object_set_new(req, "max_timed", json_integer(o->max_timed));
	}
	if (o->pin_cpus)
		json_object_set_new(req, "pin_cpus", json_string(o->pin_cpus));
	if (o->warmup_until > 0)
		json_object_set_new(req, "warmup_until", json_real(o->warmup_until));
	if (o->gc_freeze)
		json_object_set_new(req, "gc_freeze", json_true());
	if (o->fixed_layout)
		json_object_set_new(req, "fixed_layout", json_true());
	if (o->sol_floor_ms > 0)
		json_object_set_new(req, "sol_floor_ms", json_real(o->sol_floor_ms));
	if (!strcmp(o->device, "cuda")) {
		char *lock = xstrfmt("%s/mkb-gpu%d.lock", o->lock_dir, o->gpu);
		json_object_set_new(req, "gpu_lock", json_string(lock));
		free(lock);
	}
	if (o->seed)
		json_object_set_new(req, "seed", json_integer(strtoll(o->seed, NULL, 10)));
	const char *launches = o->launches ? o->launches
			       : o->rules && !strcmp(o->rules, "paper") ? "record" : "enforce";
	json_object_set_new(req, "launches", json_string(launches));
	json_object_set_new(req, "dsl_min_share", json_real(o->dsl_min_share));
	return req;
}

/* Before the kernel is imported only our own code has run. */
static int before_kernel(const char *stage)
{
	return !strcmp(stage, "") || !strcmp(stage, "setup");
}

/* What the process's end means when no result line arrived. */
static void classify_exit(struct verdict *v, int status)
{
	char how[64];
	proc_describe_status(status, how, sizeof(how));
	if (WIFSIGNALED(status)) {
		v->term_signal = WTERMSIG(status);
		verdict_set(v, VERDICT_CRASHED, "grader killed by %s during stage '%s'", how, v->stage);
		return;
	}
	v->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (before_kernel(v->stage))
		verdict_set(v, VERDICT_INFRA_ERROR, "grader exited with %s before importing the kernel", how);
	else
		verdict_set(v, VERDICT_CRASHED, "grader exited with %s during stage '%s'", how, v->stage);
}

/* ---- the candidate process ---------------------------------------------- */

/* Variables a candidate process may see; everything else (keys, tokens, the
 * judge's own settings) stays out: its environment starts empty.
 * PYTHONHASHSEED: a fixed seed is a noise measure (--fixed-layout), the
 * same in both processes; it is no secret. */
static const char *const passed_env[] = {
	"CUTE_DSL_CACHE_DIR", "CUTE_DSL_ARCH", "TVM_CUDA_COMPILE_MODE", "CUDA_HOME", "CUDA_PATH",
	"LD_LIBRARY_PATH", "PYTHONHASHSEED",
};

struct candidate_setup {
	struct sandbox sb;
	char *scratch;           /* private writable folder, removed afterwards */
	char *kernel_dir;
	const char *env[ARRAY_SIZE(passed_env) + 16];
	char **owned;            /* strings env and sb point into */
	size_t nowned;
};

static const char *own(struct candidate_setup *cs, char *s)
{
	cs->owned = xrealloc(cs->owned, (cs->nowned + 1) * sizeof(*cs->owned));
	return cs->owned[cs->nowned++] = s;
}

static int candidate_setup(struct candidate_setup *cs, const struct judge_opts *o,
			   const char *kernel_abs)
{
	memset(cs, 0, sizeof(*cs));
	sandbox_init(&cs->sb);
	const char *tmp = getenv("TMPDIR");
	char *templ = xstrfmt("%s/mkb-candidate-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(templ)) {
		int e = errno;
		free(templ);
		return error("cannot make a scratch folder: %s", strerror(e));
	}
	cs->scratch = templ;
	cs->kernel_dir = xstrdup(kernel_abs);
	char *slash = strrchr(cs->kernel_dir, '/');
	if (slash == cs->kernel_dir)
		slash[1] = '\0'; /* a kernel in / */
	else if (slash)
		*slash = '\0';

	struct sandbox *sb = &cs->sb;
	int rc = sandbox_allow_system(sb);
	for (size_t i = 0; o->python_trees && o->python_trees[i]; i++)
		rc |= sandbox_allow_read(sb, o->python_trees[i]);
	rc |= sandbox_allow_read(sb, o->grader_dir);
	rc |= sandbox_allow_read(sb, cs->kernel_dir);
	rc |= sandbox_allow_write(sb, cs->scratch);
	rc |= sandbox_allow_write(sb, "/dev");
	/* Trees a machine's GPU driver or DSL needs beyond these (a colon list
	 * each; docs/judge.md): the repository is never added. */
	static const char *const extra[2] = {"MKB_SANDBOX_READ", "MKB_SANDBOX_WRITE"};
	for (int w = 0; w < 2; w++) {
		const char *list = getenv(extra[w]);
		for (const char *q = list; q && *q;) {
			size_t len = strcspn(q, ":");
			const char *tree = own(cs, xstrfmt("%.*s", (int)len, q));
			if (*tree && !paths_touch_root(tree, o->root))
				rc |= w ? sandbox_allow_write(sb, tree) : sandbox_allow_read(sb, tree);
			q += len + (q[len] == ':');
		}
	}

	size_t n = 0;
	cs->env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	cs->env[n++] = "LANG=C.UTF-8";
	cs->env[n++] = "PYTHONUNBUFFERED=1";
	cs->env[n++] = "PYTHONDONTWRITEBYTECODE=1";
	cs->env[n++] = "MKB_PEER_FD=3";
	cs->env[n++] = own(cs, xstrfmt("HOME=%s", cs->scratch));
	cs->env[n++] = own(cs, xstrfmt("TMPDIR=%s", cs->scratch));
	cs->env[n++] = !strcmp(o->device, "cuda") ? own(cs, xstrfmt("CUDA_VISIBLE_DEVICES=%d", o->gpu))
						  : "CUDA_VISIBLE_DEVICES=";
	/* PYTHONPATH: the grader, then the caller's entries (the DSLs' site on
	 * the GPU machine) that show nothing of the repository. */
	struct buf pp = BUF_INIT(1 << 16);
	rc |= buf_adds(&pp, o->grader_dir);
	char **caller = paths_python_path_outside(o->root);
	for (size_t i = 0; caller[i]; i++) {
		const char *real = own(cs, caller[i]);
		if (sandbox_allow_read(sb, real) < 0) {
			warning("candidate PYTHONPATH: entries from '%s' on are left out (too many trees)", real);
			for (size_t k = i + 1; caller[k]; k++)
				free(caller[k]);
			break;
		}
		rc |= buf_adds(&pp, ":");
		rc |= buf_adds(&pp, real);
	}
	free(caller);
	cs->env[n++] = own(cs, xstrfmt("PYTHONPATH=%s", buf_str(&pp)));
	buf_release(&pp);
	if (o->fixed_layout)
		cs->env[n++] = "PYTHONHASHSEED=0";
	for (size_t i = 0; i < ARRAY_SIZE(passed_env); i++) {
		const char *val = getenv(passed_env[i]);
		if (!val || (o->fixed_layout && !strcmp(passed_env[i], "PYTHONHASHSEED")))
			continue;
		cs->env[n++] = own(cs, xstrfmt("%s=%s", passed_env[i], val));
		if (!strcmp(passed_env[i], "CUTE_DSL_CACHE_DIR"))
			rc |= sandbox_allow_write(sb, val);
	}
	cs->env[n] = NULL;

	sb->disable = o->sandbox_off;
	sb->file_bytes = CANDIDATE_FILE_BYTES;
	sb->open_files = CANDIDATE_OPEN_FILES;
	sb->processes = CANDIDATE_PROCESSES;
	/* CUDA maps far more address space than it uses: limit data instead. */
	sb->mem_data = !strcmp(o->device, "cuda");
	sb->thread_names = sb->mem_data;
	sb->mem_bytes = sb->mem_data ? CANDIDATE_GPU_DATA_BYTES : CANDIDATE_MEM_BYTES;
	return rc ? -1 : 0;
}

static void candidate_release(struct candidate_setup *cs)
{
	if (cs->scratch && remove_tree(cs->scratch) < 0)
		warning("cannot remove '%s'", cs->scratch);
	free(cs->scratch);
	free(cs->kernel_dir);
	for (size_t i = 0; i < cs->nowned; i++)
		free(cs->owned[i]);
	free(cs->owned);
	memset(cs, 0, sizeof(*cs));
}

/* c is the zygote's child zc: supervised through its connection (proc.h). */
static void zygote_attach(struct child *c, struct zygote_child *zc, struct child_remote *remote)
{
	c->pid = (pid_t)zc->pid;
	c->layers = zc->layers;
	remote->reap = zygote_reap;
	remote->kill = zygote_kill_ctx;
	remote->ctx = zc;
	c->remote = remote;
}

/* The checker forked from the checkers' zygote (`mkb zygote`), c's pipes
 * and fd 3 as child_start would give them. 0, or -1 (a warning; the caller
 * starts it cold). */
static int checker_from_zygote(const struct judge_opts *o, struct child *c, struct zygote_child *zc,
			       struct child_remote *remote)
{
	int fds[3][2], made = 0;
	while (made < 3 && pipe2(fds[made], O_CLOEXEC) == 0)
		made++;
	if (made < 3) {
		int e = errno;
		for (int i = 0; i < made; i++) {
			close(fds[i][0]);
			close(fds[i][1]);
		}
		warning("the checker starts cold: pipe: %s", strerror(e));
		return -1;
	}
	int *in = fds[0], *out = fds[1], *err = fds[2];
	char **envp = child_env(c);
	char cwd[4096], why[256];
	int rc = -1;
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(why, sizeof(why), "getcwd: %s", strerror(errno));
	else
		rc = zygote_spawn_checker(o->zygote, envp, cwd, in[0], out[1], err[1], c->pass_fd, zc, why,
					  sizeof(why));
	free(envp);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (rc < 0) {
		close(in[1]);
		close(out[0]);
		close(err[0]);
		warning("the checkers' zygote at %s: %s; the checker starts cold", o->zygote, why);
		return -1;
	}
	c->in_fd = in[1];
	c->out_fd = out[0];
	c->err_fd = err[0];
	zygote_attach(c, zc, remote);
	return 0;
}

/* The checker reported that the candidate process went away: say how. */
static void explain_lost_candidate(struct verdict *v, int status)
{
	char how[64];
	proc_describe_status(status, how, sizeof(how));
	char *reason = xstrfmt("%s (%s)", v->reason, how);
	free(v->reason);
	v->reason = reason;
	if (WIFSIGNALED(status))
		v->term_signal = WTERMSIG(status);
}

int judge_zygote_exec(const struct judge_opts *o, const char *socket_path)
{
	/* The candidate's environment and Python (candidate_setup's, for a
	 * "kernel" in the grader's folder): the zygote holds nothing a
	 * candidate may not see, since each candidate is its fork. */
	char *fake = xstrfmt("%s/zygote", o->grader_dir);
	struct candidate_setup cs;
	int rc = candidate_setup(&cs, o, fake);
	free(fake);
	if (rc < 0) {
		candidate_release(&cs);
		return error("cannot prepare the zygote's environment");
	}
	char *lib = xstrfmt("%s/build/libmkb_zygote.so", o->root);
	if (access(lib, R_OK) < 0) {
		error("%s is not built (make build/libmkb_zygote.so)", lib);
		free(lib);
		candidate_release(&cs);
		return -1;
	}
	const char *python = o->python_real ? o->python_real : o->python;
	/* The checkers' zygote: a process of its own (what a checker's request
	 * carries must never be copied into a candidate), in the checker's
	 * environment, ended with us (the candidates' zygote) by the kernel. */
	char *checker_name = xstrfmt("%s:checker", socket_path);
	struct grader_env genv;
	grader_env_build(&genv, o);
	struct child tmpl = CHILD_INIT;
	tmpl.env = genv.list;
	char **checker_env = child_env(&tmpl);
	const char *cargv[] = {o->python, "-m", "mkb_grader.zygote", "--role", "checker", "--socket", checker_name,
			       "--library", lib, NULL};
	/* --fixed-layout: both zygotes, and so every process forked from them,
	 * with the same memory layout every time */
	if (o->fixed_layout && proc_fix_layout() < 0)
		warning("the zygotes keep address randomisation: personality: %s", strerror(errno));
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		execve(cargv[0], (char *const *)cargv, checker_env);
		_exit(127);
	}
	free(checker_env);
	grader_env_release(&genv);
	free(checker_name);
	if (pid < 0)
		warning("the checkers' zygote did not start: %s (checkers start cold)", strerror(errno));
	/* python becomes this process: it removes the scratch folder when it ends */
	const char *argv[] = {python, "-m", "mkb_grader.zygote", "--socket", socket_path, "--library", lib,
			      "--scratch", cs.scratch, NULL};
	execve(python, (char *const *)argv, (char *const *)cs.env);
	error("cannot run '%s': %s", python, strerror(errno));
	free(lib);
	candidate_release(&cs);
	return -1;
}

int judge_evaluate(const struct judge_opts *o, const struct problem *p, const char *dsl,
		   const char *kernel_path, struct verdict *v)
{
	if (!problem_workload(p, o->workload))
		return error("problem %d has no workload '%s'", p->number, o->workload);
	if (strcmp(o->device, "cuda") && strcmp(o->device, "cpu"))
		return error("unknown device '%s' (cuda or cpu)", o->device);
	if (precheck(o, kernel_path, dsl, v) < 0)
		return 0;
	char *kernel_abs = realpath(kernel_path, NULL);
	if (!kernel_abs) {
		verdict_set(v, VERDICT_REJECTED, "cannot resolve '%s': %s", kernel_path, strerror(errno));
		v->not_counted = 1;
		return 0;
	}
	/* Wait for a slot of the judge queue; it names the GPU. */
	struct judge_slot slot;
	if (judge_queue_take(o->lock_dir, o->slots, o->ngpus ? o->gpus : NULL, o->ngpus, o->gpu, &slot) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, proc_interrupted() ? "interrupted while queued for the judge"
								: "cannot join the judge queue");
		free(kernel_abs);
		return 0;
	}
	struct judge_opts slotted = *o;
	slotted.gpu = slot.gpu;
	o = &slotted;
	v->queue_ms = slot.queue_ms;
	v->gpu_index = strcmp(o->device, "cuda") ? -1 : o->gpu;
	v->slot = slot.index;

	json_t *req = build_request(o, p, dsl, kernel_abs);
	char *req_json = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	char *req_text = xstrfmt("%s\n", req_json);
	free(req_json);
	struct grader_env env;
	grader_env_build(&env, o);
	struct candidate_setup cs;
	int pair[2] = {-1, -1}, cand_out[2] = {-1, -1};
	const char *argv[] = {o->python, "-m", "mkb_grader", NULL};
	const char *cand_argv[] = {o->python_real ? o->python_real : o->python, "-m",
				   "mkb_grader.candidate", NULL};
	struct child c = CHILD_INIT, cand = CHILD_INIT;
	struct zygote_child zc = ZYGOTE_CHILD_INIT, zck = ZYGOTE_CHILD_INIT;
	struct child_remote remote, cand_remote;
	struct reader r = {BUF_INIT(JUDGE_PROTOCOL_LINE_MAX), v, NULL, 0};
	v->draws_total = o->draws;
	struct buf tail = BUF_INIT(JUDGE_OUTPUT_TAIL_MAX);
	double t0 = now_ms();

	if (candidate_setup(&cs, o, kernel_abs) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot prepare the candidate's sandbox");
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0 ||
	    pipe2(cand_out, O_CLOEXEC) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot connect checker and candidate: %s",
			    strerror(errno));
		goto out;
	}
	/* The candidate: confined, its output into the tail, never the protocol.
	 * Forked from the zygote's pre-imported parent when one is asked for and
	 * answers; else started cold, as the published harness does. */
	if (o->zygote && (o->sandbox_off & SB_NETNS) && (o->sandbox_off & SB_LANDLOCK_SCOPE)) {
		warning("the zygote is not used with the network namespace and Landlock's scope "
			"both off: the candidate could reach it; it starts cold");
	} else if (o->zygote) {
		char why[256];
		if (zygote_spawn(o->zygote, &cs.sb, cs.env, cs.scratch, pair[1], cand_out[1], &zc, why,
				 sizeof(why)) == 0) {
			zygote_attach(&cand, &zc, &cand_remote);
			v->from_zygote = 1;
		} else
			warning("the zygote at %s: %s; the candidate starts cold", o->zygote, why);
	}
	if (v->from_zygote)
		goto started;
	cand.argv = cand_argv;
	cand.env = cs.env;
	cand.clean_env = 1;
	cand.dir = cs.scratch;
	cand.new_group = 1;
	cand.pass_fd = pair[1];
	cand.out_to = cand_out[1];
	cand.sandbox = &cs.sb;
	cand.fixed_layout = o->fixed_layout;
	if (child_start(&cand) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot start the candidate process in its sandbox");
		goto out;
	}
	child_feed(&cand, "", 0);
started:
	close(pair[1]);
	pair[1] = -1;
	close(cand_out[1]);
	cand_out[1] = -1;
	v->sandbox_layers = cand.layers;

	/* The checker: trusted, the only one that talks to us. */
	c.argv = argv;
	c.env = env.list;
	c.new_group = 1;
	c.pass_fd = pair[0];
	c.fixed_layout = o->fixed_layout;
	if (o->zygote && checker_from_zygote(o, &c, &zck, &remote) == 0) {
		v->checker_from_zygote = 1;
	} else if (child_start(&c) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot start the grader with '%s'", o->python);
		goto out;
	}
	close(pair[0]);
	pair[0] = -1;
	c.extra_fd = cand_out[0];
	cand_out[0] = -1;
	if (child_feed(&c, req_text, strlen(req_text)) < 0)
		warning("the grader did not take its request");
	/* The checker charges the candidate's time to its own budget and
	 * reports a hang itself; this deadline only catches a stuck checker. */
	int pumped = child_pump(&c, t0 + (o->timeout_s + JUDGE_CHECKER_GRACE_S) * 1e3, on_stdout, &r,
				&tail, JUDGE_OUTPUT_CAP);
	if (pumped != 0) {
		child_kill(&c);
		child_kill(&cand);
	}
	int status = 0, cand_status = 0;
	child_finish(&c, &status);
	child_kill(&cand); /* its work is over whatever it is doing */
	child_finish(&cand, &cand_status);
	v->eval_ms = now_ms() - t0;
	if (r.line.len && !r.overflow) /* a last line without its newline */
		handle_line(&r, buf_str(&r.line));

	if (pumped == 3) {
		verdict_set(v, VERDICT_INFRA_ERROR, "interrupted by signal %d during stage '%s'",
			    proc_interrupted(), v->stage);
	} else if (pumped == 2) {
		verdict_set(v, VERDICT_FAILED, "more than %lld MB of output during stage '%s': stopped",
			    JUDGE_OUTPUT_CAP >> 20, v->stage);
	} else if (pumped == 1 && before_kernel(v->stage)) {
		verdict_set(v, VERDICT_INFRA_ERROR, "the grader did not reach the kernel within %.0f s",
			    o->timeout_s + JUDGE_CHECKER_GRACE_S);
	} else if (pumped == 1) {
		verdict_set(v, VERDICT_HUNG, "no result after %.0f s: killed during stage '%s'",
			    o->timeout_s + JUDGE_CHECKER_GRACE_S, v->stage);
	} else if (r.result) {
		verdict_from_result(v, r.result);
		if (json_is_true(json_object_get(r.result, "candidate_lost")))
			explain_lost_candidate(v, cand_status);
		if (WIFSIGNALED(status))
			v->term_signal = WTERMSIG(status);
		v->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	} else if (pumped < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "lost contact with the grader");
	} else {
		classify_exit(v, status);
	}
out:
	for (int i = 0; i < 2; i++) {
		if (pair[i] >= 0)
			close(pair[i]);
		if (cand_out[i] >= 0)
			close(cand_out[i]);
	}
	if (cand.pid > 0) {
		int ignored;
		child_kill(&cand);
		child_finish(&cand, &ignored);
	}
	proc_kill_descendants();
	candidate_release(&cs);
	free(v->output_tail);
	v->output_tail = buf_detach(&tail);
	utf8_sanitize(v->output_tail);
	json_decref(r.result);
	buf_release(&r.line);
	grader_env_release(&env);
	free(req_text);
	free(kernel_abs);
	judge_queue_release(&slot);
	return 0;
}
