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

/* Interruptions (failures of the job's or a node's making) per rank-second of run time. */
typedef struct CtlFailureRate {
        int64_t interruptions;
        double rank_seconds;
} CtlFailureRate;

/* The fleet's rate over the jobs the controller holds. */
void ctl_goodput_fleet_rate(Controller *ctl, int64_t now_ms, CtlFailureRate *ret);

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
