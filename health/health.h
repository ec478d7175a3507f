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

/* Who is to blame for an attempt's end (DESIGN §4a). */
typedef enum FailureClass {
        FAILURE_NONE, /* it succeeded */
        FAILURE_JOB, /* the program failed on its own: exit, signal, hang */
        FAILURE_START, /* the job's command, workdir or account could not start */
        FAILURE_NODE, /* evidence against the node: lease expiry, a failed health check */
        FAILURE_PREEMPTED, /* preemption or drain: nobody's fault */
        FAILURE_CANCELLED,
        _FAILURE_CLASS_MAX,
} FailureClass;

/* The class of an attempt that ended for reason r. */
FailureClass health_classify(EndReason r);
const char *failure_class_to_string(FailureClass c);

typedef struct HealthFailure {
        EndReason reason;
        int exit_code; /* -1: none */
        int signal; /* 0: none */
        int consecutive; /* earlier failures in a row without progress: the backoff exponent */
        int without_progress; /* job failures in a row without progress, this one included */
} HealthFailure;

typedef struct HealthVerdict {
        HealthAction action;
        int64_t backoff_ms;
        char why[160]; /* for the job's reason */
} HealthVerdict;

/*
 * Decides what to do after an attempt ended with failure f, restarts_used so far. The
 * backoff grows with f->consecutive, not with the budget spent, so a job that fails
 * now and then after making progress restarts at once each time; retried exit codes
 * pass through the same backoff. A start failure fails the job at once, and so does the
 * policy's max_failures_without_progress-th job failure in a row without progress.
 */
HealthVerdict health_decide(const RestartPolicy *policy, int restarts_used,
                            const HealthFailure *f);

/* The shortest wait before a restart that follows a failure without progress. */
#define HEALTH_BACKOFF_FLOOR_MS 1000

/* Backoff before restart number n (0-based): first after backoff_initial (0 = at once),
 * then doubling from max(initial, 1 s), capped at max(backoff_max, 1 s). */
int64_t health_backoff_ms(const RestartPolicy *policy, int n);

/* True when a node that last synced at last_sync_ms counts as lost at now_ms. */
bool health_node_lost(int64_t last_sync_ms, int64_t now_ms, int64_t lease_ms, int64_t grace_ms);

/*
 * An application failure on a node is evidence against the node only when failures of
 * different jobs of different owners (project and user) pile up there: no sequence of
 * one owner's jobs can take a node out of service.
 */
typedef struct HealthSuspect {
        int64_t job;
        uint64_t owner; /* a hash of the job's project and user */
        int64_t at_ms;
} HealthSuspect;

/*
 * Records failure f into the node's history (s, *n, capacity cap; the oldest fall out)
 * and returns true when, within window_ms, at least `jobs` different jobs of at least
 * two different owners failed there: time to blame the node. jobs 0 disables it.
 */
bool health_suspect_record(HealthSuspect *s, int *n, int cap, HealthSuspect f,
                           int64_t window_ms, int jobs);

/*
 * Records one blame at now_ms into the node's history (times, *n, capacity cap; the
 * oldest fall out) and returns true when it has been blamed at least `threshold` times
 * within `window_ms`: time to quarantine it. threshold 0 disables quarantine.
 */
bool health_blame_record(int64_t *times, int *n, int cap, int64_t now_ms, int64_t window_ms,
                         int threshold);
