/* SPDX-License-Identifier: MIT */
/* Sync bodies built from a rank table, and decoding of the controller's answers. */
#include <string.h>

#include "protocol.h"
#include "test-util.h"

static void test_sync_body(void) {
        _cleanup_free_ char *state = test_tmpdir();
        RankTable *t;
        CHECK(rank_table_new(state, "boot", &t) == 0);
        char *argv[] = { "true", NULL };
        RankLaunch l = { .key = { 7, 2, 1 }, .argv = argv, .error = "no such device" };
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_EXITED);

        AgentCheckpoint ck = { .job = 7, .attempt = 2, .step = 40,
                               .path = "/ckpt/step_00000040" };
        AgentHealth h = { .healthy = false, .reason = "gpu 3 fell off the bus" };
        json_t *body = agent_proto_sync_body("n1", "boot", t, &ck, 1, &h, 5);
        CHECK(strcmp(json_string_value(json_object_get(body, "node")), "n1") == 0);
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
        AgentHealth ok = { .healthy = true };
        body = agent_proto_sync_body("n1", "boot", t, NULL, 0, &ok, 9);
        CHECK(r->exit_reported_in == 5);
        health = json_object_get(body, "health");
        CHECK(json_is_true(json_object_get(health, "healthy")));
        CHECK(strcmp(json_string_value(json_object_get(health, "reason")), "") == 0);
        json_decref(body);
        rank_table_free(t);
        util_rm_rf(state);
}

static void test_parse_sync(void) {
        const char *text =
                "{\"version\": 12, \"lease_ms\": 4000, \"ranks\": ["
                " {\"job\": 7, \"attempt\": 1, \"rank\": 0, \"argv\": [\"python3\", \"t.py\"],"
                "  \"env\": {\"AXCTL_JOB_ID\": \"7\"}, \"workdir\": \"/srv\", \"user\": \"alice\","
                "  \"devices\": [0, 1], \"accelerator\": \"nvidia-h100\","
                "  \"checkpoint_dir\": \"/ckpt/x\", \"hang_timeout_s\": 30},"
                " {\"job\": 7, \"attempt\": 1, \"rank\": 1, \"argv\": [], \"workdir\": null},"
                " {\"attempt\": 1, \"rank\": 2, \"argv\": [\"x\"]},"
                " {\"job\": 8, \"attempt\": 3, \"rank\": 0, \"argv\": [\"x\"], \"user\": 5}"
                "]}";
        SyncAnswer a;
        CHECK(agent_proto_parse_sync(json_loads(text, 0, NULL), &a) == 0);
        CHECK(a.version == 12 && a.lease_ms == 4000);
        CHECK(a.n_ranks == 3);
        const DesiredRank *d = agent_sync_answer_find(&a, (RankKey){ 7, 1, 0 });
        CHECK(d && !d->error);
        CHECK(json_array_size(d->argv) == 2 && strcmp(d->workdir, "/srv") == 0);
        CHECK(strcmp(d->user, "alice") == 0 && strcmp(d->accelerator, "nvidia-h100") == 0);
        CHECK(strcmp(d->checkpoint_dir, "/ckpt/x") == 0 && d->hang_timeout_s == 30);
        CHECK(json_array_size(d->devices) == 2);
        d = agent_sync_answer_find(&a, (RankKey){ 7, 1, 1 });
        CHECK(d && d->error && strstr(d->error, "argv"));
        CHECK(!d->workdir);
        d = agent_sync_answer_find(&a, (RankKey){ 8, 3, 0 });
        CHECK(d && d->error && strstr(d->error, "user"));
        CHECK(!agent_sync_answer_find(&a, (RankKey){ 7, 2, 0 }));
        agent_sync_answer_clear(&a);

        CHECK(agent_proto_parse_sync(json_loads("{\"ranks\": []}", 0, NULL), &a) < 0);
        CHECK(agent_proto_parse_sync(json_loads("[]", 0, NULL), &a) < 0);
        CHECK(agent_proto_parse_sync(NULL, &a) < 0);
}

static void test_register(void) {
        AgentInventory inv = { .cpus = 8, .memory_mb = 16000, .numa_nodes = 2 };
        json_t *labels = json_pack("{s:s}", "zone", "a");
        json_t *body = agent_proto_register_body("n1", "host", "127.0.0.1:4000", "b0f", labels,
                                                 &inv);
        CHECK(body);
        CHECK(strcmp(json_string_value(json_object_get(body, "address")), "127.0.0.1:4000") == 0);
        json_t *i = json_object_get(body, "inventory");
        CHECK(json_integer_value(json_object_get(i, "cpus")) == 8);
        CHECK(json_integer_value(json_object_get(i, "memory_mb")) == 16000);
        CHECK(json_array_size(json_object_get(i, "accelerators")) == 0);
        CHECK(strcmp(json_string_value(json_object_get(json_object_get(body, "labels"), "zone")),
                     "a") == 0);
        json_decref(body);
        json_decref(labels);

        int64_t lease = 5000, period = 1000;
        json_t *ans = json_loads("{\"node\":\"n1\",\"lease_ms\":3000,\"sync_period_ms\":500}", 0,
                                 NULL);
        CHECK(agent_proto_parse_register(ans, &lease, &period) == 0);
        CHECK(lease == 3000 && period == 500);
        json_decref(ans);
        ans = json_loads("{\"node\":\"n1\"}", 0, NULL);
        CHECK(agent_proto_parse_register(ans, &lease, &period) == 0);
        CHECK(lease == 3000 && period == 500);
        json_decref(ans);

        json_t *err = json_loads("{\"error\":{\"code\":\"unknown_node\",\"message\":\"x\"}}", 0,
                                 NULL);
        CHECK(strcmp(agent_proto_error_code(err), "unknown_node") == 0);
        json_decref(err);
        CHECK(agent_proto_error_code(NULL) == NULL);
}

int main(void) {
        test_sync_body();
        test_parse_sync();
        test_register();
        return 0;
}
