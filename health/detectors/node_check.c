/* SPDX-License-Identifier: MIT */
/* The agent's health check failed (a vendor runtime's device health, disk, ...): the
 * node is unhealthy and the attempts with ranks there end, blamed on it. */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_NODE || s->healthy)
                return false;
        f->reason = END_UNHEALTHY;
        f->cls = FAILURE_NODE;
        f->scope = HEALTH_SCOPE_NODE;
        f->node_state = NODE_UNHEALTHY;
        snprintf(f->detail, sizeof(f->detail), "%s", s->health_reason ? s->health_reason : "");
        return true;
}

const HealthDetector health_detector_node_check = {.name = "node_check", .detect = detect};
