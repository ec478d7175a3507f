/* SPDX-License-Identifier: MIT */
/* See early-leases.h. */
#include "early-leases.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonwriter.h"
#include "strmap.h"
#include "tokens.h"
#include "transition.h"
#include "util.h"

typedef struct StoredClaim {
        char *agent_id, *boot_id;
        uint64_t version;
        bool renewed; /* answered here at least once */
} StoredClaim;

struct EarlyLeases {
        StrMap *claims; /* node name -> StoredClaim, of the nodes that keep a lease */
        StrMap *agent_tokens; /* token hash -> the node its valid agent token is bound to */
        bool auth;
        int64_t lease_ms, sync_period_ms;
        EarlyLeasesUntil until;
        void *until_ctx;
        /* What the maps' values point to, freed with them. */
        StoredClaim **claim_list;
        size_t n_claims, cap_claims;
        char **token_nodes;
        size_t n_tokens, cap_tokens;
};

static int add_claim(void *userdata, const StoreNode *sn) {
        EarlyLeases *el = userdata;
        /* As the load: a node down gets no lease; a version of 0 is an older database's,
         * which the load replaces, so no agent can have applied it. */
        if (!tr_node_stored_keeps_lease(sn->state) || sn->version <= 0 || !sn->agent_id ||
            !sn->boot_id)
                return 0;
        StoredClaim *claim = xcalloc(1, sizeof(StoredClaim));
        *claim = (StoredClaim){.agent_id = xstrdup(sn->agent_id),
                               .boot_id = xstrdup(sn->boot_id),
                               .version = (uint64_t) sn->version};
        GROW(el->claim_list, el->n_claims, el->cap_claims);
        el->claim_list[el->n_claims++] = claim;
        strmap_put(el->claims, sn->name, claim);
        return 0;
}

static int add_token(void *userdata, const StoreToken *t) {
        EarlyLeases *el = userdata;
        if (t->revoked_ms != STORE_NONE || !t->node || !t->hash ||
            token_role_from_string(t->role) != TOKEN_ROLE_AGENT)
                return 0;
        GROW(el->token_nodes, el->n_tokens, el->cap_tokens);
        el->token_nodes[el->n_tokens] = xstrdup(t->node);
        strmap_put(el->agent_tokens, t->hash, el->token_nodes[el->n_tokens++]);
        return 0;
}

int early_leases_load(Store *store, bool auth, int64_t lease_ms, int64_t sync_period_ms,
                      EarlyLeasesUntil until, void *until_ctx, EarlyLeases **ret) {
        EarlyLeases *el = xcalloc(1, sizeof(EarlyLeases));
        *el = (EarlyLeases){.claims = strmap_new(),
                            .agent_tokens = strmap_new(),
                            .auth = auth,
                            .lease_ms = lease_ms,
                            .sync_period_ms = sync_period_ms,
                            .until = until,
                            .until_ctx = until_ctx};
        int r = store_nodes_load(store, add_claim, el);
        if (r >= 0 && auth)
                r = store_tokens_list(store, add_token, el);
        if (r < 0) {
                early_leases_free(el);
                return r;
        }
        *ret = el;
        return 0;
}

size_t early_leases_nodes(const EarlyLeases *el) {
        return el ? el->n_claims : 0;
}

EarlyLeases *early_leases_free(EarlyLeases *el) {
        if (!el)
                return NULL;
        for (size_t i = 0; i < el->n_claims; i++) {
                free(el->claim_list[i]->agent_id);
                free(el->claim_list[i]->boot_id);
                free(el->claim_list[i]);
        }
        free(el->claim_list);
        for (size_t i = 0; i < el->n_tokens; i++)
                free(el->token_nodes[i]);
        free(el->token_nodes);
        strmap_free(el->claims);
        strmap_free(el->agent_tokens);
        free(el);
        return NULL;
}

/* The node a valid agent token is bound to, or NULL. */
static const char *token_node(const EarlyLeases *el, const char *token) {
        char hash[TOKEN_HASH_HEX];
        if (!token || token_hash(token, hash) < 0)
                return NULL;
        return strmap_get(el->agent_tokens, hash);
}

bool early_leases_admits(const EarlyLeases *el, const char *token) {
        return el && (!el->auth || token_node(el, token));
}

char *early_leases_answer(EarlyLeases *el, const char *token, const WireSync *msg,
                          uint64_t applied_version, const EarlyAccepts *accepts,
                          bool *ret_renewed) {
        StoredClaim *claim = el && msg->node ? strmap_get(el->claims, msg->node) : NULL;
        /* The stored agent in the stored boot, with the node's own token: anyone else
         * waits, and not among the renewed. */
        bool stored = claim && msg->agent_id && msg->boot_id &&
                      strcmp(claim->agent_id, msg->agent_id) == 0 &&
                      strcmp(claim->boot_id, msg->boot_id) == 0 &&
                      (!el->auth || util_streq_ptr(token_node(el, token), msg->node));
        *ret_renewed = stored && claim->renewed;
        if (!stored || (el->until && util_now_ms() >= el->until(el->until_ctx)))
                return NULL;
        bool unchanged = claim->version == applied_version && accepts->unchanged;
        if (!unchanged && !accepts->lease_only)
                return NULL;
        claim->renewed = *ret_renewed = true;
        WireSyncAnswer answer = {.version = (int64_t) applied_version,
                                 .lease_ms = el->lease_ms,
                                 .sync_period_ms = el->sync_period_ms,
                                 .unchanged = unchanged,
                                 .lease_only = !unchanged};
        JsonWriter w = {0};
        wire_sync_answer_write_begin(&w, &answer);
        wire_sync_answer_write_end(&w, &answer, NULL, 0);
        return json_writer_take(&w);
}
