/* SPDX-License-Identifier: MIT */
/*
 * The environment a rank is started with (DESIGN.md §6). The controller sends every
 * vendor-neutral variable; the agent adds the progress file, device visibility from
 * the accelerator backends, the operator's launch profile for the accelerator kind, and
 * the few variables of its own environment a program needs to run at all (PATH, HOME,
 * locale) when the job did not set them.
 */
#pragma once

#include <jansson.h>

#include "inventory.h"

typedef struct RankEnvRequest {
        json_t *env; /* the desired rank's "env" object (strings), may be NULL */
        json_t *devices; /* the desired rank's "devices" array of inventory indices, may be NULL */
        const char *accelerator; /* kind for the launch profile, NULL or "" for none */
        const char *profile_dir; /* NULL: no launch profiles */
        const char *progress_path; /* value of AXCTL_PROGRESS_FILE */
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
