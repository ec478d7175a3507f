/* SPDX-License-Identifier: MIT */
/* A node registered with another boot id: it rebooted, and nothing it ran survives. */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_REGISTER || !s->boot_changed)
                return false;
        f->reason = END_NODE_LOST;
        f->cls = FAILURE_NODE;
        f->scope = HEALTH_SCOPE_NODE;
        f->ranks_gone = true;
        snprintf(f->detail, sizeof(f->detail), "node rebooted");
        return true;
}

const HealthDetector health_detector_reboot = {.name = "reboot", .detect = detect};
