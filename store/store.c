/* SPDX-License-Identifier: MIT */
/*
 * The front of store.h: the schema's numbered migrations and every statement, in
 * SQLite's dialect (store/pg.c translates them mechanically for PostgreSQL), typed
 * records bound to them and read back from their rows, and leadership with fencing.
 * The backend the target names (backend.h) runs them. Every statement is parameterised.
 */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "util.h"

/* job_goodput's bucket columns, in store.h's (and health/goodput.h's) order. */
#define GOODPUT_BUCKET_COLUMNS                                                            \
        "productive_ms, queueing_ms, startup_ms, lost_work_ms, detection_ms, restart_ms," \
        " hang_ms, preemption_ms, checkpoint_ms"
/* A project's sums over job_goodput's rows, columns as goodput_total's: jobs counted,
 * accelerator-ms per bucket, interruptions, rank-ms. */
#define GOODPUT_SUMS                                                                 \
        "SELECT project, SUM(CASE WHEN finished_ms > created_ms THEN 1 ELSE 0 END)," \
        " SUM(productive_ms * accelerators), SUM(queueing_ms * accelerators),"       \
        " SUM(startup_ms * accelerators), SUM(lost_work_ms * accelerators),"         \
        " SUM(detection_ms * accelerators), SUM(restart_ms * accelerators),"         \
        " SUM(hang_ms * accelerators), SUM(preemption_ms * accelerators),"           \
        " SUM(checkpoint_ms * accelerators), SUM(interruptions), SUM(rank_ms)"

/* The figures' columns closing job_goodput's and goodput_total's definitions. */
#define GOODPUT_FIGURE_DEFS                                                 \
        "  productive_ms INTEGER NOT NULL, queueing_ms INTEGER NOT NULL,"   \
        "  startup_ms INTEGER NOT NULL, lost_work_ms INTEGER NOT NULL,"     \
        "  detection_ms INTEGER NOT NULL, restart_ms INTEGER NOT NULL,"     \
        "  hang_ms INTEGER NOT NULL, preemption_ms INTEGER NOT NULL,"       \
        "  checkpoint_ms INTEGER NOT NULL, interruptions INTEGER NOT NULL," \
        "  rank_ms INTEGER NOT NULL);"
/* Migrations run in order; the database remembers how many it has applied. */
static const char *const migrations[] = {
        /* 1: the data model of DESIGN.md §3 */
        "CREATE TABLE job ("
        "  id INTEGER PRIMARY KEY, name TEXT NOT NULL, project TEXT NOT NULL,"
        "  user TEXT NOT NULL, priority INTEGER NOT NULL, spec TEXT NOT NULL,"
        "  state TEXT NOT NULL, attempt INTEGER NOT NULL, restarts INTEGER NOT NULL,"
        "  reason TEXT NOT NULL, exit_code INTEGER, created_ms INTEGER NOT NULL,"
        "  started_ms INTEGER, finished_ms INTEGER, idempotency_key TEXT UNIQUE,"
        "  ckpt_step INTEGER, ckpt_path TEXT, avoid_node TEXT);"
        "CREATE INDEX job_state ON job(state);"
        "CREATE TABLE attempt ("
        "  job INTEGER NOT NULL, attempt INTEGER NOT NULL, resume_step INTEGER NOT NULL,"
        "  resume_path TEXT, started_ms INTEGER NOT NULL, ended_ms INTEGER,"
        "  end_reason TEXT, blamed_node TEXT, detail TEXT, PRIMARY KEY (job, attempt));"
        "CREATE TABLE rank ("
        "  job INTEGER NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL,"
        "  node TEXT NOT NULL, devices TEXT NOT NULL, state TEXT NOT NULL,"
        "  alive INTEGER NOT NULL, pid INTEGER, exit_code INTEGER, signal INTEGER,"
        "  step INTEGER, local_rank INTEGER NOT NULL, node_rank INTEGER NOT NULL,"
        "  PRIMARY KEY (job, attempt, rank));"
        "CREATE TABLE node ("
        "  name TEXT PRIMARY KEY, hostname TEXT, address TEXT, boot_id TEXT,"
        "  labels TEXT NOT NULL, inventory TEXT NOT NULL, state TEXT NOT NULL,"
        "  reason TEXT NOT NULL, last_seen_ms INTEGER, blame_times TEXT NOT NULL);"
        "CREATE TABLE checkpoint ("
        "  job INTEGER NOT NULL, step INTEGER NOT NULL, path TEXT NOT NULL,"
        "  committed_ms INTEGER NOT NULL, attempt INTEGER NOT NULL,"
        "  PRIMARY KEY (job, step));"
        "CREATE TABLE event ("
        "  seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, job INTEGER, node TEXT,"
        "  kind TEXT NOT NULL, detail TEXT NOT NULL);"
        "CREATE INDEX event_job ON event(job, seq);",
        /* 2: quota tiers, and when a job last entered the queue (for aging) */
        "ALTER TABLE job ADD COLUMN tier INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE job ADD COLUMN queued_ms INTEGER;",
        /* 3: API tokens, only their SHA-256 hashes */
        "CREATE TABLE token ("
        "  name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL,"
        "  projects TEXT NOT NULL, node TEXT, created_ms INTEGER NOT NULL,"
        "  revoked_ms INTEGER);",
        /* 4: the agent holding a node, so a restarted controller refuses a second one */
        "ALTER TABLE node ADD COLUMN agent_id TEXT;",
        /* 5: idempotency keys are a project's own: the same key in another project is
         * another key. SQLite cannot drop a column's UNIQUE, so the table is rebuilt. */
        "CREATE TABLE job_new ("
        "  id INTEGER PRIMARY KEY, name TEXT NOT NULL, project TEXT NOT NULL,"
        "  user TEXT NOT NULL, priority INTEGER NOT NULL, spec TEXT NOT NULL,"
        "  state TEXT NOT NULL, attempt INTEGER NOT NULL, restarts INTEGER NOT NULL,"
        "  reason TEXT NOT NULL, exit_code INTEGER, created_ms INTEGER NOT NULL,"
        "  started_ms INTEGER, finished_ms INTEGER, idempotency_key TEXT,"
        "  ckpt_step INTEGER, ckpt_path TEXT, avoid_node TEXT,"
        "  tier INTEGER NOT NULL DEFAULT 0, queued_ms INTEGER);"
        "INSERT INTO job_new SELECT id, name, project, user, priority, spec, state, attempt,"
        "  restarts, reason, exit_code, created_ms, started_ms, finished_ms, idempotency_key,"
        "  ckpt_step, ckpt_path, avoid_node, tier, queued_ms FROM job;"
        "DROP TABLE job;"
        "ALTER TABLE job_new RENAME TO job;"
        "CREATE INDEX job_state ON job(state);"
        "CREATE UNIQUE INDEX job_idempotency ON job(project, idempotency_key);",
        /* 6: a job's failures in a row without progress and its best step survive a
         * restart of the controller, so the crash-loop limit cannot be reset by one */
        "ALTER TABLE job ADD COLUMN quick_failures INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE job ADD COLUMN best_step INTEGER;",
        /* 7: what goodput accounting needs of each attempt: when it ran, progressed,
         * failed (by the evidence) and checkpointed, and what checkpoints cost it */
        "ALTER TABLE attempt ADD COLUMN running_ms INTEGER;"
        "ALTER TABLE attempt ADD COLUMN first_progress_ms INTEGER;"
        "ALTER TABLE attempt ADD COLUMN last_progress_ms INTEGER;"
        "ALTER TABLE attempt ADD COLUMN failed_ms INTEGER;"
        "ALTER TABLE attempt ADD COLUMN first_ckpt_ms INTEGER;"
        "ALTER TABLE attempt ADD COLUMN last_ckpt_ms INTEGER;"
        "ALTER TABLE attempt ADD COLUMN n_ckpts INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE attempt ADD COLUMN ckpt_stall_ms INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE attempt ADD COLUMN n_ckpt_stalls INTEGER NOT NULL DEFAULT 0;",
        /* 8: an ended job's goodput figures, written with its final state, so the fleet's
         * and projects' figures are sums here rather than every job's timeline */
        "CREATE TABLE job_goodput ("
        "  job INTEGER PRIMARY KEY, project TEXT NOT NULL, created_ms INTEGER NOT NULL,"
        "  finished_ms INTEGER NOT NULL, accelerators INTEGER NOT NULL," GOODPUT_FIGURE_DEFS
        "CREATE INDEX job_goodput_created ON job_goodput(created_ms);",
        /* 9: leadership among controllers sharing the database: one row, whose token
         * fences a deposed leader's writes (store_lead) */
        "CREATE TABLE leader ("
        "  id INTEGER PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL, url TEXT NOT NULL,"
        "  token INTEGER NOT NULL, expires_ms INTEGER NOT NULL);"
        "INSERT INTO leader (id, holder, url, token, expires_ms) VALUES (1, '', '', 0, 0);",
        /* 10: a node's desired-state version, so that a restarted controller goes on from
         * it and its agents' first syncs can get the short answer (0: not known) */
        "ALTER TABLE node ADD COLUMN version INTEGER NOT NULL DEFAULT 0;",
        /* 11: what a start loads without reading every stored job (store_jobs_load) */
        "CREATE INDEX job_finished ON job(finished_ms);"
        "CREATE INDEX rank_alive ON rank(job) WHERE alive = 1;",
        /* 12: each project's goodput sums, kept as figures are written: a start read
         * them by summing every ended job's, which grew with the history */
        "CREATE TABLE goodput_total ("
        "  project TEXT PRIMARY KEY, jobs INTEGER NOT NULL," GOODPUT_FIGURE_DEFS
        "INSERT INTO goodput_total (project, jobs, " GOODPUT_BUCKET_COLUMNS
        ", interruptions, rank_ms) " GOODPUT_SUMS " FROM job_goodput GROUP BY project;",
};

enum {
        STMT_JOB_PUT,
        STMT_JOB_UPDATE,
        STMT_JOB_STATE_UPDATE,
        STMT_ATTEMPT_PUT,
        STMT_RANK_PUT,
        STMT_RANK_ALIVE_UPDATE,
        STMT_NODE_PUT,
        STMT_NODE_VERSION_PUT,
        STMT_CHECKPOINT_PUT,
        STMT_EVENT_APPEND,
        STMT_EVENTS_ALL,
        STMT_EVENTS_JOB,
        STMT_TOKEN_INSERT,
        STMT_TOKEN_BY_HASH,
        STMT_TOKEN_REVOKE,
        STMT_TOKEN_STAMP,
        STMT_GOODPUT_PUT,
        STMT_GOODPUT_TOTAL_ADD,
        STMT_JOB_FIND_KEY,
        STMT_JOBS_LIST,
        STMT_JOB_ONE,
        STMT_JOB_ATTEMPTS,
        STMT_JOB_RANKS,
        STMT_LEADER_CHECK,
        _STMT_MAX,
};

/* Upserts name their conflict and columns, in the SQL both backends speak: an upsert
 * rather than REPLACE also keeps REPLACE from silently deleting another job of the
 * project that holds the same idempotency key. */
static const char *const statement_sql[_STMT_MAX] = {
        [STMT_JOB_PUT] = "INSERT INTO job (id, name, project, user, priority, spec,"
                         " state, attempt, restarts, reason, exit_code, created_ms, started_ms,"
                         " finished_ms, idempotency_key, ckpt_step, ckpt_path, avoid_node, tier,"
                         " queued_ms, quick_failures, best_step)"
                         " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                         " ON CONFLICT(id) DO UPDATE SET state=excluded.state,"
                         " attempt=excluded.attempt, restarts=excluded.restarts,"
                         " reason=excluded.reason, exit_code=excluded.exit_code,"
                         " started_ms=excluded.started_ms, finished_ms=excluded.finished_ms,"
                         " ckpt_step=excluded.ckpt_step, ckpt_path=excluded.ckpt_path,"
                         " avoid_node=excluded.avoid_node, priority=excluded.priority,"
                         " tier=excluded.tier, queued_ms=excluded.queued_ms,"
                         " quick_failures=excluded.quick_failures, best_step=excluded.best_step",
        /*
         * The same columns, for a job whose row exists (its spec is not rendered again),
         * but the indexed state and finished_ms: those the next statement sets, only where
         * they differ. SQLite rewrites the entries of an index whose column an UPDATE
         * sets, whatever the value, and each rewrite is a page more in the WAL (a rank's
         * exit writes its job's row).
         */
        [STMT_JOB_UPDATE] = "UPDATE job SET attempt=?, restarts=?, reason=?, exit_code=?,"
                            " started_ms=?, ckpt_step=?, ckpt_path=?, avoid_node=?, priority=?,"
                            " tier=?, queued_ms=?, quick_failures=?, best_step=? WHERE id=?",
        [STMT_JOB_STATE_UPDATE] = "UPDATE job SET state=?, finished_ms=? WHERE id=? AND"
                                  " (state IS DISTINCT FROM ? OR finished_ms IS DISTINCT FROM ?)",
        [STMT_ATTEMPT_PUT] =
                "INSERT INTO attempt (job, attempt, resume_step, resume_path, started_ms,"
                " ended_ms, end_reason, blamed_node, detail, running_ms, first_progress_ms,"
                " last_progress_ms, failed_ms, first_ckpt_ms, last_ckpt_ms, n_ckpts,"
                " ckpt_stall_ms, n_ckpt_stalls) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(job, attempt) DO UPDATE SET resume_step=excluded.resume_step,"
                " resume_path=excluded.resume_path, started_ms=excluded.started_ms,"
                " ended_ms=excluded.ended_ms, end_reason=excluded.end_reason,"
                " blamed_node=excluded.blamed_node, detail=excluded.detail,"
                " running_ms=excluded.running_ms, first_progress_ms=excluded.first_progress_ms,"
                " last_progress_ms=excluded.last_progress_ms, failed_ms=excluded.failed_ms,"
                " first_ckpt_ms=excluded.first_ckpt_ms, last_ckpt_ms=excluded.last_ckpt_ms,"
                " n_ckpts=excluded.n_ckpts, ckpt_stall_ms=excluded.ckpt_stall_ms,"
                " n_ckpt_stalls=excluded.n_ckpt_stalls",
        [STMT_RANK_PUT] = "INSERT INTO rank (job, attempt, rank, node, devices, state, alive,"
                          " pid, exit_code, signal, step, local_rank, node_rank)"
                          " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
                          " ON CONFLICT(job, attempt, rank) DO UPDATE SET node=excluded.node,"
                          " devices=excluded.devices, state=excluded.state,"
                          " pid=excluded.pid, exit_code=excluded.exit_code,"
                          " signal=excluded.signal, step=excluded.step,"
                          " local_rank=excluded.local_rank, node_rank=excluded.node_rank",
        /* An existing row's alive, set apart and only where it differs: alive ranks have
         * an index of their own (rank_alive), rewritten whenever an UPDATE sets alive. */
        [STMT_RANK_ALIVE_UPDATE] = "UPDATE rank SET alive=? WHERE job=? AND attempt=? AND rank=?"
                                   " AND alive IS DISTINCT FROM ?",
        [STMT_NODE_PUT] = "INSERT INTO node (name, hostname, address, boot_id, labels,"
                          " inventory, state, reason, last_seen_ms, blame_times, agent_id,"
                          " version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
                          " ON CONFLICT(name) DO UPDATE SET hostname=excluded.hostname,"
                          " address=excluded.address, boot_id=excluded.boot_id,"
                          " labels=excluded.labels, inventory=excluded.inventory,"
                          " state=excluded.state, reason=excluded.reason,"
                          " last_seen_ms=excluded.last_seen_ms,"
                          " blame_times=excluded.blame_times, agent_id=excluded.agent_id,"
                          " version=excluded.version",
        [STMT_NODE_VERSION_PUT] = "UPDATE node SET version = ? WHERE name = ?",
        [STMT_CHECKPOINT_PUT] = "INSERT INTO checkpoint (job, step, path, committed_ms, attempt)"
                                " VALUES (?,?,?,?,?) ON CONFLICT(job, step) DO UPDATE SET"
                                " path=excluded.path, committed_ms=excluded.committed_ms,"
                                " attempt=excluded.attempt",
        [STMT_EVENT_APPEND] = "INSERT INTO event (time_ms, job, node, kind, detail)"
                              " VALUES (?,?,?,?,?) RETURNING seq",
        [STMT_EVENTS_ALL] = "SELECT seq, time_ms, job, node, kind, detail FROM event"
                            " WHERE seq > ? ORDER BY seq LIMIT ?",
        [STMT_EVENTS_JOB] = "SELECT seq, time_ms, job, node, kind, detail FROM event"
                            " WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?",
        [STMT_TOKEN_INSERT] = "INSERT INTO token (name, hash, role, projects, node, created_ms)"
                              " VALUES (?,?,?,?,?,?)",
        [STMT_TOKEN_BY_HASH] = "SELECT name, hash, role, projects, node, created_ms, revoked_ms"
                               " FROM token WHERE hash = ? AND revoked_ms IS NULL",
        [STMT_TOKEN_REVOKE] =
                "UPDATE token SET revoked_ms = ? WHERE name = ? AND revoked_ms IS NULL",
        /* Sums, not maxima: a token revoked and created again under its name between two
         * looks changes them whatever the clocks of the hosts that ran `axctld token`. */
        [STMT_TOKEN_STAMP] = "SELECT count(*), count(revoked_ms), coalesce(sum(created_ms), 0),"
                             " coalesce(sum(revoked_ms), 0) FROM token",
        /* An ended job's figures are final: written once, and added to its project's
         * sums (goodput_total) the one time they are (STMT_GOODPUT_TOTAL_ADD first). */
        [STMT_GOODPUT_PUT] = "INSERT INTO job_goodput (job, project, created_ms, finished_ms,"
                             " accelerators, " GOODPUT_BUCKET_COLUMNS ", interruptions, rank_ms)"
                             " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                             " ON CONFLICT(job) DO NOTHING",
        [STMT_GOODPUT_TOTAL_ADD] =
                "INSERT INTO goodput_total (project, jobs, " GOODPUT_BUCKET_COLUMNS
                ", interruptions, rank_ms) SELECT CAST(?2 AS TEXT), CAST(?3 AS INTEGER),"
                " CAST(?4 AS INTEGER), CAST(?5 AS INTEGER), CAST(?6 AS INTEGER),"
                " CAST(?7 AS INTEGER), CAST(?8 AS INTEGER), CAST(?9 AS INTEGER),"
                " CAST(?10 AS INTEGER), CAST(?11 AS INTEGER), CAST(?12 AS INTEGER),"
                " CAST(?13 AS INTEGER), CAST(?14 AS INTEGER)"
                " WHERE NOT EXISTS (SELECT 1 FROM job_goodput WHERE job = ?1)"
                " ON CONFLICT(project) DO UPDATE SET jobs = goodput_total.jobs + excluded.jobs,"
                " productive_ms = goodput_total.productive_ms + excluded.productive_ms,"
                " queueing_ms = goodput_total.queueing_ms + excluded.queueing_ms,"
                " startup_ms = goodput_total.startup_ms + excluded.startup_ms,"
                " lost_work_ms = goodput_total.lost_work_ms + excluded.lost_work_ms,"
                " detection_ms = goodput_total.detection_ms + excluded.detection_ms,"
                " restart_ms = goodput_total.restart_ms + excluded.restart_ms,"
                " hang_ms = goodput_total.hang_ms + excluded.hang_ms,"
                " preemption_ms = goodput_total.preemption_ms + excluded.preemption_ms,"
                " checkpoint_ms = goodput_total.checkpoint_ms + excluded.checkpoint_ms,"
                " interruptions = goodput_total.interruptions + excluded.interruptions,"
                " rank_ms = goodput_total.rank_ms + excluded.rank_ms",
};

/* The backends, tried in order: the first that claims the target opens it. */
static const StoreBackend *const backends[] = {&store_pg_backend, &store_sqlite_backend};

struct Store {
        const StoreBackend *backend;
        StoreConn *conn;
        bool in_transaction;
        /* Leadership (store_lead): the token and holder this Store took the row with. */
        bool leading, fenced;
        int64_t lead_token;
        char lead_holder[sizeof(((StoreLeader *) NULL)->holder)];
        char *leader_check_sql;
};

/* Why the last store_open failed, for store_last_error(NULL). */
static char *open_error;

const char *store_last_error(Store *store) {
        if (!store)
                return open_error ? open_error : "";
        /* A fenced store refuses every write itself: the engine's message is older. */
        if (store->fenced)
                return "another controller leads this database";
        return store->backend->last_error(store->conn);
}

bool store_target_is_url(const char *target) {
        return target && store_pg_backend.claims(target);
}

char *store_target_display(const char *target) {
        if (!target)
                return xstrdup("");
        if (!store_target_is_url(target))
                return xstrdup(target);
        /* postgresql://user:secret@host/db: what lies between the user's ':' and '@'. */
        const char *scheme_end = strstr(target, "://");
        if (scheme_end) {
                const char *auth = scheme_end + 3;
                const char *at = strchr(auth, '@');
                const char *colon = at ? memchr(auth, ':', (size_t) (at - auth)) : NULL;
                const char *query = strchr(target, '?');
                char *shown = colon ? xasprintf("%.*s:***%s", (int) (colon - target), target, at)
                                    : xstrdup(target);
                /* ...?password=secret names it too: keep the URL up to its query. */
                if (query && strstr(query, "password")) {
                        char *cut = strchr(shown, '?');
                        if (cut)
                                strcpy(cut, "?***");
                }
                return shown;
        }
        /* host=... password=secret ...: keyword strings show their host and dbname only. */
        return xstrdup(strstr(target, "password") ? "(a PostgreSQL connection string)" : target);
}

/* Opens target with the migrations up to version applied. */
static int store_open_version(const char *target, int version, Store **ret_store) {
        Store *store = xcalloc(1, sizeof(Store));
        for (size_t i = 0; !store->backend && i < ELEMENTSOF(backends); i++)
                if (backends[i]->claims(target))
                        store->backend = backends[i];
        free(open_error);
        open_error = NULL;
        int r = store->backend->open(target, migrations, (int) ELEMENTSOF(migrations), version,
                                     &store->conn, &open_error);
        if (r < 0) {
                free(store);
                return r;
        }
        store->leader_check_sql = xasprintf("SELECT holder, token FROM leader WHERE id = 1%s",
                                            store->backend->lock_rows_sql);
        *ret_store = store;
        return 0;
}

int store_open(const char *target, Store **ret_store) {
        return store_open_version(target, (int) ELEMENTSOF(migrations), ret_store);
}

int store_create_at_version(const char *target, int version) {
        Store *store = NULL;
        int r = store_open_version(target, version, &store);
        store_close(store);
        return r;
}

Store *store_close(Store *store) {
        if (!store)
                return NULL;
        store->backend->close(store->conn);
        free(store->leader_check_sql);
        free(store);
        return NULL;
}

void store_wal_stats(Store *store, StoreWalStats *ret) {
        *ret = (StoreWalStats){0};
        if (store->backend->wal_stats)
                store->backend->wal_stats(store->conn, ret);
}

int64_t store_cache_hint(Store *store, int64_t kib) {
        return store->backend->cache_hint ? store->backend->cache_hint(store->conn, kib) : 0;
}

int store_check_file(Store *store) {
        return store->backend->check_file(store->conn);
}

int store_begin(Store *store) {
        if (store->in_transaction)
                return 0;
        int r = store->backend->begin(store->conn);
        if (r >= 0)
                store->in_transaction = true;
        return r;
}

static int leader_check(Store *store);

int store_commit(Store *store) {
        if (!store->in_transaction)
                return 0;
        int r = leader_check(store);
        if (r < 0) {
                store_rollback(store);
                return r;
        }
        r = store->backend->commit(store->conn);
        if (r >= 0)
                store->in_transaction = false;
        return r;
}

int store_rollback(Store *store) {
        if (!store->in_transaction)
                return 0;
        store->in_transaction = false;
        return store->backend->rollback(store->conn);
}

bool store_in_transaction(Store *store) {
        return store->in_transaction;
}

/* Runs statement slot (its SQL from statement_sql) with params. */
static int run(Store *store, int slot, const StoreParam *params, int n_params, StoreRowCb row,
               void *ctx) {
        return store->backend->run(store->conn, slot, statement_sql[slot], params, n_params, row,
                                   ctx, NULL);
}

/* Runs a one-off statement: loaders run once at start-up, so they are not kept. */
static int run_once(Store *store, const char *sql, const StoreParam *params, int n_params,
                    StoreRowCb row, void *ctx) {
        return store->backend->run(store->conn, -1, sql, params, n_params, row, ctx, NULL);
}

#define N_PARAMS(p) ((int) ELEMENTSOF(p))

static const char *col_text(const StoreRow *row, int i) {
        return row->get_text(row, i);
}

static int64_t col_int(const StoreRow *row, int i) {
        return row->get_int(row, i);
}

static const char *or_default(const char *s, const char *fallback) {
        return s ? s : fallback;
}

/* Runs an UPDATE of one row in slot: -ENOENT when there is no such row. */
static int update_one(Store *store, int slot, const StoreParam *p, int n_params) {
        int64_t changes = 0;
        int r = store->backend->run(store->conn, slot, statement_sql[slot], p, n_params, NULL, NULL,
                                    &changes);
        return r < 0 ? r : changes == 1 ? 0 : -ENOENT;
}

static int job_update(Store *store, const StoreJob *j) {
        StoreParam p[] = {
                STORE_INT(j->attempt),
                STORE_INT(j->restarts),
                STORE_TEXT(or_default(j->reason, "")),
                STORE_INT(j->exit_code),
                STORE_INT(j->started_ms),
                STORE_INT(j->ckpt_step),
                STORE_TEXT(j->ckpt_path),
                STORE_TEXT(j->avoid_node),
                STORE_INT(j->priority),
                STORE_INT(j->tier),
                STORE_INT(j->queued_ms),
                STORE_INT(j->quick_failures),
                STORE_INT(j->best_step),
                STORE_INT(j->id),
        };
        int r = update_one(store, STMT_JOB_UPDATE, p, N_PARAMS(p));
        if (r < 0)
                return r;
        StoreParam state[] = {
                STORE_TEXT(j->state), STORE_INT(j->finished_ms), STORE_INT(j->id),
                STORE_TEXT(j->state), STORE_INT(j->finished_ms),
        };
        return run(store, STMT_JOB_STATE_UPDATE, state, N_PARAMS(state), NULL, NULL);
}

int store_job_put(Store *store, const StoreJob *j) {
        if (!j->spec)
                return job_update(store, j);
        StoreParam p[] = {
                STORE_INT(j->id),
                STORE_TEXT(j->name),
                STORE_TEXT(j->project),
                STORE_TEXT(j->user),
                STORE_INT(j->priority),
                STORE_TEXT(j->spec),
                STORE_TEXT(j->state),
                STORE_INT(j->attempt),
                STORE_INT(j->restarts),
                STORE_TEXT(or_default(j->reason, "")),
                STORE_INT(j->exit_code),
                STORE_INT(j->created_ms),
                STORE_INT(j->started_ms),
                STORE_INT(j->finished_ms),
                STORE_TEXT(j->idempotency_key),
                STORE_INT(j->ckpt_step),
                STORE_TEXT(j->ckpt_path),
                STORE_TEXT(j->avoid_node),
                STORE_INT(j->tier),
                STORE_INT(j->queued_ms),
                STORE_INT(j->quick_failures),
                STORE_INT(j->best_step),
        };
        return run(store, STMT_JOB_PUT, p, N_PARAMS(p), NULL, NULL);
}

int store_attempt_put(Store *store, const StoreAttempt *a) {
        StoreParam p[] = {
                STORE_INT(a->job),
                STORE_INT(a->attempt),
                STORE_INT(a->resume_step),
                STORE_TEXT(a->resume_path),
                STORE_INT(a->started_ms),
                STORE_INT(a->ended_ms),
                STORE_TEXT(a->end_reason),
                STORE_TEXT(a->blamed_node),
                STORE_TEXT(a->detail),
                STORE_INT(a->running_ms),
                STORE_INT(a->first_progress_ms),
                STORE_INT(a->last_progress_ms),
                STORE_INT(a->failed_ms),
                STORE_INT(a->first_ckpt_ms),
                STORE_INT(a->last_ckpt_ms),
                STORE_INT(a->n_ckpts),
                STORE_INT(a->ckpt_stall_ms),
                STORE_INT(a->n_ckpt_stalls),
        };
        return run(store, STMT_ATTEMPT_PUT, p, N_PARAMS(p), NULL, NULL);
}

int store_rank_put(Store *store, const StoreRank *r) {
        StoreParam p[] = {
                STORE_INT(r->job),
                STORE_INT(r->attempt),
                STORE_INT(r->rank),
                STORE_TEXT(r->node),
                STORE_TEXT(or_default(r->devices, "[]")),
                STORE_TEXT(r->state),
                STORE_INT(r->alive),
                STORE_INT(r->pid),
                STORE_INT(r->exit_code),
                STORE_INT(r->signal),
                STORE_INT(r->step),
                STORE_INT(r->local_rank),
                STORE_INT(r->node_rank),
        };
        int k = run(store, STMT_RANK_PUT, p, N_PARAMS(p), NULL, NULL);
        if (k < 0)
                return k;
        StoreParam alive[] = {
                STORE_INT(r->alive), STORE_INT(r->job),   STORE_INT(r->attempt),
                STORE_INT(r->rank),  STORE_INT(r->alive),
        };
        return run(store, STMT_RANK_ALIVE_UPDATE, alive, N_PARAMS(alive), NULL, NULL);
}

int store_node_put(Store *store, const StoreNode *n) {
        StoreParam p[] = {
                STORE_TEXT(n->name),
                STORE_TEXT(n->hostname),
                STORE_TEXT(n->address),
                STORE_TEXT(n->boot_id),
                STORE_TEXT(or_default(n->labels, "{}")),
                STORE_TEXT(or_default(n->inventory, "{}")),
                STORE_TEXT(n->state),
                STORE_TEXT(or_default(n->reason, "")),
                STORE_INT(n->last_seen_ms),
                STORE_TEXT(or_default(n->blame_times, "[]")),
                STORE_TEXT(n->agent_id),
                STORE_INT(n->version),
        };
        return run(store, STMT_NODE_PUT, p, N_PARAMS(p), NULL, NULL);
}

int store_node_version_put(Store *store, const char *name, int64_t version) {
        StoreParam p[] = {STORE_INT(version), STORE_TEXT(name)};
        return run(store, STMT_NODE_VERSION_PUT, p, N_PARAMS(p), NULL, NULL);
}

int store_checkpoint_put(Store *store, const StoreCheckpoint *c) {
        StoreParam p[] = {
                STORE_INT(c->job),          STORE_INT(c->step),    STORE_TEXT(c->path),
                STORE_INT(c->committed_ms), STORE_INT(c->attempt),
        };
        return run(store, STMT_CHECKPOINT_PUT, p, N_PARAMS(p), NULL, NULL);
}

static int seq_row(const StoreRow *row, void *ctx) {
        *(int64_t *) ctx = col_int(row, 0);
        return 0;
}

int store_event_append(Store *store, StoreEvent *e) {
        StoreParam p[] = {
                STORE_INT(e->time_ms),
                STORE_INT(e->job > 0 ? e->job : STORE_NONE),
                STORE_TEXT(e->node),
                STORE_TEXT(e->kind),
                STORE_TEXT(or_default(e->detail, "")),
        };
        int64_t seq = 0;
        int r = run(store, STMT_EVENT_APPEND, p, N_PARAMS(p), seq_row, &seq);
        if (r >= 0)
                e->seq = seq;
        return r;
}

typedef struct LoadCtx {
        void *fn;
        void *userdata;
} LoadCtx;

#define JOB_COLUMNS                                                                             \
        "id, name, project, user, priority, spec, state, attempt, restarts, reason, exit_code," \
        " created_ms, started_ms, finished_ms, idempotency_key, ckpt_step, ckpt_path,"          \
        " avoid_node, tier, queued_ms, quick_failures, best_step"

static int job_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreJob j = {
                .id = col_int(row, 0),
                .name = col_text(row, 1),
                .project = col_text(row, 2),
                .user = col_text(row, 3),
                .priority = (int) col_int(row, 4),
                .spec = col_text(row, 5),
                .state = col_text(row, 6),
                .attempt = (int) col_int(row, 7),
                .restarts = (int) col_int(row, 8),
                .reason = col_text(row, 9),
                .exit_code = col_int(row, 10),
                .created_ms = col_int(row, 11),
                .started_ms = col_int(row, 12),
                .finished_ms = col_int(row, 13),
                .idempotency_key = col_text(row, 14),
                .ckpt_step = col_int(row, 15),
                .ckpt_path = col_text(row, 16),
                .avoid_node = col_text(row, 17),
                .tier = (int) col_int(row, 18),
                .queued_ms = col_int(row, 19),
                .quick_failures = (int) col_int(row, 20),
                .best_step = col_int(row, 21),
        };
        return ((StoreJobFn) ctx->fn)(ctx->userdata, &j);
}

/*
 * The jobs a start loads: those not retired, found through indexes. A job is retired
 * when it ended before the cutoff (?1) (or without a finish time) and has no rank that
 * may still run, so every other job is in one of the UNION's sets: not ended (every
 * state but the three ends, listed: PostgreSQL's planner uses no index for a NOT IN),
 * ended at or after the cutoff, or with a rank alive. At 100,000 stored jobs, reading
 * every job took a sixth of a restart; filtering every job for retirement (a subquery per
 * job) took PostgreSQL 0.34 s, the sets alone 0.1 s. Their attempts and ranks are read
 * for the same set: reading every stored one made a restart grow with the store's
 * history (0.7 s more for 100,000 retired jobs of 8 ranks).
 */
#define LOADED_JOBS                                                        \
        "(SELECT id FROM job WHERE state IN"                               \
        "   ('pending', 'starting', 'running', 'restarting', 'preempted')" \
        "  UNION SELECT id FROM job WHERE finished_ms >= ?1"               \
        "  UNION SELECT job FROM rank WHERE alive = 1)"

static const char jobs_load_sql[] =
        "SELECT " JOB_COLUMNS " FROM job WHERE id IN " LOADED_JOBS " ORDER BY id";

int store_jobs_load(Store *store, int64_t retire_before_ms, StoreJobFn fn, void *userdata) {
        StoreParam p[] = {STORE_INT(retire_before_ms)};
        LoadCtx ctx = {(void *) fn, userdata};
        return run_once(store, jobs_load_sql, p, N_PARAMS(p), job_row, &ctx);
}

/* What attempt_row reads, for every query of attempts: a job read back after it left
 * memory keeps its goodput records. */
#define ATTEMPT_COLUMNS                                                                     \
        "job, attempt, resume_step, resume_path, started_ms, ended_ms, end_reason,"         \
        " blamed_node, detail, running_ms, first_progress_ms, last_progress_ms, failed_ms," \
        " first_ckpt_ms, last_ckpt_ms, n_ckpts, ckpt_stall_ms, n_ckpt_stalls"

static int attempt_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreAttempt a = {
                .job = col_int(row, 0),
                .attempt = (int) col_int(row, 1),
                .resume_step = col_int(row, 2),
                .resume_path = col_text(row, 3),
                .started_ms = col_int(row, 4),
                .ended_ms = col_int(row, 5),
                .end_reason = col_text(row, 6),
                .blamed_node = col_text(row, 7),
                .detail = col_text(row, 8),
                .running_ms = col_int(row, 9),
                .first_progress_ms = col_int(row, 10),
                .last_progress_ms = col_int(row, 11),
                .failed_ms = col_int(row, 12),
                .first_ckpt_ms = col_int(row, 13),
                .last_ckpt_ms = col_int(row, 14),
                .n_ckpts = (int) col_int(row, 15),
                .ckpt_stall_ms = col_int(row, 16),
                .n_ckpt_stalls = (int) col_int(row, 17),
        };
        return ((StoreAttemptFn) ctx->fn)(ctx->userdata, &a);
}

int store_attempts_load(Store *store, int64_t retire_before_ms, StoreAttemptFn fn, void *userdata) {
        StoreParam p[] = {STORE_INT(retire_before_ms)};
        LoadCtx ctx = {(void *) fn, userdata};
        return run_once(store,
                        "SELECT " ATTEMPT_COLUMNS " FROM attempt WHERE job IN " LOADED_JOBS
                        " ORDER BY job, attempt",
                        p, N_PARAMS(p), attempt_row, &ctx);
}

static int rank_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreRank rk = {
                .job = col_int(row, 0),
                .attempt = (int) col_int(row, 1),
                .rank = (int) col_int(row, 2),
                .node = col_text(row, 3),
                .devices = col_text(row, 4),
                .state = col_text(row, 5),
                .alive = col_int(row, 6) != 0,
                .pid = col_int(row, 7),
                .exit_code = col_int(row, 8),
                .signal = col_int(row, 9),
                .step = col_int(row, 10),
                .local_rank = (int) col_int(row, 11),
                .node_rank = (int) col_int(row, 12),
        };
        return ((StoreRankFn) ctx->fn)(ctx->userdata, &rk);
}

/* What rank_row reads, of the ranks of each job's latest attempt. */
#define LATEST_RANKS                                                                         \
        "r.job, r.attempt, r.rank, r.node, r.devices, r.state, r.alive, r.pid, r.exit_code," \
        " r.signal, r.step, r.local_rank, r.node_rank"                                       \
        " FROM rank r JOIN job j ON j.id = r.job AND j.attempt = r.attempt"

int store_ranks_load(Store *store, int64_t retire_before_ms, StoreRankFn fn, void *userdata) {
        StoreParam p[] = {STORE_INT(retire_before_ms)};
        LoadCtx ctx = {(void *) fn, userdata};
        /* Only the ranks of each job's latest attempt matter after a restart. */
        return run_once(store,
                        "SELECT " LATEST_RANKS " WHERE r.job IN " LOADED_JOBS
                        " ORDER BY r.job, r.rank",
                        p, N_PARAMS(p), rank_row, &ctx);
}

static const char *const job_load_sql[] = {
        "SELECT " JOB_COLUMNS " FROM job WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
        "SELECT " ATTEMPT_COLUMNS " FROM attempt WHERE job BETWEEN ?1 AND ?2 ORDER BY job, attempt",
        "SELECT " LATEST_RANKS " WHERE r.job BETWEEN ?1 AND ?2 ORDER BY r.job, r.rank",
};

int store_jobs_read(Store *store, int64_t first_id, int64_t last_id, StoreJobFn job_fn,
                    StoreAttemptFn attempt_fn, StoreRankFn rank_fn, void *userdata) {
        /* Run for every job read back after it left memory, so kept prepared. */
        const int slots[] = {STMT_JOB_ONE, STMT_JOB_ATTEMPTS, STMT_JOB_RANKS};
        StoreRowCb rows[] = {job_row, attempt_row, rank_row};
        void *const fns[] = {(void *) job_fn, (void *) attempt_fn, (void *) rank_fn};
        StoreParam p[] = {STORE_INT(first_id), STORE_INT(last_id)};
        for (size_t q = 0; q < ELEMENTSOF(slots); q++) {
                LoadCtx ctx = {fns[q], userdata};
                int r = store->backend->run(store->conn, slots[q], job_load_sql[q], p, N_PARAMS(p),
                                            rows[q], &ctx, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_job_next_id(Store *store, int64_t *ret_id) {
        int64_t id = 1;
        int r = run_once(store, "SELECT COALESCE(MAX(id), 0) + 1 FROM job", NULL, 0, seq_row, &id);
        if (r >= 0)
                *ret_id = id;
        return r;
}

int store_job_find_key(Store *store, const char *project, const char *key, int64_t *ret_id) {
        StoreParam p[] = {STORE_TEXT(project), STORE_TEXT(key)};
        int64_t id = 0;
        int r = store->backend->run(store->conn, STMT_JOB_FIND_KEY,
                                    "SELECT id FROM job WHERE project = ? AND idempotency_key = ?",
                                    p, N_PARAMS(p), seq_row, &id, NULL);
        *ret_id = r >= 0 ? id : 0;
        return r;
}

typedef struct IdCtx {
        StoreIdFn fn;
        void *userdata;
} IdCtx;

static int id_row(const StoreRow *row, void *p) {
        IdCtx *ctx = p;
        return ctx->fn(ctx->userdata, col_int(row, 0));
}

int store_jobs_list(Store *store, int64_t before, const char *state, const char *project,
                    StoreIdFn fn, void *userdata) {
        StoreParam p[] = {STORE_INT(before > 0 ? before : INT64_MAX), STORE_TEXT(state),
                          STORE_TEXT(project)};
        IdCtx ctx = {fn, userdata};
        return store->backend->run(store->conn, STMT_JOBS_LIST,
                                   "SELECT id FROM job WHERE id < ?1"
                                   " AND (?2 IS NULL OR state = ?2)"
                                   " AND (?3 IS NULL OR project = ?3) ORDER BY id DESC",
                                   p, N_PARAMS(p), id_row, &ctx, NULL);
}

int store_jobs_finished_since(Store *store, int64_t since_ms, StoreIdFn fn, void *userdata) {
        StoreParam p[] = {STORE_INT(since_ms)};
        IdCtx ctx = {fn, userdata};
        return run_once(store, "SELECT id FROM job WHERE finished_ms >= ?1 ORDER BY id", p,
                        N_PARAMS(p), id_row, &ctx);
}

static int node_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreNode n = {
                .name = col_text(row, 0),
                .hostname = col_text(row, 1),
                .address = col_text(row, 2),
                .boot_id = col_text(row, 3),
                .labels = col_text(row, 4),
                .inventory = col_text(row, 5),
                .state = col_text(row, 6),
                .reason = col_text(row, 7),
                .last_seen_ms = col_int(row, 8),
                .blame_times = col_text(row, 9),
                .agent_id = col_text(row, 10),
                .version = col_int(row, 11),
        };
        return ((StoreNodeFn) ctx->fn)(ctx->userdata, &n);
}

int store_nodes_load(Store *store, StoreNodeFn fn, void *userdata) {
        LoadCtx ctx = {(void *) fn, userdata};
        return run_once(store,
                        "SELECT name, hostname, address, boot_id, labels, inventory, state, reason,"
                        " last_seen_ms, blame_times, agent_id, version FROM node ORDER BY name",
                        NULL, 0, node_row, &ctx);
}

static int event_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        int64_t job = col_int(row, 2);
        StoreEvent e = {
                .seq = col_int(row, 0),
                .time_ms = col_int(row, 1),
                .job = job == STORE_NONE ? 0 : job,
                .node = col_text(row, 3),
                .kind = col_text(row, 4),
                .detail = col_text(row, 5),
        };
        return ((StoreEventFn) ctx->fn)(ctx->userdata, &e);
}

int store_events_list(Store *store, int64_t job, int64_t after, int limit, StoreEventFn fn,
                      void *userdata) {
        LoadCtx ctx = {(void *) fn, userdata};
        if (job > 0) {
                StoreParam p[] = {STORE_INT(job), STORE_INT(after), STORE_INT(limit)};
                return run(store, STMT_EVENTS_JOB, p, N_PARAMS(p), event_row, &ctx);
        }
        StoreParam p[] = {STORE_INT(after), STORE_INT(limit)};
        return run(store, STMT_EVENTS_ALL, p, N_PARAMS(p), event_row, &ctx);
}

int store_token_insert(Store *store, const StoreToken *t) {
        /* A revoked token gives its name back: a user token's name is the account its
         * jobs run as, and a person whose token was revoked must be able to get another. */
        StoreParam name[] = {STORE_TEXT(t->name)};
        int r = run_once(store, "DELETE FROM token WHERE name = ? AND revoked_ms IS NOT NULL", name,
                         1, NULL, NULL);
        if (r < 0)
                return r;
        StoreParam p[] = {
                STORE_TEXT(t->name), STORE_TEXT(t->hash),
                STORE_TEXT(t->role), STORE_TEXT(or_default(t->projects, "[]")),
                STORE_TEXT(t->node), STORE_INT(t->created_ms),
        };
        return run(store, STMT_TOKEN_INSERT, p, N_PARAMS(p), NULL, NULL);
}

int store_token_revoke(Store *store, const char *name, int64_t now_ms) {
        StoreParam p[] = {STORE_INT(now_ms), STORE_TEXT(name)};
        int64_t changed = 0;
        int r = store->backend->run(store->conn, STMT_TOKEN_REVOKE,
                                    statement_sql[STMT_TOKEN_REVOKE], p, N_PARAMS(p), NULL, NULL,
                                    &changed);
        if (r < 0)
                return r;
        return changed > 0 ? 0 : -ENOENT;
}

static int token_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreToken t = {
                .name = col_text(row, 0),
                .hash = col_text(row, 1),
                .role = col_text(row, 2),
                .projects = col_text(row, 3),
                .node = col_text(row, 4),
                .created_ms = col_int(row, 5),
                .revoked_ms = col_int(row, 6),
        };
        return ((StoreTokenFn) ctx->fn)(ctx->userdata, &t);
}

int store_token_find(Store *store, const char *hash, StoreTokenFn fn, void *userdata) {
        StoreParam p[] = {STORE_TEXT(hash)};
        LoadCtx ctx = {(void *) fn, userdata};
        return run(store, STMT_TOKEN_BY_HASH, p, N_PARAMS(p), token_row, &ctx);
}

static int token_stamp_row(const StoreRow *row, void *p) {
        *(StoreTokenStamp *) p = (StoreTokenStamp){col_int(row, 0), col_int(row, 1),
                                                   col_int(row, 2), col_int(row, 3)};
        return 0;
}

int store_token_stamp(Store *store, StoreTokenStamp *ret) {
        *ret = (StoreTokenStamp){0};
        return run(store, STMT_TOKEN_STAMP, NULL, 0, token_stamp_row, ret);
}

int store_tokens_list(Store *store, StoreTokenFn fn, void *userdata) {
        LoadCtx ctx = {(void *) fn, userdata};
        return run_once(store,
                        "SELECT name, hash, role, projects, node, created_ms, revoked_ms FROM token"
                        " ORDER BY name",
                        NULL, 0, token_row, &ctx);
}

int store_goodput_put(Store *store, const StoreGoodput *g) {
        StoreParam total[3 + STORE_GOODPUT_BUCKETS + 2] = {
                STORE_INT(g->job), STORE_TEXT(g->project),
                STORE_INT(g->finished_ms > g->created_ms), /* as GOODPUT_SUMS counts jobs */
        };
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                total[3 + b] = STORE_INT(g->ms[b] * g->accelerators);
        total[3 + STORE_GOODPUT_BUCKETS] = STORE_INT(g->interruptions);
        total[4 + STORE_GOODPUT_BUCKETS] = STORE_INT(g->rank_ms);
        int r = run(store, STMT_GOODPUT_TOTAL_ADD, total, N_PARAMS(total), NULL, NULL);
        if (r < 0)
                return r;
        StoreParam p[7 + STORE_GOODPUT_BUCKETS] = {
                STORE_INT(g->job),         STORE_TEXT(g->project),     STORE_INT(g->created_ms),
                STORE_INT(g->finished_ms), STORE_INT(g->accelerators),
        };
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                p[5 + b] = STORE_INT(g->ms[b]);
        p[5 + STORE_GOODPUT_BUCKETS] = STORE_INT(g->interruptions);
        p[6 + STORE_GOODPUT_BUCKETS] = STORE_INT(g->rank_ms);
        return run(store, STMT_GOODPUT_PUT, p, N_PARAMS(p), NULL, NULL);
}

/* Rows of (project, job, jobs, created_ms, finished_ms, accelerators, buckets...,
 * interruptions, rank_ms), as goodput_row reads them. */
static int goodput_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreGoodput g = {.project = col_text(row, 0),
                          .job = col_int(row, 1),
                          .jobs = col_int(row, 2),
                          .created_ms = col_int(row, 3),
                          .finished_ms = col_int(row, 4),
                          .accelerators = col_int(row, 5)};
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                g.ms[b] = col_int(row, 6 + b);
        g.interruptions = col_int(row, 6 + STORE_GOODPUT_BUCKETS);
        g.rank_ms = col_int(row, 7 + STORE_GOODPUT_BUCKETS);
        return ((StoreGoodputFn) ctx->fn)(ctx->userdata, &g);
}

/* Rows of GOODPUT_SUMS's shape: a project's sums, weighted (accelerators 1, job 0). */
static int goodput_sum_row(const StoreRow *row, void *p) {
        LoadCtx *ctx = p;
        StoreGoodput g = {.project = col_text(row, 0), .jobs = col_int(row, 1), .accelerators = 1};
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                g.ms[b] = col_int(row, 2 + b);
        g.interruptions = col_int(row, 2 + STORE_GOODPUT_BUCKETS);
        g.rank_ms = col_int(row, 3 + STORE_GOODPUT_BUCKETS);
        return ((StoreGoodputFn) ctx->fn)(ctx->userdata, &g);
}

/* Runs a goodput query whose ?1 is since_ms and ?2 the project (NULL: any); read_row reads
 * its rows' shape. */
static int goodput_query(Store *store, const char *sql, const char *project, int64_t since_ms,
                         StoreRowCb read_row, StoreGoodputFn fn, void *userdata) {
        StoreParam p[] = {STORE_INT(since_ms), STORE_TEXT(project)};
        LoadCtx ctx = {(void *) fn, userdata};
        return run_once(store, sql, p, N_PARAMS(p), read_row, &ctx);
}

int store_goodput_sum(Store *store, const char *project, int64_t since_ms, StoreGoodputFn fn,
                      void *userdata) {
        return goodput_query(store,
                             GOODPUT_SUMS " FROM job_goodput WHERE created_ms >= ?1"
                                          " AND (?2 IS NULL OR project = ?2) GROUP BY project"
                                          " ORDER BY project",
                             project, since_ms, goodput_sum_row, fn, userdata);
}

int store_goodput_totals(Store *store, StoreGoodputFn fn, void *userdata) {
        LoadCtx ctx = {(void *) fn, userdata};
        return run_once(store,
                        "SELECT project, jobs, " GOODPUT_BUCKET_COLUMNS ", interruptions, rank_ms"
                        " FROM goodput_total ORDER BY project",
                        NULL, 0, goodput_sum_row, &ctx);
}

int store_goodput_straddling(Store *store, const char *project, int64_t since_ms, StoreGoodputFn fn,
                             void *userdata) {
        return goodput_query(store,
                             "SELECT project, job, 1, created_ms, finished_ms, "
                             "accelerators, " GOODPUT_BUCKET_COLUMNS
                             ", interruptions, rank_ms FROM job_goodput"
                             " WHERE created_ms < ?1 AND finished_ms > ?1"
                             " AND (?2 IS NULL OR project = ?2) ORDER BY job",
                             project, since_ms, goodput_row, fn, userdata);
}

int store_goodput_missing(Store *store, StoreIdFn fn, void *userdata) {
        IdCtx ctx = {fn, userdata};
        return run_once(store,
                        "SELECT id FROM job WHERE state IN ('succeeded', 'failed', 'cancelled')"
                        " AND id NOT IN (SELECT job FROM job_goodput) ORDER BY id",
                        NULL, 0, id_row, &ctx);
}

/* Leadership. The row's times are the database's (now_ms_sql), so that controllers whose
 * clocks disagree still agree on when a lease ends. */

typedef struct LeaderRead {
        StoreLeader *ret;
        bool found;
} LeaderRead;

static int leader_row(const StoreRow *row, void *p) {
        LeaderRead *c = p;
        c->found = true;
        *c->ret = (StoreLeader){0};
        if (col_int(row, 2) <= 0)
                return 0; /* nobody ever led: all zero */
        snprintf(c->ret->holder, sizeof(c->ret->holder), "%s", col_text(row, 0));
        snprintf(c->ret->url, sizeof(c->ret->url), "%s", col_text(row, 1));
        c->ret->token = col_int(row, 2);
        c->ret->expires_in_ms = col_int(row, 3);
        return 0;
}

/* Reads the leader row into *ret, locking it till the transaction ends when lock. */
static int leader_read(Store *store, bool lock, StoreLeader *ret) {
        _cleanup_free_ char *sql =
                xasprintf("SELECT holder, url, token, expires_ms - %s FROM leader"
                          " WHERE id = 1%s",
                          store->backend->now_ms_sql, lock ? store->backend->lock_rows_sql : "");
        LeaderRead c = {.ret = ret};
        int r = run_once(store, sql, NULL, 0, leader_row, &c);
        return r < 0 ? r : c.found ? 0 : -EBADMSG; /* migration 9 made the row */
}

static int holder_token_row(const StoreRow *row, void *p) {
        StoreLeader *l = p;
        snprintf(l->holder, sizeof(l->holder), "%s", col_text(row, 0));
        l->token = col_int(row, 1);
        return 0;
}

/* Inside a transaction of a leading Store: -ESTALE (and fenced from then on) when another
 * took the row. The check holds the row's lock till the commit (SQLite's BEGIN IMMEDIATE
 * holds the whole database), so no takeover comes between them, and a new leader, which
 * loads after its takeover, sees everything this commit acknowledges. */
static int leader_check(Store *store) {
        if (store->fenced)
                return -ESTALE;
        if (!store->leading)
                return 0;
        StoreLeader row = {0};
        int r = store->backend->run(store->conn, STMT_LEADER_CHECK, store->leader_check_sql, NULL,
                                    0, holder_token_row, &row, NULL);
        if (r < 0)
                return r;
        if (row.token != store->lead_token || strcmp(row.holder, store->lead_holder) != 0) {
                store->leading = false;
                store->fenced = true;
                return -ESTALE;
        }
        return 0;
}

/* Sets the leader row's url (?1) and lease (?2 ms from the database's now), then rest:
 * ?3 is holder, ?4 the row's token as read. */
static int leader_update(Store *store, const char *rest, const char *holder, const char *url,
                         int64_t lease_ms, int64_t token) {
        _cleanup_free_ char *sql = xasprintf("UPDATE leader SET url = ?1, expires_ms = %s + ?2%s",
                                             store->backend->now_ms_sql, rest);
        StoreParam p[] = {STORE_TEXT(url), STORE_INT(lease_ms), STORE_TEXT(holder),
                          STORE_INT(token)};
        return run_once(store, sql, p, N_PARAMS(p), NULL, NULL);
}

int store_lead(Store *store, const char *holder, const char *url, int64_t lease_ms,
               StoreLeader *ret) {
        if (store->in_transaction)
                return -EBUSY;
        if (store->fenced)
                return -ESTALE;
        if (!holder || !*holder || strlen(holder) >= sizeof(store->lead_holder) || !url ||
            strlen(url) >= sizeof(((StoreLeader *) NULL)->url) || lease_ms <= 0)
                return -EINVAL;
        int r = store_begin(store);
        if (r < 0)
                return r;
        StoreLeader row;
        bool took = false, leads = false;
        if ((r = leader_read(store, true, &row)) < 0)
                goto fail;
        if (store->leading) {
                if (row.token != store->lead_token || strcmp(row.holder, holder) != 0) {
                        /* Deposed: what it holds in memory is stale, so it may not lead
                         * again; a new Store (a restarted controller) may. */
                        store_rollback(store);
                        store->leading = false;
                        store->fenced = true;
                        return -ESTALE;
                }
                r = leader_update(store, " WHERE id = 1 AND holder = ?3 AND token = ?4", holder,
                                  url, lease_ms, row.token);
                leads = true;
        } else if (row.token == 0 || row.expires_in_ms <= 0 || strcmp(row.holder, holder) == 0) {
                r = leader_update(store,
                                  ", holder = ?3, token = token + 1 WHERE id = 1 AND token = ?4",
                                  holder, url, lease_ms, row.token);
                leads = took = true;
        }
        if (r < 0 || (r = leader_read(store, false, &row)) < 0)
                goto fail;
        /* The lead transaction itself is not fenced: it is what decides. */
        store->in_transaction = false;
        if ((r = store->backend->commit(store->conn)) < 0) {
                store->in_transaction = true;
                goto fail;
        }
        if (took) {
                store->leading = true;
                store->lead_token = row.token;
                snprintf(store->lead_holder, sizeof(store->lead_holder), "%s", holder);
        }
        if (ret)
                *ret = row;
        return leads ? 1 : 0;
fail:
        store_rollback(store);
        return r;
}

int store_lead_share(const Store *leading, Store *other) {
        if (!leading->leading || leading->fenced || other->leading || other->fenced)
                return -EINVAL;
        other->leading = true;
        other->lead_token = leading->lead_token;
        snprintf(other->lead_holder, sizeof(other->lead_holder), "%s", leading->lead_holder);
        return 0;
}

int store_leader_get(Store *store, StoreLeader *ret) {
        return leader_read(store, false, ret);
}

int store_resign(Store *store) {
        if (store->in_transaction)
                return -EBUSY;
        if (!store->leading)
                return 0;
        _cleanup_free_ char *sql = xasprintf("UPDATE leader SET expires_ms = %s"
                                             " WHERE id = 1 AND token = ?1 AND holder = ?2",
                                             store->backend->now_ms_sql);
        StoreParam p[] = {STORE_INT(store->lead_token), STORE_TEXT(store->lead_holder)};
        int r = run_once(store, sql, p, N_PARAMS(p), NULL, NULL);
        if (r >= 0) {
                /* What it still holds in memory is a follower's now: no more writes. */
                store->leading = false;
                store->fenced = true;
        }
        return r;
}
