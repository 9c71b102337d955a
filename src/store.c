/* The store's one dispatch point: the path picks the backend (a PostgreSQL
 * URL, else a SQLite file) and every store.h call goes through its table. */
#include <stdlib.h>
#include <string.h>

#include "store_backend.h"
#include "util.h"

int store_path_is_url(const char *path)
{
	return !strncmp(path, "postgres://", 11) || !strncmp(path, "postgresql://", 13);
}

int store_open(const char *path, struct store **out)
{
	*out = NULL;
	const struct store_ops *ops = store_path_is_url(path) ? &store_pg_ops : &store_sqlite_ops;
	return ops->open(path, out);
}

void store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

int store_begin_evaluation(struct store *s, const struct eval_record *rec, int64_t *id)
{
	return s->ops->begin_evaluation(s, rec, id);
}

int store_finish_evaluation(struct store *s, int64_t id, const struct verdict *v)
{
	return s->ops->finish_evaluation(s, id, v);
}

long store_reclaim_abandoned(struct store *s, const char *boot,
			     int (*alive)(long long pid, long long start))
{
	return s->ops->reclaim_abandoned(s, boot, alive);
}

int store_begin_attempt(struct store *s, const struct attempt_record *r, int64_t *id)
{
	return s->ops->begin_attempt(s, r, id);
}

int store_add_attempt_event(struct store *s, int64_t id, const char *kind, double elapsed_s,
			    json_t *body)
{
	return s->ops->add_attempt_event(s, id, kind, elapsed_s, body);
}

int store_finish_attempt(struct store *s, int64_t id, const struct attempt_outcome *o)
{
	return s->ops->finish_attempt(s, id, o);
}

json_t *store_load_attempt(struct store *s, int64_t id)
{
	return s->ops->load_attempt(s, id);
}

int store_trials_load(struct store *s, const char *model, const char *decoding,
		      struct trial_record **out, size_t *n)
{
	return s->ops->trials_load(s, model, decoding, out, n);
}

void trial_record_release(struct trial_record *t)
{
	free(t->name);
	free(t->model);
	free(t->decoding);
	free(t->arm);
	free(t->dsl);
	free(t->fingerprint);
	free(t->status);
	free(t->owner_boot);
	free(t->source);
	free(t->lease_owner);
	memset(t, 0, sizeof(*t));
}

void trial_records_free(struct trial_record *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		trial_record_release(&t[i]);
	free(t);
}

int store_trial_begin(struct store *s, const struct trial_record *t, int64_t *id)
{
	return s->ops->trial_begin(s, t, id);
}

int store_trial_finish(struct store *s, int64_t id, const char *status, int64_t attempt,
		       const char *note)
{
	return s->ops->trial_finish(s, id, status, attempt, note);
}

int store_trial_archive(struct store *s, int64_t id, const char *why)
{
	return s->ops->trial_archive(s, id, why);
}

char *store_attempt_skill(struct store *s, int64_t attempt)
{
	return s->ops->attempt_skill(s, attempt);
}

double store_model_cost(struct store *s, const char *model)
{
	return s->ops->model_cost(s, model);
}

json_t *store_trials_summary(struct store *s)
{
	return s->ops->trials_summary(s);
}

int store_trial_results(struct store *s, const char *model, int extras,
			int (*fn)(const struct trial_result *t, void *arg), void *arg)
{
	return s->ops->trial_results(s, model, extras, fn, arg);
}

long store_count_evaluations(struct store *s, const char *status)
{
	return s->ops->count_evaluations(s, status);
}

static int no_queue(const struct store *s)
{
	return error("store '%s': the trial queue (mkb run --enqueue, mkb worker) needs a shared "
		     "PostgreSQL store (--store postgres://...)", s->path);
}

int store_trial_claim(struct store *s, const struct worker_id *w, double lease_s,
		      struct trial_record *out)
{
	memset(out, 0, sizeof(*out));
	return s->ops->trial_claim ? s->ops->trial_claim(s, w, lease_s, out) : no_queue(s);
}

int store_trial_heartbeat(struct store *s, int64_t id, const char *worker, double lease_s)
{
	return s->ops->trial_heartbeat ? s->ops->trial_heartbeat(s, id, worker, lease_s) : no_queue(s);
}

int store_trial_release(struct store *s, int64_t id, const char *worker, const char *why)
{
	return s->ops->trial_release ? s->ops->trial_release(s, id, worker, why) : no_queue(s);
}
