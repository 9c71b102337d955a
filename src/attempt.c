#define _GNU_SOURCE
#include "attempt.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "agent_cli.h"
#include "buf.h"
#include "grade.h"
#include "judge_flags.h"
#include "llm_flags.h"
#include "mkb_limits.h"
#include "model_proxy.h"
#include "paths.h"
#include "proc.h"
#include "sandbox.h"
#include "sha256.h"
#include "store.h"
#include "submit.h"
#include "terminal.h"
#include "util.h"
#include "workspace.h"

void attempt_opts_init(struct attempt_opts *o)
{
	memset(o, 0, sizeof(*o));
	llm_options_init(&o->llm);
	o->decoding = (struct llm_decoding)LLM_DECODING_INIT;
	o->decoding.temperature = AGENT_TEMPERATURE;
	o->wall_s = ATTEMPT_WALL_S;
	o->submissions = ATTEMPT_SUBMISSIONS;
}

void attempt_result_release(struct attempt_result *res)
{
	free(res->status);
	free(res->reason);
	json_decref(res->final);
	json_decref(res->summary);
	memset(res, 0, sizeof(*res));
}

/* ---- skills ------------------------------------------------------------- */

const char *attempt_skill_body(const char *skill)
{
	/* Agent Skills frontmatter: "---" line, fields, "---" line */
	if (strncmp(skill, "---\n", 4))
		return skill;
	const char *end = strstr(skill + 4, "\n---");
	if (!end || (end[4] != '\n' && end[4] != '\0'))
		return skill;
	const char *body = end + 4;
	while (*body == '\n')
		body++;
	return body;
}

char *attempt_skill_section(const char *skill, const char *from_dsl_name)
{
	return xstrfmt("## Skill from a prior attempt\n"
		       "The notes below were distilled by an earlier attempt at this same problem in a "
		       "different kernel DSL (%s).\n\n%s",
		       from_dsl_name, attempt_skill_body(skill));
}

/* ---- the attempt's state ------------------------------------------------ */

struct attempt {
	const struct attempt_opts *o;
	struct attempt_result *res;
	struct store *store;
	struct grade_env g;
	char *self;              /* this binary, for the judge's processes and submit */
	char *workspace, *bin, *run, *subs, *final;
	struct sandbox sb;
	char *env_owned[8];
	const char *env[16];
	struct terminal term;
	struct submit_server server;
	double t0, deadline;     /* now_ms() clock; moved on by judge-queue credit */
	struct llm_client *client; /* the model's client while the agent runs (its deadline follows) */
	int used;                /* submissions counted */
	int tried;               /* submissions asked for */
	struct judge_opts judge;
	char *store_path_used;
	char *shell;             /* the terminal's shell command (outlives every restart) */
	char **pypath;           /* $PYTHONPATH entries outside the repository (the DSLs) */
};

static double elapsed_s(const struct attempt *a)
{
	return (now_ms() - a->t0) / 1e3;
}

static void record(struct attempt *a, const char *kind, json_t *body)
{
	if (!body || !a->store || !a->res->id)
		return;
	if (store_add_attempt_event(a->store, a->res->id, kind, elapsed_s(a), body) < 0)
		warning("attempt %lld: an event could not be recorded", (long long)a->res->id);
}

/* record, taking the caller's reference */
static void note(struct attempt *a, const char *kind, json_t *body)
{
	record(a, kind, body);
	json_decref(body);
}

static void host_record(void *ctx, const char *kind, json_t *body)
{
	record(ctx, kind, body);
}

static double host_seconds_left(void *ctx)
{
	struct attempt *a = ctx;
	return (a->deadline - now_ms()) / 1e3;
}

/* ---- grading ------------------------------------------------------------ */

/* Grade kernel with `mkb eval` in its own process (a judge that crashes
 * takes nothing of the attempt with it). Returns its --json object, or NULL
 * with *why set (caller frees). */
static json_t *grade_file(struct attempt *a, const char *kernel, const char *submission,
			  double minutes_left, char **why)
{
	const struct judge_opts *j = &a->judge;
	char number[16], minutes[32], timeout[32], gpu[16], slots[16], gpus[JUDGE_QUEUE_MAX_GPUS * 6],
		min_share[32];
	snprintf(number, sizeof(number), "%d", a->o->problem->number);
	snprintf(slots, sizeof(slots), "%d", j->slots);
	gpus[0] = '\0';
	for (int i = 0; i < j->ngpus; i++) {
		size_t at = strlen(gpus);
		snprintf(gpus + at, sizeof(gpus) - at, "%s%d", i ? "," : "", j->gpus[i]);
	}
	snprintf(minutes, sizeof(minutes), "%.1f", minutes_left > 0 ? minutes_left : 0);
	snprintf(timeout, sizeof(timeout), "%.0f", j->timeout_s);
	snprintf(gpu, sizeof(gpu), "%d", j->gpu);
	snprintf(min_share, sizeof(min_share), "%.17g", j->dsl_min_share);
	struct judge_timing_text timing_text;
	const char *argv[48 + JUDGE_TIMING_ARGS];
	size_t n = 0;
	argv[n++] = a->self;
	argv[n++] = "eval";
	argv[n++] = number;
	argv[n++] = "--dsl";
	argv[n++] = a->o->dsl->id;
	argv[n++] = "--json";
	argv[n++] = "--device";
	argv[n++] = j->device;
	argv[n++] = "--gpu";
	argv[n++] = gpu;
	argv[n++] = "--timeout";
	argv[n++] = timeout;
	argv[n++] = "--workload";
	argv[n++] = j->workload;
	argv[n++] = "--store";
	argv[n++] = a->store_path_used;
	if (j->python) {
		argv[n++] = "--python";
		argv[n++] = j->python;
	}
	/* the zygote as this command was given it (--zygote auto: its own; ""
	 * none, whatever $MKB_ZYGOTE says) */
	argv[n++] = "--zygote";
	argv[n++] = j->zygote ? j->zygote : "";
	if (j->slots > 0) {
		argv[n++] = "--slots";
		argv[n++] = slots;
	}
	if (j->ngpus > 0) {
		argv[n++] = "--gpus";
		argv[n++] = gpus;
	}
	/* the DSL rules as the attempt was given them (default: enforced) */
	if (j->rules) {
		argv[n++] = "--rules";
		argv[n++] = j->rules;
	}
	if (j->launches) {
		argv[n++] = "--launches";
		argv[n++] = j->launches;
	}
	argv[n++] = "--dsl-min-share";
	argv[n++] = min_share;
	/* how it draws and times, as the command was given it (noise flags
	 * included) */
	judge_timing_argv(j, &timing_text, argv, &n);
	if (submission) {
		argv[n++] = "--submission";
		argv[n++] = submission;
		argv[n++] = "--minutes-left";
		argv[n++] = minutes;
	}
	argv[n++] = kernel;
	argv[n] = NULL;
	struct child c = CHILD_INIT;
	c.argv = argv;
	c.new_group = 1;
	struct buf out = BUF_INIT(ATTEMPT_EVAL_OUTPUT_MAX), err = BUF_INIT(4096);
	int status = 0;
	/* Queued behind other evaluations, mkb eval may wait for its turn
	 * (each of those is bounded by its own timeout) before its own. */
	double limit = j->timeout_s + ATTEMPT_JUDGE_GRACE_S + (j->slots > 0 ? JUDGE_QUEUE_WAIT_MAX_S : 0);
	int rc = child_run(&c, limit, &out, &err, &status);
	json_t *v = rc == 0 ? json_loads(buf_str(&out), 0, NULL) : NULL;
	if (!json_is_object(v)) {
		json_decref(v);
		v = NULL;
		utf8_sanitize(err.data ? err.data : (char[]){0});
		*why = rc == 1 ? xstrfmt("the judge did not answer in %.0f s", limit)
			       : xstrfmt("the judge gave no verdict (%s)", buf_str(&err));
	}
	buf_release(&out);
	buf_release(&err);
	return v;
}

/* Copy the workspace's kernel.py to dst (made read-only for what follows).
 * 0, or -1 with *why set. */
static int snapshot(struct attempt *a, const char *dst_dir, char **why)
{
	char *src = xstrfmt("%s/kernel.py", a->workspace);
	char *dst = xstrfmt("%s/kernel.py", dst_dir);
	int rc = 0;
	if (make_dirs(dst_dir, 0755) < 0) {
		*why = xstrfmt("cannot make '%s'", dst_dir);
		rc = -1;
	} else if (!is_file(src)) {
		*why = xstrdup("there is no kernel.py in the workspace");
		rc = -1;
	} else if (copy_file(src, dst, (size_t)a->judge.max_kernel_bytes) < 0) {
		*why = xstrfmt("kernel.py could not be read, or is over %ld bytes", a->judge.max_kernel_bytes);
		rc = -1;
	}
	free(src);
	free(dst);
	return rc;
}

/* One `submit` from the agent (fd < 0: a control agent's, no socket):
 * grade the kernel, answer with the feedback. */
static void serve_submission(struct attempt *a, int fd)
{
	a->tried++;
	double left_min = (a->deadline - now_ms()) / 60e3;
	if (a->used >= a->o->submissions) {
		char *text = xstrfmt("Submission refused: all %d submissions are used. The kernel.py on "
				     "disk is still graded when the attempt ends.\n", a->o->submissions);
		if (fd >= 0)
			submit_reply(fd, 1, text);
		note(a, "submission", json_pack("{s:i, s:b, s:s}", "asked", a->tried, "counted", 0,
						  "feedback", text));
		free(text);
		return;
	}
	char *dir = xstrfmt("%s/%d", a->subs, a->tried);
	char *why = NULL;
	json_t *v = NULL;
	char *sub = xstrfmt("%d/%d", a->used + 1, a->o->submissions);
	if (snapshot(a, dir, &why) == 0) {
		char *kernel = xstrfmt("%s/kernel.py", dir);
		v = grade_file(a, kernel, sub, left_min, &why);
		free(kernel);
	}
	int counted = v && json_is_true(json_object_get(v, "counts_as_submission"));
	a->used += counted;
	/* Time spent behind other evaluations (a judge slot, the GPU's lock) is
	 * the benchmark's, not the agent's: its wall clock gets it back, so
	 * that budgets match however many attempts run at once. */
	double credit_ms = 0;
	if (v) {
		json_t *q = json_object_get(v, "queue_ms"), *w = json_object_get(v, "wait_ms");
		credit_ms = (json_is_number(q) ? json_number_value(q) : 0) +
			    (json_is_number(w) ? json_number_value(w) : 0);
		if (credit_ms > 0) {
			a->deadline += credit_ms;
			if (a->client)
				a->client->opts.deadline_ms = a->deadline;
		}
	}
	const char *fb = json_string_value(json_object_get(v, "feedback"));
	char *text = fb ? xstrdup(fb)
			: xstrfmt("Submission not counted (%d of %d used)\nNot graded: %s\n", a->used,
				  a->o->submissions, why ? why : "unknown");
	int code = v && json_is_true(json_object_get(v, "passed")) ? 0 : 1;
	if (fd >= 0)
		submit_reply(fd, code, text);
	char *src = NULL;
	char *kpath = xstrfmt("%s/kernel.py", dir);
	if (read_file(kpath, (size_t)a->judge.max_kernel_bytes, &src, NULL) < 0)
		src = NULL;
	else
		utf8_sanitize(src);
	json_t *ev = json_pack("{s:i, s:b, s:s, s:s?, s:O?, s:f}", "asked", a->tried, "counted", counted,
			       "feedback", text, "kernel", src, "verdict", v, "credited_s", credit_ms / 1e3);
	note(a, "submission", ev);
	free(kpath);
	free(src);
	free(text);
	free(sub);
	free(why);
	free(dir);
	json_decref(v);
}

static void submit_direct(struct attempt *a)
{
	serve_submission(a, -1);
}

/* Wait seconds, answering submissions as they come. 1 once the wall clock
 * has run out. */
static int host_wait(void *ctx, double seconds)
{
	struct attempt *a = ctx;
	double end = now_ms() + seconds * 1e3;
	for (;;) {
		double now = now_ms();
		if (now >= a->deadline)
			return 1;
		if (now >= end || proc_interrupted())
			return proc_interrupted() ? 1 : 0;
		double stop = end < a->deadline ? end : a->deadline;
		int ms = (int)(stop - now) + 1;
		struct pollfd p = {a->server.fd, POLLIN, 0};
		int n = poll(&p, 1, ms > 200 ? 200 : ms);
		if (n > 0) {
			int fd = submit_accept(&a->server);
			if (fd >= 0)
				serve_submission(a, fd);
		}
	}
}

/* ---- setting up --------------------------------------------------------- */

static const char *own(struct attempt *a, char *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(a->env_owned); i++)
		if (!a->env_owned[i])
			return a->env_owned[i] = s;
	BUG("attempt: too many owned environment strings");
}

/* The sandbox every process of the agent runs in: the system, the Python
 * the grader uses (torch and the DSL, without a GPU), bin/ to read; the
 * workspace and run/ to write; nothing of the repository, no network. */
static int sandbox_setup(struct attempt *a)
{
	struct sandbox *sb = &a->sb;
	sandbox_init(sb);
	int rc = sandbox_allow_system(sb);
	for (size_t i = 0; a->g.trees[i]; i++)
		rc |= sandbox_allow_read(sb, a->g.trees[i]);
	rc |= sandbox_allow_read(sb, a->bin);
	rc |= sandbox_allow_write(sb, a->workspace);
	rc |= sandbox_allow_write(sb, a->run);
	rc |= sandbox_allow_write(sb, "/dev");
	/* the DSLs where the grader finds them ($PYTHONPATH on the GPU machine) */
	a->pypath = paths_python_path_outside(a->o->root);
	struct buf pp = BUF_INIT(1 << 16);
	for (size_t i = 0; a->pypath[i]; i++) {
		rc |= sandbox_allow_read(sb, a->pypath[i]);
		rc |= buf_printf(&pp, "%s%s", pp.len ? ":" : "", a->pypath[i]);
	}
	sb->disable = a->o->sandbox_off;
	sb->mem_bytes = ATTEMPT_MEM_BYTES;
	sb->mem_data = 1; /* torch maps far more address space than it uses */
	sb->file_bytes = ATTEMPT_FILE_BYTES;
	sb->open_files = ATTEMPT_OPEN_FILES;
	sb->processes = ATTEMPT_PROCESSES;
	sb->cpus = ATTEMPT_CPUS;
	sb->max_tasks = ATTEMPT_TASKS;
	sandbox_cgroup_create(sb); /* where cgroups cannot be made, the layer is not in force */

	/* The environment, from empty: no key, no variable of ours. */
	size_t n = 0;
	char *pydir = xstrdup(a->g.python_real ? a->g.python_real : "/usr/bin/python3");
	char *slash = strrchr(pydir, '/');
	if (slash)
		*slash = '\0';
	a->env[n++] = own(a, xstrfmt("PATH=%s:%s:/usr/local/bin:/usr/bin:/bin", a->bin, pydir));
	free(pydir);
	a->env[n++] = own(a, xstrfmt("HOME=%s", a->workspace));
	a->env[n++] = own(a, xstrfmt("TMPDIR=%s/tmp", a->run));
	a->env[n++] = own(a, xstrfmt("%s=%s/submit.sock", SUBMIT_ENV, a->run));
	a->env[n++] = "TERM=xterm-256color";
	a->env[n++] = "SHELL=/bin/bash";
	a->env[n++] = "LANG=C.UTF-8";
	a->env[n++] = "CUDA_VISIBLE_DEVICES=";
	a->env[n++] = "PYTHONDONTWRITEBYTECODE=1";
	if (pp.len)
		a->env[n++] = own(a, xstrfmt("PYTHONPATH=%s", buf_str(&pp)));
	buf_release(&pp);
	a->env[n] = NULL;
	return rc ? error("attempt: too many sandbox trees") : 0;
}

static int folders_setup(struct attempt *a)
{
	const char *w = a->o->workdir;
	struct stat st;
	if (stat(w, &st) == 0 && !S_ISDIR(st.st_mode))
		return error("'%s' exists and is not a folder", w);
	if (make_dirs(w, 0755) < 0)
		return -1;
	a->workspace = xstrfmt("%s/workspace", w);
	a->bin = xstrfmt("%s/bin", w);
	a->run = xstrfmt("%s/run", w);
	a->subs = xstrfmt("%s/submissions", w);
	a->final = xstrfmt("%s/final", w);
	if (workspace_create(a->o->root, a->o->problem, a->o->dsl, a->workspace) < 0)
		return -1;
	char *tmp = xstrfmt("%s/tmp", a->run);
	int rc = make_dirs(a->bin, 0755) | make_dirs(tmp, 0700) | make_dirs(a->subs, 0755);
	free(tmp);
	if (rc)
		return -1;
	/* The shell's prompt (a non-interactive bash between tmux and the
	 * shell would drop a PS1 from the environment). */
	static const char bashrc[] = "PS1='\\u@sandbox:\\w\\$ '\n";
	char *rcfile = xstrfmt("%s/bashrc", a->bin);
	rc = write_file_atomic(rcfile, bashrc, strlen(bashrc));
	free(rcfile);
	if (rc)
		return -1;
	/* submit: the client built beside this binary (mkb-submit) */
	char *client = xstrfmt("%s-submit", a->self);
	char *submit = xstrfmt("%s/submit", a->bin);
	rc = copy_file(client, submit, 64u << 20);
	if (rc)
		error("the submit client '%s' is missing (make builds it)", client);
	free(client);
	if (!rc && chmod(submit, 0555) < 0)
		rc = error("chmod '%s': %s", submit, strerror(errno));
	free(submit);
	/* an external agent's way to its model: the relay built beside us */
	if (!rc && agent_cli_is(a->o->model)) {
		char *relay_src = xstrfmt("%s-relay", a->self), *relay = xstrfmt("%s/mkb-relay", a->bin);
		rc = copy_file(relay_src, relay, 64u << 20);
		if (rc)
			error("the relay '%s' is missing (make builds it)", relay_src);
		else if (chmod(relay, 0555) < 0)
			rc = error("chmod '%s': %s", relay, strerror(errno));
		free(relay_src);
		free(relay);
	}
	return rc;
}

/* INSTRUCTION.md, with the skill section for a skill arm. NULL on error. */
static char *instruction(struct attempt *a)
{
	char *path = xstrfmt("%s/INSTRUCTION.md", a->workspace);
	char *text = NULL;
	if (read_file(path, 1u << 20, &text, NULL) < 0) {
		error("cannot read '%s'", path);
		free(path);
		return NULL;
	}
	if (a->o->skill_path) {
		char *skill = NULL;
		if (read_file(a->o->skill_path, ATTEMPT_SKILL_MAX_BYTES, &skill, NULL) < 0) {
			error("cannot read the skill '%s' (at most %u bytes)", a->o->skill_path, ATTEMPT_SKILL_MAX_BYTES);
			free(text);
			free(path);
			return NULL;
		}
		utf8_sanitize(skill);
		char *section = attempt_skill_section(skill, a->o->skill_from ? a->o->skill_from : "another DSL");
		char *both = xstrfmt("%s\n%s%s", text, section,
				     section[strlen(section) - 1] == '\n' ? "" : "\n");
		free(text);
		text = both;
		if (write_file_atomic(path, text, strlen(text)) < 0) {
			free(skill);
			free(section);
			free(text);
			free(path);
			return NULL;
		}
		free(section);
		free(skill);
	}
	free(path);
	return text;
}

/* ---- control agents (no model) ------------------------------------------ */

int attempt_is_control(const char *model)
{
	return !strcmp(model, "oracle") || !strcmp(model, "null") || !strcmp(model, "eager");
}

/* A plain-torch stand-in: the reference's own code, solve calling it. It
 * passes the CPU test mode (no DSL rules there) and must be refused on a GPU
 * once the rules are enforced. Caller frees. */
static char *stand_in(const struct attempt *a)
{
	char *path = xstrfmt("%s/reference.py", a->o->problem->dir);
	char *ref = NULL;
	if (read_file(path, 1u << 20, &ref, NULL) < 0) {
		free(path);
		return NULL;
	}
	free(path);
	char *k = xstrfmt("# Control agent stand-in: problem %d's reference, not a DSL kernel.\n%s\n\n"
			  "def solve(*inputs):\n    return reference(*inputs)\n",
			  a->o->problem->number, ref);
	free(ref);
	return k;
}

/* The oracle's kernel: the shipped validation solution on a GPU, the
 * stand-in on the CPU or where none is shipped. *label says which. */
static char *oracle_kernel(const struct attempt *a, const char **label)
{
	if (strcmp(a->judge.device, "cpu")) {
		char *path = xstrfmt("%s/solutions/%02d_%s/%s/kernel.py", a->o->root, a->o->problem->number,
				     a->o->problem->name, a->o->dsl->id);
		char *k = NULL;
		int rc = read_file(path, (size_t)a->judge.max_kernel_bytes, &k, NULL);
		free(path);
		if (rc == 0) {
			*label = "shipped solution";
			return k;
		}
	}
	*label = "plain-torch stand-in (reference)";
	return stand_in(a);
}

static int write_workspace_file(struct attempt *a, const char *name, const char *text)
{
	char *path = xstrfmt("%s/%s", a->workspace, name);
	int rc = write_file_atomic(path, text, strlen(text));
	free(path);
	return rc;
}

/* oracle: the validation kernel and a fixed skill, one submission; null:
 * nothing; eager: the stand-in, one submission. What they did is recorded
 * as "control" events. */
static void control_run(struct attempt *a, struct agent_result *ar)
{
	memset(ar, 0, sizeof(*ar));
	const char *agent = a->o->model, *label = NULL;
	char *kernel = NULL;
	if (!strcmp(agent, "oracle"))
		kernel = oracle_kernel(a, &label);
	else if (!strcmp(agent, "eager")) {
		kernel = stand_in(a);
		label = "plain-torch stand-in (reference)";
	}
	ar->end = AGENT_COMPLETED;
	if (kernel && write_workspace_file(a, "kernel.py", kernel) < 0) {
		ar->end = AGENT_INFRA_ERROR;
		ar->reason = xstrdup("the control agent could not write kernel.py");
	}
	if (!strcmp(agent, "oracle") &&
	    write_workspace_file(a, "SKILL.md", "The oracle control agent submitted the shipped kernel; it "
						"learned nothing and distils nothing.\n") < 0) {
		ar->end = AGENT_INFRA_ERROR;
		free(ar->reason);
		ar->reason = xstrdup("the control agent could not write SKILL.md");
	}
	note(a, "control", json_pack("{s:s, s:s?}", "agent", agent, "kernel", label));
	if (kernel && ar->end == AGENT_COMPLETED && a->o->submissions > 0)
		submit_direct(a);
	free(kernel);
}

/* ---- external agents (cli:NAME) ----------------------------------------- */

#define CLI_RELAY_PORT 18080 /* inside the sandbox's own network namespace */

static void proxy_record(void *ctx, json_t *event)
{
	note(ctx, "proxy", event);
}

/* Run the template's program in the sandbox, behind the relay and the model
 * proxy, until it exits, the wall clock runs out, or a signal comes;
 * answering submissions meanwhile. Its output goes to run/agent.log. */
static void cli_run(struct attempt *a, const char *instruction, struct agent_result *ar)
{
	memset(ar, 0, sizeof(*ar));
	ar->end = AGENT_INFRA_ERROR;
	char *inst_file = xstrfmt("%s/INSTRUCTION.md", a->workspace);
	char *base_url = xstrfmt("http://127.0.0.1:%d", CLI_RELAY_PORT);
	char *templates = xstrfmt("%s/templates", a->o->root);
	char *sock = xstrfmt("%s/model.sock", a->run), *log = xstrfmt("%s/agent.log", a->run);
	char *relay = xstrfmt("%s/mkb-relay", a->bin), *port = xstrfmt("%d", CLI_RELAY_PORT);
	struct agent_cli_vars vars = {instruction, inst_file, a->workspace, base_url};
	struct agent_cli cli;
	struct model_proxy proxy;
	memset(&proxy, 0, sizeof(proxy));
	proxy.fd = -1;
	int logfd = -1;
	struct child c = CHILD_INIT;
	unsigned offered = sandbox_available() & ~a->sb.disable;
	if (!(offered & SB_NETNS) && !a->o->unsafe) {
		char have[256];
		sandbox_describe(offered, have, sizeof(have));
		ar->reason = xstrfmt("an external agent needs a network namespace of its own, which this "
				     "machine does not give (it offers: %s); --unsafe runs it anyway", have);
		error("%s", ar->reason);
		goto out_free;
	}
	if (agent_cli_load(&cli, a->o->model, templates, &vars) < 0) {
		ar->reason = xstrdup("the external agent's template cannot be used");
		goto out_free;
	}
	if (model_proxy_open(&proxy, sock, cli.provider, a->o->llm.base_url) < 0) {
		ar->reason = xstrdup("the model proxy cannot start (a key is needed in the environment)");
		goto out;
	}
	proxy.record = proxy_record;
	proxy.ctx = a;
	/* the program's argv behind the relay; its environment: ours plus the template's */
	const char *argv[AGENT_CLI_MAX_ARGS + 8];
	size_t n = 0;
	argv[n++] = relay;
	argv[n++] = port;
	argv[n++] = sock;
	argv[n++] = "--";
	for (size_t i = 0; cli.argv[i]; i++)
		argv[n++] = cli.argv[i];
	argv[n] = NULL;
	const char *env[ARRAY_SIZE(a->env) + AGENT_CLI_MAX_ENV + 1];
	size_t m = 0;
	for (size_t i = 0; a->env[i]; i++)
		env[m++] = a->env[i];
	for (size_t i = 0; cli.env[i]; i++)
		env[m++] = cli.env[i];
	env[m] = NULL;
	logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (logfd < 0) {
		ar->reason = xstrfmt("cannot write '%s': %s", log, strerror(errno));
		goto out;
	}
	a->sb.inet_port = CLI_RELAY_PORT;
	c.argv = argv;
	c.env = env;
	c.clean_env = 1;
	c.dir = a->workspace;
	c.new_group = 1;
	c.out_to = logfd;
	c.sandbox = &a->sb;
	if (child_start(&c) < 0) {
		ar->reason = xstrdup("the external agent could not start in its sandbox");
		goto out;
	}
	child_feed(&c, "", 0);
	json_t *cmd = json_array();
	for (size_t i = 0; cli.argv[i]; i++)
		json_array_append_new(cmd, json_string(cli.argv[i]));
	char layers[256];
	sandbox_describe(c.layers, layers, sizeof(layers));
	note(a, "cli", json_pack("{s:s, s:s?, s:s, s:o, s:s, s:s}", "agent", cli.name, "model", cli.model,
				  "provider", llm_provider_name(cli.provider), "command", cmd, "sandbox", layers,
				  "upstream", proxy.upstream));
	int status = 0, ended = 0;
	ar->end = AGENT_COMPLETED;
	while (!ended) {
		if (now_ms() >= a->deadline) {
			ar->end = AGENT_OUT_OF_TIME;
			ar->reason = xstrdup("the wall clock ran out");
			break;
		}
		if (proc_interrupted())
			break;
		struct pollfd p[2] = {{a->server.fd, POLLIN, 0}, {proxy.fd, POLLIN, 0}};
		if (poll(p, 2, 200) > 0) {
			if (p[0].revents & POLLIN) {
				int fd = submit_accept(&a->server);
				if (fd >= 0)
					serve_submission(a, fd);
			}
			if (p[1].revents & POLLIN)
				model_proxy_serve(&proxy);
		}
		pid_t w = waitpid(c.pid, &status, WNOHANG);
		if (w == c.pid) {
			ended = 1;
			c.reaped = 1;
			c.status = status;
		}
	}
	if (!ended) {
		child_kill(&c);
		child_finish(&c, &status);
	} else {
		child_finish(&c, &status);
	}
	char how[64];
	proc_describe_status(status, how, sizeof(how));
	note(a, "cli_end", json_pack("{s:s, s:b}", "status", how, "exited", ended));
	if (ended && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		ar->reason = xstrfmt("the external agent ended with %s", how);
	ar->calls = (int)proxy.requests;
	ar->input_tokens = proxy.usage.input_tokens;
	ar->cached_tokens = proxy.usage.cached_input_tokens;
	ar->output_tokens = proxy.usage.output_tokens;
	ar->cost_usd = a->o->llm.price ? llm_cost_usd(a->o->llm.price, &proxy.usage) : -1;
out:
	if (logfd >= 0)
		close(logfd);
	model_proxy_close(&proxy);
	agent_cli_release(&cli);
out_free:
	free(inst_file);
	free(base_url);
	free(templates);
	free(sock);
	free(log);
	free(relay);
	free(port);
}

/* ---- the attempt -------------------------------------------------------- */

static json_t *options_json(const struct attempt *a)
{
	const struct attempt_opts *o = a->o;
	char layers[256];
	sandbox_describe(a->term.layers, layers, sizeof(layers));
	json_t *dec = llm_decoding_json(&o->decoding);
	return json_pack("{s:s, s:f, s:i, s:o, s:I, s:I, s:s, s:s, s:s, s:i, s:I, s:s?, s:I}",
			 "agent", agent_cli_is(o->model) ? "external (cli)" : attempt_is_control(o->model)
				  ? "control" : "terminus-2 (mkb)",
			 "wall_s", o->wall_s, "submissions", o->submissions,
			 "decoding", dec, "context_tokens", (json_int_t)o->context_tokens,
			 "max_turns", (json_int_t)o->max_turns, "sandbox", layers,
			 "device", a->judge.device, "workload", a->judge.workload, "cpus", ATTEMPT_CPUS,
			 "mem_bytes", (json_int_t)ATTEMPT_MEM_BYTES, "skill_from", o->skill_from,
			 "max_tasks", (json_int_t)ATTEMPT_TASKS);
}

/* Copy name from the workspace into final/; its text (NULL when absent). */
static char *keep(struct attempt *a, const char *name, size_t max)
{
	char *src = xstrfmt("%s/%s", a->workspace, name), *dst = xstrfmt("%s/%s", a->final, name);
	char *text = NULL;
	if (is_file(src) && copy_file(src, dst, max) == 0 && read_file(dst, max, &text, NULL) == 0)
		utf8_sanitize(text);
	else
		text = NULL;
	free(src);
	free(dst);
	return text;
}

static const char *status_for(enum agent_end end, json_t *final)
{
	switch (end) {
	case AGENT_OUT_OF_TIME: return "timed_out";
	case AGENT_MODEL_ERROR: return "model_error";
	case AGENT_INFRA_ERROR: return "infra_error";
	default: break;
	}
	if (!final || !strcmp(json_string_value(json_object_get(final, "status")) ?: "", "infra_error"))
		return "infra_error";
	return json_is_true(json_object_get(final, "passed")) ? "passed" : "failed";
}

static void release(struct attempt *a)
{
	terminal_stop(&a->term);
	sandbox_cgroup_remove(&a->sb);
	submit_close(&a->server);
	grade_env_close(&a->g);
	for (size_t i = 0; i < ARRAY_SIZE(a->env_owned); i++)
		free(a->env_owned[i]);
	free(a->self);
	free(a->workspace);
	free(a->bin);
	free(a->run);
	free(a->subs);
	free(a->final);
	free(a->store_path_used);
	free(a->shell);
	for (size_t i = 0; a->pypath && a->pypath[i]; i++)
		free(a->pypath[i]);
	free(a->pypath);
}

int attempt_run(const struct attempt_opts *o, struct attempt_result *res)
{
	memset(res, 0, sizeof(*res));
	struct attempt a;
	memset(&a, 0, sizeof(a));
	a.o = o;
	a.res = res;
	a.server.fd = -1;
	a.judge = *o->judge;
	a.self = realpath("/proc/self/exe", NULL);
	a.store_path_used = o->store_path ? xstrdup(o->store_path) : paths_store(o->root);
	if (!a.self) {
		release(&a);
		return error("cannot find this program's own path");
	}
	if (grade_env_open(&a.g, o->root, &a.judge, a.store_path_used, 0) < 0) {
		release(&a);
		return -1;
	}
	a.store = a.g.store;
	if (folders_setup(&a) < 0 || sandbox_setup(&a) < 0) {
		release(&a);
		return -1;
	}
	char *text = instruction(&a);
	char *sock = xstrfmt("%s/submit.sock", a.run);
	int rc = text ? submit_listen(&a.server, sock) : -1;
	free(sock);
	a.shell = xstrfmt("bash --noprofile --rcfile %s/bashrc", a.bin);
	struct terminal_opts topts = {.sandbox = &a.sb, .env = a.env, .dir = a.run,
				      .workdir = a.workspace, .shell = a.shell};
	/* a control agent types nothing, an external one has its own program:
	 * no terminal for them */
	if (rc == 0 && !attempt_is_control(o->model) && !agent_cli_is(o->model))
		rc = terminal_start(&a.term, &topts);
	if (rc < 0) {
		free(text);
		release(&a);
		return -1;
	}

	/* recorded from here on */
	char boot[64];
	proc_boot_id(boot, sizeof(boot));
	json_t *opts = options_json(&a);
	char *opts_text = json_dumps(opts, JSON_COMPACT);
	json_decref(opts);
	char skill_hash[65] = "";
	char *skill = NULL;
	if (o->skill_path && read_file(o->skill_path, ATTEMPT_SKILL_MAX_BYTES, &skill, NULL) == 0) {
		const char *body = attempt_skill_body(skill);
		sha256_hex(body, strlen(body), skill_hash);
	}
	struct attempt_record rec = {
		.problem = o->problem->number, .dsl = o->dsl->id, .model = o->model, .arm = o->arm,
		.workdir = o->workdir, .skill_sha256 = *skill_hash ? skill_hash : NULL,
		.skill_tokens = skill ? (long)((strlen(attempt_skill_body(skill)) + 3) / 4) : -1,
		.options_json = opts_text, .owner_pid = getpid(), .owner_boot = boot,
		.owner_start = proc_start_ticks(getpid()),
	};
	free(skill);
	if (store_begin_attempt(a.store, &rec, &res->id) < 0) {
		free(opts_text);
		free(text);
		release(&a);
		return -1;
	}
	free(opts_text);
	a.t0 = now_ms();
	a.deadline = a.t0 + o->wall_s * 1e3;
	note(&a, "start", json_pack("{s:s, s:s}", "instruction", text, "workdir", o->workdir));

	struct llm_client client;
	struct llm_options lo = o->llm;
	lo.deadline_ms = a.deadline;
	struct agent_result ar;
	memset(&ar, 0, sizeof(ar));
	if (attempt_is_control(o->model)) {
		control_run(&a, &ar);
	} else if (agent_cli_is(o->model)) {
		cli_run(&a, text, &ar);
	} else if (llm_client_init(&client, o->model, &lo) < 0) {
		ar.end = AGENT_MODEL_ERROR;
		ar.reason = xstrfmt("the model '%s' cannot be used", o->model);
	} else {
		struct agent_opts ao = {&client, o->decoding, text, o->context_tokens, o->max_turns};
		struct agent_host host = {&a.term, host_wait, host_seconds_left, host_record, &a};
		a.client = &client;
		agent_run(&ao, &host, &ar);
		a.client = NULL;
		llm_client_release(&client);
	}
	if (proc_interrupted()) {
		ar.end = AGENT_INFRA_ERROR;
		free(ar.reason);
		ar.reason = xstrfmt("interrupted by signal %d", proc_interrupted());
	}
	double agent_s = elapsed_s(&a);
	note(&a, "end", json_pack("{s:s, s:s?, s:i, s:i}", "agent_end", agent_end_name(ar.end),
				    "reason", ar.reason, "turns", ar.turns, "calls", ar.calls));
	/* Nothing of the agent's outlives its time; then the final grading. */
	terminal_stop(&a.term);
	sandbox_cgroup_remove(&a.sb);
	submit_close(&a.server);
	make_dirs(a.final, 0755);
	char *kernel = keep(&a, "kernel.py", (size_t)a.judge.max_kernel_bytes);
	char *skill_out = keep(&a, "SKILL.md", ATTEMPT_SKILL_MAX_BYTES);
	char *why = NULL;
	json_t *final = NULL;
	if (!proc_interrupted()) {
		char *path = xstrfmt("%s/kernel.py", a.final);
		if (kernel)
			final = grade_file(&a, path, NULL, 0, &why);
		else
			why = xstrdup("no kernel.py: a missing kernel fails");
		free(path);
	}
	note(&a, "final", json_pack("{s:O?, s:s?}", "verdict", final, "error", why));
	/* (ours) the same final kernel on the held-out workload: recorded
	 * beside the verdict that decides, never instead of it */
	json_t *heldout = NULL;
	if (o->final_heldout && kernel && !proc_interrupted()) {
		char *path = xstrfmt("%s/kernel.py", a.final), *hwhy = NULL;
		const char *visible = a.judge.workload;
		a.judge.workload = "heldout";
		heldout = grade_file(&a, path, NULL, 0, &hwhy);
		a.judge.workload = visible;
		note(&a, "final_heldout", json_pack("{s:O?, s:s?}", "verdict", heldout, "error", hwhy));
		free(hwhy);
		free(path);
	}
	char kernel_hash[65] = "", out_hash[65] = "";
	if (kernel)
		sha256_hex(kernel, strlen(kernel), kernel_hash);
	const char *body = skill_out ? attempt_skill_body(skill_out) : NULL;
	if (body)
		sha256_hex(body, strlen(body), out_hash);
	const char *status = status_for(ar.end, final);
	if (!kernel && ar.end != AGENT_INFRA_ERROR && ar.end != AGENT_MODEL_ERROR &&
	    ar.end != AGENT_OUT_OF_TIME)
		status = "failed";
	char *reason = ar.reason ? xstrdup(ar.reason)
		       : why ? xstrdup(why)
		       : xstrdup(json_string_value(json_object_get(final, "reason")) ?: "");
	struct attempt_outcome out = {
		.status = status, .reason = reason,
		.final_evaluation = json_integer_value(json_object_get(final, "evaluation_id")),
		.heldout_evaluation = json_integer_value(json_object_get(heldout, "evaluation_id")),
		.submissions = a.used, .turns = ar.turns, .input_tokens = ar.input_tokens,
		.cached_tokens = ar.cached_tokens, .output_tokens = ar.output_tokens,
		.cost_usd = ar.cost_usd, .agent_s = agent_s,
		.kernel_sha256 = kernel ? kernel_hash : NULL, .skill = body,
		.skill_sha256 = body ? out_hash : NULL,
		.skill_tokens = body ? (long long)(strlen(body) + 3) / 4 : -1,
	};
	rc = store_finish_attempt(a.store, res->id, &out);
	res->status = xstrdup(status);
	res->reason = reason;
	res->submissions = a.used;
	res->turns = ar.turns;
	res->agent_s = agent_s;
	res->final = final;
	json_decref(heldout);
	res->summary = store_load_attempt(a.store, res->id);
	free(kernel);
	free(skill_out);
	free(why);
	free(text);
	agent_result_release(&ar);
	release(&a);
	return rc < 0 ? -1 : 0;
}
