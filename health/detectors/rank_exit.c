/* SPDX-License-Identifier: MIT */
/*
 * A rank exited with a failure: a non-zero code or a signal is the job's own failure
 * (running out of its memory_mb too, said as such);
 * an exit before the command ran (command, workdir or account) is a start failure.
 * Neither is evidence against the node (DESIGN.md §4a), unless the agent says the start
 * failed for want of its own state directory.
 */
#include <stdio.h>

#include "health.h"

static bool detect(const HealthSeen *s, HealthFinding *f) {
        if (s->kind != HEALTH_SEEN_RANK || !s->exited || (s->exit_code == 0 && s->signal == 0))
                return false;
        f->exit_code = s->exit_code;
        if (s->start_failed && s->node_fault) {
                /* The agent could not even write the rank's state: its disk, not the job. */
                f->reason = END_NODE_FAULT;
                f->cls = FAILURE_NODE;
                snprintf(f->detail, sizeof(f->detail),
                         "rank %d on %s could not start: the node cannot write its state "
                         "directory (the node's health says why)",
                         s->rank, s->node);
                return true;
        }
        if (s->start_failed) {
                f->reason = END_START_FAILED;
                f->cls = FAILURE_START;
                snprintf(f->detail, sizeof(f->detail),
                         "rank %d on %s could not start (exit code %d; its log says why)", s->rank,
                         s->node, s->exit_code);
                return true;
        }
        f->reason = END_RANK_EXIT;
        f->cls = FAILURE_JOB;
        f->signal = s->signal;
        if (s->oom_killed)
                snprintf(f->detail, sizeof(f->detail),
                         "rank %d on %s ran out of memory: the kernel's OOM killer stopped it at "
                         "its resources.memory_mb limit (%s %d)",
                         s->rank, s->node, s->signal > 0 ? "signal" : "exit code",
                         s->signal > 0 ? s->signal : s->exit_code);
        else if (s->signal > 0)
                snprintf(f->detail, sizeof(f->detail), "rank %d on %s killed by signal %d", s->rank,
                         s->node, s->signal);
        else
                snprintf(f->detail, sizeof(f->detail), "rank %d on %s exited with code %d", s->rank,
                         s->node, s->exit_code);
        return true;
}

const HealthDetector health_detector_rank_exit = {.name = "rank_exit", .detect = detect};
