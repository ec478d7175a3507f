/* SPDX-License-Identifier: MIT */
/*
 * A rank placed on a node that keeps syncing is still not running after the
 * controller's start timeout: the agent could not start it and could not say why (a
 * hung filesystem, a stuck account lookup). The node is to blame; the job moves on.
 */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_RANK_WAITING || s->start_timeout_ms <= 0 ||
            s->waited_ms < s->start_timeout_ms)
                return false;
        f->reason = END_START_TIMEOUT;
        f->cls = FAILURE_NODE;
        snprintf(f->detail, sizeof(f->detail),
                 "rank %d on %s was not running %.1fs after placement", s->rank, s->node,
                 (double) s->waited_ms / 1000.0);
        return true;
}

const HealthDetector health_detector_start_timeout = {.name = "start_timeout", .detect = detect};
