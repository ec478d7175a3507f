/* SPDX-License-Identifier: MIT */
/*
 * Typed forms of the agent protocol messages (docs/PROTOCOL.md), decoded strictly from
 * JSON so the controller core never touches raw input. A decoding failure names the
 * field, like spec parsing does.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jsonutil.h"

#define WIRE_MAX_RANKS 4096
#define WIRE_MAX_CHECKPOINTS 4096
#define WIRE_MAX_REASON 4096

typedef struct WireRegister {
        const char *node, *hostname, *address, *boot_id; /* borrowed from the JSON */
        const char *agent_id; /* the agent instance's state-directory identity; may be NULL */
        json_t *labels; /* borrowed, object of strings; NULL when the agent sent none */
        json_t *inventory; /* borrowed object */
        int cpus;
        int64_t memory_mb;
        int numa_nodes;
        json_t *accelerators; /* borrowed array */
} WireRegister;

typedef struct WireRankReport {
        int64_t job;
        int attempt;
        int rank;
        bool exited;
        int pid; /* 0: unknown */
        int exit_code; /* -1: none */
        int signal; /* 0: none */
        int64_t step; /* -1: unknown */
        bool hung;
        bool start_failed; /* exited because its command, workdir or account could not start */
} WireRankReport;

typedef struct WireCheckpoint {
        int64_t job;
        int attempt;
        int64_t step;
        const char *path; /* borrowed */
} WireCheckpoint;

typedef struct WireSync {
        const char *node, *boot_id, *agent_id;
        WireRankReport *ranks;
        int n_ranks;
        WireCheckpoint *checkpoints;
        int n_checkpoints;
        bool healthy;
        const char *health_reason; /* borrowed, "" when healthy */
} WireSync;

int wire_register_parse(json_t *json, WireRegister *ret, JsonError *err);
/* Fills ret; arrays are malloc'd: release with wire_sync_clear(). */
int wire_sync_parse(json_t *json, WireSync *ret, JsonError *err);
void wire_sync_clear(WireSync *sync);
