/* SPDX-License-Identifier: MIT */
/*
 * The operator's node health command (--health-cmd), run with `sh -c` without blocking
 * the agent's loop: the caller polls the command's output pipe and pidfd together with
 * its other descriptors and calls agent_healthcmd_process when one is readable or the
 * deadline has passed. A non-zero exit, a signal or a timeout makes the node unhealthy,
 * with the command's output (trimmed) as the reason.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest reason reported to the controller, in bytes. */
#define AGENT_HEALTH_REASON_MAX 512

typedef struct AgentHealthCmd AgentHealthCmd;

AgentHealthCmd *agent_healthcmd_new(const char *command, int64_t timeout_ms);
/* Kills a command still running and frees h; returns NULL. */
AgentHealthCmd *agent_healthcmd_free(AgentHealthCmd *h);

/* Starts a run; -EBUSY when one is in progress, other -errno when fork fails. */
int agent_healthcmd_start(AgentHealthCmd *h, int64_t now_ms);
bool agent_healthcmd_running(const AgentHealthCmd *h);
/* The descriptors to poll for reading while running (0, 1 or 2 of them). */
size_t agent_healthcmd_fds(const AgentHealthCmd *h, int fds[2]);
/* Monotonic deadline of the run in progress, INT64_MAX when none. */
int64_t agent_healthcmd_deadline(const AgentHealthCmd *h);

/*
 * Collects output and, once the command has ended or its deadline has passed, the
 * verdict. Returns 1 with *ret_healthy and *ret_reason (malloc'd, NULL when healthy), 0
 * while the command still runs.
 */
int agent_healthcmd_process(AgentHealthCmd *h, int64_t now_ms, bool *ret_healthy,
                            char **ret_reason);

/*
 * Turns command output into a reason: surrounding whitespace removed, cut to
 * AGENT_HEALTH_REASON_MAX bytes without splitting a UTF-8 character. Returns a malloc'd
 * string, or NULL when nothing is left.
 */
char *agent_health_reason_trim(const char *output, size_t len);
