/* SPDX-License-Identifier: MIT */
/* early-leases.h on a real store: which syncs a restarted controller may answer before
 * its state has loaded, and which must wait. */
#include "early-leases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "test-fixture.h"
#include "tokens.h"
#include "util.h"

#define LEASE_MS 5000
#define PERIOD_MS 1000

/* n1 and n2 registered by agent-1 in boot-1 and committed; n1's stored version. */
static uint64_t two_nodes(const char *name) {
        Controller *ctl = controller(name);
        uint64_t version = node_register(ctl, "n1")->version;
        node_register(ctl, "n2");
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        return version;
}

static int64_t lease_end_ms; /* what until_of answers */

static int64_t until_of(void *ctx) {
        return *(int64_t *) ctx;
}

/* Leases whose answers stop at lease_end_ms, read at each answer; until_ms 0: never. */
static EarlyLeases *leases_of(const char *name, bool auth, int64_t until_ms) {
        char path[DB_PATH_MAX];
        db_path(path, name);
        Store *store = NULL;
        CHECK(store_open(path, &store) == 0);
        EarlyLeases *el = NULL;
        lease_end_ms = until_ms;
        CHECK(early_leases_load(store, auth, LEASE_MS, PERIOD_MS, until_ms ? until_of : NULL,
                                &lease_end_ms, &el) == 0);
        store_close(store);
        return el;
}

static const EarlyAccepts short_only = {.unchanged = true};
static const EarlyAccepts lease_only = {.lease_only = true};
static const EarlyAccepts both = {.unchanged = true, .lease_only = true};

/* How msg's agent, having applied version, is answered: "unchanged", "lease_only" or
 * NULL (it waits); the answer's other fields are checked. */
static const char *answer_of(EarlyLeases *el, const char *token, const WireSync *msg,
                             uint64_t version, const EarlyAccepts *accepts, bool *ret_renewed) {
        char *text = early_leases_answer(el, token, msg, version, accepts, ret_renewed);
        if (!text)
                return NULL;
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        CHECK(j);
        bool unchanged = json_is_true(json_object_get(j, "unchanged"));
        CHECK(unchanged != json_is_true(json_object_get(j, "lease_only")));
        CHECK_INT(json_integer_value(json_object_get(j, "version")), version);
        CHECK_INT(json_integer_value(json_object_get(j, "lease_ms")), LEASE_MS);
        CHECK_INT(json_integer_value(json_object_get(j, "sync_period_ms")), PERIOD_MS);
        CHECK(!json_object_get(j, "ranks"));
        json_decref(j);
        free(text);
        return unchanged ? "unchanged" : "lease_only";
}

/* Whether n1's agent, as stored, is answered at all, accepting both answers, with
 * `version`, which the tests below pass as stored: so the answer is the short one. */
static bool answered(EarlyLeases *el, const char *token, uint64_t version, bool *ret_renewed) {
        WireSync msg = {.node = "n1", .boot_id = "boot-1", .agent_id = "agent-1"};
        const char *kind = answer_of(el, token, &msg, version, &both, ret_renewed);
        CHECK(!kind || strcmp(kind, "unchanged") == 0);
        return kind;
}

static void test_what_is_answered(void) {
        uint64_t v = two_nodes("answered");
        EarlyLeases *el = leases_of("answered", false, 0);
        CHECK(early_leases_admits(el, NULL));
        bool renewed;
        WireSync msg = {.node = "n1", .boot_id = "boot-1", .agent_id = "agent-1"};
        /* Another version without the lease-only answer, neither answer, another boot or
         * agent, an unknown node: all wait, whatever the agent accepts. */
        CHECK(!early_leases_answer(el, NULL, &msg, v - 1, &short_only, &renewed) && !renewed);
        CHECK(!early_leases_answer(el, NULL, &msg, v, &(EarlyAccepts){0}, &renewed) && !renewed);
        WireSync other = msg;
        other.boot_id = "boot-2";
        CHECK(!early_leases_answer(el, NULL, &other, v, &both, &renewed));
        other = msg;
        other.agent_id = "agent-2";
        CHECK(!early_leases_answer(el, NULL, &other, v, &both, &renewed));
        other = msg;
        other.node = "n9";
        CHECK(!early_leases_answer(el, NULL, &other, v, &both, &renewed));
        other = msg;
        other.agent_id = NULL;
        CHECK(!early_leases_answer(el, NULL, &other, v, &both, &renewed));
        /* As stored: answered, and again (one answer per connection is api/'s rule). */
        CHECK(answered(el, NULL, v, &renewed) && renewed);
        CHECK(answered(el, NULL, v, &renewed) && renewed);
        /* A request that waits tells that the node was renewed here. */
        CHECK(!early_leases_answer(el, NULL, &msg, v, &(EarlyAccepts){0}, &renewed) && renewed);

        /* n2's agent missed the old controller's last answer, or is ahead of a store that
         * lost commits: its lease is renewed and nothing more, with its own version. */
        other = msg;
        other.node = "n2";
        CHECK_STR(answer_of(el, NULL, &other, v - 1, &both, &renewed), "lease_only");
        CHECK(renewed);
        CHECK_STR(answer_of(el, NULL, &other, v + 1000, &lease_only, &renewed), "lease_only");
        CHECK_STR(answer_of(el, NULL, &other, 0, &lease_only, &renewed), "lease_only");
        /* The stored version to an agent without the short answer: the lease only. */
        CHECK_STR(answer_of(el, NULL, &msg, v, &lease_only, &renewed), "lease_only");
        early_leases_free(el);
}

static void test_what_the_store_refuses(void) {
        uint64_t v = two_nodes("refused");
        bool renewed;
        /* A node declared lost keeps no lease; an older database's version 0 is replaced
         * by the load, so no agent holds it. */
        sql_on("refused", "UPDATE node SET state = 'down' WHERE name = 'n1'");
        EarlyLeases *el = leases_of("refused", false, 0);
        CHECK(!answered(el, NULL, v, &renewed));
        early_leases_free(el);
        /* A state this version does not know is taken for down, as by the load. */
        sql_on("refused", "UPDATE node SET state = 'lost-in-2030' WHERE name = 'n1'");
        el = leases_of("refused", false, 0);
        CHECK(!answered(el, NULL, v, &renewed));
        early_leases_free(el);
        sql_on("refused", "UPDATE node SET state = 'ready', version = 0 WHERE name = 'n1'");
        el = leases_of("refused", false, 0);
        CHECK(!answered(el, NULL, 0, &renewed));
        early_leases_free(el);
        /* A leadership that may have lapsed answers nothing. */
        sql_on("refused", "UPDATE node SET version = 7 WHERE name = 'n1'");
        el = leases_of("refused", false, util_now_ms() - 1);
        CHECK(!answered(el, NULL, 7, &renewed));
        CHECK(!early_leases_answer(
                el, NULL, &(WireSync){.node = "n1", .boot_id = "boot-1", .agent_id = "agent-1"}, 6,
                &both, &renewed));
        early_leases_free(el);
        el = leases_of("refused", false, util_now_ms() + 60000);
        CHECK(answered(el, NULL, 7, &renewed));
        /* The end is asked at each answer: a lease that lapsed, then one renewed. */
        lease_end_ms = util_now_ms() - 1;
        CHECK(!answered(el, NULL, 7, &renewed));
        lease_end_ms = util_now_ms() + 60000;
        CHECK(answered(el, NULL, 7, &renewed));
        early_leases_free(el);
}

static void add_token(Store *store, const char *name, const char *token, const char *role,
                      const char *node) {
        char hash[TOKEN_HASH_HEX];
        CHECK(token_hash(token, hash) == 0);
        StoreToken t = {.name = name,
                        .hash = hash,
                        .role = role,
                        .projects = "[]",
                        .node = node,
                        .created_ms = 1,
                        .revoked_ms = STORE_NONE};
        CHECK(store_token_insert(store, &t) == 0);
}

static void test_tokens(void) {
        uint64_t v = two_nodes("tokens");
        char path[DB_PATH_MAX];
        db_path(path, "tokens");
        Store *store = NULL;
        CHECK(store_open(path, &store) == 0);
        add_token(store, "n1-agent", "axt_n1", "agent", "n1");
        add_token(store, "n2-agent", "axt_n2", "agent", "n2");
        add_token(store, "n1-old", "axt_n1_old", "agent", "n1");
        CHECK(store_token_revoke(store, "n1-old", 5) == 0);
        add_token(store, "root", "axt_root", "admin", NULL);
        store_close(store);
        EarlyLeases *el = leases_of("tokens", true, 0);
        bool renewed;
        /* Only a valid agent token's body is parsed at all. */
        CHECK(!early_leases_admits(el, NULL));
        CHECK(!early_leases_admits(el, "axt_root"));
        CHECK(!early_leases_admits(el, "axt_n1_old"));
        CHECK(early_leases_admits(el, "axt_n2"));
        /* None, another node's, a revoked one, an admin's, an unknown one: all wait. */
        CHECK(!answered(el, NULL, v, &renewed));
        CHECK(!answered(el, "axt_n2", v, &renewed));
        CHECK(!answered(el, "axt_n1_old", v, &renewed));
        CHECK(!answered(el, "axt_root", v, &renewed));
        CHECK(!answered(el, "axt_nobody", v, &renewed));
        CHECK(answered(el, "axt_n1", v, &renewed));
        /* Nor does another node's token get the lease-only answer, nor count as renewed. */
        WireSync msg = {.node = "n1", .boot_id = "boot-1", .agent_id = "agent-1"};
        CHECK(!early_leases_answer(el, "axt_n2", &msg, v - 1, &both, &renewed) && !renewed);
        CHECK(!early_leases_answer(el, NULL, &msg, v - 1, &both, &renewed) && !renewed);
        CHECK_STR(answer_of(el, "axt_n1", &msg, v - 1, &both, &renewed), "lease_only");
        early_leases_free(el);
}

int main(void) {
        tmpdir = check_tmpdir("axctl-test-early-leases");
        test_what_is_answered();
        test_what_the_store_refuses();
        test_tokens();
        CHECK_INT(util_rm_rf(tmpdir), 0);
        free(tmpdir);
        printf("early-leases: ok\n");
        return 0;
}
