/* SPDX-License-Identifier: MIT */
/* Failure classes, restart, backoff, lease and quarantine policy; see health.h. */
#include "health.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const failure_class_names[_FAILURE_CLASS_MAX] = {
        [FAILURE_NONE] = "none",           [FAILURE_JOB] = "job",
        [FAILURE_START] = "start",         [FAILURE_NODE] = "node",
        [FAILURE_PREEMPTED] = "preempted", [FAILURE_CANCELLED] = "cancelled",
};

const char *failure_class_to_string(FailureClass c) {
        return c >= 0 && c < _FAILURE_CLASS_MAX ? failure_class_names[c] : NULL;
}

FailureClass health_classify(EndReason r) {
        switch (r) {
        case END_SUCCEEDED:
                return FAILURE_NONE;
        case END_START_FAILED:
                return FAILURE_START;
        case END_NODE_LOST:
        case END_UNHEALTHY:
        case END_NODE_FAULT:
        case END_START_TIMEOUT:
                return FAILURE_NODE;
        case END_PREEMPTED:
        case END_DRAINED:
                return FAILURE_PREEMPTED;
        case END_CANCELLED:
                return FAILURE_CANCELLED;
        default:
                /* Exits, signals and hangs carry no evidence against the hardware. */
                return FAILURE_JOB;
        }
}

HealthVerdict health_decide(const RestartPolicy *p, int restarts_used, const HealthFailure *f) {
        HealthVerdict v = {.action = HEALTH_RESTART};
        const char *what = end_reason_to_string(f->reason);
        FailureClass cls = health_classify(f->reason);
        if (cls == FAILURE_START) {
                /* Another attempt would run the same command in the same place. */
                v.action = HEALTH_FAIL;
                snprintf(v.why, sizeof(v.why), "a rank could not start (exit code %d)",
                         f->exit_code);
                return v;
        }
        if (f->rule == FAILRULE_FATAL) {
                v.action = HEALTH_FAIL;
                snprintf(v.why, sizeof(v.why), "%s matched a fatal failure rule", what);
                return v;
        }
        if ((cls == FAILURE_JOB || f->claimed_by_job) && p->max_failures_without_progress > 0 &&
            f->without_progress >= p->max_failures_without_progress) {
                v.action = HEALTH_FAIL;
                snprintf(v.why, sizeof(v.why), "%s; failed %d times in a row without progress",
                         what, f->without_progress);
                return v;
        }
        if (f->reason == END_RANK_EXIT && f->exit_code > 0) {
                if (spec_exit_code_in(p->fatal_exit_codes, p->n_fatal_exit_codes, f->exit_code)) {
                        v.action = HEALTH_FAIL;
                        snprintf(v.why, sizeof(v.why), "exit code %d is fatal", f->exit_code);
                        return v;
                }
                if (spec_exit_code_in(p->retry_exit_codes, p->n_retry_exit_codes, f->exit_code)) {
                        v.action = HEALTH_RESTART_FREE;
                        v.backoff_ms = health_backoff_ms(p, f->consecutive);
                        snprintf(v.why, sizeof(v.why), "exit code %d is retried", f->exit_code);
                        return v;
                }
        }
        if (f->rule == FAILRULE_RETRY) {
                v.action = HEALTH_RESTART_FREE;
                v.backoff_ms = health_backoff_ms(p, f->consecutive);
                snprintf(v.why, sizeof(v.why), "%s matched a retry failure rule", what);
                return v;
        }
        if (f->reason == END_PREEMPTED || f->reason == END_DRAINED) {
                v.action = HEALTH_RESTART_FREE;
                snprintf(v.why, sizeof(v.why), "%s", what);
                return v;
        }
        if (restarts_used >= p->max_restarts) {
                v.action = HEALTH_FAIL;
                snprintf(v.why, sizeof(v.why), "%s; restart budget of %d used up", what,
                         p->max_restarts);
                return v;
        }
        v.backoff_ms = health_backoff_ms(p, f->consecutive);
        snprintf(v.why, sizeof(v.why), "%s; restart %d of %d", what, restarts_used + 1,
                 p->max_restarts);
        return v;
}

int64_t health_backoff_ms(const RestartPolicy *p, int n) {
        int64_t max = (int64_t) p->backoff_max_s * 1000;
        /* backoff_max_s 0 does not make a crash loop spin: failures in a row without
         * progress wait at least HEALTH_BACKOFF_FLOOR_MS. */
        if (n > 0 && max < HEALTH_BACKOFF_FLOOR_MS)
                max = HEALTH_BACKOFF_FLOOR_MS;
        if (n <= 0)
                return (int64_t) p->backoff_initial_s * 1000 < max
                               ? (int64_t) p->backoff_initial_s * 1000
                               : max;
        int64_t b = p->backoff_initial_s > 0 ? (int64_t) p->backoff_initial_s * 1000 : 1000;
        for (int i = 1; i < n && b < max; i++)
                b *= 2;
        return b < max ? b : max;
}

bool health_node_lost(int64_t last_sync_ms, int64_t now_ms, int64_t lease_ms, int64_t grace_ms) {
        return now_ms - last_sync_ms > lease_ms + grace_ms;
}

bool health_suspect_record(HealthSuspect *s, int *n, int cap, HealthSuspect f, int64_t window_ms,
                           int jobs) {
        if (!f.fine_elsewhere)
                return false;
        if (*n == cap) {
                memmove(s, s + 1, (size_t) (cap - 1) * sizeof(*s));
                (*n)--;
        }
        s[(*n)++] = f;
        if (jobs <= 0)
                return false;
        int distinct_jobs = 0;
        bool other_owner = false;
        for (int i = 0; i < *n; i++) {
                if (f.at_ms - s[i].at_ms > window_ms)
                        continue;
                bool seen = false;
                for (int k = 0; k < i && !seen; k++)
                        seen = s[k].job == s[i].job && f.at_ms - s[k].at_ms <= window_ms;
                distinct_jobs += !seen;
                other_owner |= s[i].owner != f.owner;
        }
        return other_owner && distinct_jobs >= jobs;
}

bool health_blame_record(int64_t *times, int *n, int cap, int64_t now_ms, int64_t window_ms,
                         int threshold) {
        if (*n == cap) {
                memmove(times, times + 1, (size_t) (cap - 1) * sizeof(int64_t));
                (*n)--;
        }
        times[(*n)++] = now_ms;
        if (threshold <= 0)
                return false;
        int recent = 0;
        for (int i = 0; i < *n; i++)
                if (now_ms - times[i] <= window_ms)
                        recent++;
        return recent >= threshold;
}

void health_find_node_lost(HealthFinding *f, NodeState node_state, const char *fmt, ...) {
        f->reason = END_NODE_LOST;
        f->cls = FAILURE_NODE;
        f->scope = HEALTH_SCOPE_NODE;
        f->node_state = node_state;
        f->ranks_gone = true;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
        va_end(ap);
}
