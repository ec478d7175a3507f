/* SPDX-License-Identifier: MIT */
/* The agent's state as protocol messages: sync bodies from a rank table, the register
 * body from the inventory (the codecs themselves: common/test-wire.c). */
#include <string.h>

#include "protocol.h"
#include "test-util.h"

static const AgentIdentity test_id = {.boot_id = "boot", .agent_id = "a1"};
static void test_sync_body(void) {
        _cleanup_free_ char *state = test_tmpdir();
        RankTable *t;
        CHECK(rank_table_new(state, "boot", &t) == 0);
        char *argv[] = {"true", NULL};
        RankLaunch l = {.key = {7, 2, 1}, .argv = argv, .error = "no such device"};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_EXITED);

        AgentCheckpoint ck = {.job = 7, .attempt = 2, .step = 40, .path = "/ckpt/step_00000040"};
        AgentHealth h = {.healthy = false, .reason = "gpu 3 fell off the bus"};
        json_t *body = agent_proto_sync_body("n1", &test_id, t, &ck, 1, &h, 5);
        CHECK(strcmp(json_string_value(json_object_get(body, "node")), "n1") == 0);
        CHECK(strcmp(json_string_value(json_object_get(body, "agent_id")), "a1") == 0);
        json_t *rank = json_array_get(json_object_get(body, "ranks"), 0);
        CHECK(json_integer_value(json_object_get(rank, "job")) == 7);
        CHECK(json_integer_value(json_object_get(rank, "attempt")) == 2);
        CHECK(json_integer_value(json_object_get(rank, "rank")) == 1);
        CHECK(strcmp(json_string_value(json_object_get(rank, "state")), "exited") == 0);
        CHECK(json_integer_value(json_object_get(rank, "exit_code")) == 127);
        CHECK(json_is_null(json_object_get(rank, "signal")));
        CHECK(json_is_null(json_object_get(rank, "pid")));
        CHECK(json_is_null(json_object_get(rank, "step")));
        CHECK(!json_object_get(rank, "hung"));
        CHECK(r->exit_reported_in == 5);
        json_t *c = json_array_get(json_object_get(body, "checkpoints"), 0);
        CHECK(json_integer_value(json_object_get(c, "step")) == 40);
        CHECK(strcmp(json_string_value(json_object_get(c, "path")), "/ckpt/step_00000040") == 0);
        json_t *health = json_object_get(body, "health");
        CHECK(json_is_false(json_object_get(health, "healthy")));
        CHECK(strcmp(json_string_value(json_object_get(health, "reason")),
                     "gpu 3 fell off the bus") == 0);
        json_decref(body);

        /* A later request does not move the stamp of the first report. */
        AgentHealth ok = {.healthy = true};
        body = agent_proto_sync_body("n1", &test_id, t, NULL, 0, &ok, 9);
        CHECK(r->exit_reported_in == 5);
        health = json_object_get(body, "health");
        CHECK(json_is_true(json_object_get(health, "healthy")));
        CHECK(strcmp(json_string_value(json_object_get(health, "reason")), "") == 0);
        json_decref(body);
        rank_table_free(t);
        util_rm_rf(state);
}

static void test_register(void) {
        AgentInventory inv = {.cpus = 8, .memory_mb = 16000, .numa_nodes = 2};
        json_t *labels = json_pack("{s:s}", "zone", "a");
        json_t *body =
                agent_proto_register_body("n1", "host", "127.0.0.1:4000", &test_id, labels, &inv);
        CHECK(body);
        CHECK(strcmp(json_string_value(json_object_get(body, "boot_id")), "boot") == 0);
        CHECK(strcmp(json_string_value(json_object_get(body, "agent_id")), "a1") == 0);
        CHECK(strcmp(json_string_value(json_object_get(body, "address")), "127.0.0.1:4000") == 0);
        json_t *i = json_object_get(body, "inventory");
        CHECK(json_integer_value(json_object_get(i, "cpus")) == 8);
        CHECK(json_integer_value(json_object_get(i, "memory_mb")) == 16000);
        CHECK(json_array_size(json_object_get(i, "accelerators")) == 0);
        CHECK(strcmp(json_string_value(json_object_get(json_object_get(body, "labels"), "zone")),
                     "a") == 0);
        json_decref(body);
        json_decref(labels);
}

int main(void) {
        test_sync_body();
        test_register();
        return 0;
}
