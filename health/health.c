/* SPDX-License-Identifier: MIT */
/* Restart, backoff, lease and quarantine policy; see health.h. */
#include "health.h"

#include <stdio.h>
#include <string.h>

HealthVerdict health_decide(const RestartPolicy *p, int restarts_used, const HealthFailure *f) {
        HealthVerdict v = {.action = HEALTH_RESTART};
        const char *what = end_reason_to_string(f->reason);
        if (f->reason == END_RANK_EXIT && f->exit_code > 0) {
                if (spec_exit_code_in(p->fatal_exit_codes, p->n_fatal_exit_codes, f->exit_code)) {
                        v.action = HEALTH_FAIL;
                        snprintf(v.why, sizeof(v.why), "exit code %d is fatal", f->exit_code);
                        return v;
                }
                if (spec_exit_code_in(p->retry_exit_codes, p->n_retry_exit_codes, f->exit_code)) {
                        v.action = HEALTH_RESTART_FREE;
                        v.backoff_ms = health_backoff_ms(p, 0);
                        snprintf(v.why, sizeof(v.why), "exit code %d is retried", f->exit_code);
                        return v;
                }
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
        if (n <= 0)
                return (int64_t) p->backoff_initial_s * 1000 < max ? (int64_t) p->backoff_initial_s * 1000
                                                                 : max;
        int64_t b = p->backoff_initial_s > 0 ? (int64_t) p->backoff_initial_s * 1000 : 1000;
        for (int i = 1; i < n && b < max; i++)
                b *= 2;
        return b < max ? b : max;
}

bool health_node_lost(int64_t last_sync_ms, int64_t now_ms, int64_t lease_ms, int64_t grace_ms) {
        return now_ms - last_sync_ms > lease_ms + grace_ms;
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
