/* SPDX-License-Identifier: MIT */
/* Tests of the restart, backoff, lease and quarantine policy. */
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "health.h"

int main(void) {
        RestartPolicy p = {.max_restarts = 2, .backoff_initial_s = 0, .backoff_max_s = 5,
                           .retry_exit_codes = {75}, .n_retry_exit_codes = 1,
                           .fatal_exit_codes = {2}, .n_fatal_exit_codes = 1};
        HealthFailure crash = {.reason = END_RANK_EXIT, .exit_code = 1};
        HealthVerdict v = health_decide(&p, 0, &crash);
        CHECK_INT(v.action, HEALTH_RESTART);
        CHECK_INT(v.backoff_ms, 0); /* the first restart is immediate by default */
        crash.consecutive = 1;
        v = health_decide(&p, 1, &crash);
        CHECK_INT(v.action, HEALTH_RESTART);
        CHECK_INT(v.backoff_ms, 1000);
        crash.consecutive = 0; /* progress made: at once again */
        CHECK_INT(health_decide(&p, 1, &crash).backoff_ms, 0);
        v = health_decide(&p, 2, &crash);
        CHECK_INT(v.action, HEALTH_FAIL);

        HealthFailure fatal = {.reason = END_RANK_EXIT, .exit_code = 2};
        CHECK_INT(health_decide(&p, 0, &fatal).action, HEALTH_FAIL);
        HealthFailure retry = {.reason = END_RANK_EXIT, .exit_code = 75};
        CHECK_INT(health_decide(&p, 2, &retry).action, HEALTH_RESTART_FREE);
        HealthFailure sig = {.reason = END_RANK_EXIT, .exit_code = -1, .signal = 9};
        CHECK_INT(health_decide(&p, 0, &sig).action, HEALTH_RESTART);
        HealthFailure pre = {.reason = END_PREEMPTED, .exit_code = -1};
        CHECK_INT(health_decide(&p, 5, &pre).action, HEALTH_RESTART_FREE);

        /* Exponential, capped. */
        CHECK_INT(health_backoff_ms(&p, 2), 2000);
        CHECK_INT(health_backoff_ms(&p, 3), 4000);
        CHECK_INT(health_backoff_ms(&p, 4), 5000);
        CHECK_INT(health_backoff_ms(&p, 40), 5000);
        p.backoff_initial_s = 3;
        CHECK_INT(health_backoff_ms(&p, 0), 3000);

        CHECK(!health_node_lost(1000, 7000, 5000, 1000));
        CHECK(health_node_lost(1000, 7001, 5000, 1000));

        int64_t times[4];
        int n = 0;
        CHECK(!health_blame_record(times, &n, 4, 0, 100, 3));
        CHECK(!health_blame_record(times, &n, 4, 200, 100, 3)); /* the first fell out of the window */
        CHECK(!health_blame_record(times, &n, 4, 250, 100, 3));
        CHECK(health_blame_record(times, &n, 4, 260, 100, 3));
        CHECK(!health_blame_record(times, &n, 4, 270, 100, 0)); /* disabled */
        CHECK_INT(n, 4);

        /* Classes: only lease expiry and failed health checks are the node's. */
        CHECK_INT(health_classify(END_RANK_EXIT), FAILURE_JOB);
        CHECK_INT(health_classify(END_HANG), FAILURE_JOB);
        CHECK_INT(health_classify(END_START_FAILED), FAILURE_START);
        CHECK_INT(health_classify(END_NODE_LOST), FAILURE_NODE);
        CHECK_INT(health_classify(END_UNHEALTHY), FAILURE_NODE);
        CHECK_INT(health_classify(END_DRAINED), FAILURE_PREEMPTED);
        CHECK(strcmp(failure_class_to_string(FAILURE_START), "start") == 0);

        /* A start failure fails at once, whatever the budget. */
        HealthFailure start = {.reason = END_START_FAILED, .exit_code = 127};
        CHECK_INT(health_decide(&p, 0, &start).action, HEALTH_FAIL);

        /* The Nth job failure in a row without progress fails the job, retry codes too;
         * node faults do not count. */
        RestartPolicy q = p;
        q.max_restarts = 100;
        q.backoff_initial_s = 0;
        q.max_failures_without_progress = 3;
        HealthFailure loop = {.reason = END_RANK_EXIT, .exit_code = 75, .consecutive = 1,
                              .without_progress = 2};
        v = health_decide(&q, 0, &loop);
        CHECK_INT(v.action, HEALTH_RESTART_FREE);
        CHECK_INT(v.backoff_ms, 1000); /* retried codes back off like any failure */
        loop.consecutive = 2;
        loop.without_progress = 3;
        v = health_decide(&q, 0, &loop);
        CHECK_INT(v.action, HEALTH_FAIL);
        CHECK(strstr(v.why, "3 times in a row without progress"));
        HealthFailure lost = {.reason = END_NODE_LOST, .exit_code = -1, .without_progress = 9};
        CHECK_INT(health_decide(&q, 0, &lost).action, HEALTH_RESTART);

        /* backoff_max_s 0 still waits a second between failures without progress. */
        RestartPolicy spin = {.max_restarts = 10, .backoff_max_s = 0};
        CHECK_INT(health_backoff_ms(&spin, 0), 0);
        CHECK_INT(health_backoff_ms(&spin, 1), HEALTH_BACKOFF_FLOOR_MS);
        CHECK_INT(health_backoff_ms(&spin, 9), HEALTH_BACKOFF_FLOOR_MS);

        /* Suspicion: one owner's jobs never add up to evidence, however many. */
        HealthSuspect sus[8];
        int ns = 0;
        for (int i = 0; i < 20; i++)
                CHECK(!health_suspect_record(sus, &ns, 8,
                                             (HealthSuspect){ .job = i, .owner = 7, .at_ms = i },
                                             1000, 3));
        CHECK_INT(ns, 8);
        /* Three different jobs of two owners within the window do. */
        ns = 0;
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){ 1, 7, 0 }, 1000, 3));
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){ 1, 7, 10 }, 1000, 3));
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){ 2, 8, 20 }, 1000, 3));
        CHECK(health_suspect_record(sus, &ns, 8, (HealthSuspect){ 3, 7, 30 }, 1000, 3));
        /* ... but not once the first has left the window. */
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){ 2, 8, 1015 }, 1000, 3));
        CHECK(!health_suspect_record(sus, &ns, 8, (HealthSuspect){ 4, 8, 30 }, 1000, 0));
        printf("health: ok\n");
        return 0;
}
