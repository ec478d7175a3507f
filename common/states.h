/* SPDX-License-Identifier: MIT */
/*
 * The state names of DESIGN.md §3–§4 (jobs, ranks, nodes, attempt end reasons) and
 * their spelling on the wire and in the database. Shared so that the controller, the
 * store and the CLI agree on every name.
 */
#pragma once

#include <stdbool.h>

typedef enum JobState {
        JOB_PENDING,
        JOB_STARTING,
        JOB_RUNNING,
        JOB_RESTARTING,
        JOB_PREEMPTED,
        JOB_SUCCEEDED,
        JOB_FAILED,
        JOB_CANCELLED,
        _JOB_STATE_MAX,
        _JOB_STATE_INVALID = -1,
} JobState;

typedef enum RankState {
        RANK_ASSIGNED,
        RANK_RUNNING,
        RANK_SUCCEEDED,
        RANK_FAILED,
        RANK_KILLED,
        RANK_LOST,
        _RANK_STATE_MAX,
        _RANK_STATE_INVALID = -1,
} RankState;

typedef enum NodeState {
        NODE_READY,
        NODE_DRAINING,
        NODE_DRAINED,
        NODE_DOWN,
        NODE_QUARANTINED,
        NODE_UNHEALTHY,
        _NODE_STATE_MAX,
        _NODE_STATE_INVALID = -1,
} NodeState;

typedef enum EndReason {
        END_RANK_EXIT,
        END_NODE_LOST,
        END_HANG,
        END_UNHEALTHY,
        END_PREEMPTED,
        END_CANCELLED,
        END_SUCCEEDED,
        END_DRAINED,
        END_START_FAILED, /* a rank could not start: command, workdir or account */
        END_NODE_FAULT, /* a rank failed with evidence against its node (a failure rule) */
        END_START_TIMEOUT, /* a rank was not running within the controller's start timeout */
        _END_REASON_MAX,
        _END_REASON_INVALID = -1,
} EndReason;

const char *job_state_to_string(JobState s);
JobState job_state_from_string(const char *s);
bool job_state_is_terminal(JobState s);
const char *rank_state_to_string(RankState s);
RankState rank_state_from_string(const char *s);
const char *node_state_to_string(NodeState s);
NodeState node_state_from_string(const char *s);
const char *end_reason_to_string(EndReason r);
EndReason end_reason_from_string(const char *s);
