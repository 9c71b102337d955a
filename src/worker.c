#define _GNU_SOURCE
#include "worker.h"

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

#include "attempt.h"
#include "proc.h"
#include "store.h"
#include "util.h"

struct tally {
	int ran, passed, failed, other;
};

static void pause_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/* The trial's decoding settings (its JSON, as mkb run keyed it). */
static int parse_decoding(const char *text, struct llm_decoding *d)
{
	json_t *o = json_loads(text, 0, NULL);
	int rc = llm_decoding_from_json(o, d);
	json_decref(o);
	return rc < 0 ? error("the trial's decoding settings '%s' cannot be read", text) : 0;
}

/* The live record of the trial named name, or NULL. */
static const struct trial_record *find_record(const struct trial_record *recs, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(recs[i].name, name))
			return &recs[i];
	return NULL;
}

/* Run rt in a child process (its own store connection; it dies with this
 * one) while renewing the lease. 0 with *out filled, 1 when the child ended
 * without an outcome, -1 on error. */
static int run_child(const struct worker_opts *wo, const struct run_opts *o, struct store *st,
		     const struct worker_id *w, const struct run_trial *rt, struct run_outcome *out)
{
	int fd;
	pid_t pid = run_trial_start(o, wo->store_path, rt, &fd);
	if (pid < 0)
		return -1;
	double beat = wo->lease_s / 3, last = now_ms();
	int status = 0, signalled = 0, lost = 0;
	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);
		if (got == pid)
			break;
		if (got < 0 && errno != EINTR) {
			error("waiting for the trial's process: %s", strerror(errno));
			break;
		}
		if (proc_interrupted() && !signalled) {
			kill(pid, proc_interrupted());
			signalled = 1;
		}
		if (!lost && now_ms() - last >= beat * 1e3) {
			last = now_ms();
			int hb = store_trial_heartbeat(st, rt->id, w->name, wo->lease_s);
			if (hb < 0) {
				warning("%s: the lease could not be renewed (retrying)", rt->name);
			} else if (hb == 1) {
				warning("%s: the lease expired and another worker took the trial: interrupting it",
					rt->name);
				kill(pid, SIGTERM);
				lost = 1;
			}
		}
		pause_s(0.1);
	}
	if (run_trial_collect(fd, out) == 0 && !lost)
		return 0;
	char how[64];
	proc_describe_status(status, how, sizeof(how));
	printf("%s: %s (%s)\n", rt->name, lost ? "given up: its lease was lost"
		: "its process ended without a final record; once the lease expires a worker redoes it", how);
	return 1;
}

/* Run the claimed trial rec. 0, 1 (given back: this worker cannot run it
 * as planned), -1 (store). */
static int work(const struct worker_opts *wo, struct store *st, const struct worker_id *w,
		const struct trial_record *rec, struct tally *tally)
{
	const struct problem *p = catalog_find(wo->run.catalog, rec->problem);
	const struct arm *arm = run_arm_find(rec->arm);
	struct run_opts o = wo->run;
	o.attempt.model = rec->model;
	struct llm_flags lf = *wo->llm;
	lf.model = rec->model;
	char fp[65] = "";
	char *why = NULL;
	if (!p || !arm)
		why = xstrfmt("problem %d or arm '%s' is unknown to this worker's checkout", rec->problem, rec->arm);
	else if (parse_decoding(rec->decoding, &o.attempt.decoding) < 0)
		why = xstrdup("its decoding settings cannot be read");
	else if (!attempt_is_control(rec->model) && llm_flags_prices(&lf) < 0)
		why = xstrdup("the prices cannot be read");
	else if (run_trial_fingerprint(&o, p, arm, fp) < 0 || strcmp(fp, rec->fingerprint))
		why = xstrdup("what this worker would run differs from what was planned (its fingerprint: "
			      "problem files, grader, templates, budgets, workload, device); give the worker "
			      "the planner's flags and checkout");
	if (why) {
		char *note = xstrfmt("given back by worker %s: %s", w->name, why);
		int rc = store_trial_release(st, rec->id, w->name, note);
		error("%s: %s", rec->name, why);
		free(note);
		free(why);
		return rc < 0 ? -1 : 1;
	}
	o.attempt.llm = lf.opts; /* its price, if any, points into lf: alive until the trial ends */
	struct run_trial rt = {
		.name = rec->name, .problem = p, .replicate = rec->replicate, .arm = arm,
		.fingerprint = rec->fingerprint, .decoding = rec->decoding, .id = rec->id,
	};
	struct trial_record *recs = NULL;
	size_t n = 0;
	if (arm->skill_from) {
		if (store_trials_load(st, rec->model, rec->decoding, &recs, &n) < 0)
			return -1;
		const struct trial_record *src = rec->source ? find_record(recs, n, rec->source) : NULL;
		const struct arm *src_arm = src ? run_arm_find(src->arm) : NULL;
		if (src && src_arm) {
			rt.source = src->name;
			rt.source_dsl = src_arm->dsl;
			rt.source_attempt = src->attempt;
		} else {
			rt.why = rec->source ? "its source trial has no live record" : "it names no source trial";
		}
	}
	printf("claimed %s (trial %lld)\n", rec->name, (long long)rec->id);
	struct run_outcome out;
	int rc = run_child(wo, &o, st, w, &rt, &out);
	trial_records_free(recs, n);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		run_print_outcome(rec->name, &out, 0, 0);
		tally->ran++;
		tally->passed += !strcmp(out.status, "passed");
		tally->failed += !strcmp(out.status, "failed") || !strcmp(out.status, "timed_out");
		tally->other += strcmp(out.status, "passed") && strcmp(out.status, "failed") &&
				strcmp(out.status, "timed_out");
	}
	fflush(stdout);
	return 0;
}

int worker_run(const struct worker_opts *wo)
{
	if (!store_path_is_url(wo->store_path)) {
		error("mkb worker drains the queue of a shared PostgreSQL store: --store postgres://... "
		      "(or $MKB_STORE)");
		return 2;
	}
	struct store *st;
	if (store_open(wo->store_path, &st) < 0)
		return 3;
	char host[256], boot[64], name[320];
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	proc_boot_id(boot, sizeof(boot));
	snprintf(name, sizeof(name), "%s:%lld", host, (long long)getpid());
	struct worker_id w = {name, (long long)getpid(), proc_start_ticks((long long)getpid()), boot};
	printf("worker %s: lease %g s\n", name, wo->lease_s);
	fflush(stdout);
	struct tally tally = {0};
	int rc = 0;
	while (!proc_interrupted()) {
		struct trial_record rec;
		int c = store_trial_claim(st, &w, wo->lease_s, &rec);
		if (c < 0) {
			rc = 3;
			break;
		}
		if (c == 0)
			break;
		if (c == 2) {
			pause_s(WORKER_POLL_S);
			continue;
		}
		int r = work(wo, st, &w, &rec, &tally);
		trial_record_release(&rec);
		if (r != 0) {
			rc = r < 0 ? 3 : 1;
			break;
		}
	}
	store_close(st);
	if (proc_interrupted())
		rc = 128 + proc_interrupted();
	printf("worker %s: %d trials run: %d passed, %d failed, %d other; %s\n", name, tally.ran,
	       tally.passed, tally.failed, tally.other,
	       rc == 0 ? "nothing left in the queue" : rc == 1 ? "stopped (see above)" : "stopped");
	return rc;
}
