/* SPDX-License-Identifier: MIT */
/* From a finding to blame, quarantine and the restart decision; see health.h. */
#include "health.h"

HealthJudgement health_judge(const HealthCase *c, HealthHistory *node) {
        const HealthFinding *f = c->finding;
        HealthJudgement j = {.quick_failures = c->quick_failures};
        /* A job's log may move it off a node, never take the node out of service: that
         * needs the word of other owners' jobs, as for any failure of its own. */
        bool own = f->cls == FAILURE_JOB || f->claimed_by_job;
        if (node && f->cls == FAILURE_NODE && !f->claimed_by_job)
                j.blame = true;
        else if (node && own)
                j.blame = j.by_suspicion =
                        health_suspect_record(node->suspects, node->n_suspects, node->suspect_cap,
                                              c->suspect, c->window_ms, c->quarantine_after);
        if (j.blame)
                j.quarantine =
                        health_blame_record(node->blame_times, node->n_blame, node->blame_cap,
                                            c->suspect.at_ms, c->window_ms, c->quarantine_after);
        /* A node fault or a drain moves the job; its own crash on a healthy node does not. */
        j.avoid = node && (f->cls == FAILURE_NODE || f->reason == END_DRAINED);
        /* Failures of the node are not the job's: they neither grow its backoff nor
         * count towards its limit of failures without progress. */
        if (own || f->cls == FAILURE_START)
                j.quick_failures = c->progressed ? 0 : c->quick_failures + 1;
        HealthFailure hf = {.reason = f->reason,
                            .exit_code = f->exit_code,
                            .signal = f->signal,
                            .consecutive = j.quick_failures > 0 ? j.quick_failures - 1 : 0,
                            .without_progress = j.quick_failures,
                            .rule = f->rule,
                            .claimed_by_job = f->claimed_by_job};
        j.verdict = health_decide(c->policy, c->restarts_used, &hf);
        return j;
}
