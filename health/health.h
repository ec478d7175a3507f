/* SPDX-License-Identifier: MIT */
/*
 * Failure policy, pure: given what went wrong and the job's restart policy, decide
 * whether to restart, whether it spends budget, and after what backoff; when a node is
 * lost; when repeated blame quarantines a node. No I/O and no clock: times are passed in.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "spec.h"
#include "states.h"

typedef enum HealthAction {
        HEALTH_RESTART, /* restart, spending one unit of budget */
        HEALTH_RESTART_FREE, /* restart without spending budget (retry code, preemption) */
        HEALTH_FAIL, /* the job fails */
        _HEALTH_ACTION_MAX,
} HealthAction;

typedef struct HealthFailure {
        EndReason reason;
        int exit_code; /* -1: none */
        int signal; /* 0: none */
        int consecutive; /* earlier failures in a row without progress: the backoff exponent */
} HealthFailure;

typedef struct HealthVerdict {
        HealthAction action;
        int64_t backoff_ms;
        char why[160]; /* for the job's reason */
} HealthVerdict;

/*
 * Decides what to do after an attempt ended with failure f, restarts_used so far. The
 * backoff grows with f->consecutive, not with the budget spent, so a job that fails
 * now and then after making progress restarts at once each time.
 */
HealthVerdict health_decide(const RestartPolicy *policy, int restarts_used,
                            const HealthFailure *f);

/* Backoff before restart number n (0-based): first after backoff_initial (0 = at once),
 * then doubling from max(initial, 1 s), capped at backoff_max. */
int64_t health_backoff_ms(const RestartPolicy *policy, int n);

/* True when a node that last synced at last_sync_ms counts as lost at now_ms. */
bool health_node_lost(int64_t last_sync_ms, int64_t now_ms, int64_t lease_ms, int64_t grace_ms);

/*
 * Records one blame at now_ms into the node's history (times, *n, capacity cap; the
 * oldest fall out) and returns true when it has been blamed at least `threshold` times
 * within `window_ms`: time to quarantine it. threshold 0 disables quarantine.
 */
bool health_blame_record(int64_t *times, int *n, int cap, int64_t now_ms, int64_t window_ms,
                         int threshold);
