/* SPDX-License-Identifier: MIT */
/*
 * The controller's in-memory model: jobs with their attempts and the ranks of the
 * current attempt, and nodes. The controller core (controller.c) is the only writer;
 * api/ reads these structs to render views. Liveness (last sync) lives only here;
 * every state transition is also persisted through store/ (persist.c).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "scheduler.h"
#include "health.h"
#include "spec.h"
#include "states.h"

typedef struct Node Node;

typedef struct Rank {
        int rank;
        int attempt;
        char *node_name;
        int *devices; /* inventory indices on its node */
        int n_devices;
        RankState state;
        bool alive; /* may still have a process on its node */
        int pid; /* 0: unknown */
        int exit_code; /* -1: none */
        int signal; /* 0: none */
        int64_t step; /* -1: unknown */
        int local_rank;
        int node_rank;
        uint64_t assign_version; /* node desired-state version that first listed it */
        uint64_t stop_version; /* version that stopped listing it; 0 while listed */
        bool dirty;
} Rank;

typedef struct Attempt {
        int attempt;
        int64_t resume_step; /* 0: fresh start */
        char *resume_path;
        int64_t started_ms, ended_ms; /* wall; ended 0 while live */
        EndReason end_reason; /* _END_REASON_INVALID while live */
        char *blamed_node;
        char *detail;
        bool dirty;
} Attempt;

typedef struct Job {
        int64_t id;
        JobSpec *spec;
        char *spec_text; /* normalised spec JSON as stored */
        JobState state;
        int attempt; /* 0 before the first placement */
        int restarts;
        char *reason;
        int exit_code; /* -1: none */
        int64_t created_ms, started_ms, finished_ms; /* wall; 0: not yet */
        char *idempotency_key;
        int64_t ckpt_step; /* -1: none */
        char *ckpt_path;
        char *avoid_node;
        Attempt *attempts;
        int n_attempts;
        Rank *ranks; /* of the current attempt */
        int n_ranks;
        int64_t restart_at_ms; /* monotonic: when a restarting job may be placed again */
        int64_t failed_at_ms; /* monotonic: when the last failure was detected, 0 none */
        int quick_failures; /* failures in a row without progress: the backoff exponent */
        int64_t best_step; /* highest step any attempt reached (memory only); -1: none */
        SchedWait wait; /* why it is pending */
        int tier; /* 0: within its project's quota; 1: on borrowed capacity */
        int64_t queued_ms; /* wall: when it last entered the queue (submit, preemption) */
        bool dirty;
        bool active; /* in the controller's active list */
        bool in_pass; /* already a candidate of the scheduling pass being built */
        bool in_running; /* already among the running jobs of the snapshot being built */
} Job;

typedef struct NodeDevice {
        char *kind;
        int numa_node;
        int pcie_switch;
} NodeDevice;

#define NODE_BLAME_HISTORY 16
#define NODE_SUSPECT_HISTORY 32

typedef struct NodeJob {
        Job *job;
        int alive_ranks;
} NodeJob;

struct Node {
        int index; /* position in the controller's node list (nodes are never removed) */
        char *name, *hostname, *address, *boot_id;
        char *agent_id; /* the agent holding the node's lease; NULL: any */
        json_t *labels; /* object of strings */
        json_t *inventory; /* as registered */
        NodeState state;
        char *reason;
        int cpus;
        int64_t memory_mb;
        NodeDevice *devices;
        int n_devices;
        int64_t last_sync_mono; /* liveness: never persisted */
        int64_t last_seen_ms; /* wall, persisted on transitions only */
        uint64_t version; /* of its desired state */
        bool connected; /* registered or synced since this controller started */
        /* What alive ranks hold, kept up to date as ranks start and die. */
        int used_cpus;
        int64_t used_memory_mb;
        int *device_used; /* per inventory device: alive ranks holding it */
        int alive_ranks;
        struct NodeJob *jobs; /* jobs with alive ranks here, and how many */
        int n_jobs, cap_jobs;
        int64_t blame_times[NODE_BLAME_HISTORY];
        int n_blame;
        /* Application failures seen here (memory only): evidence only when they pile up
         * across jobs of different owners (health_suspect_record). */
        HealthSuspect suspects[NODE_SUSPECT_HISTORY];
        int n_suspects;
        bool dirty;
};

static inline Attempt *job_current_attempt(Job *job) {
        return job->n_attempts > 0 ? &job->attempts[job->n_attempts - 1] : NULL;
}
