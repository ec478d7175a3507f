/* SPDX-License-Identifier: MIT */
/*
 * The Controller struct and the helpers shared by the files of the controller core
 * (controller.c: state machine; persist.c: store mapping; rankenv.c: rank environment).
 * Nothing outside daemon/ includes this.
 */
#pragma once

#include "controller.h"
#include "metrics.h"
#include "strmap.h"

struct Controller {
        CtlConfig cfg;
        Store *store;
        Job **jobs; /* all jobs, ascending id */
        int n_jobs, cap_jobs;
        Job **active; /* jobs not terminal, or with ranks that may still be alive */
        int n_active, cap_active;
        StrMap *idempotency; /* key -> Job */
        StrMap *node_index; /* name -> Node */
        Node **nodes;
        int n_nodes, cap_nodes;
        int64_t next_job_id;
        bool in_turn_tx; /* a store transaction is open for this turn */
        bool sched_needed;
        bool sched_full; /* capacity or eligibility changed: a pass over every waiting job */
        int n_held; /* waiting jobs the scheduler holds capacity for (reserved, preempting) */
        int64_t oldest_waiting_ms; /* wall: queue time of the oldest job at the last full pass */
        Job **fresh; /* submitted since the last pass */
        int n_fresh, cap_fresh;
        bool sweep_needed; /* a job may have ended or a rank died: prune the active list */
        int64_t last_sched_ms; /* monotonic time of the last scheduling pass */
        int64_t next_restart_ms; /* earliest restart_at of a restarting job, INT64_MAX none */
        Job **dirty_jobs;
        int n_dirty_jobs, cap_dirty_jobs;
        Node **dirty_nodes;
        int n_dirty_nodes, cap_dirty_nodes;
        /* For /metrics. */
        uint64_t restarts_by_reason[_END_REASON_MAX];
        Histogram recovery; /* failure detected -> every rank of the next attempt running */
        Histogram sched_pass;
        Histogram db_commit;
        SchedQuota *quota;
};

/* Opens this turn's transaction if needed; a failure here is fatal for the process. */
void ctl_tx(Controller *ctl);
void ctl_job_dirty(Controller *ctl, Job *job);
void ctl_node_dirty(Controller *ctl, Node *node);
void ctl_event(Controller *ctl, int64_t job, const char *node, const char *kind, const char *fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* controller.c, for schedule.c */
void ctl_job_start_attempt(Controller *ctl, Job *job, const SchedPlacement *pl, Node **node_of);
/* Stops the job's attempt so that a job within its quota gets the capacity back; the
 * job returns to the queue without spending its restart budget. */
void ctl_job_preempt(Controller *ctl, Job *job, const char *why);
bool ctl_job_attempt_live(const Job *job);

/* schedule.c */
void ctl_schedule(Controller *ctl);
/* Whether a job with this spec could ever fit the fleet (SCHED_WAIT_NONE if so). */
SchedWait ctl_job_feasible(Controller *ctl, const JobSpec *spec);

/* Recomputes a node's usage from the alive ranks (after load or a new inventory). */
void ctl_node_recount(Controller *ctl, Node *node);

/* persist.c */
int ctl_persist_dirty(Controller *ctl);
int ctl_load(Controller *ctl);
void ctl_job_append(Controller *ctl, Job *job);
void ctl_active_add(Controller *ctl, Job *job);
void ctl_node_append(Controller *ctl, Node *node);
void ctl_node_set_inventory(Node *node, json_t *inventory);
Job *job_free(Job *job);
Node *node_free(Node *node);
void rank_clear(Rank *rank);
