/* SPDX-License-Identifier: MIT */
/*
 * Glue between the model and the pure scheduler (scheduler/): the snapshot it sees,
 * the waiting jobs it looks at, and the quota file. A pass returns its decisions; the
 * controller applies them (controller.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "scheduler.h"

typedef struct Controller Controller;

/* Names kept for passes (Scheduling.names) at least, before unused ones are dropped. */
#define SCHED_NAMES_MAX 4096

typedef struct Scheduling {
        SchedQuota *quota; /* NULL: equal shares */
        Job **fresh; /* submitted since the last pass */
        int n_fresh, cap_fresh;
        int n_held; /* waiting jobs the scheduler holds capacity for (reserved, preempting) */
        int64_t oldest_waiting_ms; /* wall: queue time of the oldest job at the last full pass */
        int64_t last_pass_ms; /* monotonic time of the last pass */
        int64_t next_restart_ms; /* earliest restart_at of a restarting job, INT64_MAX none */
        /* Every node's whole capacity, for the feasibility check of each submit; built
         * again after a node registers (schedule_fleet_changed). NULL: to build. */
        struct Snapshot *fleet;
        SchedFeasibility *feasibility; /* over fleet's nodes, built with it */
        /* Every node's free capacity as passes read it, kept between passes: a pass
         * copies again only the nodes in Model.capacity_changed (copying the whole fleet
         * was a third of a pass at 10,000 nodes). Built again after a node registers or
         * names_gen moves on. NULL: to build. */
        struct Snapshot *pass_fleet;
        uint64_t pass_fleet_gen; /* the names_gen its device kinds are of */
        /* The running jobs as passes read them, in Model.running's order, kept between
         * passes: a pass copies again only the positions in Model.stale_slots (copying
         * every running job was a quarter of a pass at 10,000 nodes), or all of them when
         * names_gen moved on. NULL: none kept yet. */
        SchedRunning *running;
        struct Job **running_of;
        int cap_running;
        uint64_t running_gen; /* the names_gen its names are of */
        StrMap *verdicts; /* job shape -> its feasibility + 1, for the same fleet */
        /* One copy of each project, user and kind name given to passes, so that a pass
         * knows equal names by their address instead of hashing each job's. Jobs and
         * nodes keep theirs, tagged with names_gen; when copies no job uses pile up
         * (sched_names_begin), all are dropped before a pass and names_gen moves on. */
        StrMap *names; /* its keys are the copies */
        int names_in_use; /* taken by the generation's first pass; -1: not known yet */
        uint64_t names_gen;
} Scheduling;

void schedule_init(Scheduling *s);
void schedule_clear(Scheduling *s);
/* A new job waits: the next pass looks at it even when nothing else changed. */
void schedule_job_added(Scheduling *s, Job *job);
/* A node joined or changed its inventory or labels: feasibility is judged afresh. */
void schedule_fleet_changed(Scheduling *s);
/* Reads the quota file at path (NULL: none) as ctl_quota_reload does, keeping nothing.
 * 0, or -errno with *ret_error. */
int schedule_quota_check(const char *path, char **ret_error);
/* A restarting job may be placed from restart_at_ms (monotonic). */
void schedule_restart_at(Scheduling *s, int64_t restart_at_ms);

/*
 * One pass (full: over every waiting job; else over the new ones and those the
 * scheduler holds capacity for). Records why each job waits and running jobs' tiers.
 * True with *ret filled (release with sched_result_clear) when there are placements or
 * preemptions to apply.
 */
bool schedule_pass(Controller *ctl, bool full, SchedResult *ret);
/* Whether a job with this spec could ever fit the fleet (SCHED_WAIT_NONE if so). */
SchedWait schedule_feasible(Controller *ctl, const JobSpec *spec);
