/* SPDX-License-Identifier: MIT */
/*
 * The scheduler: pure policy. It gets a snapshot of the fleet (nodes with their free
 * capacity), of the jobs that run (what they hold, for quotas and preemption) and of
 * the jobs waiting to run, and returns placements (for each job it can start, the node
 * and devices of every rank, and the tier it runs at), the running jobs to preempt, and
 * why every other waiting job waits. No I/O, no clock (the caller passes now_ms), no
 * globals, so it can be unit-tested and benchmarked on synthetic fleets of any size.
 * docs/SCHEDULING.md describes the policy.
 *
 * The caller owns every string and array in the snapshot; the scheduler works on its
 * own copy of the free capacity, so the snapshot is not modified.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Default aging threshold: a job waiting longer gets a reservation. */
#define SCHED_STARVATION_AFTER_MS_DEFAULT 300000
/* Default number of aged jobs that get a reservation in one pass. */
#define SCHED_MAX_RESERVATIONS_DEFAULT 16
/* Name of the cpu resource kind in quotas and in the result's kinds. */
#define SCHED_KIND_CPUS "cpus"

typedef struct SchedDevice {
        const char *kind; /* "nvidia-h100" */
        int numa_node; /* -1 unknown */
        int pcie_switch; /* -1 none */
        bool free;
} SchedDevice;

typedef struct SchedLabel {
        const char *key;
        const char *value;
} SchedLabel;

typedef struct SchedNode {
        const char *name;
        bool schedulable; /* ready, and not draining, quarantined, unhealthy or down */
        int cpus_free; /* after what running jobs hold */
        int cpus_total; /* 0: cpus_free plus what the snapshot's running jobs hold here */
        int64_t memory_free_mb; /* < 0: memory not accounted */
        int64_t memory_total_mb; /* 0: memory_free_mb plus what running jobs hold here */
        SchedDevice *devices; /* inventory order: index i is device i */
        int n_devices;
        SchedLabel *labels;
        int n_labels;
} SchedNode;

typedef struct SchedJob {
        int64_t id;
        const char *project; /* quota owner; NULL: "default" */
        const char *user; /* NULL: "" */
        int priority; /* within the project: higher first */
        int64_t created_ms;
        int64_t submitted_ms; /* when it last entered the queue (same clock as now_ms);
                                 0: created_ms */
        int ranks;
        int ranks_per_node; /* 0: any */
        const char *accelerator; /* NULL: none */
        int accelerators_per_rank;
        int cpus; /* per rank */
        int64_t memory_mb; /* per rank */
        const char *avoid_node; /* blamed last time; used only when nothing else fits */
        const char *same_label; /* all nodes share this label's value; NULL: no constraint */
        SchedLabel *node_selector;
        int n_node_selector;
} SchedJob;

/*
 * A job that holds resources now. The snapshot nodes' free capacity must already exclude
 * what these hold; the entries say who holds it, for quota usage, tiers and preemption.
 */
typedef struct SchedRunning {
        int64_t id;
        const char *project; /* NULL: "default" */
        const char *user; /* NULL: "" */
        int priority;
        int tier; /* the tier it was placed at (or last promoted to, see running_tier) */
        int64_t started_ms; /* start of its current attempt: the newest is preempted first */
        bool stopping; /* being stopped (preempted, cancelled): no usage, never a victim,
                          its capacity is counted as about to be free for preemptions */
        const char *accelerator; /* NULL: none */
        int accelerators_per_rank;
        int cpus; /* per rank */
        int64_t memory_mb; /* per rank */
        int n_ranks; /* ranks that hold resources */
        const int *rank_node; /* per rank: index into snapshot nodes, -1: not in it */
        const int *rank_devices; /* n_ranks * accelerators_per_rank device indices, -1: none */
} SchedRunning;

/* A parsed quota file (see sched_quota_parse and docs/SCHEDULING.md). Opaque. */
typedef struct SchedQuota SchedQuota;

typedef struct SchedSnapshot {
        SchedNode *nodes;
        int n_nodes;
        SchedJob *jobs; /* waiting jobs */
        int n_jobs;
        SchedRunning *running;
        int n_running;
        const SchedQuota *quota; /* NULL: every project has share 1 */
        int64_t now_ms; /* same clock as submitted_ms */
        int64_t starvation_after_ms; /* 0: SCHED_STARVATION_AFTER_MS_DEFAULT; < 0: never */
        int max_reservations; /* aged jobs given a reservation per pass, in pass order;
                                 0: SCHED_MAX_RESERVATIONS_DEFAULT; < 0: none */
} SchedSnapshot;

typedef enum SchedWait {
        SCHED_WAIT_NONE, /* placed */
        SCHED_WAIT_CAPACITY, /* would fit an empty fleet, not the current one */
        SCHED_WAIT_CONSTRAINT, /* no set of nodes satisfies its constraints */
        SCHED_WAIT_QUOTA, /* over its project's quota, and no spare capacity to borrow */
        SCHED_WAIT_RESERVED, /* would fit, but the capacity is held for a waiting job */
        SCHED_WAIT_PREEMPTING, /* capacity is being freed for it by preempting borrowers */
        _SCHED_WAIT_MAX,
} SchedWait;

typedef struct SchedPlacement {
        int64_t job;
        int n_ranks;
        int *rank_node; /* index into snapshot nodes, per rank */
        int *rank_devices; /* n_ranks * accelerators_per_rank inventory indices */
        int accelerators_per_rank;
        int tier; /* 0: within its project's quota; 1: borrows spare capacity */
} SchedPlacement;

/* One project's quota and usage, per resource kind of the result. */
typedef struct SchedProjectQuota {
        char *project;
        bool configured; /* named in the quota file (else it got the default share) */
        double *quota; /* per kind: its share of the schedulable fleet */
        int64_t *used; /* per kind: held by its running jobs (not stopping) */
} SchedProjectQuota;

typedef struct SchedResult {
        SchedPlacement *placements;
        int n_placements;
        SchedWait *wait; /* per snapshot job: why it was not placed */
        int64_t *preempt; /* running jobs to stop so that waiting jobs get their quota */
        int n_preempt;
        int *running_tier; /* per snapshot running entry: its tier now (borrowers whose
                              project is back within quota are promoted to 0) */
        char **kinds; /* resource kinds: kinds[0] is "cpus", then accelerator kinds */
        int n_kinds;
        SchedProjectQuota *projects; /* configured projects and those with jobs */
        int n_projects;
} SchedResult;

/* One pass (see docs/SCHEDULING.md). 0 or -errno; clear the result when done. */
int sched_pass(const SchedSnapshot *snapshot, SchedResult *ret_result);
void sched_result_clear(SchedResult *result);

/*
 * Whether a job could ever run on the nodes: placed on an empty copy of the schedulable
 * ones (cpus_total and memory_total_mb when set, else the free amounts are taken as the
 * capacity). A check returns SCHED_WAIT_NONE or SCHED_WAIT_CONSTRAINT. Built once for
 * many submits (a walk over the nodes); a check then costs a job without selector or
 * same_label a count over node types, and one with them the nodes they name. The nodes
 * must outlive it.
 */
typedef struct SchedFeasibility SchedFeasibility;
SchedFeasibility *sched_feasibility_new(const SchedNode *nodes, int n_nodes);
SchedWait sched_feasibility_check(SchedFeasibility *fz, const SchedJob *job);
SchedFeasibility *sched_feasibility_free(SchedFeasibility *fz);

const char *sched_wait_to_string(SchedWait w);

/*
 * Parses a quota file. On error returns -EINVAL and, when ret_error is not NULL, a message
 * naming the line ("line 4: ..."), owned by the caller.
 */
int sched_quota_parse(const char *text, SchedQuota **ret, char **ret_error);
SchedQuota *sched_quota_free(SchedQuota *q);

/*
 * Splits each kind's capacity among projects (see docs/SCHEDULING.md): configured
 * projects always take part, the others with the [default] entry. configured[p] is set
 * for the projects named in q. ret_quota is n_projects * n_kinds, row per project.
 */
void sched_quota_normalise(const SchedQuota *q, char *const *kinds, const int64_t *capacity,
                           int n_kinds, const char *const *projects, int n_projects,
                           bool *ret_configured, double *ret_quota);
/* Number and names of the projects the file names, in file order. */
int sched_quota_n_projects(const SchedQuota *q);
const char *sched_quota_project(const SchedQuota *q, int i);
