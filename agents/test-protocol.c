/* SPDX-License-Identifier: MIT */
/* Sync bodies built from a rank table, and decoding of the controller's answers. */
#include <errno.h>
#include <string.h>

#include "protocol.h"
#include "test-util.h"


static const AgentIdentity test_id = { .boot_id = "boot", .agent_id = "a1" };
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
        AgentHealth ok = { .healthy = true };
        body = agent_proto_sync_body("n1", &test_id, t, NULL, 0, &ok, 9);
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

/* The error of the single desired rank of an answer built from one entry's JSON. */
static char *entry_error(const char *entry) {
        _cleanup_free_ char *text = xasprintf("{\"version\": 1, \"ranks\": [%s]}", entry);
        json_error_t e;
        /* The agent's own reader refuses \u0000; the decoder must not rely on that. */
        json_t *json = json_loads(text, JSON_ALLOW_NUL, &e);
        if (!json)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        CHECK(json);
        SyncAnswer a;
        CHECK(agent_proto_parse_sync(json, &a) == 0);
        CHECK(a.n_ranks == 1);
        char *error = a.ranks[0].error ? xstrdup(a.ranks[0].error) : NULL;
        agent_sync_answer_clear(&a);
        return error;
}

static void expect_entry_error(const char *entry, const char *needle) {
        _cleanup_free_ char *error = entry_error(entry);
        if (!error || !strstr(error, needle))
                fprintf(stderr, "entry %.200s: error '%s', want '%s'\n", entry,
                        error ? error : "(none)", needle);
        CHECK(error && strstr(error, needle));
}

static void test_hostile_answers(void) {
        const char *key = "\"job\": 1, \"attempt\": 1, \"rank\": 0";
        _cleanup_free_ char *ok = xasprintf("{%s, \"argv\": [\"x\"], \"workdir\": \"/srv\","
                                            " \"hang_timeout_s\": -5}", key);
        CHECK(!entry_error(ok));

        _cleanup_free_ char *rel = xasprintf("{%s, \"argv\": [\"x\"], \"workdir\": \"srv\"}",
                                             key);
        expect_entry_error(rel, "workdir must be an absolute path");
        _cleanup_free_ char *ckpt = xasprintf("{%s, \"argv\": [\"x\"], \"checkpoint_dir\":"
                                              " \"../x\"}", key);
        expect_entry_error(ckpt, "checkpoint_dir must be an absolute path");
        _cleanup_free_ char *nul = xasprintf("{%s, \"argv\": [\"a\\u0000b\"]}", key);
        expect_entry_error(nul, "argv[0] is longer than");
        _cleanup_free_ char *nulpath = xasprintf("{%s, \"argv\": [\"x\"], \"workdir\":"
                                                 " \"/srv\\u0000/x\"}", key);
        expect_entry_error(nulpath, "contains a NUL byte");
        _cleanup_free_ char *eq = xasprintf("{%s, \"argv\": [\"x\"], \"env\": {\"A=B\": \"1\"}}",
                                            key);
        expect_entry_error(eq, "invalid variable name");
        _cleanup_free_ char *envnum = xasprintf("{%s, \"argv\": [\"x\"], \"env\": {\"A\": 1}}",
                                                key);
        expect_entry_error(envnum, "env variable A");
        _cleanup_free_ char *devs = xasprintf("{%s, \"argv\": [\"x\"], \"devices\": 3}", key);
        expect_entry_error(devs, "devices must be a list");

        /* One huge argument, then many that add up past the exec limit. */
        size_t big = AGENT_MAX_STRING + 1;
        char *huge = xmalloc(big + 1);
        memset(huge, 'a', big);
        huge[big] = '\0';
        _cleanup_free_ char *e1 = xasprintf("{%s, \"argv\": [\"%s\"]}", key, huge);
        expect_entry_error(e1, "argv[0] is longer than");
        huge[AGENT_MAX_STRING / 2] = '\0';
        _cleanup_free_ char *e2 = xasprintf("{%s, \"argv\": [\"x\"], \"env\": {\"A\": \"%s\","
                                            " \"B\": \"%s\", \"C\": \"%s\", \"D\": \"%s\","
                                            " \"E\": \"%s\", \"F\": \"%s\", \"G\": \"%s\","
                                            " \"H\": \"%s\", \"I\": \"%s\", \"J\": \"%s\","
                                            " \"K\": \"%s\", \"L\": \"%s\", \"M\": \"%s\","
                                            " \"N\": \"%s\", \"O\": \"%s\", \"P\": \"%s\","
                                            " \"Q\": \"%s\"}}",
                                            key, huge, huge, huge, huge, huge, huge, huge, huge,
                                            huge, huge, huge, huge, huge, huge, huge, huge, huge);
        expect_entry_error(e2, "argv and env together are larger than");
        free(huge);

        /* Negative keys are not keys: the entry is dropped, not started. */
        SyncAnswer a;
        CHECK(agent_proto_parse_sync(json_loads("{\"version\": 1, \"ranks\": [{\"job\": -1,"
                                                " \"attempt\": 1, \"rank\": 0,"
                                                " \"argv\": [\"x\"]}]}",
                                                0, NULL),
                                     &a) == 0);
        CHECK(a.n_ranks == 0);
        agent_sync_answer_clear(&a);

        /* More ranks than any node runs: the whole answer is refused. */
        json_t *ranks = json_array();
        for (int i = 0; i <= AGENT_MAX_DESIRED_RANKS; i++)
                json_array_append_new(ranks, json_pack("{s:i, s:i, s:i, s:[s]}", "job", 1,
                                                       "attempt", 1, "rank", i, "argv", "x"));
        CHECK(agent_proto_parse_sync(json_pack("{s:i, s:o}", "version", 1, "ranks", ranks), &a) ==
              -EBADMSG);
}

static void test_register(void) {
        AgentInventory inv = { .cpus = 8, .memory_mb = 16000, .numa_nodes = 2 };
        json_t *labels = json_pack("{s:s}", "zone", "a");
        json_t *body = agent_proto_register_body("n1", "host", "127.0.0.1:4000", &test_id,
                                                 labels, &inv);
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
        test_hostile_answers();
        test_register();
        return 0;
}
