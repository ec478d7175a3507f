/* SPDX-License-Identifier: MIT */
/* What happens to a job's attempt when it fails, is preempted or starts (jobs.c). */
#pragma once

#include "controller-internal.h"
#include "health.h"

/*
 * The current attempt failed with finding f, seen on node (NULL: nowhere in
 * particular): stop the gang, ask health/ whom to blame and whether to restart, and
 * apply the verdict. Does nothing when the attempt is already over (the first failure
 * wins the blame).
 */
void jobs_attempt_failed(Controller *ctl, Job *job, Node *node, const HealthFinding *f);
/* Stops the job's attempt so that a job within its quota gets the capacity back; the
 * job returns to the queue without spending its restart budget. */
void jobs_preempt(Controller *ctl, Job *job, const char *why);
/* Starts the job's next attempt on a placement of the scheduler. */
void jobs_start(Controller *ctl, Job *job, const SchedPlacement *pl);
/* Ends starting attempts with a rank not running within cfg.start_timeout_ms. */
void jobs_tick(Controller *ctl, int64_t now_ms);
/* Frees the jobs ctl_job_lookup read from the store during the turn. */
void jobs_borrowed_release(Controller *ctl);
/* Every rank of the current attempt succeeded. */
void jobs_succeeded(Controller *ctl, Job *job);
