/* SPDX-License-Identifier: MIT */
/* Goodput accounting and checkpoint advice; see goodput.h and docs/GOODPUT.md. */
#include "goodput.h"

#include <math.h>
#include <stdlib.h>

#include "health.h"
#include "util.h"

static const char *const bucket_names[_GOODPUT_BUCKET_MAX] = {
        [GOODPUT_PRODUCTIVE] = "productive",
        [GOODPUT_QUEUEING] = "queueing",
        [GOODPUT_STARTUP] = "startup",
        [GOODPUT_LOST_WORK] = "lost_work",
        [GOODPUT_DETECTION] = "detection",
        [GOODPUT_RESTART] = "restart",
        [GOODPUT_HANG] = "hang",
        [GOODPUT_PREEMPTION] = "preemption",
        [GOODPUT_CHECKPOINT] = "checkpoint",
};

const char *goodput_bucket_to_string(GoodputBucket b) {
        return b >= 0 && b < _GOODPUT_BUCKET_MAX ? bucket_names[b] : NULL;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
        return v < lo ? lo : v > hi ? hi : v;
}

typedef struct Timeline {
        GoodputSegment *s;
        int n, cap;
} Timeline;

/* Appends [from, to) unless it is empty. */
static void emit(Timeline *t, GoodputBucket b, int attempt, int64_t from, int64_t to,
                 int64_t ckpt_ms) {
        if (to <= from)
                return;
        GROW(t->s, t->n, t->cap);
        t->s[t->n++] = (GoodputSegment){.bucket = b,
                                        .attempt = attempt,
                                        .from_ms = from,
                                        .to_ms = to,
                                        .ckpt_ms = clamp(ckpt_ms, 0, to - from)};
}

/* Where the work since the last checkpoint goes when an attempt ends for reason r:
 * nowhere (it counts) while live, after success or cancellation. */
static GoodputBucket loss_bucket(EndReason r) {
        switch (health_classify(r)) {
        case FAILURE_NONE:
        case FAILURE_CANCELLED:
                return _GOODPUT_BUCKET_INVALID;
        case FAILURE_PREEMPTED:
                return GOODPUT_PREEMPTION;
        default:
                return GOODPUT_LOST_WORK;
        }
}

/* The bucket of the time after an attempt that ended for reason r, until the next. */
static GoodputBucket gap_bucket(EndReason r) {
        switch (health_classify(r)) {
        case FAILURE_NONE:
        case FAILURE_CANCELLED:
                return GOODPUT_PRODUCTIVE; /* the job ends with it: an instant at most */
        case FAILURE_PREEMPTED:
                return GOODPUT_QUEUEING; /* back in the queue, through no failure */
        default:
                return GOODPUT_RESTART;
        }
}

/* Cuts one attempt, placed at s_ms and over at e_ms, into its segments. */
static void attempt_segments(Timeline *t, const GoodputAttempt *a, int64_t s_ms, int64_t e_ms) {
        bool live = a->ended_for == _END_REASON_INVALID;
        /* Work starts with the first progress; a trainer that reports no step is taken
         * to work from the moment every rank runs. */
        int64_t first = a->first_progress_ms > 0 ? a->first_progress_ms : a->running_ms;
        int64_t p_ms = first > 0 ? clamp(first, s_ms, e_ms) : e_ms;
        /* Where the work ended: the last progress of a hang, the evidence's time of a
         * failure noticed later (a lost node's last sync), else the end. */
        int64_t f_ms = e_ms;
        GoodputBucket tail = GOODPUT_DETECTION;
        if (!live && a->ended_for == END_HANG) {
                tail = GOODPUT_HANG;
                f_ms = a->last_progress_ms > 0 ? clamp(a->last_progress_ms, p_ms, e_ms) : p_ms;
        } else if (!live && a->failed_ms > 0)
                f_ms = clamp(a->failed_ms, s_ms, e_ms);
        if (p_ms > f_ms)
                p_ms = f_ms;
        emit(t, GOODPUT_STARTUP, a->attempt, s_ms, p_ms, 0);
        GoodputBucket loss = live ? _GOODPUT_BUCKET_INVALID : loss_bucket(a->ended_for);
        /* A failure throws away what followed the attempt's last checkpoint (all of its
         * work when it committed none). */
        int64_t kept_ms = f_ms;
        if (loss != _GOODPUT_BUCKET_INVALID)
                kept_ms = a->last_ckpt_ms >= p_ms ? clamp(a->last_ckpt_ms, p_ms, f_ms) : p_ms;
        emit(t, GOODPUT_PRODUCTIVE, a->attempt, p_ms, kept_ms, a->ckpt_stall_ms);
        if (loss != _GOODPUT_BUCKET_INVALID)
                emit(t, loss, a->attempt, kept_ms, f_ms, 0);
        emit(t, tail, a->attempt, f_ms, e_ms, 0);
}

GoodputSegment *goodput_timeline(const GoodputJob *job, int64_t now_ms, int *ret_n) {
        Timeline t = {0};
        int64_t end_ms = job->finished_ms > 0 ? job->finished_ms : now_ms;
        int64_t prev_ms = job->created_ms;
        GoodputBucket gap = GOODPUT_QUEUEING;
        int prev_attempt = 0;
        for (int i = 0; i < job->n_attempts; i++) {
                const GoodputAttempt *a = &job->attempts[i];
                int64_t s_ms = a->started_ms > prev_ms ? a->started_ms : prev_ms;
                emit(&t, gap, prev_attempt, prev_ms, s_ms, 0);
                bool live = a->ended_for == _END_REASON_INVALID;
                int64_t e_ms = live ? end_ms : a->ended_ms;
                if (e_ms < s_ms)
                        e_ms = s_ms;
                attempt_segments(&t, a, s_ms, e_ms);
                prev_ms = e_ms;
                prev_attempt = a->attempt;
                gap = live ? GOODPUT_PRODUCTIVE : gap_bucket(a->ended_for);
        }
        emit(&t, gap, prev_attempt, prev_ms, end_ms > prev_ms ? end_ms : prev_ms, 0);
        *ret_n = t.n;
        return t.s;
}

void goodput_totals_add(GoodputTotals *t, const GoodputSegment *s, int n, int64_t since_ms,
                        int64_t until_ms, int64_t weight) {
        for (int i = 0; i < n; i++) {
                int64_t from = s[i].from_ms > since_ms ? s[i].from_ms : since_ms;
                int64_t to = s[i].to_ms < until_ms ? s[i].to_ms : until_ms;
                if (to <= from)
                        continue;
                int64_t part = to - from, ckpt = 0;
                if (s[i].bucket == GOODPUT_PRODUCTIVE && s[i].ckpt_ms > 0)
                        ckpt = (int64_t) ((double) s[i].ckpt_ms * (double) part /
                                          (double) (s[i].to_ms - s[i].from_ms));
                t->ms[GOODPUT_CHECKPOINT] += ckpt * weight;
                t->ms[s[i].bucket] += (part - ckpt) * weight;
                t->elapsed_ms += part * weight;
        }
}

int64_t goodput_allocated_ms(const GoodputTotals *t) {
        return t->elapsed_ms - t->ms[GOODPUT_QUEUEING];
}

double goodput_ratio(const GoodputTotals *t) {
        int64_t allocated = goodput_allocated_ms(t);
        return allocated > 0 ? (double) t->ms[GOODPUT_PRODUCTIVE] / (double) allocated : -1;
}

double goodput_expected(double interval_s, double cost_s, double mtbf_s, double recovery_s) {
        if (interval_s <= 0 || mtbf_s <= 0)
                return 0;
        double period = interval_s + (cost_s > 0 ? cost_s : 0);
        double failing = (recovery_s + period / 2) / mtbf_s;
        double g = interval_s / period * (1 - failing);
        return g < 0 ? 0 : g > 1 ? 1 : g;
}

bool goodput_advise(const GoodputAdviceInput *in, GoodputAdvice *ret) {
        if (in->cost_s <= 0 || in->mtbf_s <= 0)
                return false;
        ret->advised_interval_s = sqrt(2 * in->cost_s * in->mtbf_s);
        ret->expected_advised =
                goodput_expected(ret->advised_interval_s, in->cost_s, in->mtbf_s, in->recovery_s);
        ret->expected_current = in->interval_s > 0 ? goodput_expected(in->interval_s, in->cost_s,
                                                                      in->mtbf_s, in->recovery_s)
                                                   : -1;
        return true;
}
