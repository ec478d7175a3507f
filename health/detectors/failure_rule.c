/* SPDX-License-Identifier: MIT */
/*
 * A failed rank's log matches a failure rule (common/failrules.h): the operator's rules
 * first, then the job's own. A node_fault match moves the job off the node, but the log
 * is the job's own text (a hostile job can print any vendor's XID line), so it blames
 * the node only the way any failure of the job does (health_judge: jobs of other users
 * that ran fine elsewhere failing there too); evidence the job cannot write, the
 * devices' own health, blames at once (node_check). fatal and retry rules decide the
 * restart (health_decide).
 */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_RANK || !s->exited || s->start_failed || !s->log_tail ||
            (s->exit_code == 0 && s->signal == 0))
                return false;
        FailRuleMatch m;
        bool operator= failrules_match(s->operator_rules, s->log_tail, &m);
        if (!operator&& !failrules_match(s->job_rules, s->log_tail, &m))
                return false;
        f->rule = m.rule->action;
        f->exit_code = s->exit_code;
        f->signal = s->signal;
        if (m.rule->action == FAILRULE_NODE_FAULT) {
                f->reason = END_NODE_FAULT;
                f->cls = FAILURE_NODE;
                f->claimed_by_job = true; /* whichever rule: the text is the job's */
        } else {
                f->reason = END_RANK_EXIT;
                f->cls = FAILURE_JOB;
        }
        char ended[48];
        if (s->signal > 0)
                snprintf(ended, sizeof(ended), "killed by signal %d", s->signal);
        else
                snprintf(ended, sizeof(ended), "exited with code %d", s->exit_code);
        snprintf(f->detail, sizeof(f->detail),
                 "rank %d on %s %s; its log matches %s rule %d (%s%s%s): %s", s->rank, s->node,
                 ended, operator? "the operator's" : "the job's", m.index + 1,
                 failrule_action_to_string(m.rule->action), m.rule->why ? ", " : "",
                 m.rule->why ? m.rule->why : "", m.line);
        return true;
}

const HealthDetector health_detector_failure_rule = {.name = "failure_rule", .detect = detect};
