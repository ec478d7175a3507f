/* SPDX-License-Identifier: MIT */
/* Names of job, rank and node states and attempt end reasons; see states.h. */
#include "states.h"

#include <string.h>

static const char *const job_state_names[_JOB_STATE_MAX] = {
        [JOB_PENDING] = "pending",     [JOB_STARTING] = "starting",
        [JOB_RUNNING] = "running",     [JOB_RESTARTING] = "restarting",
        [JOB_PREEMPTED] = "preempted", [JOB_SUCCEEDED] = "succeeded",
        [JOB_FAILED] = "failed",       [JOB_CANCELLED] = "cancelled",
};

static const char *const rank_state_names[_RANK_STATE_MAX] = {
        [RANK_ASSIGNED] = "assigned", [RANK_RUNNING] = "running", [RANK_SUCCEEDED] = "succeeded",
        [RANK_FAILED] = "failed",     [RANK_KILLED] = "killed",   [RANK_LOST] = "lost",
};

static const char *const node_state_names[_NODE_STATE_MAX] = {
        [NODE_READY] = "ready", [NODE_DRAINING] = "draining",       [NODE_DRAINED] = "drained",
        [NODE_DOWN] = "down",   [NODE_QUARANTINED] = "quarantined", [NODE_UNHEALTHY] = "unhealthy",
};

static const char *const end_reason_names[_END_REASON_MAX] = {
        [END_RANK_EXIT] = "rank_exit",
        [END_NODE_LOST] = "node_lost",
        [END_HANG] = "hang",
        [END_UNHEALTHY] = "unhealthy",
        [END_PREEMPTED] = "preempted",
        [END_CANCELLED] = "cancelled",
        [END_SUCCEEDED] = "succeeded",
        [END_DRAINED] = "drained",
        [END_START_FAILED] = "start_failed",
        [END_NODE_FAULT] = "node_fault",
        [END_START_TIMEOUT] = "start_timeout",
};

static int lookup(const char *const *names, int n, const char *s) {
        for (int i = 0; s && i < n; i++)
                if (strcmp(names[i], s) == 0)
                        return i;
        return -1;
}

const char *job_state_to_string(JobState s) {
        return s >= 0 && s < _JOB_STATE_MAX ? job_state_names[s] : NULL;
}
JobState job_state_from_string(const char *s) {
        return (JobState) lookup(job_state_names, _JOB_STATE_MAX, s);
}
bool job_state_is_terminal(JobState s) {
        return s == JOB_SUCCEEDED || s == JOB_FAILED || s == JOB_CANCELLED;
}
const char *rank_state_to_string(RankState s) {
        return s >= 0 && s < _RANK_STATE_MAX ? rank_state_names[s] : NULL;
}
RankState rank_state_from_string(const char *s) {
        return (RankState) lookup(rank_state_names, _RANK_STATE_MAX, s);
}
const char *node_state_to_string(NodeState s) {
        return s >= 0 && s < _NODE_STATE_MAX ? node_state_names[s] : NULL;
}
NodeState node_state_from_string(const char *s) {
        return (NodeState) lookup(node_state_names, _NODE_STATE_MAX, s);
}
const char *end_reason_to_string(EndReason r) {
        return r >= 0 && r < _END_REASON_MAX ? end_reason_names[r] : NULL;
}
EndReason end_reason_from_string(const char *s) {
        return (EndReason) lookup(end_reason_names, _END_REASON_MAX, s);
}
