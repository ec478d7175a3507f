/* SPDX-License-Identifier: MIT */
/* A rank's agent saw no progress for the job's hang_timeout_s: the job hangs. A hang is
 * the program's own failure, not evidence against the node. */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_RANK || s->exited || !s->hung)
                return false;
        f->reason = END_HANG;
        f->cls = FAILURE_JOB;
        snprintf(f->detail, sizeof(f->detail), "rank %d made no progress for %ds (last step %lld)",
                 s->rank, s->hang_timeout_s, (long long) s->step);
        return true;
}

const HealthDetector health_detector_hang = {.name = "hang", .detect = detect};
