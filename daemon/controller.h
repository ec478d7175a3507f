/* SPDX-License-Identifier: MIT */
/*
 * The controller core: owns the model (model.h), applies the operations of the API and
 * the agents through the state machine of DESIGN.md §4 (transition.h), asks health/
 * for failure verdicts, runs the scheduler, and persists every transition. It speaks
 * no HTTP: errors are CtlErrorCode values that api/ maps. Single-threaded: every
 * function here runs on the main loop's thread.
 *
 * Writes made during one loop turn go into one store transaction that ctl_end_turn()
 * commits; callers must not acknowledge a request that wrote (ctl_turn_has_writes())
 * before that commit.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "store.h"
#include "tokens.h"
#include "wire.h"

typedef struct Controller Controller;

typedef struct CtlConfig {
        const char *db_path;
        const char *quota_path; /* quota file for the scheduler; NULL: equal shares */
        int64_t lease_ms;
        int64_t grace_ms;
        int64_t sync_period_ms;
        int quarantine_after; /* blames within the window that quarantine a node; 0: never */
        int64_t quarantine_window_ms;
        int64_t start_timeout_ms; /* a placed rank not running by then blames its node; 0: never */
        int64_t job_retention_ms; /* a job over this long leaves memory (stays in the store) */
        int64_t max_jobs_per_user; /* jobs not ended one user may have; 0: no limit */
        const char *failure_rules_path; /* the operator's failure rules; NULL: none */
        bool strict_transitions; /* an illegal state transition aborts (tests) */
        const char *log_secret; /* ctl_log_secret_load's; NULL: log links are not signed */
} CtlConfig;

/* Why an operation was refused; api/ maps each to its HTTP status and JSON code. */
typedef enum CtlErrorCode {
        CTL_ERR_NONE,
        CTL_ERR_INVALID_SPEC, /* the job spec is invalid (field says which) */
        CTL_ERR_NOT_FOUND, /* no such job or node */
        CTL_ERR_CONFLICT, /* the job already ended; an idempotency key reused */
        CTL_ERR_UNSCHEDULABLE, /* the job can never fit the fleet */
        CTL_ERR_TOO_MANY_JOBS, /* its user has max_jobs_per_user jobs not ended */
        CTL_ERR_UNKNOWN_NODE, /* an agent must register first */
        CTL_ERR_NODE_CLAIMED, /* another agent holds the node's lease */
        CTL_ERR_BOOT_MISMATCH, /* the node rebooted: register again */
        _CTL_ERR_MAX,
} CtlErrorCode;

typedef struct CtlError {
        CtlErrorCode code;
        char message[320];
        char field[128];
} CtlError;

int ctl_new(const CtlConfig *config, Controller **ret);
/* The same on a store already open (the controller owns it from then on, also on failure):
 * a follower opens it long before it leads and loads. */
int ctl_new_on(const CtlConfig *config, Store *store, Controller **ret);
Controller *ctl_free(Controller *ctl);
const CtlConfig *ctl_config(Controller *ctl);

/* Loop integration. Call ctl_serving_starts right before serving: the stored nodes'
 * fresh leases count from then, not from when the database was read. */
void ctl_serving_starts(Controller *ctl);
int64_t ctl_next_deadline_ms(Controller *ctl); /* monotonic ms of the next timed work */
void ctl_tick(Controller *ctl); /* leases, backoffs; call when the deadline passes */
bool ctl_turn_has_writes(Controller *ctl);
/*
 * Runs the scheduler if something changed, persists and commits. 0, or -errno when a
 * durable write of the turn failed: the turn is rolled back, and from then on
 * ctl_failure() says why; api/ answers every request 503 so that none of this turn or
 * later is acknowledged, and the caller must stop.
 */
int ctl_end_turn(Controller *ctl);
/* Records how long a turn that wrote took, from taking its requests to sending its
 * answers: every answer of the turn waited for all of it. */
void ctl_turn_observe(Controller *ctl, double seconds);
/* NULL while the controller works; else why it stopped accepting requests. */
const char *ctl_failure(Controller *ctl);

/* Jobs. */
int ctl_job_submit(Controller *ctl, json_t *spec, const char *idempotency_key, Job **ret_job,
                   bool *ret_created, CtlError *err);
/* A job in memory: active, or over for less than the retention time. */
Job *ctl_job_find(Controller *ctl, int64_t id);
/* Any job, also one that left memory for the store (then valid until the turn ends). */
Job *ctl_job_lookup(Controller *ctl, int64_t id);
int ctl_job_cancel(Controller *ctl, int64_t id, Job **ret_job, CtlError *err);
/* Jobs newest first with id < before (0: from the newest), those in the store too (valid
 * until the turn ends); filters may be NULL. */
typedef bool (*CtlJobFn)(void *userdata, Job *job); /* return false to stop */
void ctl_jobs_foreach(Controller *ctl, int64_t before, JobState state, const char *project,
                      CtlJobFn fn, void *userdata);
int ctl_events_list(Controller *ctl, int64_t job, int64_t after, int limit, StoreEventFn fn,
                    void *userdata);

/* Nodes. */
Node *ctl_node_find(Controller *ctl, const char *name);
/* The nodes whose desired state changed since the last call, for the long-polls to
 * answer (the array is valid until the controller runs again). */
Node **ctl_take_changed_nodes(Controller *ctl, int *ret_n);
Node **ctl_nodes(Controller *ctl, int *ret_n);
int ctl_node_register(Controller *ctl, const WireRegister *msg, Node **ret_node, CtlError *err);
/*
 * Where a report was applied. The same report again (the same bytes, with the same
 * applied version) changes nothing while the node's version and the failure rules are
 * those it was applied under and no other report of the node came between (one on
 * another connection, or an older one read late, may have moved its ranks): each of
 * its effects is guarded by the state the first application left (a rank gone, a step
 * seen, a rank running). So its ranks need no second look; set = false: no such
 * report yet.
 */
typedef struct ReportMark {
        bool set;
        uint64_t applied_version, node_version, node_syncs, rules_epoch;
} ReportMark;
/* Applies an agent's report; *ret_node set on success. applied_version: the desired
 * version the agent had converged to when it composed the report. mark: where the
 * caller's copy of the same report bytes was applied, or NULL when it keeps none; set to
 * where this one was. 1 when this is the node's first sync since this controller
 * started (its agent resumed without registering), 0 for the others, or -errno. */
int ctl_node_sync(Controller *ctl, const WireSync *msg, uint64_t applied_version, ReportMark *mark,
                  Node **ret_node, CtlError *err);
int ctl_node_drain(Controller *ctl, const char *name, bool now, Node **ret_node, CtlError *err);
int ctl_node_undrain(Controller *ctl, const char *name, Node **ret_node, CtlError *err);

/* The desired ranks of a node (rendered by api/ for sync answers). */
typedef void (*CtlDesiredFn)(void *userdata, Job *job, Rank *rank);
void ctl_node_desired_foreach(Controller *ctl, Node *node, CtlDesiredFn fn, void *userdata);
/*
 * The environment of DESIGN.md §6 that does not depend on the vendor (rankenv.c). Its
 * strings are the job's or env's own: valid until the job changes, a node registers
 * from another address, or env is filled again (one RankEnv serves a whole answer's
 * ranks) or cleared. Not to be copied: vars point into its numbers. The first
 * RANK_ENV_SHARED vars (the gang's host list) are the same for all the ranks of the
 * job's attempt and point at the job's own strings only: an answer may send them once
 * for all its ranks of the job.
 */
#define RANK_ENV_MAX_NUMBERS 16
#define RANK_ENV_SHARED 1
typedef struct RankEnv {
        WireEnvVar *vars;
        size_t n_vars, cap_vars;
        char numbers[RANK_ENV_MAX_NUMBERS][24];
        size_t n_numbers;
} RankEnv;
void ctl_rank_env(Controller *ctl, Job *job, Rank *rank, RankEnv *env);
void ctl_rank_env_clear(RankEnv *env);

/* Writes the controller's metrics in Prometheus text format (metrics.c). */
void ctl_metrics_write(Controller *ctl, FILE *f);

/* Re-reads the quota file. 0, or -errno with *ret_error (malloc'd) saying what is wrong;
 * on error the old quotas stay. */
int ctl_quota_reload(Controller *ctl, char **ret_error);
/* (Re)reads the operator's failure rules (cfg.failure_rules_path); on failure keeps the
 * rules in force and returns -errno with *ret_error (malloc'd). */
int ctl_failure_rules_reload(Controller *ctl, char **ret_error);
/* Reads the quota file and the failure rules as the reloads would, and keeps nothing: a
 * follower checks them before it waits, not when it must lead. 0 or -errno with
 * *ret_error (malloc'd). */
int ctl_files_check(const CtlConfig *cfg, char **ret_error);
/* Per project, its share and use of each resource kind, from a scheduling pass over the
 * fleet as it is (release with sched_result_clear). 0 or -errno. */
int ctl_quota_usage(Controller *ctl, SchedResult *ret);

/* Looks up a bearer token (by its hash). 0 with *ret filled, -EACCES when it is unknown
 * or revoked, other -errno on failure. */
int ctl_token_identify(Controller *ctl, const char *token, TokenIdentity *ret);

/*
 * The query string that lets a client read path from node's agent log server:
 * "?expires=E&sig=S" signed for the node's agent token, or "" when the node has none
 * (authentication off). New string.
 */
char *ctl_log_url_query(Controller *ctl, const char *node, const char *path);
/* The key a node's agent checks log links with (token_node_log_key): 0, or -ENOKEY
 * without a secret. */
int ctl_node_log_key(Controller *ctl, const char *node, char ret_key[TOKEN_HASH_HEX]);

/* Counts for /healthz and status lines. */
void ctl_counts(Controller *ctl, int *ret_jobs_active, int *ret_nodes_ready);
