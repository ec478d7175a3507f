/* SPDX-License-Identifier: MIT */
/*
 * A node silent for longer than lease + grace is lost. By then every rank on it has
 * been killed by its own supervisor (the node lease, docs/ARCHITECTURE.md), so its
 * ranks count as gone and their attempts may be placed elsewhere.
 */

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_SILENCE ||
            !health_node_lost(0, s->silent_ms, s->lease_ms, s->grace_ms))
                return false;
        health_find_node_lost(f, NODE_DOWN, "no sync for %lld ms", (long long) s->silent_ms);
        return true;
}

const HealthDetector health_detector_lease = {.name = "lease", .detect = detect};
