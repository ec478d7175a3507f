/* SPDX-License-Identifier: MIT */
/* Tests of the restart, backoff, lease and quarantine policy. */
#include <stdio.h>

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
        printf("health: ok\n");
        return 0;
}
