/* SPDX-License-Identifier: MIT */
/*
 * The identities of tokens read from the store lately, by token hash. Every request
 * with authentication on names a token, and at 10,000 agents syncing each second a
 * store lookup per request took a quarter of the fleet's rank starts on SQLite, and
 * would be a network round trip each on PostgreSQL. `axctld token` creates, revokes and
 * deletes tokens from another process, so the cache looks at the table's stamp
 * (store_token_stamp) at most every TOKEN_CACHE_CHECK_MS, and when it changed reads the
 * table's valid hashes once and forgets the identities of every other token: a
 * revocation takes effect within that time. A token's row is never edited, so the rest
 * stand (forgetting all of them had a fleet's agents looked up again within a second
 * whenever a node got its token). Rows edited by hand (a token's projects) change no
 * stamp; they take effect when the identity is TOKEN_CACHE_TTL_MS old at most. Each
 * identity is kept for a time between half of that and all of it, fixed by its hash, so
 * that a fleet's agents, read within seconds of each other at a start, are not all read
 * again together every TOKEN_CACHE_TTL_MS. Only tokens the store knew are kept: a
 * client sending unknown tokens costs a lookup each, as before, and cannot fill the
 * cache.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "tokens.h"

#define TOKEN_CACHE_CHECK_MS 100
#define TOKEN_CACHE_TTL_MS 60000
/* Beyond this many the cache starts over (a fleet's agents and its users fit). */
#define TOKEN_CACHE_MAX 100000

typedef struct TokenCache TokenCache;

TokenCache *token_cache_new(void);
TokenCache *token_cache_free(TokenCache *c);
/* A copy of the identity read for hash less than its keeping time (TOKEN_CACHE_TTL_MS / 2
 * to TOKEN_CACHE_TTL_MS) before now_ms (the monotonic clock); false when there is none. */
bool token_cache_get(TokenCache *c, const char *hash, int64_t now_ms, TokenIdentity *ret);
/* Keeps a copy of id, read from the store at now_ms. */
void token_cache_put(TokenCache *c, const char *hash, const TokenIdentity *id, int64_t now_ms);
/* Forgets the identities of tokens revoked or gone if the token table changed since the
 * last look; looks at most every TOKEN_CACHE_CHECK_MS. A failed look forgets every
 * identity and returns its error. */
int token_cache_revalidate(TokenCache *c, Store *store, int64_t now_ms);
