/* SPDX-License-Identifier: MIT */
/*
 * The table of failure detectors. A new detector is one file in this folder plus one
 * extern and one line in the table below. Order matters where two could find the same
 * thing: a failure rule outranks the plain exit it explains, and an exit its hang.
 */
#include <stddef.h>
#include <string.h>

#include "health.h"

extern const HealthDetector health_detector_failure_rule;
extern const HealthDetector health_detector_rank_exit;
extern const HealthDetector health_detector_rank_missing;
extern const HealthDetector health_detector_hang;
extern const HealthDetector health_detector_node_check;
extern const HealthDetector health_detector_lease;
extern const HealthDetector health_detector_reboot;
extern const HealthDetector health_detector_agent_replaced;
extern const HealthDetector health_detector_start_timeout;

/* One detector a line. */
/* clang-format off */
const HealthDetector *const health_detectors[] = {
        &health_detector_failure_rule,
        &health_detector_rank_exit,
        &health_detector_rank_missing,
        &health_detector_hang,
        &health_detector_node_check,
        &health_detector_lease,
        &health_detector_reboot,
        &health_detector_agent_replaced,
        &health_detector_start_timeout,
        NULL,
};
/* clang-format on */

_Static_assert(
        sizeof(HealthFinding) - offsetof(HealthFinding, detail) - HEALTH_DETAIL_MAX <
                _Alignof(HealthFinding),
        "detail must stay HealthFinding's last member: finding_reset clears what is before it");

/*
 * A blank finding for the next detector. The detail (4 KiB, to hold a node's whole health
 * reason) is only emptied: every detector that finds something writes it whole, and this
 * runs for every rank of every sync, where zeroing it eight times was 2 % of the loop.
 */
static void finding_reset(HealthFinding *f) {
        memset(f, 0, offsetof(HealthFinding, detail));
        f->exit_code = -1;
        f->node_state = _NODE_STATE_INVALID;
        f->rule = _FAILRULE_ACTION_INVALID;
        f->detail[0] = '\0';
}

bool health_detect(const HealthSeen *seen, HealthFinding *ret) {
        for (int i = 0; health_detectors[i]; i++) {
                finding_reset(ret);
                if (health_detectors[i]->detect(seen, ret))
                        return true;
        }
        return false;
}
