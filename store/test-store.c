/* SPDX-License-Identifier: MIT */
/* Unit test of the SQLite store: migrations, upserts, transactions, reloading. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/unit/check.h"
#include "store.h"
#include "util.h"

static int count_jobs(void *ud, const StoreJob *j) {
        int *n = ud;
        (*n)++;
        CHECK_STR(j->name, "train");
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
static void test_idempotency_key_per_project(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/v4.db", dir);
        CHECK_INT(store_create_at_version(path, 4), 0);
        sqlite3 *db;
        CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
        CHECK_INT(sqlite3_exec(db,
                               "INSERT INTO job (id, name, project, user, priority, spec, state,"
                               " attempt, restarts, reason, created_ms, idempotency_key)"
                               " VALUES (1, 'a', 'p1', 'u', 0, '{}', 'pending', 0, 0, '', 1, 'k'),"
                               " (2, 'b', 'p1', 'u', 0, '{}', 'pending', 0, 0, '', 1, NULL);",
                               NULL, NULL, NULL),
                  SQLITE_OK);
        /* Version 4 knew one key per controller: another project could not have it. */
        CHECK(sqlite3_exec(db,
                           "INSERT INTO job (id, name, project, user, priority, spec, state,"
                           " attempt, restarts, reason, created_ms, idempotency_key)"
                           " VALUES (3, 'c', 'p2', 'u', 0, '{}', 'pending', 0, 0, '', 1, 'k');",
                           NULL, NULL, NULL) != SQLITE_OK);
        sqlite3_close(db);

        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);
        StoreJob job = {.id = 3,
                        .name = "c",
                        .project = "p2",
                        .user = "u",
                        .spec = "{}",
                        .state = "pending",
                        .reason = "",
                        .exit_code = STORE_NONE,
                        .created_ms = 1,
                        .started_ms = STORE_NONE,
                        .finished_ms = STORE_NONE,
                        .idempotency_key = "k",
                        .ckpt_step = STORE_NONE};
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
static void test_goodput(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/goodput.db", dir);
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
        StoreJob j = {.name = "j",
                      .project = "p",
                      .user = "u",
                      .spec = "{}",
                      .reason = "",
                      .exit_code = STORE_NONE,
                      .created_ms = 1,
                      .started_ms = STORE_NONE,
                      .finished_ms = STORE_NONE,
                      .ckpt_step = STORE_NONE,
                      .queued_ms = STORE_NONE,
                      .best_step = STORE_NONE};
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
        CHECK_INT(store_job_load(s, 4, ignore_job, check_attempt_records, ignore_rank, &n), 0);
        CHECK_INT(n, 1);
        s = store_close(s);
}

static int count_one_job(void *ud, const StoreJob *j) {
        (void) j;
        (*(int *) ud)++;
        return 0;
}

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
        store_close(a);
        store_close(a2);
        store_close(b);
}

int main(void) {
        _cleanup_free_ char *dir = check_tmpdir("axctl-store");
        _cleanup_free_ char *path = xasprintf("%s/state.db", dir);
        Store *s = NULL;
        CHECK_INT(store_open(path, &s), 0);

        StoreJob job = {.id = 1,
                        .name = "train",
                        .project = "p",
                        .user = "u",
                        .spec = "{}",
                        .state = "running",
                        .attempt = 2,
                        .reason = "",
                        .exit_code = STORE_NONE,
                        .created_ms = 1,
                        .started_ms = STORE_NONE,
                        .finished_ms = STORE_NONE,
                        .idempotency_key = "key-1",
                        .ckpt_step = 40,
                        .ckpt_path = "/c"};
        CHECK_INT(store_begin(s), 0);
        CHECK_INT(store_job_put(s, &job), 0);
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
        CHECK_INT(store_ranks_load(s, check_rank, &n), 0);
        CHECK_INT(n, 1);
        s = store_close(s);

        /* Not a database: a clear error, no crash. */
        _cleanup_free_ char *bad = xasprintf("%s/bad.db", dir);
        CHECK_INT(util_write_file_atomic(bad, "this is not sqlite, just some text....", 38), 0);
        CHECK(store_open(bad, &s) < 0);
        CHECK(!s);
        test_idempotency_key_per_project(dir);
        test_check_file(dir);
        test_goodput(dir);
        _cleanup_free_ char *lead_path = xasprintf("%s/lead.db", dir);
        test_leadership(lead_path);
        util_rm_rf(dir);
        printf("store: ok\n");
        return 0;
}
