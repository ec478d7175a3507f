/* SPDX-License-Identifier: MIT */
/* A rank ran, and its agent lost it without an exit status: the job's attempt failed. */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_RANK_MISSING)
                return false;
        f->reason = END_RANK_EXIT;
        f->cls = FAILURE_JOB;
        snprintf(f->detail, sizeof(f->detail), "rank %d vanished from %s without an exit status",
                 s->rank, s->node);
        return true;
}

const HealthDetector health_detector_rank_missing = {.name = "rank_missing", .detect = detect};
