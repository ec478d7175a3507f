/* SPDX-License-Identifier: MIT */
/*
 * The environment a rank is started with (DESIGN.md §6). The controller sends every
 * vendor-neutral variable; the agent adds the progress file, device visibility from
 * the accelerator backends, the operator's launch profile for the accelerator kind, the
 * identity of the account the rank runs as (HOME, USER, LOGNAME, SHELL from its passwd
 * entry) and, when the job did not set them, PATH, LANG and TZ from its own environment.
 * Nothing else of the agent's environment reaches a rank: it may hold the agent's
 * credentials (systemd's $CREDENTIALS_DIRECTORY) or settings meant for root.
 */
#pragma once

#include <jansson.h>

#include "inventory.h"
#include "userpolicy.h"

typedef struct RankEnvRequest {
        json_t *env; /* the desired rank's "env" object (strings), may be NULL */
        json_t *shared_env; /* and the shared environment it names (strings), may be NULL */
        json_t *devices; /* the desired rank's "devices" array of inventory indices, may be NULL */
        const char *accelerator; /* kind for the launch profile, NULL or "" for none */
        const char *profile_dir; /* NULL: no launch profiles */
        const char *progress_path; /* value of AXCTL_PROGRESS_FILE */
        const RankUser *user; /* the account the rank runs as; NULL: no identity vars */
} RankEnvRequest;

/*
 * Builds the environment as sorted "KEY=VALUE" strings in a NULL-terminated array. On
 * failure (a device index this node does not have, a value that is not a string, a
 * backend or profile error) returns -errno with *ret_error (malloc'd) saying why, for
 * the rank's log.
 */
int agent_env_build(const RankEnvRequest *req, const AgentInventory *inv, char ***ret_envp,
                    char **ret_error);

/* Frees an array from agent_env_build; returns NULL. */
char **agent_env_free(char **envp);
