/* SPDX-License-Identifier: MIT */
/*
 * The agent's side of the agent protocol (docs/PROTOCOL.md "Agent protocol"): building
 * the register and sync bodies from the agent's state, and decoding the controller's
 * answers into typed records. Decoding is lenient where leniency is safe: a desired
 * rank whose fields are wrong is still recognised by its key (so it is neither killed
 * nor started twice) and carries an error that becomes its launch failure.
 *
 * The controller's answers are input like any other: a compromised or buggy controller
 * must not be able to exhaust the agent's memory or hand a rank a path it did not mean.
 * The limits below bound what one answer may ask for; an answer over the rank limit is
 * rejected whole (the agent keeps its state and, without a good answer, fences itself
 * at the end of its lease), an entry over another limit fails to start with the reason.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"
#include "rank.h"

/* Largest answer body read from the controller. */
#define AGENT_MAX_ANSWER_BYTES (16 * 1024 * 1024)
/* Most desired ranks in one answer: more than any node can run. */
#define AGENT_MAX_DESIRED_RANKS 4096
/* Per rank: argv entries, env entries, devices, bytes of one string, and all of argv and
 * env together (Linux refuses an exec over about 2 MiB anyway). */
#define AGENT_MAX_ARGS 4096
#define AGENT_MAX_ENV 4096
#define AGENT_MAX_DEVICES 1024
#define AGENT_MAX_STRING (128 * 1024)
#define AGENT_MAX_EXEC_BYTES (1024 * 1024)
#define AGENT_MAX_PATH 4096
#define AGENT_MAX_NAME 256
#define AGENT_MAX_HANG_TIMEOUT_S (366LL * 24 * 3600)

/* One rank the controller wants on this node; strings and JSON borrowed from the answer. */
typedef struct DesiredRank {
        RankKey key;
        json_t *argv; /* array of strings */
        json_t *env; /* object of strings, may be NULL */
        const char *workdir; /* may be NULL */
        const char *user; /* may be NULL */
        json_t *devices; /* array of inventory indices, may be NULL */
        const char *accelerator; /* may be NULL */
        const char *checkpoint_dir; /* may be NULL */
        int64_t hang_timeout_s;
        char *error; /* malloc'd; non-NULL when the entry cannot be started as given */
} DesiredRank;

typedef struct SyncAnswer {
        json_t *json; /* owns what the ranks borrow */
        int64_t version;
        int64_t lease_ms; /* 0 when absent */
        DesiredRank *ranks;
        size_t n_ranks;
} SyncAnswer;

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
 * Decodes the register answer: lease_ms and sync_period_ms (left untouched when absent).
 * Returns 0 or -EBADMSG.
 */
int agent_proto_parse_register(json_t *json, int64_t *lease_ms, int64_t *sync_period_ms);

/*
 * Builds a sync body reporting every rank of t, the checkpoints and the health. Ranks
 * that have exited are stamped with request_id in exit_reported_in the first time they
 * are reported, which later tells when the controller has seen the exit.
 */
json_t *agent_proto_sync_body(const char *node, const AgentIdentity *id, RankTable *t,
                              const AgentCheckpoint *ckpts, size_t n_ckpts,
                              const AgentHealth *health, uint64_t request_id);

/*
 * Decodes a sync answer, taking over the reference to json. 0, or -EBADMSG when the
 * answer is not a sync answer or lists more than AGENT_MAX_DESIRED_RANKS ranks.
 */
int agent_proto_parse_sync(json_t *json, SyncAnswer *ret);
void agent_sync_answer_clear(SyncAnswer *a);

/* Finds key among the desired ranks, NULL when not listed. */
const DesiredRank *agent_sync_answer_find(const SyncAnswer *a, RankKey key);

/* The controller's error code in an error answer body ({"error":{"code":...}}), or NULL. */
const char *agent_proto_error_code(json_t *json);
