/* SPDX-License-Identifier: MIT */
/*
 * SQLite implementation of store.h: numbered migrations, cached prepared statements,
 * whole-row upserts. Every statement is parameterised.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

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
        "  finished_ms INTEGER NOT NULL, accelerators INTEGER NOT NULL,"
        "  productive_ms INTEGER NOT NULL, queueing_ms INTEGER NOT NULL,"
        "  startup_ms INTEGER NOT NULL, lost_work_ms INTEGER NOT NULL,"
        "  detection_ms INTEGER NOT NULL, restart_ms INTEGER NOT NULL,"
        "  hang_ms INTEGER NOT NULL, preemption_ms INTEGER NOT NULL,"
        "  checkpoint_ms INTEGER NOT NULL, interruptions INTEGER NOT NULL,"
        "  rank_ms INTEGER NOT NULL);"
        "CREATE INDEX job_goodput_created ON job_goodput(created_ms);",
        /* 9: leadership among controllers sharing the database: one row, whose token
         * fences a deposed leader's writes (store_lead) */
        "CREATE TABLE leader ("
        "  id INTEGER PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL, url TEXT NOT NULL,"
        "  token INTEGER NOT NULL, expires_ms INTEGER NOT NULL);"
        "INSERT INTO leader (id, holder, url, token, expires_ms) VALUES (1, '', '', 0, 0);",
};

/* The database's clock in wall ms: leases are timed by it, not by the controllers'. */
#define DB_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

/* job_goodput's bucket columns, in store.h's (and health/goodput.h's) order. */
#define GOODPUT_BUCKET_COLUMNS                                                            \
        "productive_ms, queueing_ms, startup_ms, lost_work_ms, detection_ms, restart_ms," \
        " hang_ms, preemption_ms, checkpoint_ms"

enum {
        STMT_JOB_PUT,
        STMT_ATTEMPT_PUT,
        STMT_RANK_PUT,
        STMT_NODE_PUT,
        STMT_CHECKPOINT_PUT,
        STMT_EVENT_APPEND,
        STMT_EVENTS_ALL,
        STMT_EVENTS_JOB,
        STMT_TOKEN_INSERT,
        STMT_TOKEN_BY_HASH,
        STMT_TOKEN_REVOKE,
        STMT_GOODPUT_PUT,
        _STMT_MAX,
};

static const char *const statement_sql[_STMT_MAX] = {
        [STMT_JOB_PUT] = "INSERT INTO job (id, name, project, user, priority, spec,"
                         " state, attempt, restarts, reason, exit_code, created_ms, started_ms,"
                         " finished_ms, idempotency_key, ckpt_step, ckpt_path, avoid_node, tier,"
                         " queued_ms, quick_failures, best_step)"
                         " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                         /* An upsert, not REPLACE: REPLACE would silently delete another
                          * job of the project that holds the same idempotency key. */
                         " ON CONFLICT(id) DO UPDATE SET state=excluded.state,"
                         " attempt=excluded.attempt, restarts=excluded.restarts,"
                         " reason=excluded.reason, exit_code=excluded.exit_code,"
                         " started_ms=excluded.started_ms, finished_ms=excluded.finished_ms,"
                         " ckpt_step=excluded.ckpt_step, ckpt_path=excluded.ckpt_path,"
                         " avoid_node=excluded.avoid_node, priority=excluded.priority,"
                         " tier=excluded.tier, queued_ms=excluded.queued_ms,"
                         " quick_failures=excluded.quick_failures, best_step=excluded.best_step",
        [STMT_ATTEMPT_PUT] = "INSERT OR REPLACE INTO attempt (job, attempt, resume_step,"
                             " resume_path, started_ms, ended_ms, end_reason, blamed_node,"
                             " detail, running_ms, first_progress_ms, last_progress_ms,"
                             " failed_ms, first_ckpt_ms, last_ckpt_ms, n_ckpts, ckpt_stall_ms,"
                             " n_ckpt_stalls) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [STMT_RANK_PUT] = "INSERT OR REPLACE INTO rank (job, attempt, rank, node, devices,"
                          " state, alive, pid, exit_code, signal, step, local_rank, node_rank)"
                          " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [STMT_NODE_PUT] = "INSERT OR REPLACE INTO node (name, hostname, address, boot_id,"
                          " labels, inventory, state, reason, last_seen_ms, blame_times,"
                          " agent_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [STMT_CHECKPOINT_PUT] = "INSERT OR REPLACE INTO checkpoint (job, step, path,"
                                " committed_ms, attempt) VALUES (?,?,?,?,?)",
        [STMT_EVENT_APPEND] = "INSERT INTO event (time_ms, job, node, kind, detail)"
                              " VALUES (?,?,?,?,?)",
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
        [STMT_GOODPUT_PUT] = "INSERT OR REPLACE INTO job_goodput (job, project, created_ms,"
                             " finished_ms, accelerators, " GOODPUT_BUCKET_COLUMNS
                             ", interruptions, rank_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
};

struct Store {
        sqlite3 *db;
        sqlite3_stmt *stmts[_STMT_MAX];
        bool in_transaction;
        char *path;
        /* The file SQLite opened, held to compare with what the path names now. Closed
         * only after SQLite's own descriptor: closing any descriptor of the file drops
         * the process's POSIX locks on it, SQLite's included. */
        int file_fd;
        /* Leadership (store_lead): the token and holder this Store took the row with. */
        bool leading, fenced;
        int64_t lead_token;
        char lead_holder[sizeof(((StoreLeader *) NULL)->holder)];
};

/* Maps SQLite's result codes onto errno values, so callers never see SQLite codes. */
static int errno_from_sqlite(int rc) {
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        default:
                return -EIO;
        }
}

const char *store_last_error(Store *store) {
        return store && store->db ? sqlite3_errmsg(store->db) : "no database";
}

static int exec(Store *store, const char *sql) {
        return errno_from_sqlite(sqlite3_exec(store->db, sql, NULL, NULL, NULL));
}

/* Applies the migrations after the database's own, up to the first `version`. */
static int migrate(Store *store, int version_wanted) {
        sqlite3_stmt *st;
        int rc = sqlite3_prepare_v2(store->db, "PRAGMA user_version", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return errno_from_sqlite(rc);
        int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
        sqlite3_finalize(st);
        if (version > (int) ELEMENTSOF(migrations))
                return -EPROTO; /* written by a newer axctld */
        for (int v = version; v < version_wanted; v++) {
                int r = exec(store, "BEGIN IMMEDIATE");
                if (r < 0)
                        return r;
                r = exec(store, migrations[v]);
                if (r >= 0) {
                        _cleanup_free_ char *set = xasprintf("PRAGMA user_version = %d", v + 1);
                        r = exec(store, set);
                }
                if (r < 0) {
                        exec(store, "ROLLBACK");
                        return r;
                }
                if ((r = exec(store, "COMMIT")) < 0)
                        return r;
        }
        return 0;
}

/*
 * Creates the database file 0600 whatever the umask, unless it exists: SQLite would make
 * it 0644 less the umask, and it makes the -wal and -shm files with the database's own
 * mode, so all three stay private to the controller's account. The database holds every
 * job's environment and the token hashes. Any error is left for SQLite to report.
 */
static void store_create_private(const char *path) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        if (fd < 0)
                return;
        (void) fchmod(fd, 0600);
        close(fd);
}

/* Opens path with the migrations up to version applied; statements only when prepare. */
static int store_open_version(const char *path, int version, bool prepare, Store **ret_store) {
        store_create_private(path);
        Store *store = xcalloc(1, sizeof(Store));
        store->path = xstrdup(path);
        store->file_fd = -1;
        int rc = sqlite3_open_v2(path, &store->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 NULL);
        int r = errno_from_sqlite(rc);
        if (r < 0)
                goto fail;
        sqlite3_busy_timeout(store->db, 5000);
        /* WAL + FULL: a commit is on disk when it returns, so a 2xx means durable. */
        if ((r = exec(store, "PRAGMA journal_mode = WAL")) < 0 ||
            (r = exec(store, "PRAGMA synchronous = FULL")) < 0 ||
            (r = exec(store, "PRAGMA foreign_keys = ON")) < 0 || (r = migrate(store, version)) < 0)
                goto fail;
        store->file_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (store->file_fd < 0) {
                r = -errno;
                goto fail;
        }
        for (int i = 0; prepare && i < _STMT_MAX; i++) {
                rc = sqlite3_prepare_v3(store->db, statement_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                        &store->stmts[i], NULL);
                if ((r = errno_from_sqlite(rc)) < 0)
                        goto fail;
        }
        *ret_store = store;
        return 0;
fail:
        store_close(store);
        return r;
}

int store_open(const char *path, Store **ret_store) {
        return store_open_version(path, (int) ELEMENTSOF(migrations), true, ret_store);
}

int store_create_at_version(const char *path, int version) {
        Store *store = NULL;
        int r = store_open_version(path, version, false, &store);
        store_close(store);
        return r;
}

Store *store_close(Store *store) {
        if (!store)
                return NULL;
        for (int i = 0; i < _STMT_MAX; i++)
                sqlite3_finalize(store->stmts[i]);
        sqlite3_close_v2(store->db);
        if (store->file_fd >= 0)
                close(store->file_fd);
        free(store->path);
        free(store);
        return NULL;
}

int store_check_file(Store *store) {
        struct stat open_st, path_st;
        if (fstat(store->file_fd, &open_st) < 0 || stat(store->path, &path_st) < 0)
                return -errno;
        /* A path that names the open file is one of its links, so this also covers
         * st_nlink == 0 (deleted): its path then names nothing (ENOENT) or another file. */
        if (path_st.st_dev != open_st.st_dev || path_st.st_ino != open_st.st_ino)
                return -ESTALE;
        return 0;
}

int store_begin(Store *store) {
        if (store->in_transaction)
                return 0;
        int r = exec(store, "BEGIN IMMEDIATE");
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
        r = exec(store, "COMMIT");
        if (r >= 0)
                store->in_transaction = false;
        return r;
}

int store_rollback(Store *store) {
        if (!store->in_transaction)
                return 0;
        store->in_transaction = false;
        return exec(store, "ROLLBACK");
}

bool store_in_transaction(Store *store) {
        return store->in_transaction;
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
        if (s)
                sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, i);
}

static void bind_int(sqlite3_stmt *st, int i, int64_t v) {
        if (v == STORE_NONE)
                sqlite3_bind_null(st, i);
        else
                sqlite3_bind_int64(st, i, v);
}

static const char *col_text(sqlite3_stmt *st, int i) {
        return (const char *) sqlite3_column_text(st, i);
}

static int64_t col_int(sqlite3_stmt *st, int i) {
        return sqlite3_column_type(st, i) == SQLITE_NULL ? STORE_NONE : sqlite3_column_int64(st, i);
}

/* Runs a bound write statement to completion and resets it. */
static int step_done(sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE ? 0 : errno_from_sqlite(rc == SQLITE_ROW ? SQLITE_ERROR : rc);
}

int store_job_put(Store *store, const StoreJob *j) {
        sqlite3_stmt *st = store->stmts[STMT_JOB_PUT];
        bind_int(st, 1, j->id);
        bind_text(st, 2, j->name);
        bind_text(st, 3, j->project);
        bind_text(st, 4, j->user);
        bind_int(st, 5, j->priority);
        bind_text(st, 6, j->spec);
        bind_text(st, 7, j->state);
        bind_int(st, 8, j->attempt);
        bind_int(st, 9, j->restarts);
        bind_text(st, 10, j->reason ? j->reason : "");
        bind_int(st, 11, j->exit_code);
        bind_int(st, 12, j->created_ms);
        bind_int(st, 13, j->started_ms);
        bind_int(st, 14, j->finished_ms);
        bind_text(st, 15, j->idempotency_key);
        bind_int(st, 16, j->ckpt_step);
        bind_text(st, 17, j->ckpt_path);
        bind_text(st, 18, j->avoid_node);
        bind_int(st, 19, j->tier);
        bind_int(st, 20, j->queued_ms);
        bind_int(st, 21, j->quick_failures);
        bind_int(st, 22, j->best_step);
        return step_done(st);
}

int store_attempt_put(Store *store, const StoreAttempt *a) {
        sqlite3_stmt *st = store->stmts[STMT_ATTEMPT_PUT];
        bind_int(st, 1, a->job);
        bind_int(st, 2, a->attempt);
        bind_int(st, 3, a->resume_step);
        bind_text(st, 4, a->resume_path);
        bind_int(st, 5, a->started_ms);
        bind_int(st, 6, a->ended_ms);
        bind_text(st, 7, a->end_reason);
        bind_text(st, 8, a->blamed_node);
        bind_text(st, 9, a->detail);
        bind_int(st, 10, a->running_ms);
        bind_int(st, 11, a->first_progress_ms);
        bind_int(st, 12, a->last_progress_ms);
        bind_int(st, 13, a->failed_ms);
        bind_int(st, 14, a->first_ckpt_ms);
        bind_int(st, 15, a->last_ckpt_ms);
        bind_int(st, 16, a->n_ckpts);
        bind_int(st, 17, a->ckpt_stall_ms);
        bind_int(st, 18, a->n_ckpt_stalls);
        return step_done(st);
}

int store_rank_put(Store *store, const StoreRank *r) {
        sqlite3_stmt *st = store->stmts[STMT_RANK_PUT];
        bind_int(st, 1, r->job);
        bind_int(st, 2, r->attempt);
        bind_int(st, 3, r->rank);
        bind_text(st, 4, r->node);
        bind_text(st, 5, r->devices ? r->devices : "[]");
        bind_text(st, 6, r->state);
        bind_int(st, 7, r->alive);
        bind_int(st, 8, r->pid);
        bind_int(st, 9, r->exit_code);
        bind_int(st, 10, r->signal);
        bind_int(st, 11, r->step);
        bind_int(st, 12, r->local_rank);
        bind_int(st, 13, r->node_rank);
        return step_done(st);
}

int store_node_put(Store *store, const StoreNode *n) {
        sqlite3_stmt *st = store->stmts[STMT_NODE_PUT];
        bind_text(st, 1, n->name);
        bind_text(st, 2, n->hostname);
        bind_text(st, 3, n->address);
        bind_text(st, 4, n->boot_id);
        bind_text(st, 5, n->labels ? n->labels : "{}");
        bind_text(st, 6, n->inventory ? n->inventory : "{}");
        bind_text(st, 7, n->state);
        bind_text(st, 8, n->reason ? n->reason : "");
        bind_int(st, 9, n->last_seen_ms);
        bind_text(st, 10, n->blame_times ? n->blame_times : "[]");
        bind_text(st, 11, n->agent_id);
        return step_done(st);
}

int store_checkpoint_put(Store *store, const StoreCheckpoint *c) {
        sqlite3_stmt *st = store->stmts[STMT_CHECKPOINT_PUT];
        bind_int(st, 1, c->job);
        bind_int(st, 2, c->step);
        bind_text(st, 3, c->path);
        bind_int(st, 4, c->committed_ms);
        bind_int(st, 5, c->attempt);
        return step_done(st);
}

int store_event_append(Store *store, StoreEvent *e) {
        sqlite3_stmt *st = store->stmts[STMT_EVENT_APPEND];
        bind_int(st, 1, e->time_ms);
        bind_int(st, 2, e->job > 0 ? e->job : STORE_NONE);
        bind_text(st, 3, e->node);
        bind_text(st, 4, e->kind);
        bind_text(st, 5, e->detail ? e->detail : "");
        int r = step_done(st);
        if (r >= 0)
                e->seq = sqlite3_last_insert_rowid(store->db);
        return r;
}

/* Prepares a one-off query; loaders run once at start-up, so no caching. */
static int query(Store *store, const char *sql, sqlite3_stmt **ret) {
        return errno_from_sqlite(sqlite3_prepare_v2(store->db, sql, -1, ret, NULL));
}

/* Steps st to the end, calling row() for each row, and stops early when row() returns
 * non-zero (which it returns: -errno, or > 0 for "enough"); finalizes or resets st. */
static int for_each_row(sqlite3_stmt *st, bool finalize, int (*row)(sqlite3_stmt *, void *),
                        void *ctx) {
        int rc, r = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                if ((r = row(st, ctx)) != 0)
                        break;
        if (r == 0 && rc != SQLITE_DONE)
                r = errno_from_sqlite(rc);
        if (finalize)
                sqlite3_finalize(st);
        else {
                sqlite3_reset(st);
                sqlite3_clear_bindings(st);
        }
        return r;
}

typedef struct LoadCtx {
        void *fn;
        void *userdata;
} LoadCtx;

static int job_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        StoreJob j = {
                .id = col_int(st, 0),
                .name = col_text(st, 1),
                .project = col_text(st, 2),
                .user = col_text(st, 3),
                .priority = (int) col_int(st, 4),
                .spec = col_text(st, 5),
                .state = col_text(st, 6),
                .attempt = (int) col_int(st, 7),
                .restarts = (int) col_int(st, 8),
                .reason = col_text(st, 9),
                .exit_code = col_int(st, 10),
                .created_ms = col_int(st, 11),
                .started_ms = col_int(st, 12),
                .finished_ms = col_int(st, 13),
                .idempotency_key = col_text(st, 14),
                .ckpt_step = col_int(st, 15),
                .ckpt_path = col_text(st, 16),
                .avoid_node = col_text(st, 17),
                .tier = (int) col_int(st, 18),
                .queued_ms = col_int(st, 19),
                .quick_failures = (int) col_int(st, 20),
                .best_step = col_int(st, 21),
        };
        return ((StoreJobFn) ctx->fn)(ctx->userdata, &j);
}

#define JOB_COLUMNS                                                                             \
        "id, name, project, user, priority, spec, state, attempt, restarts, reason, exit_code," \
        " created_ms, started_ms, finished_ms, idempotency_key, ckpt_step, ckpt_path,"          \
        " avoid_node, tier, queued_ms, quick_failures, best_step"
/* A job that is over, before the retention cutoff, with no rank that may still run. */
#define JOB_RETIRED(cutoff)                                                                     \
        "(state IN ('succeeded', 'failed', 'cancelled') AND COALESCE(finished_ms, 0) < " cutoff \
        " AND NOT EXISTS (SELECT 1 FROM rank WHERE rank.job = job.id AND rank.alive = 1))"

int store_jobs_load(Store *store, int64_t retire_before_ms, StoreJobFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store,
                      "SELECT " JOB_COLUMNS " FROM job WHERE NOT " JOB_RETIRED("?1") " ORDER BY id",
                      &st);
        if (r < 0)
                return r;
        bind_int(st, 1, retire_before_ms);
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, true, job_row, &ctx);
}

/* What attempt_row reads, for every query of attempts: a job read back after it left
 * memory keeps its goodput records. */
#define ATTEMPT_COLUMNS                                                                     \
        "job, attempt, resume_step, resume_path, started_ms, ended_ms, end_reason,"         \
        " blamed_node, detail, running_ms, first_progress_ms, last_progress_ms, failed_ms," \
        " first_ckpt_ms, last_ckpt_ms, n_ckpts, ckpt_stall_ms, n_ckpt_stalls"

static int attempt_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        StoreAttempt a = {
                .job = col_int(st, 0),
                .attempt = (int) col_int(st, 1),
                .resume_step = col_int(st, 2),
                .resume_path = col_text(st, 3),
                .started_ms = col_int(st, 4),
                .ended_ms = col_int(st, 5),
                .end_reason = col_text(st, 6),
                .blamed_node = col_text(st, 7),
                .detail = col_text(st, 8),
                .running_ms = col_int(st, 9),
                .first_progress_ms = col_int(st, 10),
                .last_progress_ms = col_int(st, 11),
                .failed_ms = col_int(st, 12),
                .first_ckpt_ms = col_int(st, 13),
                .last_ckpt_ms = col_int(st, 14),
                .n_ckpts = (int) col_int(st, 15),
                .ckpt_stall_ms = col_int(st, 16),
                .n_ckpt_stalls = (int) col_int(st, 17),
        };
        return ((StoreAttemptFn) ctx->fn)(ctx->userdata, &a);
}

int store_attempts_load(Store *store, StoreAttemptFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store, "SELECT " ATTEMPT_COLUMNS " FROM attempt ORDER BY job, attempt", &st);
        if (r < 0)
                return r;
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, true, attempt_row, &ctx);
}

static int rank_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        StoreRank rk = {
                .job = col_int(st, 0),
                .attempt = (int) col_int(st, 1),
                .rank = (int) col_int(st, 2),
                .node = col_text(st, 3),
                .devices = col_text(st, 4),
                .state = col_text(st, 5),
                .alive = col_int(st, 6) != 0,
                .pid = col_int(st, 7),
                .exit_code = col_int(st, 8),
                .signal = col_int(st, 9),
                .step = col_int(st, 10),
                .local_rank = (int) col_int(st, 11),
                .node_rank = (int) col_int(st, 12),
        };
        return ((StoreRankFn) ctx->fn)(ctx->userdata, &rk);
}

/* What rank_row reads, of the ranks of each job's latest attempt. */
#define LATEST_RANKS                                                                         \
        "r.job, r.attempt, r.rank, r.node, r.devices, r.state, r.alive, r.pid, r.exit_code," \
        " r.signal, r.step, r.local_rank, r.node_rank"                                       \
        " FROM rank r JOIN job j ON j.id = r.job AND j.attempt = r.attempt"

int store_ranks_load(Store *store, StoreRankFn fn, void *userdata) {
        sqlite3_stmt *st;
        /* Only the ranks of each job's latest attempt matter after a restart. */
        int r = query(store, "SELECT " LATEST_RANKS " ORDER BY r.job, r.rank", &st);
        if (r < 0)
                return r;
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, true, rank_row, &ctx);
}

int store_job_load(Store *store, int64_t id, StoreJobFn job_fn, StoreAttemptFn attempt_fn,
                   StoreRankFn rank_fn, void *userdata) {
        static const char *const sql[] = {
                "SELECT " JOB_COLUMNS " FROM job WHERE id = ?",
                "SELECT " ATTEMPT_COLUMNS " FROM attempt WHERE job = ? ORDER BY attempt",
                "SELECT " LATEST_RANKS " WHERE r.job = ? ORDER BY r.rank",
        };
        int (*const rows[])(sqlite3_stmt *, void *) = {job_row, attempt_row, rank_row};
        void *const fns[] = {(void *) job_fn, (void *) attempt_fn, (void *) rank_fn};
        for (size_t q = 0; q < 3; q++) {
                sqlite3_stmt *st;
                int r = query(store, sql[q], &st);
                if (r < 0)
                        return r;
                bind_int(st, 1, id);
                LoadCtx ctx = {fns[q], userdata};
                if ((r = for_each_row(st, true, rows[q], &ctx)) < 0)
                        return r;
        }
        return 0;
}

int store_job_next_id(Store *store, int64_t *ret_id) {
        sqlite3_stmt *st;
        int r = query(store, "SELECT COALESCE(MAX(id), 0) + 1 FROM job", &st);
        if (r < 0)
                return r;
        if (sqlite3_step(st) == SQLITE_ROW)
                *ret_id = sqlite3_column_int64(st, 0);
        else
                r = errno_from_sqlite(sqlite3_errcode(store->db));
        sqlite3_finalize(st);
        return r;
}

int store_job_find_key(Store *store, const char *project, const char *key, int64_t *ret_id) {
        sqlite3_stmt *st;
        int r = query(store, "SELECT id FROM job WHERE project = ? AND idempotency_key = ?", &st);
        if (r < 0)
                return r;
        bind_text(st, 1, project);
        bind_text(st, 2, key);
        *ret_id = 0;
        if (sqlite3_step(st) == SQLITE_ROW)
                *ret_id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return 0;
}

typedef struct IdCtx {
        StoreIdFn fn;
        void *userdata;
} IdCtx;

static int id_row(sqlite3_stmt *st, void *p) {
        IdCtx *ctx = p;
        return ctx->fn(ctx->userdata, sqlite3_column_int64(st, 0));
}

int store_jobs_list(Store *store, int64_t before, const char *state, const char *project,
                    StoreIdFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store,
                      "SELECT id FROM job WHERE id < ?1 AND (?2 IS NULL OR state = ?2)"
                      " AND (?3 IS NULL OR project = ?3) ORDER BY id DESC",
                      &st);
        if (r < 0)
                return r;
        bind_int(st, 1, before > 0 ? before : INT64_MAX);
        bind_text(st, 2, state);
        bind_text(st, 3, project);
        IdCtx ctx = {fn, userdata};
        return for_each_row(st, true, id_row, &ctx);
}

static int node_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        StoreNode n = {
                .name = col_text(st, 0),
                .hostname = col_text(st, 1),
                .address = col_text(st, 2),
                .boot_id = col_text(st, 3),
                .labels = col_text(st, 4),
                .inventory = col_text(st, 5),
                .state = col_text(st, 6),
                .reason = col_text(st, 7),
                .last_seen_ms = col_int(st, 8),
                .blame_times = col_text(st, 9),
                .agent_id = col_text(st, 10),
        };
        return ((StoreNodeFn) ctx->fn)(ctx->userdata, &n);
}

int store_nodes_load(Store *store, StoreNodeFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store,
                      "SELECT name, hostname, address, boot_id, labels, inventory, state, reason,"
                      " last_seen_ms, blame_times, agent_id FROM node ORDER BY name",
                      &st);
        if (r < 0)
                return r;
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, true, node_row, &ctx);
}

static int event_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        int64_t job = col_int(st, 2);
        StoreEvent e = {
                .seq = col_int(st, 0),
                .time_ms = col_int(st, 1),
                .job = job == STORE_NONE ? 0 : job,
                .node = col_text(st, 3),
                .kind = col_text(st, 4),
                .detail = col_text(st, 5),
        };
        return ((StoreEventFn) ctx->fn)(ctx->userdata, &e);
}

int store_events_list(Store *store, int64_t job, int64_t after, int limit, StoreEventFn fn,
                      void *userdata) {
        sqlite3_stmt *st;
        int i = 1;
        if (job > 0) {
                st = store->stmts[STMT_EVENTS_JOB];
                sqlite3_bind_int64(st, i++, job);
        } else
                st = store->stmts[STMT_EVENTS_ALL];
        sqlite3_bind_int64(st, i++, after);
        sqlite3_bind_int(st, i, limit);
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, false, event_row, &ctx);
}

int store_token_insert(Store *store, const StoreToken *t) {
        /* A revoked token gives its name back: a user token's name is the account its
         * jobs run as, and a person whose token was revoked must be able to get another. */
        sqlite3_stmt *del;
        int r = query(store, "DELETE FROM token WHERE name = ? AND revoked_ms IS NOT NULL", &del);
        if (r < 0)
                return r;
        bind_text(del, 1, t->name);
        r = step_done(del);
        sqlite3_finalize(del);
        if (r < 0)
                return r;
        sqlite3_stmt *st = store->stmts[STMT_TOKEN_INSERT];
        bind_text(st, 1, t->name);
        bind_text(st, 2, t->hash);
        bind_text(st, 3, t->role);
        bind_text(st, 4, t->projects ? t->projects : "[]");
        bind_text(st, 5, t->node);
        bind_int(st, 6, t->created_ms);
        return step_done(st);
}

int store_token_revoke(Store *store, const char *name, int64_t now_ms) {
        sqlite3_stmt *st = store->stmts[STMT_TOKEN_REVOKE];
        bind_int(st, 1, now_ms);
        bind_text(st, 2, name);
        int r = step_done(st);
        if (r < 0)
                return r;
        return sqlite3_changes(store->db) > 0 ? 0 : -ENOENT;
}

static int token_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        StoreToken t = {
                .name = col_text(st, 0),
                .hash = col_text(st, 1),
                .role = col_text(st, 2),
                .projects = col_text(st, 3),
                .node = col_text(st, 4),
                .created_ms = col_int(st, 5),
                .revoked_ms = col_int(st, 6),
        };
        return ((StoreTokenFn) ctx->fn)(ctx->userdata, &t);
}

int store_token_find(Store *store, const char *hash, StoreTokenFn fn, void *userdata) {
        sqlite3_stmt *st = store->stmts[STMT_TOKEN_BY_HASH];
        bind_text(st, 1, hash);
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, false, token_row, &ctx);
}

int store_tokens_list(Store *store, StoreTokenFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store,
                      "SELECT name, hash, role, projects, node, created_ms, revoked_ms FROM token"
                      " ORDER BY name",
                      &st);
        if (r < 0)
                return r;
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, true, token_row, &ctx);
}

int store_goodput_put(Store *store, const StoreGoodput *g) {
        sqlite3_stmt *st = store->stmts[STMT_GOODPUT_PUT];
        bind_int(st, 1, g->job);
        bind_text(st, 2, g->project);
        bind_int(st, 3, g->created_ms);
        bind_int(st, 4, g->finished_ms);
        bind_int(st, 5, g->accelerators);
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                bind_int(st, 6 + b, g->ms[b]);
        bind_int(st, 6 + STORE_GOODPUT_BUCKETS, g->interruptions);
        bind_int(st, 7 + STORE_GOODPUT_BUCKETS, g->rank_ms);
        return step_done(st);
}

/* Rows of (project, jobs, created_ms, finished_ms, accelerators, buckets...,
 * interruptions, rank_ms), as goodput_row reads them. */
static int goodput_row(sqlite3_stmt *st, void *p) {
        LoadCtx *ctx = p;
        StoreGoodput g = {.project = col_text(st, 0),
                          .job = col_int(st, 1),
                          .jobs = col_int(st, 2),
                          .created_ms = col_int(st, 3),
                          .finished_ms = col_int(st, 4),
                          .accelerators = col_int(st, 5)};
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                g.ms[b] = col_int(st, 6 + b);
        g.interruptions = col_int(st, 6 + STORE_GOODPUT_BUCKETS);
        g.rank_ms = col_int(st, 7 + STORE_GOODPUT_BUCKETS);
        return ((StoreGoodputFn) ctx->fn)(ctx->userdata, &g);
}

/* Runs a goodput query whose ?1 is since_ms and ?2 the project (NULL: any). */
static int goodput_query(Store *store, const char *sql, const char *project, int64_t since_ms,
                         StoreGoodputFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store, sql, &st);
        if (r < 0)
                return r;
        bind_int(st, 1, since_ms);
        bind_text(st, 2, project);
        LoadCtx ctx = {(void *) fn, userdata};
        return for_each_row(st, true, goodput_row, &ctx);
}

int store_goodput_sum(Store *store, const char *project, int64_t since_ms, StoreGoodputFn fn,
                      void *userdata) {
        return goodput_query(store,
                             "SELECT project, 0, SUM(finished_ms > created_ms), 0, 0, 1,"
                             " SUM(productive_ms * accelerators), SUM(queueing_ms * accelerators),"
                             " SUM(startup_ms * accelerators), SUM(lost_work_ms * accelerators),"
                             " SUM(detection_ms * accelerators), SUM(restart_ms * accelerators),"
                             " SUM(hang_ms * accelerators), SUM(preemption_ms * accelerators),"
                             " SUM(checkpoint_ms * accelerators), SUM(interruptions), SUM(rank_ms)"
                             " FROM job_goodput WHERE created_ms >= ?1"
                             " AND (?2 IS NULL OR project = ?2) GROUP BY project ORDER BY project",
                             project, since_ms, fn, userdata);
}

int store_goodput_straddling(Store *store, const char *project, int64_t since_ms, StoreGoodputFn fn,
                             void *userdata) {
        return goodput_query(store,
                             "SELECT project, job, 1, created_ms, finished_ms, "
                             "accelerators, " GOODPUT_BUCKET_COLUMNS
                             ", interruptions, rank_ms FROM job_goodput"
                             " WHERE created_ms < ?1 AND finished_ms > ?1"
                             " AND (?2 IS NULL OR project = ?2) ORDER BY job",
                             project, since_ms, fn, userdata);
}

int store_goodput_missing(Store *store, StoreIdFn fn, void *userdata) {
        sqlite3_stmt *st;
        int r = query(store,
                      "SELECT id FROM job WHERE state IN ('succeeded', 'failed', 'cancelled')"
                      " AND id NOT IN (SELECT job FROM job_goodput) ORDER BY id",
                      &st);
        if (r < 0)
                return r;
        IdCtx ctx = {fn, userdata};
        return for_each_row(st, true, id_row, &ctx);
}

/* Reads the leader row into *ret (zeroed when none ever led). */
static int leader_read(Store *store, StoreLeader *ret) {
        sqlite3_stmt *st;
        int r = query(store,
                      "SELECT holder, url, token, expires_ms - " DB_NOW_MS
                      " FROM leader WHERE id = 1",
                      &st);
        if (r < 0)
                return r;
        *ret = (StoreLeader){0};
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW && sqlite3_column_int64(st, 2) > 0) {
                snprintf(ret->holder, sizeof(ret->holder), "%s", col_text(st, 0));
                snprintf(ret->url, sizeof(ret->url), "%s", col_text(st, 1));
                ret->token = sqlite3_column_int64(st, 2);
                ret->expires_in_ms = sqlite3_column_int64(st, 3);
        } else if (rc != SQLITE_ROW)
                r = errno_from_sqlite(rc == SQLITE_DONE ? SQLITE_CORRUPT : rc);
        sqlite3_finalize(st);
        return r;
}

/* Inside a transaction of a leading Store: -ESTALE (and fenced from then on) when another
 * took the row; BEGIN IMMEDIATE holds the write lock, so no takeover can come between
 * this check and the commit. */
static int leader_check(Store *store) {
        if (store->fenced)
                return -ESTALE;
        if (!store->leading)
                return 0;
        StoreLeader row;
        int r = leader_read(store, &row);
        if (r < 0)
                return r;
        if (row.token != store->lead_token || strcmp(row.holder, store->lead_holder) != 0) {
                store->leading = false;
                store->fenced = true;
                return -ESTALE;
        }
        return 0;
}

/* Runs one UPDATE of the leader row with ?1 url, ?2 lease_ms, ?3 holder. */
static int leader_update(Store *store, const char *sql, const char *holder, const char *url,
                         int64_t lease_ms) {
        sqlite3_stmt *st;
        int r = query(store, sql, &st);
        if (r < 0)
                return r;
        bind_text(st, 1, url);
        bind_int(st, 2, lease_ms);
        bind_text(st, 3, holder);
        r = step_done(st);
        sqlite3_finalize(st);
        return r;
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
        int r = exec(store, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        StoreLeader row;
        bool took = false, leads = false;
        if ((r = leader_read(store, &row)) < 0)
                goto fail;
        if (store->leading) {
                if (row.token != store->lead_token || strcmp(row.holder, holder) != 0) {
                        /* Deposed: the state in memory is stale, so no taking it back. */
                        exec(store, "ROLLBACK");
                        store->leading = false;
                        store->fenced = true;
                        return -ESTALE;
                }
                r = leader_update(store,
                                  "UPDATE leader SET url = ?1, expires_ms = " DB_NOW_MS " + ?2"
                                  " WHERE id = 1",
                                  holder, url, lease_ms);
                leads = true;
        } else if (row.token == 0 || row.expires_in_ms <= 0 || strcmp(row.holder, holder) == 0) {
                r = leader_update(store,
                                  "UPDATE leader SET url = ?1, expires_ms = " DB_NOW_MS " + ?2,"
                                  " holder = ?3, token = token + 1 WHERE id = 1",
                                  holder, url, lease_ms);
                leads = took = true;
        }
        if (r < 0 || (r = leader_read(store, &row)) < 0 || (r = exec(store, "COMMIT")) < 0)
                goto fail;
        if (took) {
                store->leading = true;
                store->lead_token = row.token;
                snprintf(store->lead_holder, sizeof(store->lead_holder), "%s", holder);
        }
        if (ret)
                *ret = row;
        return leads ? 1 : 0;
fail:
        exec(store, "ROLLBACK");
        return r;
}

int store_leader_get(Store *store, StoreLeader *ret) {
        return leader_read(store, ret);
}

int store_resign(Store *store) {
        if (store->in_transaction)
                return -EBUSY;
        if (!store->leading)
                return 0;
        sqlite3_stmt *st;
        int r = query(store,
                      "UPDATE leader SET expires_ms = " DB_NOW_MS " WHERE id = 1 AND token = ?"
                      " AND holder = ?",
                      &st);
        if (r < 0)
                return r;
        bind_int(st, 1, store->lead_token);
        bind_text(st, 2, store->lead_holder);
        r = step_done(st);
        sqlite3_finalize(st);
        if (r >= 0) {
                /* Whatever it still holds in memory is a follower's now: no more writes. */
                store->leading = false;
                store->fenced = true;
        }
        return r;
}
