/* The store's backends (store.c dispatches to them): each implements the
 * whole of store.h as one table of operations. store_sqlite.c is the
 * embedded default, store_pg.c the shared PostgreSQL store of many
 * machines; callers never see which. Only store*.c include this. */
#ifndef MKB_STORE_BACKEND_H
#define MKB_STORE_BACKEND_H

#include "store.h"

/* Every backend's store starts with this; db is its connection (sqlite3 *,
 * PGconn *). */
struct store {
	const struct store_ops *ops;
	char *path;
	void *db;
};

struct store_ops {
	const char *name;
	int (*open)(const char *path, struct store **out);
	void (*close)(struct store *s);
	int (*begin_evaluation)(struct store *s, const struct eval_record *rec, int64_t *id);
	int (*finish_evaluation)(struct store *s, int64_t id, const struct verdict *v);
	long (*reclaim_abandoned)(struct store *s, const char *boot,
				  int (*alive)(long long pid, long long start));
	int (*begin_attempt)(struct store *s, const struct attempt_record *r, int64_t *id);
	int (*add_attempt_event)(struct store *s, int64_t id, const char *kind, double elapsed_s,
				 json_t *body);
	int (*finish_attempt)(struct store *s, int64_t id, const struct attempt_outcome *o);
	json_t *(*load_attempt)(struct store *s, int64_t id);
	int (*trials_load)(struct store *s, const char *model, const char *decoding,
			   struct trial_record **out, size_t *n);
	int (*trial_begin)(struct store *s, const struct trial_record *t, int64_t *id);
	int (*trial_finish)(struct store *s, int64_t id, const char *status, int64_t attempt,
			    const char *note);
	int (*trial_archive)(struct store *s, int64_t id, const char *why);
	char *(*attempt_skill)(struct store *s, int64_t attempt);
	double (*model_cost)(struct store *s, const char *model);
	json_t *(*trials_summary)(struct store *s);
	int (*trial_results)(struct store *s, const char *model, int extras,
			     int (*fn)(const struct trial_result *t, void *arg), void *arg);
	long (*count_evaluations)(struct store *s, const char *status);
	/* the queue of mkb worker; NULL where the backend has none */
	int (*trial_claim)(struct store *s, const struct worker_id *w, double lease_s,
			   struct trial_record *out);
	int (*trial_heartbeat)(struct store *s, int64_t id, const char *worker, double lease_s);
	int (*trial_release)(struct store *s, int64_t id, const char *worker, const char *why);
};

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;

#endif
