/* SPDX-License-Identifier: MIT */
/*
 * Client credentials shared by axctl and axagent: reading a bearer token from a file
 * that only its owner may read, checking that a file holding a secret is private, and
 * the Authorization header built from a token. Tokens travel in an HTTP header, so a
 * token is only accepted when every byte is a visible ASCII character: a newline in a
 * token file could otherwise smuggle a second header into every request.
 *
 * Library-like: nothing here logs. Errors come back as one-line messages that name the
 * file and, for a file others may read, the chmod that fixes it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Longest token accepted; the controller's tokens are far shorter. */
#define TOKEN_MAX_LEN 1024
/* Largest token or client configuration file read. */
#define TOKEN_FILE_MAX 65536

/* True when s is a non-empty run of at most TOKEN_MAX_LEN visible ASCII characters. */
bool token_valid(const char *s);

/*
 * Checks that st (of path) is a regular file that neither group nor others may read or
 * write and that belongs to the caller or root. Returns 0, or -EPERM / -EINVAL with
 * *ret_error ("PATH is readable by group or others: run chmod 600 PATH").
 */
int token_check_private(const char *path, const struct stat *st, char **ret_error);

/*
 * Reads a whole file of at most TOKEN_FILE_MAX bytes into *ret_data (NUL-terminated;
 * free it with token_free_secret) and the status of the file opened into *ret_st (may be
 * NULL). Returns 0 or -errno with *ret_error.
 */
int token_file_load(const char *path, char **ret_data, struct stat *ret_st, char **ret_error);

/*
 * Reads a token file: private (token_check_private), one token with surrounding blanks
 * and newlines trimmed. Returns 0 with *ret_token, or -errno with *ret_error.
 */
int token_file_read(const char *path, char **ret_token, char **ret_error);

/* "Authorization: Bearer TOKEN" (malloc'd) for a valid token. */
char *token_auth_header(const char *token);

#define TOKEN_HASH_HEX 65 /* 64 hex digits and a NUL */

/* Writes n bytes as lowercase hex (2n digits and a NUL) into out. */
void token_hex(const unsigned char *in, size_t n, char *out);
/* Hex SHA-256 of a token: what the controller stores and an agent can compute. 0 or -EIO. */
int token_hash(const char *token, char out[TOKEN_HASH_HEX]);
/*
 * Signs a rank-log URL path: hex HMAC-SHA256 keyed with the node's log key (below), over
 * "<path> <expires>". The controller signs its requests for logs so; the agent checks
 * them, so only a client the controller authorised reads a log. 0 or -EIO.
 */
int token_sign_path(const char *key_hex, const char *path, int64_t expires,
                    char out[TOKEN_HASH_HEX]);
/*
 * A node's log key: hex HMAC-SHA256 of the node's name keyed with the controller's
 * secret. The controller hands it to the node's agent when it registers; no node can
 * work out another's. 0 or -EIO.
 */
int token_node_log_key(const char *secret_hex, const char *node, char out[TOKEN_HASH_HEX]);
/* Whether s is exactly 64 lowercase hex digits (a hash, key or secret as written here). */
bool token_hex_valid(const char *s);

/* Overwrites a secret before freeing it, so it does not linger in freed memory. */
void token_free_secret(char *s);
