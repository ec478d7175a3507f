/* SPDX-License-Identifier: MIT */
/* A node registered with another boot id: it rebooted, and nothing it ran survives. */

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_REGISTER || !s->boot_changed)
                return false;
        health_find_node_lost(f, _NODE_STATE_INVALID, "node rebooted");
        return true;
}

const HealthDetector health_detector_reboot = {.name = "reboot", .detect = detect};
