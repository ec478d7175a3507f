/* SPDX-License-Identifier: MIT */
/*
 * The controller's side of goodput (health/goodput.h does the accounting): records what
 * the accounting needs of each attempt as the agents report progress and checkpoints,
 * hands a job's records to the accounting, measures the fleet's failure rate and advises
 * a job's checkpoint interval. docs/GOODPUT.md says what each figure means.
 */
#pragma once

#include <stdio.h>

#include "controller.h"
#include "goodput.h" /* health/ */
#include "store.h"
#include "transition.h"

/* Rank r of job's current attempt reported its step at now_ms (wall). */
void ctl_goodput_progress(Turn *t, Job *job, const Rank *r, int64_t now_ms);
/* Job's current attempt committed a checkpoint at now_ms (wall). */
void ctl_goodput_checkpoint(Turn *t, Job *job, int64_t now_ms);
/* Job's current attempt is about to end for reason, seen on node (NULL: none): records
 * when the failure happened by its evidence, where that is earlier than now. */
void ctl_goodput_failing(Job *job, const Node *node, EndReason reason);

/* The job's timeline (health/goodput.h) up to now_ms; malloc'd, *ret_n segments. */
GoodputSegment *ctl_goodput_timeline(const Job *job, int64_t now_ms, int *ret_n);
/* What one second of the job costs: its accelerators (its ranks when it uses none). */
int64_t ctl_goodput_weight(const Job *job);

/* Interruptions (failures of the job's or a node's making) per rank-time of run time. */
typedef struct CtlFailureRate {
        int64_t interruptions;
        int64_t rank_ms;
} CtlFailureRate;

/* The fleet's rate over every job it has run (in memory or only in the store). O(1). */
void ctl_goodput_fleet_rate(Controller *ctl, int64_t now_ms, CtlFailureRate *ret);
/* Seeds the model's rate and stored goodput at load from one sum of the store's figures
 * of ended jobs, and the rate also from the attempts of jobs in memory whose figures are
 * not stored yet. */
int ctl_goodput_stored_load(Store *store, Model *m);
/* An ended job's figures were stored (ctl_goodput_final's): adds them to the model's. */
void ctl_goodput_stored_add(Model *m, const StoreGoodput *job);

/* An ended job's figures, for the store (written once, with its final state). */
void ctl_goodput_final(const Job *job, StoreGoodput *ret);

/*
 * Goodput per project and for the fleet, over every job the controller has run: the
 * jobs whose figures are not stored yet (running, or ended in this turn) from their
 * timelines, the others from the sums kept as they were stored (since_ms 0) or summed
 * in the store (a window). O(jobs in memory + projects), plus the store's sums over a
 * window.
 */
typedef struct CtlGoodputQuery {
        const char *project; /* NULL: every project */
        int64_t since_ms, now_ms; /* the window, wall */
        bool (*visible)(void *userdata, const char *project); /* NULL: every project */
        void *userdata;
        /* Reads a job that may have left memory (ctl_job_lookup), for the ended jobs
         * whose lives the window's start cuts; NULL when since_ms is 0. Passed in:
         * jobs.c calls this file. */
        Job *(*lookup)(Controller *ctl, int64_t id);
} CtlGoodputQuery;

typedef struct CtlGoodputSums {
        ProjectGoodput *projects; /* jobs: those with time in the window */
        int n_projects, cap_projects;
        GoodputTotals fleet; /* accelerator-ms */
} CtlGoodputSums;

void ctl_goodput_sums(Controller *ctl, const CtlGoodputQuery *q, CtlGoodputSums *ret);
void ctl_goodput_sums_clear(CtlGoodputSums *sums);

typedef struct CtlCheckpointAdvice {
        GoodputAdviceInput in; /* measured; 0 where not known */
        bool mtbf_from_job; /* the job's own failures, else the fleet's rate at its size */
        bool advised; /* advice is known (a cost and an MTBF were measured) */
        GoodputAdvice advice;
} CtlCheckpointAdvice;

void ctl_goodput_advice(const Job *job, const CtlFailureRate *fleet, int64_t now_ms,
                        CtlCheckpointAdvice *ret);

/* Goodput metrics per project, in Prometheus text. */
void ctl_goodput_metrics_write(Controller *ctl, FILE *f);
