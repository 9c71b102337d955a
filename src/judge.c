#define _GNU_SOURCE
#include "judge.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "proc.h"
#include "util.h"

#define PROTOCOL_LINE_MAX (4u << 20)  /* one JSON line from the grader */
#define OUTPUT_TAIL_MAX (16u << 10)   /* stderr kept for the feedback */
#define SYNTAX_TIMEOUT_S 60.0

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
	o->lock_dir = "/tmp";
	o->workload = "visible";
	o->timeout_s = JUDGE_TIMEOUT_S;
	o->max_kernel_bytes = JUDGE_MAX_KERNEL_BYTES;
	o->draws = 5;
	o->warmup = 10;
	o->timed = 50;
	o->rechecks = 3;
}

/* Environment changes for every grader process; strings owned by *env_out. */
struct grader_env {
	const char *list[ARRAY_SIZE(scrubbed_env) + 8];
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
	if (!strcmp(o->device, "cuda")) {
		e->owned[1] = xstrfmt("CUDA_VISIBLE_DEVICES=%d", o->gpu);
		e->list[n++] = e->owned[1];
	} else {
		e->list[n++] = "CUDA_VISIBLE_DEVICES=";
	}
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
static int precheck(const struct judge_opts *o, const char *kernel_path, struct verdict *v)
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
		return -1;
	}
	free(src);

	struct grader_env env;
	grader_env_build(&env, o);
	const char *argv[] = {o->python, "-m", "mkb_grader", "--syntax", kernel_path, NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.env = env.list;
	c.new_group = 1;
	struct buf out = BUF_INIT(OUTPUT_TAIL_MAX);
	int rc = -1;
	if (child_start(&c) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot start the Python interpreter '%s'", o->python);
		goto out;
	}
	child_feed(&c, "", 0);
	int timed_out = child_pump(&c, now_ms() + SYNTAX_TIMEOUT_S * 1e3, collect, &out, &out);
	if (timed_out)
		child_kill(&c);
	int status = 0;
	child_finish(&c, &status);
	utf8_sanitize(out.data ? out.data : (char[]){0});
	if (timed_out)
		verdict_set(v, VERDICT_INFRA_ERROR, "syntax check did not finish in %.0f s", SYNTAX_TIMEOUT_S);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 1)
		verdict_set(v, VERDICT_REJECTED, "kernel file is not valid Python: %.*s",
			    (int)strcspn(buf_str(&out), "\n"), buf_str(&out));
	else
		verdict_set(v, VERDICT_INFRA_ERROR, "syntax check failed to run: %s", buf_str(&out));
out:
	buf_release(&out);
	grader_env_release(&env);
	return rc;
}

/* Hold the GPU for the whole evaluation: timing needs it alone. The lock is
 * an flock, so it dies with the process that held it. Returns the fd or -1. */
static int lock_gpu(const struct judge_opts *o, double *wait_ms)
{
	char *path = xstrfmt("%s/mkb-gpu%d.lock", o->lock_dir, o->gpu);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0) {
		error("cannot open GPU lock '%s': %s", path, strerror(errno));
		free(path);
		return -1;
	}
	double t0 = now_ms();
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			error("cannot lock '%s': %s", path, strerror(errno));
			close(fd);
			free(path);
			return -1;
		}
	}
	*wait_ms = now_ms() - t0;
	free(path);
	return fd;
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
	if (o->seed)
		json_object_set_new(req, "seed", json_integer(strtoll(o->seed, NULL, 10)));
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

int judge_evaluate(const struct judge_opts *o, const struct problem *p, const char *dsl,
		   const char *kernel_path, struct verdict *v)
{
	if (!problem_workload(p, o->workload))
		return error("problem %d has no workload '%s'", p->number, o->workload);
	if (strcmp(o->device, "cuda") && strcmp(o->device, "cpu"))
		return error("unknown device '%s' (cuda or cpu)", o->device);
	if (precheck(o, kernel_path, v) < 0)
		return 0;
	char *kernel_abs = realpath(kernel_path, NULL);
	if (!kernel_abs) {
		verdict_set(v, VERDICT_REJECTED, "cannot resolve '%s': %s", kernel_path, strerror(errno));
		return 0;
	}

	int lock_fd = -1;
	if (!strcmp(o->device, "cuda") && (lock_fd = lock_gpu(o, &v->wait_ms)) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot take the GPU %d lock", o->gpu);
		free(kernel_abs);
		return 0;
	}

	json_t *req = build_request(o, p, dsl, kernel_abs);
	char *req_json = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	char *req_text = xstrfmt("%s\n", req_json);
	free(req_json);
	struct grader_env env;
	grader_env_build(&env, o);
	const char *argv[] = {o->python, "-m", "mkb_grader", NULL};
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.env = env.list;
	c.new_group = 1;
	struct reader r = {BUF_INIT(PROTOCOL_LINE_MAX), v, NULL, 0};
	v->draws_total = o->draws;
	struct buf tail = BUF_INIT(OUTPUT_TAIL_MAX);

	double t0 = now_ms();
	if (child_start(&c) < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "cannot start the grader with '%s'", o->python);
		goto out;
	}
	if (child_feed(&c, req_text, strlen(req_text)) < 0)
		warning("the grader did not take its request");
	int pumped = child_pump(&c, t0 + o->timeout_s * 1e3, on_stdout, &r, &tail);
	if (pumped != 0)
		child_kill(&c);
	int status = 0;
	child_finish(&c, &status);
	v->eval_ms = now_ms() - t0;
	if (r.line.len && !r.overflow) /* a last line without its newline */
		handle_line(&r, buf_str(&r.line));

	if (pumped == 1 && before_kernel(v->stage)) {
		/* Only our own start-up had run: a slow machine, not the kernel. */
		verdict_set(v, VERDICT_INFRA_ERROR, "the grader did not reach the kernel within %.0f s",
			    o->timeout_s);
	} else if (pumped == 1) {
		verdict_set(v, VERDICT_HUNG, "no result after %.0f s: killed during stage '%s'",
			    o->timeout_s, v->stage);
	} else if (r.result) {
		verdict_from_result(v, r.result);
		if (WIFSIGNALED(status))
			v->term_signal = WTERMSIG(status);
		v->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	} else if (pumped < 0) {
		verdict_set(v, VERDICT_INFRA_ERROR, "lost contact with the grader");
	} else {
		classify_exit(v, status);
	}
out:
	proc_kill_descendants();
	free(v->output_tail);
	v->output_tail = buf_detach(&tail);
	utf8_sanitize(v->output_tail);
	json_decref(r.result);
	buf_release(&r.line);
	grader_env_release(&env);
	free(req_text);
	free(kernel_abs);
	if (lock_fd >= 0)
		close(lock_fd); /* releases the flock */
	return 0;
}
