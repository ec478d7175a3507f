/* SPDX-License-Identifier: MIT */
/* Tests of goodput accounting: every ms in exactly one bucket, each cause where it
 * belongs, windows, and the checkpoint advice. */
#include <math.h>
#include <stdlib.h>

#include "../tests/unit/check.h"
#include "goodput.h"

/* The segments follow each other without gap or overlap from created to the end, and
 * the totals sum to the elapsed time. */
static GoodputTotals check_timeline(const GoodputJob *job, int64_t now, int64_t end) {
        int n;
        GoodputSegment *s = goodput_timeline(job, now, &n);
        int64_t at = job->created_ms;
        for (int i = 0; i < n; i++) {
                CHECK_INT(s[i].from_ms, at);
                CHECK(s[i].to_ms > s[i].from_ms);
                CHECK(s[i].ckpt_ms <= s[i].to_ms - s[i].from_ms);
                at = s[i].to_ms;
        }
        CHECK_INT(at, end);
        GoodputTotals t = {0};
        goodput_totals_add(&t, s, n, 0, INT64_MAX, 1);
        int64_t sum = 0;
        for (int b = 0; b < _GOODPUT_BUCKET_MAX; b++)
                sum += t.ms[b];
        CHECK_INT(sum, t.elapsed_ms);
        CHECK_INT(t.elapsed_ms, end - job->created_ms);
        free(s);
        return t;
}

/*
 * Submitted at 0, placed at 10, running at 12, first step at 15, checkpoints up to 60
 * (3 of stall), node last seen at 80, lost noticed at 86; placed again at 90 after the
 * backoff, first step at 95, succeeded at 200, finished at 200.
 */
static void test_failure_and_recovery(void) {
        GoodputAttempt a[] = {
                {.attempt = 1,
                 .started_ms = 10,
                 .running_ms = 12,
                 .first_progress_ms = 15,
                 .last_progress_ms = 80,
                 .last_ckpt_ms = 60,
                 .ckpt_stall_ms = 3,
                 .failed_ms = 80,
                 .ended_ms = 86,
                 .ended_for = END_NODE_LOST},
                {.attempt = 2,
                 .started_ms = 90,
                 .running_ms = 92,
                 .first_progress_ms = 95,
                 .last_progress_ms = 199,
                 .ckpt_stall_ms = -5, /* noise below zero costs nothing */
                 .ended_ms = 200,
                 .ended_for = END_SUCCEEDED},
        };
        GoodputJob job = {.created_ms = 0, .finished_ms = 200, .attempts = a, .n_attempts = 2};
        GoodputTotals t = check_timeline(&job, 1000, 200);
        CHECK_INT(t.ms[GOODPUT_QUEUEING], 10);
        CHECK_INT(t.ms[GOODPUT_STARTUP], 5 + 5);
        CHECK_INT(t.ms[GOODPUT_CHECKPOINT], 3);
        CHECK_INT(t.ms[GOODPUT_PRODUCTIVE], (60 - 15 - 3) + (200 - 95));
        CHECK_INT(t.ms[GOODPUT_LOST_WORK], 20);
        CHECK_INT(t.ms[GOODPUT_DETECTION], 6);
        CHECK_INT(t.ms[GOODPUT_RESTART], 4);
        CHECK_INT(goodput_allocated_ms(&t), 190);
        CHECK(fabs(goodput_ratio(&t) - 147.0 / 190.0) < 1e-9);
}

/* A hang: last progress to the verdict is hang time; work since the checkpoint is lost.
 * Then a preemption: its unsaved work is the preemption's, and it queues again. */
static void test_hang_and_preemption(void) {
        GoodputAttempt a[] = {
                {.attempt = 1,
                 .started_ms = 0,
                 .running_ms = 2,
                 .first_progress_ms = 4,
                 .last_progress_ms = 50,
                 .last_ckpt_ms = 40,
                 .ended_ms = 80,
                 .ended_for = END_HANG},
                {.attempt = 2,
                 .started_ms = 85,
                 .first_progress_ms = 90,
                 .last_ckpt_ms = 100,
                 .ended_ms = 110,
                 .ended_for = END_PREEMPTED},
                {.attempt = 3, .started_ms = 130, .ended_for = _END_REASON_INVALID},
        };
        GoodputJob job = {.created_ms = 0, .attempts = a, .n_attempts = 3};
        GoodputTotals t = check_timeline(&job, 150, 150);
        CHECK_INT(t.ms[GOODPUT_HANG], 30);
        CHECK_INT(t.ms[GOODPUT_LOST_WORK], 10);
        CHECK_INT(t.ms[GOODPUT_RESTART], 5);
        CHECK_INT(t.ms[GOODPUT_PREEMPTION], 10);
        CHECK_INT(t.ms[GOODPUT_QUEUEING], 20);
        /* The live attempt never progressed nor ran: all of it is start-up so far. */
        CHECK_INT(t.ms[GOODPUT_STARTUP], 4 + 5 + 20);
        CHECK_INT(t.ms[GOODPUT_PRODUCTIVE], 36 + 10);
        CHECK_INT(t.ms[GOODPUT_DETECTION], 0);
}

/* Without a checkpoint a failure loses the whole attempt's work; a trainer that reports
 * no steps works from the moment it runs. A job cancelled while queued only queued. */
static void test_edges(void) {
        GoodputAttempt a[] = {
                {.attempt = 1,
                 .started_ms = 100,
                 .running_ms = 110,
                 .ended_ms = 150,
                 .ended_for = END_RANK_EXIT},
        };
        GoodputJob job = {.created_ms = 100, .finished_ms = 160, .attempts = a, .n_attempts = 1};
        GoodputTotals t = check_timeline(&job, 500, 160);
        CHECK_INT(t.ms[GOODPUT_STARTUP], 10);
        CHECK_INT(t.ms[GOODPUT_LOST_WORK], 40);
        CHECK_INT(t.ms[GOODPUT_RESTART], 10);
        CHECK_INT(goodput_ratio(&t), 0);

        GoodputJob queued = {.created_ms = 5, .finished_ms = 25};
        t = check_timeline(&queued, 100, 25);
        CHECK_INT(t.ms[GOODPUT_QUEUEING], 20);
        CHECK(goodput_ratio(&t) < 0); /* nothing allocated: no figure */

        /* Times out of order (clock steps, a record lost in a crash) still sum exactly. */
        GoodputAttempt odd[] = {
                {.attempt = 1,
                 .started_ms = 50,
                 .running_ms = 40,
                 .first_progress_ms = 300,
                 .last_ckpt_ms = 10,
                 .failed_ms = 5,
                 .ended_ms = 45,
                 .ended_for = END_NODE_LOST},
                {.attempt = 2, .started_ms = 30, .ended_for = _END_REASON_INVALID},
        };
        GoodputJob weird = {.created_ms = 20, .attempts = odd, .n_attempts = 2};
        check_timeline(&weird, 70, 70);
}

/* A window counts only what lies inside it; the checkpoint share follows the part. */
static void test_window(void) {
        GoodputAttempt a[] = {{.attempt = 1,
                               .started_ms = 1,
                               .first_progress_ms = 1,
                               .ckpt_stall_ms = 10,
                               .ended_for = _END_REASON_INVALID}};
        GoodputJob job = {.created_ms = 1, .attempts = a, .n_attempts = 1};
        int n;
        GoodputSegment *s = goodput_timeline(&job, 101, &n);
        GoodputTotals t = {0};
        goodput_totals_add(&t, s, n, 51, 1000, 2);
        CHECK_INT(t.elapsed_ms, 100);
        CHECK_INT(t.ms[GOODPUT_CHECKPOINT], 10);
        CHECK_INT(t.ms[GOODPUT_PRODUCTIVE], 90);
        free(s);
        CHECK_STR(goodput_bucket_to_string(GOODPUT_LOST_WORK), "lost_work");
        CHECK(goodput_bucket_to_string(_GOODPUT_BUCKET_MAX) == NULL);
}

/* Young/Daly: sqrt(2 C M), and it beats intervals on either side. */
static void test_advice(void) {
        GoodputAdvice adv;
        GoodputAdviceInput in = {
                .interval_s = 3600, .cost_s = 60, .mtbf_s = 3 * 3600, .recovery_s = 300};
        CHECK(goodput_advise(&in, &adv));
        CHECK(fabs(adv.advised_interval_s - sqrt(2.0 * 60 * 3 * 3600)) < 1e-6);
        CHECK(adv.expected_advised > adv.expected_current);
        CHECK(adv.expected_advised >=
              goodput_expected(adv.advised_interval_s * 1.5, 60, 3 * 3600, 300));
        CHECK(adv.expected_advised >=
              goodput_expected(adv.advised_interval_s / 1.5, 60, 3 * 3600, 300));
        CHECK(adv.expected_advised > 0.8 && adv.expected_advised < 1);
        in.interval_s = 0;
        CHECK(goodput_advise(&in, &adv));
        CHECK(adv.expected_current < 0);
        in.cost_s = 0;
        CHECK(!goodput_advise(&in, &adv));
        /* Failing faster than one can recover leaves nothing. */
        CHECK(goodput_expected(100, 10, 50, 100) == 0);
}

int main(void) {
        test_failure_and_recovery();
        test_hang_and_preemption();
        test_edges();
        test_window();
        test_advice();
        printf("goodput: ok\n");
        return 0;
}
