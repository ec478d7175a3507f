/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the store: migrations, upserts, transactions, reloading, leadership. On
 * SQLite by default; on PostgreSQL when AXTEST_PG_URL names a database (meson's
 * store-postgresql test runs it so, under tests/pgserver.py), each case then in a schema
 * of its own.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/unit/check.h"
#include "states.h"
#include "store.h"
#include "util.h"

static const char *scratch_dir; /* SQLite's files */
static const char *pg_url; /* NULL: SQLite */

/* A fresh, empty database for one case, named name: a file, or a PostgreSQL schema
 * that the URL makes the connection's search path. */
static char *fresh_target(const char *name);

static char *mfree_text(char *text) {
        free(text);
        return NULL;
}

/* Appends one column's value to text, then "|" or, after the last, a newline. */
static char *append_value(char *text, const char *value, bool last) {
        char *more = xasprintf("%s%s%s", text, value ? value : "", last ? "\n" : "|");
        free(text);
        return more;
}

/* Runs sql on target outside the store, as an operator or an older axctld would; the
 * rows as "a|b\n" lines, or NULL when it failed. */
static char *raw_sql(const char *target, const char *sql) {
        char *text = xstrdup("");
        if (!pg_url) {
                sqlite3 *db;
                CHECK_INT(sqlite3_open(target, &db), SQLITE_OK);
                const char *tail = sql;
                while (text && *tail) {
                        sqlite3_stmt *st;
                        if (sqlite3_prepare_v2(db, tail, -1, &st, &tail) != SQLITE_OK) {
                                text = mfree_text(text);
                                break;
                        }
                        if (!st)
                                break;
                        int rc, n = sqlite3_column_count(st);
                        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                                for (int i = 0; i < n; i++)
                                        text = append_value(
                                                text, (const char *) sqlite3_column_text(st, i),
                                                i + 1 == n);
                        if (rc != SQLITE_DONE)
                                text = mfree_text(text);
                        sqlite3_finalize(st);
                }
                sqlite3_close(db);
                return text;
        }
        PGconn *pg = PQconnectdb(target);
        CHECK(PQstatus(pg) == CONNECTION_OK);
        PGresult *res = PQexec(pg, sql);
        if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
                text = mfree_text(text);
        for (int r = 0; text && r < PQntuples(res); r++)
                for (int i = 0; i < PQnfields(res); i++)
                        text = append_value(text, PQgetvalue(res, r, i), i + 1 == PQnfields(res));
        PQclear(res);
        PQfinish(pg);
        return text;
}

/* A pending job with every optional column empty. */
static StoreJob plain_job(int64_t id) {
        return (StoreJob){.id = id,
                          .name = "j",
                          .project = "p",
                          .user = "u",
                          .spec = "{}",
                          .state = "pending",
                          .reason = "",
                          .exit_code = STORE_NONE,
                          .created_ms = 1,
                          .started_ms = STORE_NONE,
                          .finished_ms = STORE_NONE,
                          .ckpt_step = STORE_NONE,
                          .queued_ms = STORE_NONE,
                          .best_step = STORE_NONE};
}

static int count_jobs(void *ud, const StoreJob *j) {
        int *n = ud;
        (*n)++;
        CHECK_STR(j->name, "train");
        CHECK_STR(j->spec, "{}");
        CHECK_STR(j->state, "running");
        CHECK_INT(j->exit_code, STORE_NONE);
        CHECK_INT(j->ckpt_step, 40);
        CHECK_STR(j->idempotency_key, "key-1");
        return 0;
}

static int count_events(void *ud, const StoreEvent *e) {
        int *n = ud;
        (*n)++;
        CHECK_INT(e->job, 1);
        CHECK_STR(e->kind, "job_state");
        return 0;
}

static int check_rank(void *ud, const StoreRank *r) {
        int *n = ud;
        (*n)++;
        CHECK_INT(r->attempt, 2); /* only the job's current attempt is loaded */
        CHECK(r->alive);
        return 0;
}

static int collect_keys(void *ud, const StoreJob *j) {
        char *keys = ud;
        char one[64];
        snprintf(one, sizeof(one), "%lld:%s/%s ", (long long) j->id, j->project,
                 j->idempotency_key ? j->idempotency_key : "-");
        strcat(keys, one);
        return 0;
}

/* An idempotency key is a project's own; a database of version 4 (one key per
 * controller) is upgraded with its jobs intact. */
static void test_idempotency_key_per_project(void) {
        _cleanup_free_ char *path = fresh_target("v4");
        CHECK_INT(store_create_at_version(path, 4), 0);
        _cleanup_free_ char *inserted =
                raw_sql(path, "INSERT INTO job (id, name, project, \"user\", priority, spec, state,"
                              " attempt, restarts, reason, created_ms, idempotency_key)"
                              " VALUES (1, 'a', 'p1', 'u', 0, '{}', 'pending', 0, 0, '', 1, 'k'),"
                              " (2, 'b', 'p1', 'u', 0, '{}', 'pending', 0, 0, '', 1, NULL);");
        CHECK(inserted);
        /* Version 4 knew one key per controller: another project could not have it. */
        _cleanup_free_ char *refused =
                raw_sql(path, "INSERT INTO job (id, name, project, \"user\", priority, spec, state,"
                              " attempt, restarts, reason, created_ms, idempotency_key)"
                              " VALUES (3, 'c', 'p2', 'u', 0, '{}', 'pending', 0, 0, '', 1, 'k');");
        CHECK(!refused);

        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        StoreJob job = plain_job(3);
        job.name = "c";
        job.project = "p2";
        job.idempotency_key = "k";
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &job), 0);
        CHECK_INT(store_commit(s), 0);
        /* Within one project a key still names one job. */
        job.id = 4;
        job.project = "p1";
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &job), -EEXIST);
        CHECK_INT(store_rollback(s), 0);
        char keys[256] = "";
        CHECK_INT(store_jobs_load(s, 0, collect_keys, keys), 0);
        CHECK_STR(keys, "1:p1/k 2:p1/- 3:p2/k ");
        store_close(s);
}

static int append_id(char *ids, int64_t id) {
        char one[24];
        snprintf(one, sizeof(one), "%lld ", (long long) id);
        strcat(ids, one);
        return 0;
}

static int collect_ids(void *ud, const StoreJob *j) {
        return append_id(ud, j->id);
}

static int collect_attempt_jobs(void *ud, const StoreAttempt *a) {
        return append_id(ud, a->job);
}

static int collect_rank_jobs(void *ud, const StoreRank *r) {
        return append_id(ud, r->job);
}

/* A start loads every job not retired and no other: one not ended (whatever its
 * finished_ms), one that ended at or after the cutoff, one whose ranks may still run;
 * not one that ended before it, nor an ended job without a finish time. The attempts
 * and ranks it reads are those of the same jobs, not the store's whole history. */
static void test_jobs_load_cutoff(void) {
        _cleanup_free_ char *path = fresh_target("cutoff");
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        static const struct {
                const char *state;
                int64_t finished_ms;
                bool alive_rank;
        } jobs[] = {
                {"pending", STORE_NONE, false},   {"succeeded", 100, false},
                {"succeeded", 1000, false},       {"failed", 100, true},
                {"failed", 100, false},           {"running", 50, false},
                {"cancelled", STORE_NONE, false}, {"succeeded", 5000, false},
        };
        CHECK_INT(store_begin(s), 0);
        for (size_t i = 0; i < ELEMENTSOF(jobs); i++) {
                StoreJob job = plain_job((int64_t) i + 1);
                job.state = jobs[i].state;
                job.finished_ms = jobs[i].finished_ms;
                job.attempt = 1;
                CHECK_INT(store_job_put(s, &job), 0);
                StoreRank rank = {.job = job.id,
                                  .attempt = 1,
                                  .node = "n1",
                                  .state = "exited",
                                  .alive = jobs[i].alive_rank,
                                  .pid = STORE_NONE,
                                  .exit_code = STORE_NONE,
                                  .signal = STORE_NONE,
                                  .step = STORE_NONE};
                CHECK_INT(store_rank_put(s, &rank), 0);
                StoreAttempt at = {.job = job.id,
                                   .attempt = 1,
                                   .started_ms = 10,
                                   .ended_ms = STORE_NONE,
                                   .running_ms = STORE_NONE,
                                   .first_progress_ms = STORE_NONE,
                                   .last_progress_ms = STORE_NONE,
                                   .failed_ms = STORE_NONE,
                                   .first_ckpt_ms = STORE_NONE,
                                   .last_ckpt_ms = STORE_NONE};
                CHECK_INT(store_attempt_put(s, &at), 0);
        }
        CHECK_INT(store_commit(s), 0);
        char ids[128] = "";
        CHECK_INT(store_jobs_load(s, 1000, collect_ids, ids), 0);
        CHECK_STR(ids, "1 3 4 6 8 ");
        char attempts[128] = "";
        CHECK_INT(store_attempts_load(s, 1000, collect_attempt_jobs, attempts), 0);
        CHECK_STR(attempts, "1 3 4 6 8 ");
        char ranks[128] = "";
        CHECK_INT(store_ranks_load(s, 1000, collect_rank_jobs, ranks), 0);
        CHECK_STR(ranks, "1 3 4 6 8 ");
        store_close(s);
}

/* Every job state but the three ends is loaded, ended long ago or not: the load lists
 * them by name (for the index), so a state added without its name there fails here. */
static void test_jobs_load_every_unended_state(void) {
        _cleanup_free_ char *path = fresh_target("states");
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        char want[128] = "";
        CHECK_INT(store_begin(s), 0);
        for (int st = 0; st < _JOB_STATE_MAX; st++) {
                StoreJob job = plain_job(st + 1);
                job.state = job_state_to_string((JobState) st);
                job.finished_ms = 100;
                CHECK_INT(store_job_put(s, &job), 0);
                if (!job_state_is_terminal((JobState) st)) {
                        char one[24];
                        snprintf(one, sizeof(one), "%d ", st + 1);
                        strcat(want, one);
                }
        }
        CHECK_INT(store_commit(s), 0);
        char ids[128] = "";
        CHECK_INT(store_jobs_load(s, 1000, collect_ids, ids), 0);
        CHECK_STR(ids, want);
        store_close(s);
}

/* The store tells when its file was deleted or replaced under it. */
static void test_check_file(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/moved.db", dir);
        _cleanup_free_ char *other = xasprintf("%s/other.db", dir);
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        CHECK_INT(store_check_file(s), 0);
        CHECK_INT(util_write_file_atomic(other, "x", 1), 0);
        CHECK_INT(rename(other, path), 0);
        CHECK_INT(store_check_file(s), -ESTALE);
        CHECK_INT(unlink(path), 0);
        CHECK_INT(store_check_file(s), -ENOENT);
        store_close(s);
}

typedef struct GoodputSeen {
        char text[256];
} GoodputSeen;

static int collect_goodput(void *ud, const StoreGoodput *g) {
        GoodputSeen *seen = ud;
        char one[96];
        snprintf(one, sizeof(one), "%s:%lld:%lld:p%lld:q%lld:i%lld:r%lld ", g->project,
                 (long long) g->job, (long long) g->jobs, (long long) g->ms[0],
                 (long long) g->ms[1], (long long) g->interruptions, (long long) g->rank_ms);
        strcat(seen->text, one);
        return 0;
}

static int collect_id(void *ud, int64_t id) {
        int64_t *ids = ud;
        ids[ids[0]++ + 1] = id;
        return 0;
}

static int ignore_job(void *ud, const StoreJob *j) {
        (void) ud, (void) j;
        return 0;
}

static int ignore_rank(void *ud, const StoreRank *r) {
        (void) ud, (void) r;
        return 0;
}

static int check_attempt_records(void *ud, const StoreAttempt *a) {
        int *n = ud;
        (*n)++;
        CHECK_INT(a->first_progress_ms, 1500);
        CHECK_INT(a->last_ckpt_ms, 2500);
        CHECK_INT(a->n_ckpts, 3);
        return 0;
}

/* Ended jobs' goodput: summed per project (weighted by accelerators) over the jobs
 * created in the window, the jobs the window's start cuts listed alone, and the ended
 * jobs without figures (an older database's) found; one job read alone keeps its
 * attempts' goodput records. */
static void test_goodput(void) {
        _cleanup_free_ char *path = fresh_target("goodput");
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        CHECK_INT(store_begin(s), 0);
        StoreGoodput a = {.job = 1,
                          .project = "p",
                          .created_ms = 1000,
                          .finished_ms = 5000,
                          .accelerators = 8,
                          .ms = {3000, 1000},
                          .interruptions = 1,
                          .rank_ms = 8000};
        StoreGoodput b = {.job = 2,
                          .project = "p",
                          .created_ms = 2000,
                          .finished_ms = 4000,
                          .accelerators = 1,
                          .ms = {2000}};
        StoreGoodput c = {.job = 3,
                          .project = "q",
                          .created_ms = 500,
                          .finished_ms = 600,
                          .accelerators = 2,
                          .ms = {0, 100}};
        CHECK_INT(store_goodput_put(s, &a), 0);
        CHECK_INT(store_goodput_put(s, &b), 0);
        CHECK_INT(store_goodput_put(s, &c), 0);
        CHECK_INT(store_goodput_put(s, &c), 0); /* written again: still one row */
        StoreJob j = plain_job(0);
        const char *states[] = {"succeeded", "failed", "running", "cancelled"};
        for (int i = 0; i < 4; i++) {
                j.id = i + 1;
                j.state = states[i];
                CHECK_INT(store_job_put(s, &j), 0);
        }
        StoreAttempt at = {.job = 4,
                           .attempt = 1,
                           .started_ms = 1000,
                           .ended_ms = 3000,
                           .end_reason = "cancelled",
                           .running_ms = 1200,
                           .first_progress_ms = 1500,
                           .last_progress_ms = 2900,
                           .failed_ms = STORE_NONE,
                           .first_ckpt_ms = 2000,
                           .last_ckpt_ms = 2500,
                           .n_ckpts = 3};
        CHECK_INT(store_attempt_put(s, &at), 0);
        CHECK_INT(store_commit(s), 0);

        GoodputSeen seen = {0};
        CHECK_INT(store_goodput_sum(s, NULL, 0, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "p:0:2:p26000:q8000:i1:r8000 q:0:1:p0:q200:i0:r0 ");
        /* The totals kept as figures were written say the same; figures are final. */
        CHECK_INT(store_begin(s), 0);
        StoreGoodput a_again = a;
        a_again.ms[0] = 1;
        CHECK_INT(store_goodput_put(s, &a_again), 0);
        CHECK_INT(store_commit(s), 0);
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_totals(s, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "p:0:2:p26000:q8000:i1:r8000 q:0:1:p0:q200:i0:r0 ");
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_sum(s, NULL, 0, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "p:0:2:p26000:q8000:i1:r8000 q:0:1:p0:q200:i0:r0 ");
        /* A database from before the totals gets them from its figures. */
        s = store_close(s);
        free(raw_sql(path, "DROP TABLE goodput_total"));
        free(raw_sql(path, pg_url ? "UPDATE schema_version SET version = 11"
                                  : "PRAGMA user_version = 11"));
        CHECK_INT(store_open(path, &s), 0);
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_totals(s, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "p:0:2:p26000:q8000:i1:r8000 q:0:1:p0:q200:i0:r0 ");
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_sum(s, "q", 0, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "q:0:1:p0:q200:i0:r0 ");
        /* From 1500 on: job 2 whole, job 1 cut (its rows unweighted), job 3 outside. */
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_sum(s, NULL, 1500, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "p:0:1:p2000:q0:i0:r0 ");
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_straddling(s, NULL, 1500, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "p:1:1:p3000:q1000:i1:r8000 ");
        seen = (GoodputSeen){0};
        CHECK_INT(store_goodput_straddling(s, "q", 1500, collect_goodput, &seen), 0);
        CHECK_STR(seen.text, "");

        int64_t ids[8] = {0};
        CHECK_INT(store_goodput_missing(s, collect_id, ids), 0);
        CHECK_INT(ids[0], 1);
        CHECK_INT(ids[1], 4); /* ended, no figures; job 3 is running */
        int n = 0;
        CHECK_INT(store_jobs_read(s, 4, 4, ignore_job, check_attempt_records, ignore_rank, &n), 0);
        CHECK_INT(n, 1);
        s = store_close(s);
}

static int count_one_job(void *ud, const StoreJob *j) {
        (void) j;
        (*(int *) ud)++;
        return 0;
}

/* Writes job id in one transaction: store_commit's result. */
static int put_job(Store *s, int64_t id) {
        StoreJob j = plain_job(id);
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &j), 0);
        return store_commit(s);
}

/* Leadership between two Stores on one database: taken when free, renewed, refused
 * while another's lease runs, taken with a higher token once it expired, after which
 * the deposed Store's commits fail -ESTALE without writing; resign hands over at once;
 * the same holder in a new Store takes over at once. */
static void test_leadership(const char *target) {
        Store *a = NULL, *b = NULL;
        CHECK_INT(store_open(target, &a), 0);
        CHECK_INT(store_open(target, &b), 0);
        StoreLeader row;
        CHECK_INT(store_leader_get(a, &row), 0);
        CHECK_STR(row.holder, "");
        CHECK_INT(row.token, 0);
        CHECK_INT(row.expires_in_ms, 0);

        CHECK_INT(store_lead(a, "ctl-a", "http://a:1", 60000, &row), 1);
        CHECK_STR(row.holder, "ctl-a");
        CHECK_STR(row.url, "http://a:1");
        int64_t token = row.token;
        CHECK(token > 0);
        CHECK(row.expires_in_ms > 50000 && row.expires_in_ms <= 60000);
        CHECK_INT(store_lead(a, "ctl-a", "http://a:2", 60000, &row), 1); /* renewed */
        CHECK_INT(row.token, token);
        CHECK_STR(row.url, "http://a:2");
        CHECK_INT(put_job(a, 1), 0);

        CHECK_INT(store_lead(b, "ctl-b", "http://b", 60000, &row), 0);
        CHECK_STR(row.holder, "ctl-a");
        CHECK_INT(row.token, token);
        /* Only outside a transaction. */
        CHECK_INT(store_begin(b), 0);
        CHECK_INT(store_lead(b, "ctl-b", "http://b", 60000, NULL), -EBUSY);
        CHECK_INT(store_rollback(b), 0);

        /* a's lease runs out: b takes over, and a is fenced. */
        CHECK_INT(store_lead(a, "ctl-a", "http://a:2", 1, NULL), 1);
        CHECK_INT(store_leader_get(b, &row), 0);
        for (int i = 0; i < 200 && row.expires_in_ms > 0; i++) {
                usleep(5000);
                CHECK_INT(store_leader_get(b, &row), 0);
        }
        CHECK(row.expires_in_ms <= 0);
        CHECK_INT(store_lead(b, "ctl-b", "http://b", 60000, &row), 1);
        CHECK_INT(row.token, token + 1);
        CHECK_STR(row.holder, "ctl-b");
        CHECK_INT(put_job(a, 2), -ESTALE);
        CHECK_STR(store_last_error(a), "another controller leads this database");
        CHECK(!store_in_transaction(a));
        CHECK_INT(put_job(a, 3), -ESTALE); /* stays fenced */
        CHECK_INT(store_lead(a, "ctl-a", "http://a", 60000, NULL), -ESTALE);
        CHECK_INT(put_job(b, 4), 0);
        int n = 0;
        CHECK_INT(store_jobs_load(b, 0, count_one_job, &n), 0);
        CHECK_INT(n, 2); /* 1 and 4: the fenced Store wrote nothing */
        a = store_close(a);

        /* Resign: another takes over at once, and the resigned Store writes no more. */
        CHECK_INT(store_resign(b), 0);
        CHECK_INT(put_job(b, 5), -ESTALE);
        CHECK_INT(store_open(target, &a), 0);
        CHECK_INT(store_lead(a, "ctl-a", "http://a", 60000, &row), 1);
        CHECK_INT(row.token, token + 2);

        /* The same holder in a new Store (a restarted controller) takes over at once,
         * and the bumped token fences the old one. */
        Store *a2 = NULL;
        CHECK_INT(store_open(target, &a2), 0);
        CHECK_INT(store_lead(a2, "ctl-a", "http://a", 60000, &row), 1);
        CHECK_INT(row.token, token + 3);
        CHECK_INT(put_job(a, 6), -ESTALE);
        CHECK_INT(put_job(a2, 7), 0);

        /* A second Store that shares a2's leadership renews it without a new token, so
         * a2's commits go on; it cannot share what it does not hold. */
        Store *renewer = NULL;
        CHECK_INT(store_open(target, &renewer), 0);
        CHECK_INT(store_lead_share(a, renewer), -EINVAL); /* a is fenced */
        CHECK_INT(store_lead_share(b, renewer), -EINVAL); /* b resigned */
        CHECK_INT(store_lead_share(a2, renewer), 0);
        CHECK_INT(store_lead_share(a2, renewer), -EINVAL); /* it leads already */
        CHECK_INT(store_lead(renewer, "ctl-a", "http://a", 60000, &row), 1);
        CHECK_INT(row.token, token + 3);
        CHECK_INT(put_job(a2, 8), 0);
        CHECK_INT(store_lead(a2, "ctl-a", "http://a", 60000, &row), 1);
        CHECK_INT(row.token, token + 3);
        /* Deposed, both are fenced. */
        CHECK_INT(store_lead(renewer, "ctl-a", "http://a", 1, NULL), 1);
        for (int i = 0; i < 200 && row.expires_in_ms > 0; i++) {
                usleep(5000);
                CHECK_INT(store_leader_get(b, &row), 0);
        }
        CHECK_INT(store_lead(b, "ctl-b", "http://b", 60000, &row), -ESTALE); /* b resigned */
        Store *c = NULL;
        CHECK_INT(store_open(target, &c), 0);
        CHECK_INT(store_lead(c, "ctl-c", "http://c", 60000, &row), 1);
        CHECK_INT(store_lead(renewer, "ctl-a", "http://a", 60000, NULL), -ESTALE);
        CHECK_INT(put_job(a2, 9), -ESTALE);
        store_close(c);
        store_close(renewer);
        store_close(a);
        store_close(a2);
        store_close(b);
}

/* Upserts, an idempotency key's constraint, rollback, and reopening. */
static void test_reopen(void) {
        _cleanup_free_ char *path = fresh_target("state");
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);

        StoreJob job = {.id = 1,
                        .name = "train",
                        .project = "p",
                        .user = "u",
                        .spec = "{}",
                        .state = "pending",
                        .attempt = 2,
                        .reason = "",
                        .exit_code = STORE_NONE,
                        .created_ms = 1,
                        .started_ms = STORE_NONE,
                        .finished_ms = STORE_NONE,
                        .idempotency_key = "key-1",
                        .ckpt_step = STORE_NONE};
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &job), 0);
        /* A job whose row exists is written without its spec: the rest changes, the
         * spec stays. Without a row there is nothing to write to. */
        StoreJob later = job;
        later.spec = NULL;
        later.state = "running";
        later.ckpt_step = 40;
        later.ckpt_path = "/c";
        CHECK_INT(store_job_put(s, &later), 0);
        later.id = 9;
        CHECK_INT(store_job_put(s, &later), -ENOENT);
        StoreRank r1 = {.job = 1,
                        .attempt = 1,
                        .rank = 0,
                        .node = "n1",
                        .state = "failed",
                        .pid = STORE_NONE,
                        .exit_code = 3,
                        .signal = STORE_NONE,
                        .step = STORE_NONE};
        StoreRank r2 = r1;
        r2.attempt = 2;
        r2.state = "running";
        r2.alive = true;
        CHECK_INT(store_rank_put(s, &r1), 0);
        CHECK_INT(store_rank_put(s, &r2), 0);
        StoreEvent ev = {.time_ms = 5, .job = 1, .kind = "job_state", .detail = "a -> b"};
        CHECK_INT(store_event_append(s, &ev), 0);
        CHECK(ev.seq > 0);
        CHECK_INT(store_commit(s), 0);

        /* A second job with the same idempotency key violates the constraint. */
        StoreJob dup = job;
        dup.id = 2;
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &dup), -EEXIST);
        CHECK_INT(store_rollback(s), 0);

        /* Rolled-back writes are gone. */
        CHECK_INT(store_begin(s), 0);
        StoreJob other = job;
        other.id = 3;
        other.idempotency_key = NULL;
        CHECK_INT(store_job_put(s, &other), 0);
        CHECK_INT(store_rollback(s), 0);
        s = store_close(s);

        /* Reopening runs no migration twice and sees exactly the committed state. */
        CHECK_INT(store_open(path, &s), 0);
        int n = 0;
        CHECK_INT(store_jobs_load(s, 0, count_jobs, &n), 0);
        CHECK_INT(n, 1);
        n = 0;
        CHECK_INT(store_events_list(s, 1, 0, 100, count_events, &n), 0);
        CHECK_INT(n, 1);
        n = 0;
        CHECK_INT(store_events_list(s, 0, ev.seq, 100, count_events, &n), 0);
        CHECK_INT(n, 0);
        n = 0;
        CHECK_INT(store_ranks_load(s, 0, check_rank, &n), 0);
        CHECK_INT(n, 1);
        s = store_close(s);
}

typedef struct ReadBack {
        char state[32], reason[32];
        int64_t finished_ms;
        int ranks, alive, step_sum;
} ReadBack;

static int read_job(void *ud, const StoreJob *j) {
        ReadBack *b = ud;
        snprintf(b->state, sizeof(b->state), "%s", j->state);
        snprintf(b->reason, sizeof(b->reason), "%s", j->reason);
        b->finished_ms = j->finished_ms;
        return 0;
}

static int read_rank(void *ud, const StoreRank *r) {
        ReadBack *b = ud;
        b->ranks++;
        b->alive += r->alive;
        b->step_sum += (int) r->step;
        return 0;
}

static ReadBack read_back(Store *s, int64_t id) {
        ReadBack b = {0};
        CHECK_INT(store_jobs_read(s, id, id, read_job, NULL, read_rank, &b), 0);
        return b;
}

static StoreRank plain_rank(int64_t job, int rank) {
        return (StoreRank){.job = job,
                           .attempt = 1,
                           .rank = rank,
                           .node = "n1",
                           .state = "running",
                           .alive = true,
                           .pid = STORE_NONE,
                           .exit_code = STORE_NONE,
                           .signal = STORE_NONE,
                           .step = 1};
}

/* Pages written into the WAL by one transaction updating jobs first..first+n-1, pending
 * in their rows, to state. */
static uint64_t wal_pages_updating(Store *s, int64_t first, int n, const char *state) {
        StoreWalStats before, after;
        store_wal_stats(s, &before);
        CHECK_INT(store_begin(s), 0);
        for (int64_t id = first; id < first + n; id++) {
                StoreJob j = plain_job(id);
                j.spec = NULL;
                j.attempt = 1;
                j.reason = "written again";
                j.state = state;
                CHECK_INT(store_job_put(s, &j), 0);
        }
        CHECK_INT(store_commit(s), 0);
        store_wal_stats(s, &after);
        return after.pages_written - before.pages_written;
}

/*
 * A write that leaves the indexed columns as the row has them does not set them: a
 * job's state and finished time, a rank's alive; one that changes them does. SQLite
 * rewrites an index's entries whenever an UPDATE sets its column, so each such write
 * would put pages of job_state, job_finished or rank_alive into the WAL.
 */
static void test_writes_leave_indexed_columns(void) {
        _cleanup_free_ char *path = fresh_target("kept");
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        CHECK_INT(store_begin(s), 0);
        for (int64_t id = 1; id <= 2000; id++) {
                StoreJob j = plain_job(id);
                j.attempt = 1;
                j.spec = "{\"command\": [\"python3\", \"train.py\"], \"ranks\": 8}";
                CHECK_INT(store_job_put(s, &j), 0);
        }
        StoreRank r0 = plain_rank(1, 0), r1 = plain_rank(1, 1);
        CHECK_INT(store_rank_put(s, &r0), 0);
        CHECK_INT(store_commit(s), 0);

        CHECK_INT(store_begin(s), 0);
        StoreJob j = plain_job(1);
        j.spec = NULL;
        j.attempt = 1;
        j.reason = "later"; /* state and finished time as the row has them */
        CHECK_INT(store_job_put(s, &j), 0);
        r0.step = 5; /* alive as the row has it */
        CHECK_INT(store_rank_put(s, &r0), 0);
        CHECK_INT(store_rank_put(s, &r1), 0); /* no row yet: the whole one is written */
        CHECK_INT(store_commit(s), 0);
        ReadBack b = read_back(s, 1);
        CHECK_STR(b.state, "pending");
        CHECK_INT(b.finished_ms, STORE_NONE);
        CHECK_STR(b.reason, "later");
        CHECK_INT(b.ranks, 2);
        CHECK_INT(b.alive, 2);
        CHECK_INT(b.step_sum, 6);

        CHECK_INT(store_begin(s), 0);
        j.state = "succeeded";
        j.finished_ms = 77;
        CHECK_INT(store_job_put(s, &j), 0);
        r0.alive = false;
        CHECK_INT(store_rank_put(s, &r0), 0);
        CHECK_INT(store_commit(s), 0);
        b = read_back(s, 1);
        CHECK_STR(b.state, "succeeded");
        CHECK_INT(b.finished_ms, 77);
        CHECK_INT(b.alive, 1);

        /* The same rows rewritten: fewer pages where the indexed columns are left. Every
         * 40th job, so that no two share a page of the table. */
        if (!pg_url) {
                uint64_t kept = 0, set = 0;
                for (int i = 0; i < 20; i++) {
                        set += wal_pages_updating(s, 100 + 40 * i, 1, "running");
                        kept += wal_pages_updating(s, 120 + 40 * i, 1, "pending");
                }
                /* One page of the table a job: a write that set state and finished_ms
                 * whatever their values would add a page of each index. */
                CHECK(kept < 2 * 20);
                CHECK(kept < set);
        }
        s = store_close(s);
}

/* Not a database: a clear error, no crash. */
static void test_not_a_database(void) {
        Store *s = NULL;
        _cleanup_free_ char *bad = xasprintf("%s/bad.db", scratch_dir);
        CHECK_INT(util_write_file_atomic(bad, "this is not sqlite, just some text....", 38), 0);
        CHECK(store_open(bad, &s) < 0);
        CHECK(!s);
        CHECK(strlen(store_last_error(NULL)) > 0);
}

/* A database file left readable by others (an older axctld, a copy) is narrowed to
 * 0600 at open, with its WAL: it holds every job's environment and the token hashes. */
static void test_narrowed_mode(void) {
        _cleanup_free_ char *path = xasprintf("%s/wide.db", scratch_dir);
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        s = store_close(s);
        _cleanup_free_ char *wal = xasprintf("%s-wal", path);
        CHECK_INT(util_write_file_atomic(wal, "", 0), 0);
        CHECK_INT(chmod(path, 0644), 0);
        CHECK_INT(chmod(wal, 0666), 0);
        CHECK_INT(store_open(path, &s), 0);
        struct stat st;
        CHECK_INT(stat(path, &st), 0);
        CHECK_INT(st.st_mode & 07777, 0600);
        CHECK_INT(stat(wal, &st), 0);
        CHECK_INT(st.st_mode & 07777, 0600);
        store_close(s);
}

static off_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Writes job id with spec in one transaction. */
static void put_big_job(Store *s, int64_t id, const char *spec) {
        StoreJob job = plain_job(id);
        job.spec = spec;
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &job), 0);
        CHECK_INT(store_commit(s), 0);
}

/*
 * The WAL is checkpointed by the store's own thread, not in a commit: once it holds
 * 1,000 pages the rows reach the database file with no further commit. A commit checkpoints
 * only where the thread has not caught up by 2,000, so the WAL stays under that
 * however fast the writes come. Closing checkpoints the rest and removes it.
 */
static void test_checkpoints_off_commits(void) {
        _cleanup_free_ char *path = fresh_target("wal");
        _cleanup_free_ char *wal = xasprintf("%s-wal", path);
        const off_t frame = 4096 + 24;
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        char *spec = xmalloc(16384);
        memset(spec, ' ', 16383);
        spec[0] = '{';
        spec[16382] = '}';
        spec[16383] = 0;
        int64_t id = 0;
        while (file_size(wal) < 1500 * frame && id < 2000)
                put_big_job(s, ++id, spec);
        CHECK(file_size(wal) >= 1500 * frame); /* no commit checkpointed at 1,000 */
        off_t per_commit = file_size(wal) / frame / id + 1;
        StoreWalStats stats = {0};
        for (int64_t until = util_now_ms() + 10000;
             file_size(path) < id * 16384 && util_now_ms() < until; usleep(2000))
                ;
        store_wal_stats(s, &stats);
        CHECK(file_size(path) >= id * 16384);
        CHECK(stats.checkpoints_on_thread >= 1);
        CHECK_INT(stats.checkpoints_on_commit, 0);
        /* Every commit's pages counted, across the WAL's restarts: at least a page each. */
        CHECK(stats.pages_written >= (uint64_t) id);

        for (int64_t more = 6000 / per_commit; more > 0; more--) {
                put_big_job(s, ++id, spec);
                CHECK(file_size(wal) < (2000 + 2 * per_commit) * frame);
        }
        s = store_close(s);
        CHECK(file_size(wal) < 0);
        free(spec);

        CHECK_INT(store_open(path, &s), 0);
        int n = 0;
        CHECK_INT(store_jobs_load(s, 0, count_one_job, &n), 0);
        CHECK_INT(n, id);
        s = store_close(s);
}

/* A URL's password never reaches a log line. */
static void test_display(void) {
        static const char *const cases[][2] = {
                {"/var/lib/axctl/axctld.db", "/var/lib/axctl/axctld.db"},
                {"postgresql://axctl:s3cret@db:5432/axctl", "postgresql://axctl:***@db:5432/axctl"},
                {"postgres://axctl@db/axctl", "postgres://axctl@db/axctl"},
                {"postgresql://db/axctl?user=a&password=s3cret", "postgresql://db/axctl?***"},
                {"host=db dbname=axctl password=s3cret", "(a PostgreSQL connection string)"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *shown = store_target_display(cases[i][0]);
                CHECK_STR(shown, cases[i][1]);
        }
        CHECK(store_target_is_url("postgresql://db/x"));
        CHECK(store_target_is_url("host=/run/postgresql dbname=x"));
        CHECK(!store_target_is_url("./axctld.db"));
}

static char *fresh_target(const char *name) {
        if (!pg_url)
                return xasprintf("%s/%s.db", scratch_dir, name);
        _cleanup_free_ char *create = xasprintf("CREATE SCHEMA %s", name);
        _cleanup_free_ char *done = raw_sql(pg_url, create);
        CHECK(done);
        return xasprintf("%s%coptions=-csearch_path%%3D%s", pg_url, strchr(pg_url, '?') ? '&' : '?',
                         name);
}

/* Both backends hold the same tables with the same columns in the same order. */
static void test_same_schema(void) {
        _cleanup_free_ char *lite = xasprintf("%s/schema.db", scratch_dir);
        _cleanup_free_ char *pg = fresh_target("schema");
        Store *s = NULL;
        CHECK_INT(store_open(lite, &s), 0);
        s = store_close(s);
        CHECK_INT(store_open(pg, &s), 0);
        s = store_close(s);
        const char *saved = pg_url;
        pg_url = NULL;
        _cleanup_free_ char *lite_columns = raw_sql(
                lite, "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
                      " WHERE m.type = 'table' ORDER BY m.name, p.cid");
        pg_url = saved;
        _cleanup_free_ char *pg_columns = raw_sql(
                pg, "SELECT table_name, column_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND table_name <> 'schema_version'"
                    " ORDER BY table_name COLLATE \"C\", ordinal_position");
        CHECK(lite_columns && strstr(lite_columns, "leader|expires_ms\n"));
        CHECK_STR(pg_columns, lite_columns);
}

/* A connection the server dropped: the transaction under way fails, and the next one
 * runs on a new connection, with the statements prepared again. */
static void test_lost_connection(void) {
        _cleanup_free_ char *target = fresh_target("lost");
        Store *s = NULL;
        CHECK_INT(store_open(target, &s), 0);
        CHECK_INT(put_job(s, 1), 0);
        CHECK_INT(store_begin(s), 0);
        StoreJob j = plain_job(2);
        CHECK_INT(store_job_put(s, &j), 0);
        _cleanup_free_ char *killed =
                raw_sql(pg_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                " WHERE application_name = 'axctld'");
        CHECK_STR(killed, "t\n");
        int r = store_commit(s);
        CHECK(r == -ENOTCONN || r == -EIO);
        CHECK(strlen(store_last_error(s)) > 0);
        /* The rollback after it keeps the reason: there is nothing left to roll back. */
        _cleanup_free_ char *why = xstrdup(store_last_error(s));
        CHECK_INT(store_rollback(s), 0);
        CHECK_STR(store_last_error(s), why);
        CHECK_INT(put_job(s, 3), 0);
        int n = 0;
        CHECK_INT(store_jobs_load(s, 0, count_one_job, &n), 0);
        CHECK_INT(n, 2); /* 1 and 3: 2's commit was lost and said so */
        store_close(s);
}

/* Controllers starting at once on an empty database: one migrates, the others wait
 * for it and find the schema done. */
static void test_concurrent_migration(void) {
        _cleanup_free_ char *target = fresh_target("race");
        pid_t pids[4];
        for (int i = 0; i < 4; i++) {
                pids[i] = fork();
                CHECK(pids[i] >= 0);
                if (pids[i] == 0) {
                        Store *s = NULL;
                        int r = store_open(target, &s);
                        if (r < 0)
                                fprintf(stderr, "store_open: %s\n", store_last_error(NULL));
                        store_close(s);
                        _exit(r < 0 ? 1 : 0);
                }
        }
        for (int i = 0; i < 4; i++) {
                int status;
                CHECK_INT(waitpid(pids[i], &status, 0), pids[i]);
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        _cleanup_free_ char *version = raw_sql(target, "SELECT version FROM schema_version");
        CHECK_STR(version, "12\n");
}

/* The token table's stamp changes with every create and revoke, also a revoke and a
 * create of the same name whose clock ran behind the newest token's. */
static void test_token_stamp(void) {
        _cleanup_free_ char *target = fresh_target("tokens");
        Store *s;
        CHECK_INT(store_open(target, &s), 0);
        StoreTokenStamp empty, one, two, revoked, rotated;
        CHECK_INT(store_token_stamp(s, &empty), 0);
        CHECK_INT(empty.tokens, 0);
        StoreToken t = {.name = "bob", .hash = "hb", .role = "admin", .created_ms = 300};
        CHECK_INT(store_token_insert(s, &t), 0);
        CHECK_INT(store_token_stamp(s, &one), 0);
        CHECK(memcmp(&one, &empty, sizeof(one)) != 0);
        t = (StoreToken){.name = "alice", .hash = "ha1", .role = "user", .created_ms = 100};
        CHECK_INT(store_token_insert(s, &t), 0);
        CHECK_INT(store_token_stamp(s, &two), 0);
        CHECK(memcmp(&two, &one, sizeof(two)) != 0);
        CHECK_INT(store_token_revoke(s, "alice", 200), 0);
        CHECK_INT(store_token_stamp(s, &revoked), 0);
        CHECK(memcmp(&revoked, &two, sizeof(two)) != 0);
        t = (StoreToken){.name = "alice", .hash = "ha2", .role = "user", .created_ms = 50};
        CHECK_INT(store_token_insert(s, &t), 0); /* takes the revoked row's place */
        CHECK_INT(store_token_stamp(s, &rotated), 0);
        CHECK(memcmp(&rotated, &two, sizeof(two)) != 0);
        CHECK(memcmp(&rotated, &revoked, sizeof(two)) != 0);
        store_close(s);
}

/* SQLite's page cache takes the size asked, never below its default; PostgreSQL's server
 * keeps its own. */
static void test_cache_hint(void) {
        _cleanup_free_ char *target = fresh_target("cache");
        Store *s;
        CHECK_INT(store_open(target, &s), 0);
        CHECK_INT(store_cache_hint(s, 16000), pg_url ? 0 : 16000);
        CHECK_INT(store_cache_hint(s, 100), pg_url ? 0 : 2000);
        store_close(s);
}

int main(void) {
        _cleanup_free_ char *dir = check_tmpdir("axctl-store");
        scratch_dir = dir;
        pg_url = getenv("AXTEST_PG_URL");
        if (pg_url && !*pg_url)
                pg_url = NULL;
        test_reopen();
        test_writes_leave_indexed_columns();
        test_idempotency_key_per_project();
        test_jobs_load_cutoff();
        test_jobs_load_every_unended_state();
        test_goodput();
        test_token_stamp();
        test_cache_hint();
        _cleanup_free_ char *lead = fresh_target("lead");
        test_leadership(lead);
        test_display();
        if (pg_url) {
                test_same_schema();
                test_lost_connection();
                test_concurrent_migration();
        } else {
                test_not_a_database();
                test_check_file(dir);
                test_narrowed_mode();
                test_checkpoints_off_commits();
        }
        util_rm_rf(dir);
        printf("store (%s): ok\n", pg_url ? "postgresql" : "sqlite");
        return 0;
}
