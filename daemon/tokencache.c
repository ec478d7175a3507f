/* SPDX-License-Identifier: MIT */
#include "tokencache.h"

#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "util.h"

typedef struct Entry {
        char *hash;
        TokenIdentity id;
        int64_t read_ms, keep_ms;
} Entry;

struct TokenCache {
        StrMap *by_hash; /* -> Entry (owned by entries) */
        Entry **entries; /* to free them: the map does not iterate */
        size_t n, cap;
        StoreTokenStamp stamp; /* the table's, as of the last look */
        bool stamped; /* stamp holds one */
        int64_t looked_ms;
};

static void identity_copy(TokenIdentity *dst, const TokenIdentity *src) {
        *dst = (TokenIdentity){
                .role = src->role,
                .name = src->name ? xstrdup(src->name) : NULL,
                .projects = json_incref(src->projects),
                .node = src->node ? xstrdup(src->node) : NULL,
        };
}

TokenCache *token_cache_new(void) {
        TokenCache *c = xcalloc(1, sizeof(TokenCache));
        c->by_hash = strmap_new();
        return c;
}

static void entry_free(Entry *e) {
        token_identity_clear(&e->id);
        free(e->hash);
        free(e);
}

static void token_cache_clear(TokenCache *c) {
        for (size_t i = 0; i < c->n; i++)
                entry_free(c->entries[i]);
        c->n = 0;
        strmap_free(c->by_hash);
        c->by_hash = strmap_new();
}

TokenCache *token_cache_free(TokenCache *c) {
        if (!c)
                return NULL;
        token_cache_clear(c);
        strmap_free(c->by_hash);
        free(c->entries);
        free(c);
        return NULL;
}

static int valid_token(void *userdata, const StoreToken *t) {
        if (t->revoked_ms == STORE_NONE)
                strmap_put(userdata, t->hash, userdata); /* any value but NULL */
        return 0;
}

/* Forgets the identities whose token is no longer valid, in one read of the table. */
static int token_cache_keep_valid(TokenCache *c, Store *store) {
        StrMap *valid = strmap_new();
        int r = store_tokens_list(store, valid_token, valid);
        size_t kept = 0;
        for (size_t i = 0; i < c->n; i++) {
                Entry *e = c->entries[i];
                if (r >= 0 && strmap_get(valid, e->hash))
                        c->entries[kept++] = e;
                else {
                        strmap_remove(c->by_hash, e->hash);
                        entry_free(e);
                }
        }
        c->n = kept;
        strmap_free(valid);
        return r;
}

int token_cache_revalidate(TokenCache *c, Store *store, int64_t now_ms) {
        if (c->stamped && now_ms - c->looked_ms < TOKEN_CACHE_CHECK_MS)
                return 0;
        /* The stamp before the list: a change between the two is seen at the next look. */
        StoreTokenStamp stamp;
        int r = store_token_stamp(store, &stamp);
        if (r < 0 || !c->stamped)
                token_cache_clear(c);
        else if (memcmp(&stamp, &c->stamp, sizeof(stamp)) != 0)
                r = token_cache_keep_valid(c, store);
        c->stamp = stamp;
        c->stamped = r == 0;
        c->looked_ms = now_ms;
        return r;
}

bool token_cache_get(TokenCache *c, const char *hash, int64_t now_ms, TokenIdentity *ret) {
        Entry *e = strmap_get(c->by_hash, hash);
        if (!e || now_ms - e->read_ms >= e->keep_ms)
                return false;
        identity_copy(ret, &e->id);
        return true;
}

void token_cache_put(TokenCache *c, const char *hash, const TokenIdentity *id, int64_t now_ms) {
        Entry *e = strmap_get(c->by_hash, hash);
        if (e)
                token_identity_clear(&e->id);
        else {
                if (c->n == TOKEN_CACHE_MAX)
                        token_cache_clear(c);
                GROW(c->entries, c->n, c->cap);
                e = xcalloc(1, sizeof(Entry));
                e->hash = xstrdup(hash);
                c->entries[c->n++] = e;
                strmap_put(c->by_hash, hash, e);
        }
        identity_copy(&e->id, id);
        e->read_ms = now_ms;
        e->keep_ms =
                TOKEN_CACHE_TTL_MS / 2 + (int64_t) (strmap_hash(hash) % (TOKEN_CACHE_TTL_MS / 2));
}
