/* SPDX-License-Identifier: MIT */
/*
 * The agent protocol (docs/PROTOCOL.md "Agent protocol"): one typed struct per message
 * and, per message, one encoder and one decoder side by side in one file, so the agent,
 * the controller, the CLI and the tests all read and write the same JSON:
 *
 *   register request and answer   wire-register.c
 *   sync request                  wire-sync.c
 *   sync answer (desired ranks)   wire-sync-answer.c
 *   error body                    wire-error.c
 *
 * Encoders build a new JSON value and only take references to the struct's JSON members;
 * the sync answer's, the hottest, writes text instead (see below).
 * Decoders borrow strings and JSON from the input, which must outlive the struct. The
 * controller decodes the agent's messages strictly: a failure names the field, like
 * spec parsing does. The agent decodes answers leniently where that is safe (see the
 * sync answer below).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonutil.h"
#include "jsonwriter.h"

/* Ranks in one sync or its answer: more than any node can run. */
#define WIRE_MAX_RANKS 4096
#define WIRE_MAX_CHECKPOINTS 4096
#define WIRE_MAX_REASON 4096

/*
 * Limits on one desired rank. The controller's answers are input like any other: a
 * compromised or buggy controller must not be able to exhaust the agent's memory or hand
 * a rank a path it did not mean. Per rank: argv entries, env entries, devices, bytes of
 * one string, and all of argv and env together (Linux refuses an exec over about 2 MiB).
 */
#define WIRE_MAX_ARGS 4096
#define WIRE_MAX_ENV 4096
#define WIRE_MAX_DEVICES 1024
#define WIRE_MAX_STRING (128 * 1024)
#define WIRE_MAX_EXEC_BYTES (1024 * 1024)
#define WIRE_MAX_PATH 4096
#define WIRE_MAX_NAME 256
#define WIRE_MAX_HANG_TIMEOUT_S (366LL * 24 * 3600)
#define WIRE_MAX_LOG_TAIL 4096 /* FAILRULES_LOG_TAIL */
/* The spec's own bounds on a rank's resources (common/spec.c). */
#define WIRE_MAX_CPUS 4096
#define WIRE_MAX_MEMORY_MB (INT64_C(1) << 40)

/* ---- POST /v1/agent/register ---- */

typedef struct WireRegister {
        const char *node, *hostname, *address, *boot_id;
        const char *agent_id; /* the agent instance's state-directory identity; may be NULL */
        json_t *labels; /* object of strings; NULL when the agent sent none */
        json_t *inventory; /* decoded only: the whole inventory object, as received */
        int cpus;
        int64_t memory_mb;
        int numa_nodes;
        json_t *accelerators; /* array of device objects with a kind */
        const char *containment; /* how ranks are contained: "cgroup-v2", "subreaper"...;
                                    may be NULL */
} WireRegister;

json_t *wire_register_encode(const WireRegister *r);
/* True for "host:port" only: a host name or IPv4 address ([A-Za-z0-9._-], at most 253
 * bytes) or a bracketed IPv6 address, and a port from 1 to 65535 without leading zeros. */
bool wire_address_valid(const char *address);
int wire_register_parse(json_t *json, WireRegister *ret, JsonError *err);

typedef struct WireRegisterAnswer {
        const char *node;
        int64_t lease_ms; /* 0 when absent */
        int64_t sync_period_ms; /* 0 when absent */
        const char *log_key; /* the key log links to this node are signed with; NULL: none */
} WireRegisterAnswer;

json_t *wire_register_answer_encode(const WireRegisterAnswer *a);
/* Missing or non-positive periods read as 0 (the agent keeps its own), a log_key that
 * is not 64 hex digits as NULL; -EBADMSG when json is not an object. */
int wire_register_answer_parse(json_t *json, WireRegisterAnswer *ret);

/* ---- POST /v1/agent/sync: the request ---- */

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
        bool node_fault; /* start_failed because of the node: its state dir cannot be written */
        const char *log_tail; /* a failed rank's last log bytes (failure rules); NULL: none */
        bool oom_killed; /* the OOM killer killed a process of it: over its memory_mb */
} WireRankReport;

typedef struct WireCheckpoint {
        int64_t job;
        int attempt;
        int64_t step;
        const char *path;
} WireCheckpoint;

/* api/syncmemo.c copies these three structs: a pointer added to them must be added there. */
typedef struct WireSync {
        const char *node, *boot_id, *agent_id;
        WireRankReport *ranks;
        int n_ranks;
        WireCheckpoint *checkpoints;
        int n_checkpoints;
        bool healthy;
        const char *health_reason; /* "" when healthy; NULL encodes as "" */
} WireSync;

json_t *wire_sync_encode(const WireSync *s);
/* Fills ret; arrays are malloc'd: release with wire_sync_clear(). */
int wire_sync_parse(json_t *json, WireSync *ret, JsonError *err);
void wire_sync_clear(WireSync *sync);

/*
 * What the agent understands in an answer, beyond what every agent does: the sync's
 * `accept` query parameter, a comma-separated list. It travels in the query, not the
 * body, because a controller ignores query parameters it does not know but refuses
 * unknown body fields: agents and controllers can then be upgraded in either order.
 */
#define WIRE_ACCEPT_UNCHANGED "unchanged" /* the short answer of an unchanged version */
/* Variables common to many ranks, sent once per answer (WireSharedEnvOut). */
#define WIRE_ACCEPT_SHARED_ENV "shared_env"
/* The answer that renews the lease and says nothing of the desired ranks (lease_only). */
#define WIRE_ACCEPT_LEASE_ONLY "lease_only"
/* Whether list (the parameter's value; NULL when absent) names capability. */
bool wire_accepts(const char *list, const char *capability);

/* ---- POST /v1/agent/sync: the answer ---- */

/* How the controller names a rank (the agent's RankKey). */
typedef struct WireRankKey {
        int64_t job;
        int64_t attempt;
        int64_t rank;
} WireRankKey;

/* One rank the controller wants on the node, as the agent decodes it. */
typedef struct WireDesiredRank {
        WireRankKey key;
        json_t *argv; /* array of strings */
        json_t *env; /* object of strings, may be NULL */
        /* Variables the rank has besides env (the answer's shared environment it names,
         * checked, none of them also in env); NULL: none. */
        json_t *shared_env;
        const char *workdir; /* may be NULL */
        const char *user; /* may be NULL */
        json_t *devices; /* array of inventory indices, may be NULL */
        const char *accelerator; /* may be NULL */
        const char *checkpoint_dir; /* may be NULL */
        int64_t hang_timeout_s;
        int hang_signal; /* sent before a hang is reported (spec_hang_signal_name); 0: none */
        int64_t hang_signal_grace_s;
        int cpus; /* the spec's resources, limits where the node has cgroups; 0: none */
        int64_t memory_mb;
        char *error; /* decoded only, malloc'd: why the entry cannot be started as given */
} WireDesiredRank;

typedef struct WireSyncAnswer {
        json_t *json; /* decoded only: owns what the ranks borrow */
        int64_t version;
        int64_t lease_ms; /* 0 when absent */
        int64_t sync_period_ms; /* 0 when absent */
        /* The desired ranks are still those of version, which the agent said it applied
         * (it accepts WIRE_ACCEPT_UNCHANGED): none are sent. */
        bool unchanged;
        /* The lease is renewed, and that is all: the answer says nothing of the desired
         * ranks, which the agent keeps as they are, exits it reported included, until a
         * whole or unchanged answer (it accepts WIRE_ACCEPT_LEASE_ONLY). A restarted
         * controller gives it while it loads to an agent whose version it cannot vouch
         * for (daemon/early-leases.h). version is the one the agent sent. */
        bool lease_only;
        WireDesiredRank *ranks; /* decoded only */
        size_t n_ranks;
} WireSyncAnswer;

/* A variable of a desired rank's environment. */
typedef struct WireEnvVar {
        const char *key, *value;
} WireEnvVar;

/*
 * The controller's side of a desired rank: WireDesiredRank's members from plain arrays,
 * written as text without a JSON tree (every rank's environment, rendered per answer,
 * was most of an answer's cost). A NULL array is written as null.
 */
typedef struct WireDesiredRankOut {
        WireRankKey key;
        const char *const *argv;
        size_t n_argv;
        const WireEnvVar *env;
        size_t n_env;
        const int *devices;
        size_t n_devices;
        const char *workdir, *user, *accelerator, *checkpoint_dir; /* may be NULL */
        int64_t hang_timeout_s;
        int hang_signal;
        int64_t hang_signal_grace_s;
        int cpus;
        int64_t memory_mb;
        /* Names a WireSharedEnvOut of the same answer whose variables the rank has too
         * (only to an agent that accepts WIRE_ACCEPT_SHARED_ENV); NULL: none. */
        const char *shared_env;
} WireDesiredRankOut;

/*
 * Variables that many ranks of an answer have, written once under the answer's
 * "shared_env" and added by the agent to the environment of each rank that names them
 * (WireDesiredRank.shared_env): a gang's host list, written into every rank's
 * environment, made an answer to a node of a gang of thousands of nodes megabytes long.
 */
typedef struct WireSharedEnvOut {
        const char *name;
        const WireEnvVar *vars;
        size_t n_vars;
} WireSharedEnvOut;

/*
 * Writes {"version","lease_ms","sync_period_ms","ranks","shared_env"}, or "unchanged":
 * true or "lease_only": true instead of "ranks": begin, then for each desired rank
 * wire_desired_rank_write (none when a->unchanged or a->lease_only), then end with the
 * shared environments the ranks named (none: no "shared_env"). a's ranks are not read.
 */
void wire_sync_answer_write_begin(JsonWriter *w, const WireSyncAnswer *a);
void wire_desired_rank_write(JsonWriter *w, const WireDesiredRankOut *d);
void wire_sync_answer_write_end(JsonWriter *w, const WireSyncAnswer *a,
                                const WireSharedEnvOut *shared, size_t n_shared);
/*
 * Decodes a sync answer, taking over the reference to json. -EBADMSG when the answer is
 * not a sync answer (not exactly one of ranks, unchanged and lease_only) or lists more
 * than WIRE_MAX_RANKS ranks or shared environments (the agent keeps its state and,
 * without a good answer, fences itself at the end of its lease). A desired rank whose key cannot
 * be read is dropped; one whose other fields are wrong or over a limit is still
 * recognised by its key (so it is neither killed nor started twice) and carries an error
 * that becomes its launch failure. The shared environment a rank names is checked once
 * and borrowed, not copied into its env; a name the answer lacks, one whose environment
 * breaks a limit, a variable given both ways, or env and shared environment together
 * over a limit, is such an error.
 */
int wire_sync_answer_parse(json_t *json, WireSyncAnswer *ret);
void wire_sync_answer_clear(WireSyncAnswer *a);
/* The desired rank named key, NULL when not listed. */
const WireDesiredRank *wire_sync_answer_find(const WireSyncAnswer *a, WireRankKey key);

/* ---- Error answers: {"error":{"code","message","field"}} ---- */

typedef struct WireError {
        const char *code, *message, *field; /* NULL when absent or not strings */
} WireError;

/* {"error": {"code", "message", "field"}}; field only when set and not empty. */
json_t *wire_error_encode(const WireError *e);
/* Any JSON (NULL included) decodes; a body of another shape gives all NULL. */
void wire_error_parse(json_t *json, WireError *ret);
