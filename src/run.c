#define _GNU_SOURCE
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_cli.h"
#include "dsl.h"
#include "fingerprint.h"
#include "llm_flags.h"
#include "paths.h"
#include "proc.h"
#include "sha256.h"
#include "store.h"
#include "util.h"

#define AGENT_VERSION "terminus-2 (mkb) 1" /* bump when the agent's behaviour changes */

const struct arm run_arms[] = {
	{"solo_cutedsl", "cutedsl", NULL, 0, 1},
	{"solo_tirx", "tirx", NULL, 0, 1},
	{"cutedsl2tirx_skill", "tirx", "solo_cutedsl", 0, 1},
	{"tirx2cutedsl_skill", "cutedsl", "solo_tirx", 0, 1},
	/* (ours, off by default) the skill of another problem of the same
	 * family: is a transfer specific to its problem, or any kernel advice? */
	{"placebo_tirx", "tirx", "solo_cutedsl", 1, 0},
	{"placebo_cutedsl", "cutedsl", "solo_tirx", 1, 0},
};
const size_t run_narms = ARRAY_SIZE(run_arms);

const struct arm *run_arm_find(const char *name)
{
	for (size_t i = 0; i < run_narms; i++)
		if (!strcmp(run_arms[i].name, name))
			return &run_arms[i];
	return NULL;
}

void run_trial_name(char *out, size_t size, int problem, int replicate, const char *arm)
{
	snprintf(out, size, "p%02d_r%d_%s", problem, replicate, arm);
}

enum action { ACT_RUN, ACT_REUSE, ACT_RERUN, ACT_STALE, ACT_QUEUED };
static const char *const action_names[] = {"RUN", "REUSE", "RERUN", "STALE", "QUEUED"};

struct trial {
	char name[96];
	const struct problem *problem;
	int replicate;
	const struct arm *arm;
	char fingerprint[65];
	enum action action;
	struct trial_record *rec;   /* the live record, or NULL */
	int64_t id, attempt;        /* this run's row and attempt, once made */
	int final;
	int lost;                   /* its worker ended without a record (redone next run) */
	char *status;               /* once final */
	pid_t worker;               /* running in this worker process (concurrency > 1) */
	int worker_fd;              /* the pipe its outcome comes back on */
	double started_ms;
};

struct plan {
	const struct run_opts *o;
	struct trial *t;
	size_t n;
	struct trial_record *recs;
	size_t nrecs;
	char *decoding;
	struct store *store;
};

static char *decoding_json(const struct llm_decoding *d)
{
	json_t *o = llm_decoding_json(d);
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
	json_decref(o);
	return s ? s : xstrdup("{}");
}

/* What a trial would run: the problem's files, the instruction's templates,
 * the grader, the DSL's primer, the agent and the budgets. */
int run_trial_fingerprint(const struct run_opts *o, const struct problem *p, const struct arm *arm,
			  char hex[65])
{
	static const char *const problem_files[] = {"problem.json", "reference.py"};
	static const char *const template_files[] = {"instruction.md", "CONTRACT.md", "check.py"};
	char fp_problem[65], fp_templates[65], fp_grader[65], fp_docs[65];
	const char *root = o->attempt.root;
	char *templates = xstrfmt("%s/templates", root), *grader = xstrfmt("%s/grader/mkb_grader", root);
	char *docs = xstrfmt("%s/docs/%s", root, arm->dsl);
	static const char *const primer[] = {"primer.md"};
	int rc = fingerprint_files(p->dir, problem_files, 2, fp_problem) |
		 fingerprint_files(templates, template_files, 3, fp_templates) |
		 fingerprint_dir(grader, ".py", fp_grader) | fingerprint_files(docs, primer, 1, fp_docs);
	free(templates);
	free(grader);
	free(docs);
	if (rc)
		return -1;
	const struct attempt_opts *a = &o->attempt;
	/* an external agent: its template too (its command and environment) */
	char fp_agent[65] = "";
	char *tpl_dir = xstrfmt("%s/templates", root), *tpl = agent_cli_template_path(a->model, tpl_dir);
	free(tpl_dir);
	if (tpl) {
		char *slash = strrchr(tpl, '/');
		const char *base = slash ? slash + 1 : tpl;
		if (slash)
			*slash = '\0';
		const char *names[] = {base};
		rc = fingerprint_files(slash ? tpl : ".", names, 1, fp_agent);
		free(tpl);
		if (rc)
			return -1;
	}
	char *all = xstrfmt("%s %s %s %s %s|%.0f|%d|%s|%s|%s|%s%s%s", fp_problem, fp_templates, fp_grader, fp_docs,
			    AGENT_VERSION, a->wall_s, a->submissions, a->judge->workload, a->judge->device,
			    arm->name, a->model, *fp_agent ? "|" : "", fp_agent);
	sha256_hex(all, strlen(all), hex);
	free(all);
	return 0;
}

static struct trial_record *find_record(struct plan *pl, const char *name)
{
	for (size_t i = 0; i < pl->nrecs; i++)
		if (!strcmp(pl->recs[i].name, name))
			return &pl->recs[i];
	return NULL;
}

static int is_final_status(const char *s)
{
	return strcmp(s, "running") != 0 && strcmp(s, "queued") != 0;
}

/* Decide each trial's action from its live record. */
static int make_plan(struct plan *pl)
{
	const struct run_opts *o = pl->o;
	pl->t = xcalloc(o->nproblems * (size_t)o->replicates * o->narms + 1, sizeof(*pl->t));
	char boot[64];
	proc_boot_id(boot, sizeof(boot));
	/* solos first: arms in table order, the solos lead it */
	for (size_t a = 0; a < o->narms; a++)
		for (size_t i = 0; i < o->nproblems; i++)
			for (int r = 1; r <= o->replicates; r++) {
				struct trial *t = &pl->t[pl->n++];
				t->problem = catalog_find(o->catalog, o->problems[i]);
				t->replicate = r;
				t->arm = o->arms[a];
				run_trial_name(t->name, sizeof(t->name), t->problem->number, r, t->arm->name);
				if (run_trial_fingerprint(o, t->problem, t->arm, t->fingerprint) < 0)
					return -1;
				t->rec = find_record(pl, t->name);
				if (!t->rec) {
					t->action = ACT_RUN;
				} else if (t->rec->lease_owner || !strcmp(t->rec->status, "queued")) {
					/* in the queue of mkb worker (a shared store): left
					 * there by --enqueue, redone by a worker once a
					 * lease expires */
					if (o->enqueue)
						t->action = ACT_QUEUED;
					else if (!strcmp(t->rec->status, "queued") || t->rec->lease_live)
						return error("%s is %s by mkb worker: one run per store and model at a "
							     "time (the workers drain it)", t->name,
							     t->rec->lease_live ? "being run" : "queued");
					else
						t->action = ACT_RERUN;
				} else if (!is_final_status(t->rec->status)) {
					/* left running by an mkb that is gone, or by us now? */
					int alive = t->rec->owner_boot && !strcmp(t->rec->owner_boot, boot) &&
						    proc_alive(t->rec->owner_pid, t->rec->owner_start);
					if (alive)
						return error("%s is running in another mkb (pid %lld): one run per "
							     "store and model at a time", t->name, t->rec->owner_pid);
					t->action = ACT_RERUN;
				} else if (strcmp(t->rec->fingerprint, t->fingerprint)) {
					t->action = ACT_STALE;
				} else if (!strcmp(t->rec->status, "infra_error")) {
					t->action = ACT_RERUN;
				} else {
					t->action = ACT_REUSE;
					t->final = 1;
					t->status = xstrdup(t->rec->status);
					t->attempt = t->rec->attempt;
					t->id = t->rec->id;
				}
			}
	return 0;
}

static struct trial *find_trial(struct plan *pl, int problem, int replicate, const char *arm)
{
	for (size_t i = 0; i < pl->n; i++)
		if (pl->t[i].problem->number == problem && pl->t[i].replicate == replicate &&
		    !strcmp(pl->t[i].arm->name, arm))
			return &pl->t[i];
	return NULL;
}

/* The trial whose SKILL.md t gets: the source solo of its problem, or for a
 * placebo that of the next problem of the same family in this run. NULL
 * when there is none; *why says so. */
static struct trial *skill_source(struct plan *pl, const struct trial *t, const char **why)
{
	const struct run_opts *o = pl->o;
	int source_problem = t->problem->number;
	if (t->arm->other_problem) {
		source_problem = 0;
		size_t at = 0;
		for (size_t i = 0; i < o->nproblems; i++)
			if (o->problems[i] == t->problem->number)
				at = i;
		for (size_t k = 1; k < o->nproblems && !source_problem; k++) {
			const struct problem *q = catalog_find(o->catalog, o->problems[(at + k) % o->nproblems]);
			if (!strcmp(q->family, t->problem->family))
				source_problem = q->number;
		}
		if (!source_problem) {
			*why = "no other problem of its family in this run";
			return NULL;
		}
	}
	struct trial *s = find_trial(pl, source_problem, t->replicate, t->arm->skill_from);
	if (!s)
		*why = "its source arm is not part of this run";
	return s;
}

static void print_plan(const struct plan *pl)
{
	int counts[5] = {0};
	for (size_t i = 0; i < pl->n; i++) {
		const struct trial *t = &pl->t[i];
		counts[t->action]++;
		printf("%-6s %s%s\n", action_names[t->action], t->name,
		       t->action == ACT_STALE ? "  (what it ran has changed since)" : "");
	}
	printf("plan: %zu trials: %d to run, %d to reuse, %d to rerun, %d stale", pl->n,
	       counts[ACT_RUN], counts[ACT_REUSE], counts[ACT_RERUN], counts[ACT_STALE]);
	if (counts[ACT_QUEUED])
		printf(", %d in the queue already", counts[ACT_QUEUED]);
	putchar('\n');
}

static char *slug(const char *model)
{
	char *s = xstrdup(model);
	for (char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '.' || *p == '_'))
			*p = '_';
	return s;
}

int run_trial_execute(const struct run_opts *o, struct store *store, const struct run_trial *t,
		      struct run_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->speedup = -1;
	out->id = t->id;
	char boot[64];
	proc_boot_id(boot, sizeof(boot));
	struct trial_record rec = {
		.name = (char *)t->name, .model = (char *)o->attempt.model, .decoding = (char *)t->decoding,
		.arm = (char *)t->arm->name, .dsl = (char *)t->arm->dsl, .fingerprint = (char *)t->fingerprint,
		.status = "running", .problem = t->problem->number, .replicate = t->replicate,
		.owner_pid = getpid(), .owner_boot = boot, .owner_start = proc_start_ticks(getpid()),
	};
	char *skill_file = NULL, *note = NULL;
	const char *skill_from = NULL;
	double t0 = now_ms();
	if (t->arm->skill_from) {
		char *skill = t->source && t->source_attempt ? store_attempt_skill(store, t->source_attempt) : NULL;
		if (!skill || !*attempt_skill_body(skill)) {
			note = xstrfmt("skipped: %s", t->source ? "its source left no SKILL.md" : t->why);
			rec.status = "skipped";
			free(skill);
			int rc = out->id ? 0 : store_trial_begin(store, &rec, &out->id);
			if (!rc)
				rc = store_trial_finish(store, out->id, "skipped", 0, note);
			snprintf(out->status, sizeof(out->status), "skipped");
			snprintf(out->note, sizeof(out->note), "%s", note + 9);
			free(note);
			return rc;
		}
		skill_from = dsl_find(t->source_dsl)->name;
		char *m = slug(o->attempt.model);
		char *dir = xstrfmt("%s/%s", o->runs_dir, m);
		free(m);
		make_dirs(dir, 0755);
		skill_file = xstrfmt("%s/%s-skill-from-%s.md", dir, t->name, t->source);
		free(dir);
		if (write_file_atomic(skill_file, skill, strlen(skill)) < 0) {
			free(skill);
			free(skill_file);
			return -1;
		}
		free(skill);
	}
	if (!out->id && store_trial_begin(store, &rec, &out->id) < 0) {
		free(skill_file);
		return -1;
	}
	struct attempt_opts a = o->attempt;
	a.problem = t->problem;
	a.dsl = dsl_find(t->arm->dsl);
	a.arm = t->name;
	a.skill_path = skill_file;
	a.skill_from = skill_from;
	char *m = slug(o->attempt.model);
	/* trial ids are per store: another store's run in the same folder may
	 * have used the name already (an attempt wants a fresh folder) */
	char *workdir = xstrfmt("%s/%s/%s-t%lld", o->runs_dir, m, t->name, (long long)out->id);
	for (int n = 2; (is_dir(workdir) || is_file(workdir)) && n < 1000; n++) {
		free(workdir);
		workdir = xstrfmt("%s/%s/%s-t%lld.%d", o->runs_dir, m, t->name, (long long)out->id, n);
	}
	free(m);
	a.workdir = workdir;
	struct attempt_result r;
	int rc = attempt_run(&a, &r);
	const char *status = rc < 0 ? "infra_error" : r.status;
	if (rc < 0)
		note = xstrdup("the attempt could not start (see the errors above)");
	int stored = store_trial_finish(store, out->id, status, r.id, note);
	snprintf(out->status, sizeof(out->status), "%s", status);
	if (rc == 0) {
		out->ran = 1;
		out->attempt = r.id;
		out->turns = r.turns;
		out->submissions = r.submissions;
		if (r.final && json_is_number(json_object_get(r.final, "speedup")) &&
		    json_is_true(json_object_get(r.final, "passed")))
			out->speedup = json_number_value(json_object_get(r.final, "speedup"));
		attempt_result_release(&r);
	}
	out->seconds = (now_ms() - t0) / 1e3;
	free(note);
	free(workdir);
	free(skill_file);
	return stored;
}

/* Run t of the plan: its skill's source from the plan. */
/* t as run_trial_execute takes it (pointers into t and the plan). */
static void trial_for_run(struct plan *pl, struct trial *t, struct run_trial *rt)
{
	*rt = (struct run_trial){
		.name = t->name, .problem = t->problem, .replicate = t->replicate, .arm = t->arm,
		.fingerprint = t->fingerprint, .decoding = pl->decoding,
	};
	if (t->arm->skill_from) {
		struct trial *src = skill_source(pl, t, &rt->why);
		if (src) {
			rt->source = src->name;
			rt->source_dsl = src->arm->dsl;
			rt->source_attempt = src->attempt;
		}
	}
}

static int execute(struct plan *pl, struct trial *t, struct run_outcome *out)
{
	struct run_trial rt;
	trial_for_run(pl, t, &rt);
	return run_trial_execute(pl->o, pl->store, &rt, out);
}

/* The trial is final as *out says. */
static void settle(struct trial *t, const struct run_outcome *out)
{
	t->final = 1;
	free(t->status);
	t->status = xstrdup(out->status);
	t->id = out->id;
	t->attempt = out->attempt;
}

void run_print_outcome(const char *name, const struct run_outcome *out, size_t done, size_t total)
{
	if (total)
		printf("[%zu/%zu] ", done, total);
	printf("%s: %s", name, out->status);
	if (!strcmp(out->status, "skipped")) {
		printf(" (%s)\n", out->note);
		return;
	}
	if (out->speedup >= 0)
		printf(", speedup %.3fx", out->speedup);
	if (out->ran)
		printf(", %d turns, %d submissions", out->turns, out->submissions);
	printf(", %.0f s\n", out->seconds);
}

/* ---- the scheduler: trials in flight --------------------------------------
 * With --concurrency 1 a trial runs in this process, one after another. With
 * N > 1 each runs in a worker process of its own (a fork: attempts mostly
 * wait on the model's API, and a worker that crashes takes nothing else
 * with it), at most N at once; the worker opens its own store connection,
 * writes its trial's rows as a sequential run does, and sends its outcome
 * back through a pipe. Workers die with this process (PR_SET_PDEATHSIG), so
 * kill -9 of mkb run leaves rows "running" under dead owners: the next run
 * archives and redoes them, as it does for a sequential run. */

struct sched {
	struct plan *pl;
	size_t done, total;
	int running, passed, failed;
	double t0;                 /* now_ms() at the start */
	double busy_s;             /* seconds of trials finished in this run */
	int finished;              /* how many */
	int live;                  /* a status line on a terminal */
};

/* Is t ready to start (not final, not in flight, its skill's source final)? */
static int ready(struct plan *pl, const struct trial *t)
{
	if (t->final || t->worker > 0)
		return 0;
	if (t->arm->skill_from) {
		const char *why;
		struct trial *src = skill_source(pl, t, &why);
		if (src && !src->final)
			return 0;
	}
	return 1;
}

static struct trial *next_ready(struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++)
		if (ready(pl, &pl->t[i]))
			return &pl->t[i];
	return NULL;
}

static void fmt_duration(char *out, size_t size, double s)
{
	long v = (long)(s + 0.5);
	if (v >= 3600)
		snprintf(out, size, "%ldh%02ldm", v / 3600, v / 60 % 60);
	else
		snprintf(out, size, "%ldm%02lds", v / 60, v % 60);
}

/* The live status line (a terminal only): erased before any other output. */
static void status_line(const struct sched *sc, int erase_only)
{
	if (!sc->live)
		return;
	fputs("\r\033[K", stdout);
	if (!erase_only) {
		size_t queued = sc->total - sc->done - (size_t)sc->running;
		double el = (now_ms() - sc->t0) / 1e3;
		char elapsed[32], eta[32] = "?";
		fmt_duration(elapsed, sizeof(elapsed), el);
		if (sc->finished) {
			int conc = sc->pl->o->concurrency > 1 ? sc->pl->o->concurrency : 1;
			double per = sc->busy_s / sc->finished;
			size_t left = sc->total - sc->done;
			fmt_duration(eta, sizeof(eta), per * (double)left / (double)(left < (size_t)conc ? left : (size_t)conc));
		}
		printf("%zu/%zu done, %d running, %zu queued | %d passed, %d failed | %s elapsed, ETA %s",
		       sc->done, sc->total, sc->running, queued, sc->passed, sc->failed, elapsed, eta);
	}
	fflush(stdout);
}

static void finished(struct sched *sc, struct trial *t, const struct run_outcome *out)
{
	settle(t, out);
	sc->done++;
	sc->finished++;
	sc->busy_s += out->seconds;
	sc->passed += !strcmp(out->status, "passed");
	sc->failed += !strcmp(out->status, "failed") || !strcmp(out->status, "timed_out");
	status_line(sc, 1);
	run_print_outcome(t->name, out, sc->done, sc->total);
	status_line(sc, 0);
}

pid_t run_trial_start(const struct run_opts *o, const char *store_path, const struct run_trial *t, int *fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return error("cannot make a pipe for a trial's process: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return error("cannot start a trial's process: %s", strerror(errno));
	}
	if (pid == 0) {
		close(p[0]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(3);
		/* A connection does not cross a fork: the parent's is left untouched. */
		struct store *mine = NULL;
		int rc = store_open(store_path, &mine);
		struct run_outcome out;
		if (rc == 0) {
			rc = run_trial_execute(o, mine, t, &out);
			store_close(mine);
		}
		if (rc == 0 && write(p[1], &out, sizeof(out)) != (ssize_t)sizeof(out))
			rc = -1;
		fflush(stdout);
		fflush(stderr);
		_exit(rc < 0 ? 3 : 0);
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

int run_trial_collect(int fd, struct run_outcome *out)
{
	ssize_t got = read(fd, out, sizeof(*out));
	close(fd);
	if (got != (ssize_t)sizeof(*out))
		return -1;
	out->status[sizeof(out->status) - 1] = out->note[sizeof(out->note) - 1] = '\0';
	return 0;
}

/* Start t in a process of its own. 0, or -1 (error printed). */
static int start_worker(struct sched *sc, struct trial *t)
{
	const struct run_opts *o = sc->pl->o;
	struct run_trial rt;
	trial_for_run(sc->pl, t, &rt);
	char *path = o->attempt.store_path ? xstrdup(o->attempt.store_path) : paths_store(o->attempt.root);
	int fd;
	pid_t pid = run_trial_start(o, path, &rt, &fd);
	free(path);
	if (pid < 0)
		return -1;
	t->worker = pid;
	t->worker_fd = fd;
	t->started_ms = now_ms();
	sc->running++;
	if (!sc->live) {
		printf("start %s\n", t->name);
		fflush(stdout);
	}
	return 0;
}

/* A worker ended with wait status: collect its outcome. */
static void reap(struct sched *sc, struct trial *t, int status)
{
	struct run_outcome out;
	int got = run_trial_collect(t->worker_fd, &out);
	t->worker_fd = -1;
	t->worker = 0;
	sc->running--;
	if (got == 0) {
		finished(sc, t, &out);
		return;
	}
	char how[64];
	proc_describe_status(status, how, sizeof(how));
	t->final = t->lost = 1; /* not again in this run; the next one redoes it */
	status_line(sc, 1);
	printf("[-/%zu] %s: its worker ended without a final record (%s); the next run redoes it\n",
	       sc->total, t->name, how);
	status_line(sc, 0);
}

static struct trial *worker_trial(struct plan *pl, pid_t pid)
{
	for (size_t i = 0; i < pl->n; i++)
		if (pl->t[i].worker == pid)
			return &pl->t[i];
	return NULL;
}

/* Has the model spent the ceiling? (prints so once) */
static int over_ceiling(struct plan *pl)
{
	const struct run_opts *o = pl->o;
	if (o->max_cost <= 0)
		return 0;
	double spent = store_model_cost(pl->store, o->attempt.model);
	if (spent < o->max_cost)
		return 0;
	printf("spending ceiling reached: $%.4f spent on %s of $%.4f; no new trial starts (resume with "
	       "a higher --max-cost)\n", spent, o->attempt.model, o->max_cost);
	return 1;
}

/* Run every ready trial until none is left, none can start, or a signal
 * came. 0, or -1 when the store fails. */
static int schedule(struct sched *sc, int *ceiling)
{
	struct plan *pl = sc->pl;
	int conc = pl->o->concurrency > 1 ? pl->o->concurrency : 1;
	int signalled = 0, rc = 0;
	double last_line = 0;
	status_line(sc, 0);
	for (;;) {
		struct trial *t;
		while (!*ceiling && !proc_interrupted() && rc == 0 && sc->running < conc &&
		       (t = next_ready(pl))) {
			if ((*ceiling = over_ceiling(pl)))
				break;
			if (conc == 1) {
				struct run_outcome out;
				if (execute(pl, t, &out) < 0)
					rc = -1;
				else
					finished(sc, t, &out);
			} else if (start_worker(sc, t) < 0) {
				rc = -1;
			}
		}
		if (sc->running == 0)
			break;
		if (proc_interrupted() && !signalled) { /* pass it on, then wait for them */
			for (size_t i = 0; i < pl->n; i++)
				if (pl->t[i].worker > 0)
					kill(pl->t[i].worker, proc_interrupted());
			signalled = 1;
		}
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			struct trial *w = worker_trial(pl, pid);
			if (w)
				reap(sc, w, status);
			continue;
		}
		if (pid < 0 && errno != EINTR)
			break;
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
		if (sc->live && now_ms() - last_line >= 1000) {
			status_line(sc, 0);
			last_line = now_ms();
		}
	}
	status_line(sc, 1);
	return rc;
}

static void release(struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++)
		free(pl->t[i].status);
	free(pl->t);
	trial_records_free(pl->recs, pl->nrecs);
	free(pl->decoding);
	store_close(pl->store);
}

/* Put every trial of the plan that is not final and not queued already into
 * the store's queue for mkb worker ("queued", a skill arm naming its source
 * trial). A skill arm without a source is recorded skipped now. 0, or 3. */
static int enqueue(struct plan *pl)
{
	const struct run_opts *o = pl->o;
	int queued = 0, already = 0;
	for (size_t i = 0; i < pl->n; i++) {
		struct trial *t = &pl->t[i];
		already += t->action == ACT_QUEUED;
		if (t->final || t->action == ACT_QUEUED)
			continue;
		const char *why = NULL;
		struct trial *src = t->arm->skill_from ? skill_source(pl, t, &why) : NULL;
		if (t->arm->skill_from && !src) {
			struct run_outcome out;
			if (execute(pl, t, &out) < 0)
				return 3;
			settle(t, &out);
			run_print_outcome(t->name, &out, 0, 0);
			continue;
		}
		struct trial_record rec = {
			.name = t->name, .model = (char *)o->attempt.model, .decoding = pl->decoding,
			.arm = (char *)t->arm->name, .dsl = (char *)t->arm->dsl, .fingerprint = t->fingerprint,
			.status = "queued", .problem = t->problem->number, .replicate = t->replicate,
			.source = src ? src->name : NULL,
		};
		int64_t id;
		if (store_trial_begin(pl->store, &rec, &id) < 0)
			return 3;
		queued++;
	}
	printf("enqueued: %d trial%s queued for mkb worker, %d in the queue already\n", queued,
	       queued == 1 ? "" : "s", already);
	return 0;
}

int run_protocol(const struct run_opts *o)
{
	struct plan pl = {o, NULL, 0, NULL, 0, decoding_json(&o->attempt.decoding), NULL};
	char *path = o->attempt.store_path ? xstrdup(o->attempt.store_path) : paths_store(o->attempt.root);
	if (o->enqueue && !store_path_is_url(path)) {
		error("--enqueue fills the queue of mkb worker, which needs a shared PostgreSQL store "
		      "(--store postgres://...)");
		free(path);
		release(&pl);
		return 2;
	}
	int rc = store_open(path, &pl.store);
	free(path);
	if (rc < 0) {
		release(&pl);
		return 3;
	}
	if (store_trials_load(pl.store, o->attempt.model, pl.decoding, &pl.recs, &pl.nrecs) < 0 ||
	    make_plan(&pl) < 0) {
		release(&pl);
		return 3;
	}
	print_plan(&pl);
	int stale = 0;
	for (size_t i = 0; i < pl.n; i++)
		stale += pl.t[i].action == ACT_STALE;
	if (stale && !o->rerun_stale) {
		printf("%d stale trial%s: what they ran has changed (problem, grader, templates, budgets); "
		       "--rerun-stale archives their records and runs them again\n", stale, stale == 1 ? "" : "s");
		release(&pl);
		return 1;
	}
	if (o->dry_run) {
		release(&pl);
		return 0;
	}
	for (size_t i = 0; i < pl.n; i++) {
		struct trial *t = &pl.t[i];
		if (t->rec && (t->action == ACT_RERUN || t->action == ACT_STALE) &&
		    store_trial_archive(pl.store, t->rec->id, t->action == ACT_STALE ? "stale"
						: !is_final_status(t->rec->status) ? "interrupted" : "errored") < 0) {
			release(&pl);
			return 3;
		}
	}
	if (o->enqueue) {
		rc = enqueue(&pl);
		release(&pl);
		return rc;
	}
	struct sched sc = {&pl, 0, pl.n, 0, 0, 0, now_ms(), 0, 0, isatty(STDOUT_FILENO)};
	for (size_t i = 0; i < pl.n; i++)
		sc.done += pl.t[i].final;
	int ceiling = 0;
	if (schedule(&sc, &ceiling) < 0) {
		release(&pl);
		return 3;
	}
	size_t done = sc.done, total = sc.total;
	int counts[8] = {0};
	static const char *const kinds[] = {"passed", "failed", "timed_out", "model_error", "infra_error",
					    "skipped"};
	for (size_t i = 0; i < pl.n; i++)
		for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
			if (pl.t[i].status && !strcmp(pl.t[i].status, kinds[k]))
				counts[k]++;
	printf("done: %zu of %zu trials final: %d passed, %d failed, %d timed out, %d model errors, "
	       "%d infrastructure errors, %d skipped\n", done, total, counts[0], counts[1], counts[2],
	       counts[3], counts[4], counts[5]);
	rc = proc_interrupted() ? 128 + proc_interrupted() : done < total ? 1 : counts[4] ? 3 : 0;
	release(&pl);
	return rc;
}
