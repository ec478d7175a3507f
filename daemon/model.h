/* SPDX-License-Identifier: MIT */
/*
 * The controller's in-memory model: jobs with their attempts and the ranks of the
 * current attempt, nodes, and their indexes (model.c). States change only through
 * transition.c; api/ reads these structs to render views. Liveness (last sync) lives
 * only here; every state transition is also persisted through store/ (persist.c).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "goodput.h"
#include "health.h"
#include "scheduler.h"
#include "spec.h"
#include "states.h"
#include "strmap.h"

typedef struct Node Node;

typedef struct Rank {
        int rank;
        int attempt;
        char *node_name;
        int node_index; /* its node's index in the model (nodes are never removed); -1: none */
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
        int64_t assigned_mono; /* monotonic: when it was placed (or loaded), for the start timeout */
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
        /* For goodput (daemon/goodput.c), wall ms, 0 where not seen: every rank running,
         * the step's first and last advance, when the failure happened by its evidence,
         * the checkpoints it committed and the progress stalls measured around them. */
        int64_t running_ms, first_progress_ms, last_progress_ms, failed_ms;
        int64_t first_ckpt_ms, last_ckpt_ms;
        int n_ckpts;
        int64_t ckpt_stall_ms; /* signed: each sample is noisy, their sum is not biased */
        int n_ckpt_stalls;
        bool dirty;
} Attempt;

/* How the current attempt's step advances, in memory only (daemon/goodput.c). */
typedef struct JobProgress {
        int attempt; /* the attempt these are of */
        int64_t step; /* the highest step any rank reported */
        int64_t advanced_ms; /* wall: when it last grew */
        int64_t prev_step, prev_ms; /* the advance before the last; prev_step -1: none */
        int64_t steady_ms, steady_steps; /* between advances where no checkpoint was
                                          * written: the pace of a step */
        bool ckpt_pending; /* a checkpoint came since the last advance: the gap is its cost */
} JobProgress;

#define JOB_FINE_NODES 4

/*
 * What the rank environment takes from the whole gang (rankenv.c), built once per
 * attempt and fleet of addresses instead of for every rank of every answer: each of a
 * gang's nodes gets all of it, and walking the gang per rank made answers to a gang of
 * thousands of nodes quadratic.
 */
typedef struct JobGang {
        int attempt; /* built for; 0: not built */
        uint64_t addresses; /* Model.addresses_changed when built */
        int num_nodes;
        int *local_world; /* per node rank: its ranks */
        char *hosts; /* AXCTL_NODE_HOSTNAMES: hosts in node-rank order, comma-separated */
        char *first_host, *coordinator; /* node rank 0's host, and with the port */
} JobGang;

typedef struct Job {
        int64_t id;
        JobSpec *spec;
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
        /* Its ranks as a scheduling pass reads them, so that a pass reads two arrays per
         * job and not each rank's struct, devices and node: per rank its node's index
         * while it may be alive (else -1), then spec->accelerators_per_rank device
         * indexes per rank (-1: none). Kept by model_rank_held_set. */
        int *held_node;
        int *held_devices;
        /* The scheduler's copies of its project, user and accelerator names (schedule.c),
         * valid while sched_names_gen is the scheduler's. */
        const char *sched_project, *sched_user, *sched_accelerator;
        uint64_t sched_names_gen;
        int64_t restart_at_ms; /* monotonic: when a restarting job may be placed again */
        int64_t failed_at_ms; /* monotonic: when the last failure was detected, 0 none */
        int quick_failures; /* failures in a row without progress: the backoff exponent */
        int64_t best_step; /* highest step any ended attempt reached; -1: none */
        JobProgress progress;
        /* Where it last ran fine (memory only): hashes of the nodes of attempts that made
         * progress and ended through no failure of the job's own (drain, preemption,
         * another node's fault), newest last. Its failure on another node is then
         * evidence against that node (health_suspect_record). */
        uint64_t fine_nodes[JOB_FINE_NODES];
        int n_fine_nodes;
        SchedWait wait; /* why it is pending */
        int tier; /* 0: within its project's quota; 1: on borrowed capacity */
        int64_t queued_ms; /* wall: when it last entered the queue (submit, preemption) */
        bool dirty;
        /* Its row is in the store (loaded, or inserted by a turn: a turn that fails stops
         * the controller): later writes leave its spec out. */
        bool stored;
        /* Its goodput figures are in the store (it ended, and a turn wrote them): the
         * fleet's sums read them there, not from its timeline. */
        bool goodput_saved;
        int active_slot; /* 1 + its index in Model.active; 0: not active */
        bool ending; /* in the model's list of active jobs that may have ended */
        bool in_pass; /* already a candidate of the scheduling pass being built */
        int held_ranks; /* its alive ranks counted on their nodes (model_node_hold) */
        int running_slot; /* 1 + its index in Model.running; 0: holds nothing */
        int starting_slot; /* 1 + its index in Model.starting; 0: not starting */
        JobGang gang; /* memory only */
} Job;

/* In Model.active: not over, or with ranks that may still be alive. */
static inline bool job_active(const Job *job) {
        return job->active_slot > 0;
}

typedef struct NodeDevice {
        char *kind;
        const char *sched_kind; /* the scheduler's copy of kind, of Node.sched_names_gen */
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
        /* As registered, as JSON text: parsed once for what the scheduler needs (kept
         * as jansson objects, 10,000 nodes' took 60 MB and most of a restart's load). */
        char *inventory;
        NodeState state;
        char *reason;
        int cpus;
        int64_t memory_mb;
        NodeDevice *devices;
        int n_devices;
        int64_t last_sync_mono; /* liveness: never persisted (set by model_node_touch) */
        Node *lease_prev, *lease_next; /* Model's lease list */
        bool in_lease;
        int64_t last_seen_ms; /* wall, persisted on transitions only */
        uint64_t version; /* of its desired state */
        uint64_t syncs_applied; /* its reports applied, on any connection (ReportMark) */
        bool changed; /* listed in the turn's changed nodes (transition.c) */
        bool connected; /* registered or synced since this controller started */
        bool awaited; /* stored, with a lease, not synced yet: scheduling waits for it */
        /* What alive ranks hold, kept up to date as ranks start and die. */
        int used_cpus;
        int64_t used_memory_mb;
        int *device_used; /* per inventory device: alive ranks holding it */
        bool capacity_changed; /* listed in Model.capacity_changed */
        uint64_t sched_names_gen; /* of its devices' sched_kind; 0: none taken */
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

/* Versions are stored as signed 64-bit integers; an agent's claim above this (a broken or
 * hostile agent: real ones are the clock's milliseconds times 1000) is not followed. */
#define NODE_VERSION_MAX ((uint64_t) INT64_MAX / 2)
/* More changes than lost commits could have made to one node (transition.c). */
#define NODE_VERSION_LEAP ((uint64_t) 1000000)

/* Records that the job ran fine on the node named name (see Job.fine_nodes). */
void model_job_ran_fine(Job *job, const char *name);
/* True when the job ran fine on a node other than the one named name. */
bool model_job_fine_elsewhere(const Job *job, const char *name);

static inline Attempt *job_current_attempt(Job *job) {
        return job->n_attempts > 0 ? &job->attempts[job->n_attempts - 1] : NULL;
}

static inline bool rank_desired(const Rank *r) {
        return r->state == RANK_ASSIGNED || r->state == RANK_RUNNING;
}

/* The job's current attempt may have ranks starting or running. */
static inline bool job_attempt_live(const Job *job) {
        return job->state == JOB_STARTING || job->state == JOB_RUNNING;
}

/*
 * The fleet's failure rate (accounting.c), kept up to date as attempts start and end so
 * that reading it, for every job view's checkpoint advice, costs nothing: interruptions
 * and the rank-time of ended attempts; of live ones the ranks and the sum of their start
 * times by their ranks, so that their rank-time at now is now x live_ranks -
 * live_start_ranks_ms. Jobs that left memory count through the store's sums, read once
 * at load.
 */
typedef struct FleetRate {
        int64_t interruptions;
        int64_t ended_rank_ms;
        int64_t live_ranks;
        int64_t live_start_ranks_ms;
} FleetRate;

/* A project's goodput: the kept sums below, and the rows of a report (accounting.h). */
typedef struct ProjectGoodput {
        char *project;
        int64_t jobs; /* that had any time */
        GoodputTotals t; /* accelerator-ms */
} ProjectGoodput;

/* Every job and node, with the indexes the controller looks them up by. */
typedef struct Model {
        Job **jobs; /* all jobs, ascending id */
        int n_jobs, cap_jobs;
        Job **active; /* jobs not terminal, or with ranks that may still be alive */
        int n_active, cap_active;
        /* Active jobs that ended or lost a rank since the last prune: the only ones it
         * needs to look at. */
        Job **ending;
        int n_ending, cap_ending;
        /* Jobs in JOB_STARTING, in no order: the start timeout looks at these and not at
         * every active job. */
        Job **starting;
        int n_starting, cap_starting;
        StrMap *idempotency; /* "<project>/<key>" -> Job: a key is its project's own */
        StrMap *node_index; /* name -> Node */
        StrMap *user_jobs; /* user -> how many of its jobs have not ended (intptr_t) */
        Node **nodes; /* never removed; Node.index is the position */
        int n_nodes, cap_nodes;
        int n_draining; /* nodes in NODE_DRAINING: a sweep looks for ended drains only then */
        /* Jobs whose alive ranks hold capacity on nodes, in no order: what a pass reads as
         * the running jobs, without a walk over the nodes' job lists. */
        Job **running;
        int n_running, cap_running;
        /* Positions in running whose job, or what a pass reads of it (state, tier, its
         * attempt), changed since the scheduler last copied them (schedule.c): a pass
         * copies those and not every running job. running_stale[i]: i is listed. */
        int *stale_slots;
        int n_stale_slots;
        bool *running_stale; /* cap_running of them */
        /* Nodes whose free capacity or state changed since the scheduler last took them
         * (schedule.c), so that a pass copies those and not the fleet. */
        Node **capacity_changed;
        int n_capacity_changed, cap_capacity_changed;
        /* Nodes whose lease runs, oldest contact first: a touch moves a node to the tail,
         * so only the head can have run out, and a turn looks at no other. */
        Node *lease_head, *lease_tail;
        int64_t next_job_id;
        FleetRate rate;
        /* Per project, the goodput of its ended jobs whose figures are stored
         * (accounting.c), summed as each is written and seeded at load from one sum of
         * the store, so that a report since the beginning (/metrics, GET /v1/goodput)
         * reads no stored row. In the order first seen. */
        ProjectGoodput **stored_goodput;
        int n_stored_goodput, cap_stored_goodput;
        StrMap *stored_goodput_index; /* project -> its entry */
        uint64_t addresses_changed; /* counts changes of a node's hostname or address */
} Model;

/* The node a placed rank is on, without a lookup by name (a pass does this per rank). */
static inline Node *model_rank_node(const Model *m, const Rank *r) {
        return r->node_name && r->node_index >= 0 && r->node_index < m->n_nodes
                       ? m->nodes[r->node_index]
                       : NULL;
}

/* Gives job n fresh ranks (the old ones freed), none of them holding anything yet. */
void model_job_ranks_new(Job *job, int n);
/* Writes what rank r of job holds into job->held_node and held_devices: call it
 * wherever a rank is placed, restored, or gone. */
void model_rank_held_set(const Model *m, Job *job, const Rank *r);

void model_init(Model *m);
void model_clear(Model *m);
Job *model_job_find(const Model *m, int64_t id);
Node *model_node_find(const Model *m, const char *name);
/* Adds a job (ids ascend) and indexes its idempotency key; active unless terminal. */
void model_job_add(Model *m, Job *job);
/* Adds n jobs, in ascending id order and none of them in m, among those m holds. */
void model_jobs_merge(Model *m, Job **jobs, int n);
/* How many of user's jobs have not ended: what max_jobs_per_user bounds. */
int64_t model_user_jobs(const Model *m, const char *user);
/* job, counted by model_job_add, just ended. */
void model_user_job_ended(Model *m, const Job *job);
/* The job of project that was submitted with idempotency key, or NULL. */
Job *model_job_by_key(const Model *m, const char *project, const char *key);
void model_active_add(Model *m, Job *job);
/* job ended or lost a rank: the next model_active_prune sees whether it holds nothing. */
void model_active_recheck(Model *m, Job *job);
/* After job's state was set: lists it in Model.starting while it is JOB_STARTING. */
void model_starting_update(Model *m, Job *job);
/* job was taken from a model of its own (persist.c's loads): it is in no model's
 * lists until one adds it. */
void model_job_unlisted(Job *job);
/* Frees the jobs over before before_ms (wall) that are not active (hold nothing): they
 * stay in the store (persist_load_job). Returns how many. */
int model_jobs_retire(Model *m, int64_t before_ms);
/* Drops the jobs given to model_active_recheck that are over and hold nothing from the
 * active list; the work follows those jobs, not the list. The list's order is not kept. */
void model_active_prune(Model *m);
void model_node_add(Model *m, Node *node);
/* An attempt that ended so counts against the fleet's failure rate: the job's or a
 * node's failure, not a cancel, drain or preemption. */
bool model_interruption(EndReason r);
/* Counts attempt a of job in rate as it is now, live or ended (sign 1), or takes it out
 * before it changes (sign -1). */
void model_rate_count(FleetRate *rate, const Job *job, const Attempt *a, int sign);
/* Contact from the node's agent at now_ms (monotonic): its lease starts again. */
void model_node_touch(Model *m, Node *node, int64_t now_ms);
/* Its lease is over (the node was declared lost): off the lease list until a touch. */
void model_node_lease_drop(Model *m, Node *node);
/* The node with the oldest contact whose lease runs, or NULL. */
static inline Node *model_lease_oldest(const Model *m) {
        return m->lease_head;
}

/* Lists the node in m->capacity_changed (once): its state or free capacity changed. */
void model_node_capacity_changed(Model *m, Node *node);
/* Lists job's position in m->running (once), if it holds capacity: what a pass reads of
 * it changed. */
void model_running_stale(Model *m, const Job *job);
/* Adds (delta 1) or takes back (delta -1) what rank r of job holds on node. */
void model_node_hold(Model *m, Node *node, Job *job, const Rank *r, int delta);
/* The jobs with alive ranks on node, in id order: a malloc'd copy (*ret_n of them),
 * since marking ranks gone edits the node's own list. */
Job **model_node_jobs(const Node *node, int *ret_n);
/* Recomputes a node's usage from the alive ranks (after load or a new inventory). */
void model_node_recount(Model *m, Node *node);
/* The same for every node at once, after loading: one walk over the alive ranks. */
void model_nodes_recount_all(Model *m);
/* Sets a node's inventory (NULL: none) as a registration brings it: its text, and what
 * the scheduler needs of it. */
void model_node_set_inventory(Node *node, json_t *inventory);
/* Reads what the scheduler needs from the inventory text the node holds (loaded from
 * the store; unreadable text counts as none). Touches only the node's capacity fields
 * and that text, so loading can do it on another thread (persist.c). */
void model_node_parse_inventory(Node *node);
/* Free resources of a node. */
void model_node_free_capacity(const Node *node, int *ret_cpus, int *ret_free_devices,
                              int *ret_ranks);

Job *job_free(Job *job);
void job_gang_clear(JobGang *g);
Node *node_free(Node *node);
void rank_clear(Rank *rank);
