/* SPDX-License-Identifier: MIT */
/*
 * Failure verdicts, pure (DESIGN.md §4a). Detectors (detectors/, one file each behind
 * HealthDetector, listed in detectors/registry.c) turn what the controller saw into
 * findings; health_judge() turns a finding into blame, quarantine and the restart
 * decision (policy.c, judge.c). No I/O and no clock: times are passed in.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "failrules.h"
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
        FailRuleAction rule; /* the failure rule that matched; _FAILRULE_ACTION_INVALID: none */
        bool claimed_by_job; /* a node fault only the job's log claims: counted as its own */
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
HealthVerdict health_decide(const RestartPolicy *policy, int restarts_used, const HealthFailure *f);

/* The shortest wait before a restart that follows a failure without progress. */
#define HEALTH_BACKOFF_FLOOR_MS 1000

/* Backoff before restart number n (0-based): first after backoff_initial (0 = at once),
 * then doubling from max(initial, 1 s), capped at max(backoff_max, 1 s). */
int64_t health_backoff_ms(const RestartPolicy *policy, int n);

/* True when a node that last synced at last_sync_ms counts as lost at now_ms. */
bool health_node_lost(int64_t last_sync_ms, int64_t now_ms, int64_t lease_ms, int64_t grace_ms);

/*
 * An application failure on a node is evidence against the node only when failures of
 * different jobs of different owners (users) pile up there: no sequence of
 * one owner's jobs can take a node out of service.
 */
typedef struct HealthSuspect {
        int64_t job;
        uint64_t owner; /* a hash of the user who runs the job */
        int64_t at_ms;
        bool fine_elsewhere; /* the job made progress on another node */
} HealthSuspect;

/*
 * Records failure f into the node's history (s, *n, capacity cap; the oldest fall out)
 * and returns true when, within window_ms, at least `jobs` different jobs of at least
 * two different owners failed there: time to blame the node. jobs 0 disables it. Only a
 * job that ran fine elsewhere is a witness: one that fails everywhere is recorded nowhere.
 */
bool health_suspect_record(HealthSuspect *s, int *n, int cap, HealthSuspect f, int64_t window_ms,
                           int jobs);

/*
 * Records one blame at now_ms into the node's history (times, *n, capacity cap; the
 * oldest fall out) and returns true when it has been blamed at least `threshold` times
 * within `window_ms`: time to quarantine it. threshold 0 disables quarantine.
 */
bool health_blame_record(int64_t *times, int *n, int cap, int64_t now_ms, int64_t window_ms,
                         int threshold);

/* What the controller saw, handed to every detector. */
typedef enum HealthSeenKind {
        HEALTH_SEEN_RANK, /* an agent's report of a rank of the current attempt */
        HEALTH_SEEN_RANK_MISSING, /* a rank that ran is no longer reported, and left no exit */
        HEALTH_SEEN_NODE, /* an agent's sync: its node's health check */
        HEALTH_SEEN_SILENCE, /* time passed since a node's last sync */
        HEALTH_SEEN_REGISTER, /* an agent registered its node */
        HEALTH_SEEN_RANK_WAITING, /* a rank placed on a live node is not running yet */
} HealthSeenKind;

typedef struct HealthSeen {
        HealthSeenKind kind;
        const char *node;
        /* HEALTH_SEEN_RANK, HEALTH_SEEN_RANK_MISSING */
        int rank;
        bool exited, start_failed, hung;
        bool node_fault; /* start_failed because of the node (its state dir) */
        bool oom_killed; /* the OOM killer struck in the rank's cgroup: over its memory_mb */
        int exit_code; /* -1: none */
        int signal; /* 0: none */
        int64_t step; /* -1: unknown */
        int hang_timeout_s;
        const char *log_tail; /* a failed rank's last log bytes; NULL: none */
        const FailRules *operator_rules, *job_rules; /* matched against log_tail, in order */
        /* HEALTH_SEEN_RANK_WAITING */
        int64_t waited_ms, start_timeout_ms;
        /* HEALTH_SEEN_NODE */
        bool healthy;
        const char *health_reason;
        /* HEALTH_SEEN_SILENCE */
        int64_t silent_ms, lease_ms, grace_ms;
        /* HEALTH_SEEN_REGISTER */
        bool boot_changed;
        bool agent_replaced; /* another agent than the one that held the node */
} HealthSeen;

typedef enum HealthScope {
        HEALTH_SCOPE_ATTEMPT, /* the attempt the rank belongs to */
        HEALTH_SCOPE_NODE, /* the node, and every live attempt with a rank there */
} HealthScope;

#define HEALTH_DETAIL_MAX 4200

typedef struct HealthFinding {
        EndReason reason; /* how the attempts it ends end */
        FailureClass cls;
        HealthScope scope;
        NodeState node_state; /* HEALTH_SCOPE_NODE: the node's new state */
        bool ranks_gone; /* HEALTH_SCOPE_NODE: the node's ranks are dead (fenced, rebooted) */
        int exit_code; /* -1: none */
        int signal; /* 0: none */
        FailRuleAction rule; /* the failure rule that decided it; _FAILRULE_ACTION_INVALID */
        bool claimed_by_job; /* FAILURE_NODE on the job's word only: its log matched a rule */
        /* Holds a node's whole health reason. Last, and written whole (never appended to)
         * by the detector that finds something: health_detect only empties it. */
        char detail[HEALTH_DETAIL_MAX];
} HealthFinding;

typedef struct HealthDetector {
        const char *name;
        /* True, with *ret filled, when seen shows a failure this detector knows. */
        bool (*detect)(const HealthSeen *seen, HealthFinding *ret);
} HealthDetector;

/* The registry (detectors/registry.c), NULL-terminated. */
extern const HealthDetector *const health_detectors[];

/* Asks the detectors in registry order; the first finding wins. */
bool health_detect(const HealthSeen *seen, HealthFinding *ret);
/* For a detector: f finds the whole node lost, with every rank on it dead (fenced,
 * rebooted), moving it to node_state (_NODE_STATE_INVALID: where it is). */
__attribute__((format(printf, 3, 4))) void
health_find_node_lost(HealthFinding *f, NodeState node_state, const char *fmt, ...);

/* A node's record of failures, kept by the controller and updated by health_judge. */
typedef struct HealthHistory {
        int64_t *blame_times;
        int *n_blame;
        int blame_cap;
        HealthSuspect *suspects;
        int *n_suspects;
        int suspect_cap;
} HealthHistory;

typedef struct HealthCase {
        const HealthFinding *finding;
        const RestartPolicy *policy;
        int restarts_used;
        int quick_failures; /* the job's failures in a row without progress, before this */
        bool progressed; /* the ending attempt made progress */
        HealthSuspect suspect; /* this failure, as evidence against the node */
        int64_t window_ms; /* the quarantine window */
        int quarantine_after; /* blames (or suspect jobs) within it; 0: never */
} HealthCase;

typedef struct HealthJudgement {
        bool blame; /* the node where it was seen is to blame */
        bool by_suspicion; /* because failures of several owners' jobs piled up there */
        bool quarantine; /* and it has been blamed too often: out of service */
        bool avoid; /* the next attempt avoids the node */
        int quick_failures; /* the job's new count of failures without progress */
        HealthVerdict verdict;
} HealthJudgement;

/*
 * Judges a failure seen on a node with history `node` (NULL: no node): whom to blame
 * (the node for a node fault; for the job's own failure, or a node fault only the job's
 * log claims, only when failures of different jobs of different owners, each of
 * which ran fine elsewhere, pile up there), whether that quarantines it, and whether and
 * when the job restarts. Records the blame and suspicion into *node.
 */
HealthJudgement health_judge(const HealthCase *c, HealthHistory *node);
