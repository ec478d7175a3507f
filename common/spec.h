/* SPDX-License-Identifier: MIT */
/*
 * The job spec of DESIGN.md §3: parsing with strict validation (types, ranges, required
 * fields, unknown fields rejected), defaults, and the normalised JSON form that the
 * controller stores and shows. The spec is immutable once parsed.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "failrules.h"
#include "jsonutil.h"

/* Limits on what one spec may hold; part of the API (documented in docs/PROTOCOL.md). */
#define SPEC_MAX_RANKS 65536
#define SPEC_MAX_ARGS 1024
#define SPEC_MAX_ARG_LEN 8192
#define SPEC_MAX_ENV 512
#define SPEC_MAX_ENV_VALUE 16384
#define SPEC_MAX_NAME 128
#define SPEC_MAX_PATH 4096
#define SPEC_MAX_EXIT_CODES 64

typedef enum Framework {
        FRAMEWORK_NONE,
        FRAMEWORK_TORCH,
        FRAMEWORK_JAX,
        _FRAMEWORK_MAX,
        _FRAMEWORK_INVALID = -1,
} Framework;

/* NVIDIA's resiliency extension stops after 3 restart cycles without progress too. */
#define SPEC_DEFAULT_MAX_FAILURES_WITHOUT_PROGRESS 3

typedef struct RestartPolicy {
        int max_restarts;
        int backoff_initial_s;
        int backoff_max_s;
        /* Lists are NULL when empty, as they mostly are: a queued job's spec stays in the
         * controller's memory (issue 13: under 1 KiB per job). */
        int *retry_exit_codes; /* restart without spending budget */
        int n_retry_exit_codes;
        int *fatal_exit_codes; /* never restart */
        int n_fatal_exit_codes;
        int max_failures_without_progress; /* job failures in a row that fail it, 1..1000 */
} RestartPolicy;

typedef struct JobSpec {
        char *name;
        char *project;
        char *user;
        int priority;
        char **command; /* NULL-terminated */
        int n_command;
        json_t *env; /* object of strings; NULL when empty (jansson's getters take NULL) */
        char *workdir; /* NULL: the agent's choice */
        int ranks;
        int ranks_per_node; /* 0: any packing */
        char *accelerator; /* NULL: no accelerator */
        int accelerators_per_rank;
        int cpus; /* per rank */
        int64_t memory_mb; /* per rank */
        Framework framework;
        char *checkpoint_dir; /* NULL: none */
        RestartPolicy restart;
        int hang_timeout_s; /* 0: no hang detection */
        int hang_signal; /* sent to a hung rank before it is stopped; 0: none */
        int hang_signal_grace_s; /* time between hang_signal and the hang report */
        FailRules failure_rules; /* the job's own, checked after the operator's */
        json_t *labels; /* object of strings; NULL when empty */
        char *same_label; /* all nodes of the job share this label's value */
        json_t *node_selector; /* object of strings; NULL when empty */
} JobSpec;

/*
 * Validates and parses a spec. On success returns 0 and *ret_spec; on failure returns
 * -EINVAL with err naming the field. default_name is used when the spec has none.
 */
int spec_parse(json_t *json, JobSpec **ret_spec, JsonError *err);
JobSpec *spec_free(JobSpec *spec);
/* The normalised spec with every default filled in (new reference). */
json_t *spec_to_json(const JobSpec *spec);
/* The same as text, keys sorted: what the store keeps, and what two submits compare
 * (malloc'd). Made when needed: a queued job keeps only its parsed spec in memory. */
char *spec_to_text(const JobSpec *spec);

const char *framework_to_string(Framework f);
Framework framework_from_string(const char *s);

#define SPEC_DEFAULT_HANG_SIGNAL_GRACE_S 5
#define SPEC_MAX_HANG_SIGNAL_GRACE_S 300

/* The signals a spec may name as hang_signal ("SIGUSR1" or "USR1"): 0 when not one. */
int spec_hang_signal_from_name(const char *name);
/* Its name ("SIGUSR1"), NULL for 0 or a signal not allowed. */
const char *spec_hang_signal_name(int sig);

/* True when code is listed in the list of n codes. */
bool spec_exit_code_in(const int *codes, int n, int code);
