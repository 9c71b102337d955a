/* The SQLite store (store.h), the embedded default: one file per store,
 * WAL, the schema versioned by PRAGMA user_version. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "store_backend.h"
#include "util.h"

/* 1: the first schema. 2: owner_pid, owner_boot, owner_start (which mkb
 * process ran a row, so a row it left "running" can be found abandoned).
 * 3: attempts and their events. 4: trials (mkb run). Tables are added; the
 * earlier ones are unchanged. 5: the judge queue's columns of an evaluation
 * (gpu_index, slot, queue_ms, hold_ms). 6: an attempt's held-out final
 * evaluation (heldout_evaluation). */
#define SCHEMA_VERSION 6

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS evaluations ("
	" id INTEGER PRIMARY KEY,"
	" started_at TEXT NOT NULL,"
	" finished_at TEXT,"
	" problem INTEGER NOT NULL,"
	" dsl TEXT NOT NULL,"
	" workload TEXT NOT NULL,"
	" device TEXT NOT NULL,"
	" kernel_path TEXT NOT NULL,"
	" kernel_sha256 TEXT,"
	" kernel_source TEXT,"
	" problem_sha256 TEXT NOT NULL,"
	" grader_sha256 TEXT NOT NULL,"
	" options TEXT NOT NULL,"
	" status TEXT NOT NULL,"          /* running until the verdict lands */
	" reason TEXT,"
	" stage TEXT,"
	" imported INTEGER, correct INTEGER, passed INTEGER,"
	" draws_passed INTEGER, draws_total INTEGER,"
	" kernel_ms REAL, eager_ms REAL, speedup REAL,"
	" gpu TEXT,"
	" versions TEXT,"                 /* JSON */
	" seeds TEXT,"                    /* JSON array */
	" stages TEXT,"                   /* JSON array of stage events */
	" result TEXT,"                   /* the grader's whole result object */
	" term_signal INTEGER, exit_code INTEGER,"
	" wait_ms REAL, eval_ms REAL,"
	" output_tail TEXT,"
	" owner_pid INTEGER, owner_boot TEXT, owner_start INTEGER,"
	" gpu_index INTEGER, slot INTEGER, queue_ms REAL, hold_ms REAL);"
	"CREATE INDEX IF NOT EXISTS evaluations_problem ON evaluations(problem, dsl, workload);"
	"CREATE TABLE IF NOT EXISTS attempts ("
	" id INTEGER PRIMARY KEY,"
	" started_at TEXT NOT NULL,"
	" finished_at TEXT,"
	" problem INTEGER NOT NULL,"
	" dsl TEXT NOT NULL,"
	" model TEXT NOT NULL,"
	" arm TEXT,"
	" workdir TEXT NOT NULL,"
	" skill_in_sha256 TEXT, skill_in_tokens INTEGER,"  /* the skill attached, if any */
	" options TEXT NOT NULL,"         /* budgets, decoding, agent, sandbox (JSON) */
	" status TEXT NOT NULL,"          /* running until the attempt ends */
	" reason TEXT,"
	" final_evaluation INTEGER REFERENCES evaluations(id),"
	" submissions INTEGER, turns INTEGER,"
	" input_tokens INTEGER, cached_tokens INTEGER, output_tokens INTEGER, cost_usd REAL,"
	" agent_s REAL,"
	" kernel_sha256 TEXT, skill_out TEXT, skill_out_sha256 TEXT, skill_out_tokens INTEGER,"
	" owner_pid INTEGER, owner_boot TEXT, owner_start INTEGER,"
	" heldout_evaluation INTEGER REFERENCES evaluations(id));" /* last: as ALTER adds it */
	"CREATE TABLE IF NOT EXISTS attempt_events ("
	" attempt INTEGER NOT NULL REFERENCES attempts(id),"
	" seq INTEGER NOT NULL,"
	" at TEXT NOT NULL,"
	" elapsed_s REAL NOT NULL,"       /* since the attempt began */
	" kind TEXT NOT NULL,"            /* request, response, keys, screen, submission, note */
	" body TEXT NOT NULL,"            /* JSON object */
	" PRIMARY KEY (attempt, seq));"
	"CREATE TABLE IF NOT EXISTS trials ("
	" id INTEGER PRIMARY KEY,"
	" name TEXT NOT NULL,"            /* p<NN>_r<k>_<arm> */
	" model TEXT NOT NULL,"
	" decoding TEXT NOT NULL,"        /* JSON: the decoding settings it ran with */
	" arm TEXT NOT NULL, problem INTEGER NOT NULL, dsl TEXT NOT NULL, replicate INTEGER NOT NULL,"
	" fingerprint TEXT NOT NULL,"     /* of what it ran: problem, grader, templates, budgets */
	" status TEXT NOT NULL,"          /* running, then the attempt's status, or skipped */
	" attempt INTEGER REFERENCES attempts(id),"
	" archived INTEGER NOT NULL DEFAULT 0," /* superseded (stale, interrupted, errored) */
	" note TEXT,"
	" created_at TEXT NOT NULL, finished_at TEXT,"
	" owner_pid INTEGER, owner_boot TEXT, owner_start INTEGER);"
	"CREATE INDEX IF NOT EXISTS trials_live ON trials(model, decoding, name) WHERE archived=0;";

static void sq_close(struct store *s);

static int sql_error(struct store *s, const char *what)
{
	return error("store '%s': %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int sq_open(const char *path, struct store **out)
{
	struct store *s = xcalloc(1, sizeof(*s));
	s->ops = &store_sqlite_ops;
	s->path = xstrdup(path);
	sqlite3 *db = NULL;
	int orc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	s->db = db;
	if (orc != SQLITE_OK) {
		int rc = error("cannot open store '%s': %s", path,
			       s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sq_close(s);
		return rc;
	}
	sqlite3_busy_timeout(s->db, 30000);
	char *msg = NULL;
	int version = -1;
	sqlite3_stmt *st;
	if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg) != SQLITE_OK ||
	    sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		int rc = error("store '%s': cannot create schema: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sq_close(s);
		return rc;
	}
	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			version = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	/* Version 1 stores gain the owner columns; their running rows keep NULL
	 * owners (nothing tells whether their process still runs). */
	if (version == 1 &&
	    sqlite3_exec(s->db, "BEGIN IMMEDIATE;"
			 " ALTER TABLE evaluations ADD COLUMN owner_pid INTEGER;"
			 " ALTER TABLE evaluations ADD COLUMN owner_boot TEXT;"
			 " ALTER TABLE evaluations ADD COLUMN owner_start INTEGER;"
			 " PRAGMA user_version=2; COMMIT;", NULL, NULL, &msg) == SQLITE_OK)
		version = 2;
	else if (version == 1) {
		int rc = error("store '%s': cannot migrate from version 1: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		sq_close(s);
		return rc;
	}
	/* Version 2 and 3 stores got the newer tables from the schema above. */
	if ((version == 2 || version == 3) &&
	    sqlite3_exec(s->db, "PRAGMA user_version=4", NULL, NULL, NULL) == SQLITE_OK)
		version = 4;
	/* Version 4 stores' evaluations gain the judge queue's columns (NULL in
	 * older rows: not recorded). */
	if (version == 4 &&
	    sqlite3_exec(s->db, "BEGIN IMMEDIATE;"
			 " ALTER TABLE evaluations ADD COLUMN gpu_index INTEGER;"
			 " ALTER TABLE evaluations ADD COLUMN slot INTEGER;"
			 " ALTER TABLE evaluations ADD COLUMN queue_ms REAL;"
			 " ALTER TABLE evaluations ADD COLUMN hold_ms REAL;"
			 " PRAGMA user_version=5; COMMIT;", NULL, NULL, &msg) == SQLITE_OK)
		version = 5;
	else if (version == 4) {
		int rc = error("store '%s': cannot migrate from version 4: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		sq_close(s);
		return rc;
	}
	/* Version 5 stores' attempts gain the held-out final evaluation. */
	if (version == 5 &&
	    sqlite3_exec(s->db, "BEGIN IMMEDIATE;"
			 " ALTER TABLE attempts ADD COLUMN heldout_evaluation INTEGER;"
			 " PRAGMA user_version=6; COMMIT;", NULL, NULL, &msg) == SQLITE_OK)
		version = 6;
	else if (version == 5) {
		int rc = error("store '%s': cannot migrate from version 5: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		store_close(s);
		return rc;
	}
	if (version == 0) {
		char pragma[64];
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version=%d", SCHEMA_VERSION);
		if (sqlite3_exec(s->db, pragma, NULL, NULL, NULL) != SQLITE_OK)
			version = -1;
		else
			version = SCHEMA_VERSION;
	}
	if (version != SCHEMA_VERSION) {
		int rc = error("store '%s' has schema version %d; this mkb reads %d", path, version,
			       SCHEMA_VERSION);
		sq_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

static void sq_close(struct store *s)
{
	if (!s)
		return;
	if (s->db && sqlite3_close(s->db) != SQLITE_OK)
		warning("store '%s' did not close cleanly", s->path);
	free(s->path);
	free(s);
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
	return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

static int bind_ms(sqlite3_stmt *st, int i, double v)
{
	return v >= 0 ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

static int bind_json(sqlite3_stmt *st, int i, json_t *v)
{
	if (!v)
		return sqlite3_bind_null(st, i);
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, s, -1, free);
}

/* Step a statement to completion and finalize it. */
static int run(struct store *s, sqlite3_stmt *st, int bind_rc, const char *what)
{
	int rc = bind_rc == SQLITE_OK && sqlite3_step(st) == SQLITE_DONE ? 0 : sql_error(s, what);
	sqlite3_finalize(st);
	return rc;
}

static int bind_count(sqlite3_stmt *st, int i, long long v)
{
	return v >= 0 ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

/* The mkb process that owns a row (pid, boot id, start time) at i, i+1, i+2. */
static int bind_owner(sqlite3_stmt *st, int i, long long pid, const char *boot, long long start)
{
	return (pid > 0 ? sqlite3_bind_int64(st, i, pid) : sqlite3_bind_null(st, i)) |
	       bind_text(st, i + 1, boot) | bind_count(st, i + 2, start);
}

/* Step an INSERT to completion; *id gets the new row. */
static int insert(struct store *s, sqlite3_stmt *st, int bind_rc, const char *what, int64_t *id)
{
	if (run(s, st, bind_rc, what) < 0)
		return -1;
	*id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

static int sq_begin_evaluation(struct store *s, const struct eval_record *r, int64_t *id)
{
	static const char sql[] =
		"INSERT INTO evaluations (started_at, problem, dsl, workload, device, kernel_path,"
		" kernel_sha256, kernel_source, problem_sha256, grader_sha256, options, status,"
		" owner_pid, owner_boot, owner_start)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'running', ?12, ?13, ?14)";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare insert");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = SQLITE_OK;
	b |= bind_text(st, 1, ts);
	b |= sqlite3_bind_int(st, 2, r->problem);
	b |= bind_text(st, 3, r->dsl);
	b |= bind_text(st, 4, r->workload);
	b |= bind_text(st, 5, r->device);
	b |= bind_text(st, 6, r->kernel_path);
	b |= bind_text(st, 7, r->kernel_sha256);
	b |= bind_text(st, 8, r->kernel_source);
	b |= bind_text(st, 9, r->problem_sha256);
	b |= bind_text(st, 10, r->grader_sha256);
	b |= bind_text(st, 11, r->options_json);
	b |= bind_owner(st, 12, r->owner_pid, r->owner_boot, r->owner_start);
	return insert(s, st, b, "insert evaluation", id);
}

static int sq_finish_evaluation(struct store *s, int64_t id, const struct verdict *v)
{
	static const char sql[] =
		"UPDATE evaluations SET finished_at=?1, status=?2, reason=?3, stage=?4,"
		" imported=?5, correct=?6, passed=?7, draws_passed=?8, draws_total=?9,"
		" kernel_ms=?10, eager_ms=?11, speedup=?12, gpu=?13, versions=?14, seeds=?15,"
		" stages=?16, result=?17, term_signal=?18, exit_code=?19, wait_ms=?20,"
		" eval_ms=?21, output_tail=?22, gpu_index=?24, slot=?25, queue_ms=?26, hold_ms=?27"
		" WHERE id=?23";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare update");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = SQLITE_OK;
	b |= bind_text(st, 1, ts);
	b |= bind_text(st, 2, verdict_status_name(v->status));
	b |= bind_text(st, 3, v->reason);
	b |= bind_text(st, 4, v->stage);
	b |= sqlite3_bind_int(st, 5, v->imported);
	b |= sqlite3_bind_int(st, 6, v->correct);
	b |= sqlite3_bind_int(st, 7, v->passed);
	b |= sqlite3_bind_int(st, 8, v->draws_passed);
	b |= sqlite3_bind_int(st, 9, v->draws_total);
	b |= bind_ms(st, 10, v->kernel_ms);
	b |= bind_ms(st, 11, v->eager_ms);
	b |= bind_ms(st, 12, v->speedup);
	b |= bind_text(st, 13, v->gpu);
	b |= bind_json(st, 14, json_object_get(v->result, "versions"));
	b |= bind_json(st, 15, json_object_get(v->result, "seeds"));
	b |= bind_json(st, 16, v->stages);
	b |= bind_json(st, 17, v->result);
	b |= v->term_signal > 0 ? sqlite3_bind_int(st, 18, v->term_signal) : sqlite3_bind_null(st, 18);
	b |= sqlite3_bind_int(st, 19, v->exit_code);
	b |= sqlite3_bind_double(st, 20, v->wait_ms);
	b |= sqlite3_bind_double(st, 21, v->eval_ms);
	b |= bind_text(st, 22, v->output_tail);
	b |= sqlite3_bind_int64(st, 23, id);
	b |= v->gpu_index >= 0 ? sqlite3_bind_int(st, 24, v->gpu_index) : sqlite3_bind_null(st, 24);
	b |= v->slot >= 0 ? sqlite3_bind_int(st, 25, v->slot) : sqlite3_bind_null(st, 25);
	b |= sqlite3_bind_double(st, 26, v->queue_ms);
	b |= bind_ms(st, 27, v->hold_ms);
	return run(s, st, b, "update evaluation");
}

static long sq_count_evaluations(struct store *s, const char *status)
{
	sqlite3_stmt *st;
	const char *sql = *status ? "SELECT count(*) FROM evaluations WHERE status=?1"
				  : "SELECT count(*) FROM evaluations";
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare count");
	if (*status && sqlite3_bind_text(st, 1, status, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
		sqlite3_finalize(st);
		return sql_error(s, "bind count");
	}
	long n = sqlite3_step(st) == SQLITE_ROW ? (long)sqlite3_column_int64(st, 0) : -1;
	sqlite3_finalize(st);
	return n;
}

/* Reclaim the abandoned running rows of one table (evaluations, attempts). */
static long reclaim_table(struct store *s, const char *table, const char *boot,
			  int (*alive)(long long pid, long long start))
{
	sqlite3_stmt *st;
	char *sql = xstrfmt("SELECT id, owner_pid, owner_start, owner_boot FROM %s"
			    " WHERE status='running' AND owner_pid IS NOT NULL", table);
	int prc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	free(sql);
	if (prc != SQLITE_OK)
		return sql_error(s, "prepare abandoned");
	int64_t ids[256];
	long long pids[256];
	size_t n = 0;
	while (n < ARRAY_SIZE(ids) && sqlite3_step(st) == SQLITE_ROW) {
		const char *owner_boot = (const char *)sqlite3_column_text(st, 3);
		long long pid = sqlite3_column_int64(st, 1), start = sqlite3_column_int64(st, 2);
		/* another boot of this machine, or a process that is gone */
		if (!owner_boot || strcmp(owner_boot, boot) || !alive(pid, start)) {
			ids[n] = sqlite3_column_int64(st, 0);
			pids[n++] = pid;
		}
	}
	sqlite3_finalize(st);
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	for (size_t i = 0; i < n; i++) {
		sql = xstrfmt("UPDATE %s SET status='infra_error', finished_at=?1, reason=?2"
			      " WHERE id=?3 AND status='running'", table);
		prc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
		free(sql);
		if (prc != SQLITE_OK)
			return sql_error(s, "prepare reclaim");
		char *why = xstrfmt("abandoned: the mkb process that ran it (pid %lld) ended without a verdict",
				    pids[i]);
		int b = bind_text(st, 1, ts);
		b |= sqlite3_bind_text(st, 2, why, -1, free);
		b |= sqlite3_bind_int64(st, 3, ids[i]);
		if (run(s, st, b, "reclaim abandoned row") < 0)
			return -1;
	}
	return (long)n;
}

static long sq_reclaim_abandoned(struct store *s, const char *boot,
			     int (*alive)(long long pid, long long start))
{
	long evals = reclaim_table(s, "evaluations", boot, alive);
	long attempts = evals < 0 ? -1 : reclaim_table(s, "attempts", boot, alive);
	return attempts < 0 ? -1 : evals + attempts;
}

/* ---- attempts ---------------------------------------------------------- */

static int sq_begin_attempt(struct store *s, const struct attempt_record *r, int64_t *id)
{
	static const char sql[] =
		"INSERT INTO attempts (started_at, problem, dsl, model, arm, workdir, skill_in_sha256,"
		" skill_in_tokens, options, status, owner_pid, owner_boot, owner_start)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'running', ?10, ?11, ?12)";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare insert attempt");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = bind_text(st, 1, ts);
	b |= sqlite3_bind_int(st, 2, r->problem);
	b |= bind_text(st, 3, r->dsl);
	b |= bind_text(st, 4, r->model);
	b |= bind_text(st, 5, r->arm);
	b |= bind_text(st, 6, r->workdir);
	b |= bind_text(st, 7, r->skill_sha256);
	b |= bind_count(st, 8, r->skill_tokens);
	b |= bind_text(st, 9, r->options_json);
	b |= bind_owner(st, 10, r->owner_pid, r->owner_boot, r->owner_start);
	return insert(s, st, b, "insert attempt", id);
}

static int sq_add_attempt_event(struct store *s, int64_t id, const char *kind, double elapsed_s,
			    json_t *body)
{
	static const char sql[] =
		"INSERT INTO attempt_events (attempt, seq, at, elapsed_s, kind, body)"
		" VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM attempt_events WHERE attempt=?1),"
		" ?2, ?3, ?4, ?5)";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare attempt event");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = sqlite3_bind_int64(st, 1, id);
	b |= bind_text(st, 2, ts);
	b |= sqlite3_bind_double(st, 3, elapsed_s);
	b |= bind_text(st, 4, kind);
	b |= bind_json(st, 5, body);
	return run(s, st, b, "insert attempt event");
}

static int sq_finish_attempt(struct store *s, int64_t id, const struct attempt_outcome *o)
{
	static const char sql[] =
		"UPDATE attempts SET finished_at=?1, status=?2, reason=?3, final_evaluation=?4,"
		" submissions=?5, turns=?6, input_tokens=?7, cached_tokens=?8, output_tokens=?9,"
		" cost_usd=?10, agent_s=?11, kernel_sha256=?12, skill_out=?13, skill_out_sha256=?14,"
		" skill_out_tokens=?15, heldout_evaluation=?17 WHERE id=?16";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare finish attempt");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = bind_text(st, 1, ts);
	b |= bind_text(st, 2, o->status);
	b |= bind_text(st, 3, o->reason);
	b |= o->final_evaluation > 0 ? sqlite3_bind_int64(st, 4, o->final_evaluation)
				     : sqlite3_bind_null(st, 4);
	b |= o->heldout_evaluation > 0 ? sqlite3_bind_int64(st, 17, o->heldout_evaluation)
				       : sqlite3_bind_null(st, 17);
	b |= sqlite3_bind_int(st, 5, o->submissions);
	b |= sqlite3_bind_int(st, 6, o->turns);
	b |= bind_count(st, 7, o->input_tokens);
	b |= bind_count(st, 8, o->cached_tokens);
	b |= bind_count(st, 9, o->output_tokens);
	b |= o->cost_usd >= 0 ? sqlite3_bind_double(st, 10, o->cost_usd) : sqlite3_bind_null(st, 10);
	b |= sqlite3_bind_double(st, 11, o->agent_s);
	b |= bind_text(st, 12, o->kernel_sha256);
	b |= bind_text(st, 13, o->skill);
	b |= bind_text(st, 14, o->skill_sha256);
	b |= bind_count(st, 15, o->skill_tokens);
	b |= sqlite3_bind_int64(st, 16, id);
	return run(s, st, b, "finish attempt");
}

/* One row of st as an object: each column by its name, JSON columns parsed. */
static json_t *row_object(sqlite3_stmt *st, const char *const *json_columns)
{
	json_t *o = json_object();
	for (int i = 0; i < sqlite3_column_count(st); i++) {
		const char *name = sqlite3_column_name(st, i);
		json_t *v = NULL;
		switch (sqlite3_column_type(st, i)) {
		case SQLITE_INTEGER: v = json_integer(sqlite3_column_int64(st, i)); break;
		case SQLITE_FLOAT: v = json_real(sqlite3_column_double(st, i)); break;
		case SQLITE_NULL: v = json_null(); break;
		default: {
			const char *text = (const char *)sqlite3_column_text(st, i);
			for (size_t k = 0; json_columns[k] && !v; k++)
				if (!strcmp(name, json_columns[k]))
					v = json_loads(text ? text : "null", JSON_DECODE_ANY, NULL);
			if (!v)
				v = json_string(text ? text : "");
		}
		}
		json_object_set_new(o, name, v ? v : json_null());
	}
	return o;
}

static json_t *sq_load_attempt(struct store *s, int64_t id)
{
	static const char *const attempt_json[] = {"options", NULL};
	static const char *const event_json[] = {"body", NULL};
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT * FROM attempts WHERE id=?1", -1, &st, NULL) != SQLITE_OK) {
		sql_error(s, "prepare load attempt");
		return NULL;
	}
	json_t *a = NULL;
	if (sqlite3_bind_int64(st, 1, id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		a = row_object(st, attempt_json);
	sqlite3_finalize(st);
	if (!a) {
		error("store '%s' has no attempt %lld", s->path, (long long)id);
		return NULL;
	}
	if (sqlite3_prepare_v2(s->db, "SELECT seq, at, elapsed_s, kind, body FROM attempt_events"
			       " WHERE attempt=?1 ORDER BY seq", -1, &st, NULL) != SQLITE_OK) {
		json_decref(a);
		sql_error(s, "prepare load events");
		return NULL;
	}
	json_t *events = json_array();
	int rc = sqlite3_bind_int64(st, 1, id);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_array_append_new(events, row_object(st, event_json));
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(a);
		json_decref(events);
		sql_error(s, "load events");
		return NULL;
	}
	json_object_set_new(a, "events", events);
	return a;
}

/* ---- trials (mkb run) ---------------------------------------------------- */

static char *column_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? xstrdup((const char *)t) : NULL;
}

static int sq_trials_load(struct store *s, const char *model, const char *decoding,
		      struct trial_record **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT id, name, model, decoding, arm, problem, dsl, replicate,"
			       " fingerprint, status, attempt, owner_pid, owner_boot, owner_start FROM trials"
			       " WHERE archived=0 AND model=?1 AND decoding=?2 ORDER BY id", -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare trials");
	int rc = bind_text(st, 1, model) | bind_text(st, 2, decoding);
	size_t cap = 0;
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		struct trial_record *t = &(*out)[(*n)++];
		memset(t, 0, sizeof(*t));
		t->id = sqlite3_column_int64(st, 0);
		t->name = column_text(st, 1);
		t->model = column_text(st, 2);
		t->decoding = column_text(st, 3);
		t->arm = column_text(st, 4);
		t->problem = sqlite3_column_int(st, 5);
		t->dsl = column_text(st, 6);
		t->replicate = sqlite3_column_int(st, 7);
		t->fingerprint = column_text(st, 8);
		t->status = column_text(st, 9);
		t->attempt = sqlite3_column_int64(st, 10);
		t->owner_pid = sqlite3_column_int64(st, 11);
		t->owner_boot = column_text(st, 12);
		t->owner_start = sqlite3_column_int64(st, 13);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		trial_records_free(*out, *n);
		*out = NULL;
		*n = 0;
		return sql_error(s, "load trials");
	}
	return 0;
}

static int sq_trial_begin(struct store *s, const struct trial_record *t, int64_t *id)
{
	static const char sql[] =
		"INSERT INTO trials (name, model, decoding, arm, problem, dsl, replicate, fingerprint,"
		" status, archived, created_at, owner_pid, owner_boot, owner_start)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12, ?13)";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare trial");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = bind_text(st, 1, t->name);
	b |= bind_text(st, 2, t->model);
	b |= bind_text(st, 3, t->decoding);
	b |= bind_text(st, 4, t->arm);
	b |= sqlite3_bind_int(st, 5, t->problem);
	b |= bind_text(st, 6, t->dsl);
	b |= sqlite3_bind_int(st, 7, t->replicate);
	b |= bind_text(st, 8, t->fingerprint);
	b |= bind_text(st, 9, t->status);
	b |= bind_text(st, 10, ts);
	b |= bind_owner(st, 11, t->owner_pid, t->owner_boot, t->owner_start);
	return insert(s, st, b, "insert trial", id);
}

static int sq_trial_finish(struct store *s, int64_t id, const char *status, int64_t attempt,
		       const char *note)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "UPDATE trials SET status=?1, attempt=?2, note=?3, finished_at=?4"
			       " WHERE id=?5", -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare finish trial");
	char ts[32];
	utc_timestamp(ts, sizeof(ts));
	int b = bind_text(st, 1, status);
	b |= attempt > 0 ? sqlite3_bind_int64(st, 2, attempt) : sqlite3_bind_null(st, 2);
	b |= bind_text(st, 3, note);
	b |= bind_text(st, 4, ts);
	b |= sqlite3_bind_int64(st, 5, id);
	return run(s, st, b, "finish trial");
}

static int sq_trial_archive(struct store *s, int64_t id, const char *why)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "UPDATE trials SET archived=1, note=coalesce(note || '; ', '') || ?1"
			       " WHERE id=?2", -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare archive trial");
	int b = bind_text(st, 1, why) | sqlite3_bind_int64(st, 2, id);
	return run(s, st, b, "archive trial");
}

static char *sq_attempt_skill(struct store *s, int64_t attempt)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT skill_out FROM attempts WHERE id=?1", -1, &st, NULL) != SQLITE_OK) {
		sql_error(s, "prepare skill");
		return NULL;
	}
	char *skill = NULL;
	if (sqlite3_bind_int64(st, 1, attempt) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		skill = column_text(st, 0);
	sqlite3_finalize(st);
	return skill;
}

static json_t *sq_trials_summary(struct store *s)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT model, decoding, status, count(*), sum(archived = 0),"
			       " group_concat(CASE WHEN status = 'running' AND archived = 0 THEN name END, ' ')"
			       " FROM trials GROUP BY model, decoding, status ORDER BY model, decoding, status",
			       -1, &st, NULL) != SQLITE_OK) {
		sql_error(s, "prepare trials summary");
		return NULL;
	}
	json_t *rows = json_array();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *running = (const char *)sqlite3_column_text(st, 5);
		json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:I, s:I, s:s?}",
			"model", (const char *)sqlite3_column_text(st, 0),
			"decoding", (const char *)sqlite3_column_text(st, 1),
			"status", (const char *)sqlite3_column_text(st, 2),
			"trials", (json_int_t)sqlite3_column_int64(st, 3),
			"live", (json_int_t)sqlite3_column_int64(st, 4), "running", running));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(rows);
		sql_error(s, "trials summary");
		return NULL;
	}
	return rows;
}

static double sq_model_cost(struct store *s, const char *model)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT coalesce(sum(cost_usd), 0) FROM attempts WHERE model=?1",
			       -1, &st, NULL) != SQLITE_OK) {
		sql_error(s, "prepare cost");
		return -1;
	}
	double cost = -1;
	if (bind_text(st, 1, model) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		cost = sqlite3_column_double(st, 0);
	sqlite3_finalize(st);
	return cost;
}

/* ---- the report's read of trials ----------------------------------------- */

static double column_real(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_double(st, i);
}

static long long column_count(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

static int sq_trial_results(struct store *s, const char *model, int extras,
			int (*fn)(const struct trial_result *t, void *arg), void *arg)
{
	static const char sql[] =
		"SELECT t.name, t.model, t.decoding, t.arm, t.dsl, t.status, t.note, a.reason,"
		" t.problem, t.replicate, t.attempt, e.passed, e.speedup, e.kernel_ms, e.eager_ms,"
		" a.input_tokens, a.cached_tokens, a.output_tokens, a.cost_usd, a.agent_s,"
		" a.skill_out IS NOT NULL AND a.skill_out <> '', a.skill_in_tokens, a.skill_out_tokens,"
		" h.passed, h.speedup, e.gpu, e.workload,"
		/* the speedup's interval as JSON text, only when asked (?2):
		 * it parses every stored result; json_extract alone would fail
		 * the whole read on one malformed result */
		" CASE WHEN ?2 AND json_valid(e.result) THEN CASE json_type(e.result, '$.speedup_ci')"
		"  WHEN 'array' THEN json_extract(e.result, '$.speedup_ci') END END,"
		" CASE WHEN ?2 AND json_valid(e.result) THEN CASE json_type(e.result, '$.timing.device_ms')"
		"  WHEN 'real' THEN json_extract(e.result, '$.timing.device_ms')"
		"  WHEN 'integer' THEN json_extract(e.result, '$.timing.device_ms') END END"
		" FROM trials t LEFT JOIN attempts a ON a.id = t.attempt"
		" LEFT JOIN evaluations e ON e.id = a.final_evaluation"
		" LEFT JOIN evaluations h ON h.id = a.heldout_evaluation"
		" WHERE t.archived = 0 AND (?1 IS NULL OR t.model = ?1)"
		" ORDER BY t.model, t.decoding, t.problem, t.replicate, t.arm";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sql_error(s, "prepare trial results");
	int rc = bind_text(st, 1, model) | sqlite3_bind_int(st, 2, extras != 0), stop = 0;
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct trial_result t = {
			.name = (const char *)sqlite3_column_text(st, 0),
			.model = (const char *)sqlite3_column_text(st, 1),
			.decoding = (const char *)sqlite3_column_text(st, 2),
			.arm = (const char *)sqlite3_column_text(st, 3),
			.dsl = (const char *)sqlite3_column_text(st, 4),
			.status = (const char *)sqlite3_column_text(st, 5),
			.note = (const char *)sqlite3_column_text(st, 6),
			.reason = (const char *)sqlite3_column_text(st, 7),
			.problem = sqlite3_column_int(st, 8),
			.replicate = sqlite3_column_int(st, 9),
			.attempt = sqlite3_column_int64(st, 10),
			.passed = sqlite3_column_type(st, 11) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 11),
			.speedup = column_real(st, 12),
			.kernel_ms = column_real(st, 13),
			.eager_ms = column_real(st, 14),
			.input_tokens = column_count(st, 15),
			.cached_tokens = column_count(st, 16),
			.output_tokens = column_count(st, 17),
			.cost_usd = column_real(st, 18),
			.agent_s = column_real(st, 19),
			.wrote_skill = sqlite3_column_int(st, 20),
			.skill_in_tokens = column_count(st, 21),
			.skill_out_tokens = column_count(st, 22),
			.heldout_passed = sqlite3_column_type(st, 23) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 23),
			.heldout_speedup = column_real(st, 24),
			.gpu = (const char *)sqlite3_column_text(st, 25),
			.workload = (const char *)sqlite3_column_text(st, 26),
			.speedup_ci = (const char *)sqlite3_column_text(st, 27),
			.device_ms = column_real(st, 28),
		};
		if ((stop = fn(&t, arg)) != 0)
			break;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (stop)
		return stop;
	return rc == SQLITE_DONE ? 0 : sql_error(s, "read trial results");
}

const struct store_ops store_sqlite_ops = {
	.name = "sqlite",
	.open = sq_open,
	.close = sq_close,
	.begin_evaluation = sq_begin_evaluation,
	.finish_evaluation = sq_finish_evaluation,
	.reclaim_abandoned = sq_reclaim_abandoned,
	.begin_attempt = sq_begin_attempt,
	.add_attempt_event = sq_add_attempt_event,
	.finish_attempt = sq_finish_attempt,
	.load_attempt = sq_load_attempt,
	.trials_load = sq_trials_load,
	.trial_begin = sq_trial_begin,
	.trial_finish = sq_trial_finish,
	.trial_archive = sq_trial_archive,
	.attempt_skill = sq_attempt_skill,
	.model_cost = sq_model_cost,
	.trials_summary = sq_trials_summary,
	.trial_results = sq_trial_results,
	.count_evaluations = sq_count_evaluations,
	/* no queue: one machine runs its trials itself (mkb run --concurrency) */
};
