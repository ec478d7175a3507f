/* SPDX-License-Identifier: MIT */
/*
 * Another agent took a node over once its holder's lease had run out (DESIGN §4b). The
 * holder's ranks fenced themselves by then, and the newcomer cannot know them: they are
 * lost, and so are their attempts, even when the takeover comes before the lease
 * detector's tick has declared the node down.
 */

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_REGISTER || !s->agent_replaced)
                return false;
        /* As the lease detector would have found a moment later: down, so that the
         * attempts it ends blame it without quarantining it; the registration that
         * follows makes it ready again. */
        health_find_node_lost(f, NODE_DOWN, "node taken over by another agent");
        return true;
}

const HealthDetector health_detector_agent_replaced = {.name = "agent_replaced", .detect = detect};
