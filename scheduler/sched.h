/* SPDX-License-Identifier: MIT */
/*
 * The scheduler: pure policy. It gets a snapshot of the fleet (nodes with their free
 * capacity) and of the jobs waiting to run, and returns placements: for each job it
 * can start, the node and devices of every rank. No I/O, no clock, no globals, so it
 * can be unit-tested and benchmarked on synthetic fleets of any size.
 *
 * The caller owns every string and array in the snapshot; the scheduler copies the
 * free capacity it needs, so the snapshot is not modified.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

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
        bool schedulable; /* ready, and not draining, quarantined or unhealthy */
        int cpus_free;
        int64_t memory_free_mb; /* < 0: memory not accounted */
        SchedDevice *devices; /* inventory order: index i is device i */
        int n_devices;
        SchedLabel *labels;
        int n_labels;
} SchedNode;

typedef struct SchedJob {
        int64_t id;
        int priority;
        int64_t created_ms;
        int ranks;
        int ranks_per_node; /* 0: any */
        const char *accelerator; /* NULL: none */
        int accelerators_per_rank;
        int cpus;
        int64_t memory_mb;
        const char *avoid_node; /* blamed last time; used only when nothing else fits */
        const char *same_label; /* all nodes share this label's value; NULL: no constraint */
        SchedLabel *node_selector;
        int n_node_selector;
} SchedJob;

typedef struct SchedSnapshot {
        SchedNode *nodes;
        int n_nodes;
        SchedJob *jobs;
        int n_jobs;
} SchedSnapshot;

typedef enum SchedWait {
        SCHED_WAIT_NONE, /* placed */
        SCHED_WAIT_CAPACITY, /* would fit an empty fleet, not the current one */
        SCHED_WAIT_CONSTRAINT, /* no set of nodes satisfies its constraints */
        _SCHED_WAIT_MAX,
} SchedWait;

typedef struct SchedPlacement {
        int64_t job;
        int n_ranks;
        int *rank_node; /* index into snapshot nodes, per rank */
        int *rank_devices; /* n_ranks * accelerators_per_rank inventory indices */
        int accelerators_per_rank;
} SchedPlacement;

typedef struct SchedResult {
        SchedPlacement *placements;
        int n_placements;
        SchedWait *wait; /* per snapshot job: why it was not placed */
} SchedResult;

/* One pass: places jobs in priority order, all ranks of a job or none. 0 or -errno. */
int sched_pass(const SchedSnapshot *snapshot, SchedResult *ret_result);
void sched_result_clear(SchedResult *result);

/*
 * Whether job could ever run on the fleet: placed on an empty copy of the schedulable
 * nodes. Returns SCHED_WAIT_NONE or the reason it can never fit.
 */
SchedWait sched_job_feasible(const SchedNode *nodes, int n_nodes, const SchedJob *job);

const char *sched_wait_to_string(SchedWait w);
