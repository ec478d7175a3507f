/* SPDX-License-Identifier: MIT */
/*
 * The node agent (DESIGN.md §5): registers the node with the controller, keeps a sync
 * going that reports the actual state of every rank and receives the desired one, and
 * converges to it by starting and killing ranks. One thread runs everything on one
 * loop: libcurl's multi interface for the controller, pidfds for rank and health
 * command exits, signalfd for SIGTERM/SIGINT, and deadlines for scans, health checks,
 * kill escalation and the lease.
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "logpump.h"
#include "userpolicy.h"

typedef struct AgentConfig {
        const char *controller; /* base URL, "http://127.0.0.1:8080" */
        const char *node;
        const char *state_dir;
        const char *topology; /* hwloc XML, NULL: the real machine */
        const char *dev_root; /* "" for the real root */
        const char *sys_root;
        const char *listen; /* "HOST:PORT" of the log server */
        json_t *labels; /* object of strings, borrowed */
        const char *health_cmd; /* NULL: none */
        int64_t health_interval_ms;
        const char *profile_dir; /* NULL: no launch profiles */
        int64_t kill_grace_ms;
        LogPumpLimits log_limits; /* cap and rotation of rank logs */
        const char *token; /* bearer token for the controller, NULL: none; never logged */
        const char *ca_file; /* CA bundle for an https controller, NULL: the system's */
        const AgentUserPolicy *users; /* which accounts ranks may run as; borrowed */
        const char *cgroup; /* name of the agent's cgroup below its own; NULL: no cgroups */
} AgentConfig;

typedef struct Agent Agent;

/*
 * Takes the inventory, starts the log server and re-adopts the ranks found in the state
 * directory. The caller must have blocked SIGTERM and SIGINT (agent_run takes them
 * through a signalfd) before calling, so that no helper thread receives them. Logs the
 * reason and returns -errno on failure.
 */
int agent_new(const AgentConfig *cfg, Agent **ret);
/* Runs until SIGTERM or SIGINT; ranks keep running. Returns 0 or -errno. */
int agent_run(Agent *a);
/* Returns NULL. */
Agent *agent_free(Agent *a);
