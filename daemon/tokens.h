/* SPDX-License-Identifier: MIT */
/*
 * API tokens: generation (random, shown once), hashing (only SHA-256 hashes are stored)
 * and the `axctld token` admin command that creates, revokes and lists them directly in
 * the state database, also while the controller runs.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "token.h"

typedef enum TokenRole {
        TOKEN_ROLE_ADMIN,
        TOKEN_ROLE_USER,
        TOKEN_ROLE_AGENT,
        _TOKEN_ROLE_MAX,
        _TOKEN_ROLE_INVALID = -1,
} TokenRole;

const char *token_role_to_string(TokenRole r);
TokenRole token_role_from_string(const char *s);

/* A new random token "axt_<64 hex digits>" (malloc'd). 0 or -errno. */
int token_generate(char **ret_token);
/*
 * The controller's log-link secret, in the file at path (by default <db_path>.logkey; the
 * controllers that fail over to each other share one): 64 hex digits, created with 256
 * random bits and mode 0600 when missing, refused when others may read it. It keys the
 * nodes' log keys (token_node_log_key), so what the database holds (token hashes
 * included) is not enough to forge a log link. 0, or -errno with *ret_error.
 */
int ctl_log_secret_load(const char *path, char ret_secret[TOKEN_HASH_HEX], char **ret_error);
/* `axctld token create|revoke|list ...`: argv[0] is "token". Returns the exit status. */
int token_command(int argc, char **argv);

/* Who a request's token says it is. */
typedef struct TokenIdentity {
        TokenRole role;
        char *name;
        json_t *projects; /* array of strings; users only */
        char *node; /* agents only */
} TokenIdentity;

void token_identity_clear(TokenIdentity *id);
/* Whether a user identity may act in project (admins may everywhere). */
bool token_identity_has_project(const TokenIdentity *id, const char *project);
