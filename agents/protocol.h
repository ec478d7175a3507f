/* SPDX-License-Identifier: MIT */
/*
 * The agent's glue to the agent protocol (docs/PROTOCOL.md "Agent protocol"): it turns
 * the agent's state (inventory, rank table, checkpoints, health) into the typed messages
 * of common/wire.h, whose codecs do all encoding and decoding.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"
#include "rank.h"
#include "wire.h"

/* Largest answer body read from the controller. */
#define AGENT_MAX_ANSWER_BYTES (16 * 1024 * 1024)

/* The latest committed checkpoint of one job, as reported in every sync. */
typedef struct AgentCheckpoint {
        int64_t job;
        int64_t attempt;
        int64_t step;
        char *path;
} AgentCheckpoint;

typedef struct AgentHealth {
        bool healthy;
        char *reason; /* malloc'd, NULL when healthy */
} AgentHealth;

/*
 * Who is speaking for a node: the host's boot (a new boot id means every rank the node
 * ran is gone) and the agent's state directory (agent_id, kept in <state_dir>/agent-id: a
 * restarted agent is the same agent, a second one or one that lost its state is not).
 */
typedef struct AgentIdentity {
        const char *boot_id;
        const char *agent_id;
} AgentIdentity;

json_t *agent_proto_register_body(const char *node, const char *hostname, const char *address,
                                  const AgentIdentity *id, json_t *labels,
                                  const AgentInventory *inv);

/*
 * Builds a sync body reporting every rank of t, the checkpoints and the health. Ranks
 * that have exited are stamped with request_id in exit_reported_in the first time they
 * are reported, which later tells when the controller has seen the exit.
 */
json_t *agent_proto_sync_body(const char *node, const AgentIdentity *id, RankTable *t,
                              const AgentCheckpoint *ckpts, size_t n_ckpts,
                              const AgentHealth *health, uint64_t request_id);
