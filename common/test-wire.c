/* SPDX-License-Identifier: MIT */
/*
 * The agent protocol's codecs (common/wire-*.c): per message, encode then decode gives
 * the same message, the JSON is the exact bytes docs/PROTOCOL.md shows, and the decoders
 * refuse bad input naming the field (controller side) or the entry (agent side).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "../tests/unit/check.h"
#include "util.h"
#include "wire.h"

static json_t *load_with(const char *text, size_t flags) {
        json_error_t e;
        json_t *j = json_loads(text, flags, &e);
        if (!j)
                fprintf(stderr, "refused: %s (%s)\n", text, e.text);
        CHECK(j);
        return j;
}

static json_t *load(const char *text) {
        /* The agent's own reader refuses \u0000; the decoders must not rely on that. */
        return load_with(text, JSON_ALLOW_NUL);
}

/* An answer read as the agent reads it (agents/agent.c). */
static json_t *load_answer(const char *text) {
        return load_with(text, JSON_REJECT_DUPLICATES);
}

static void check_dump(json_t *j, const char *want) {
        char *got = json_dumps(j, JSON_COMPACT);
        CHECK_STR(got, want);
        free(got);
}

/* ---- register ---- */

/* The field a register body fails on, "(ok)" when it decodes. */
static const char *register_error(const char *text) {
        static JsonError err;
        json_t *j = load(text);
        WireRegister r;
        memset(&err, 0, sizeof(err));
        int k = wire_register_parse(j, &r, &err);
        json_decref(j);
        return k < 0 ? err.field : "(ok)";
}

static void test_register(void) {
        json_t *labels = json_pack("{s:s}", "zone", "a");
        json_t *accs = json_pack("[{s:s,s:i}]", "kind", "nvidia-h100", "index", 0);
        WireRegister in = {.node = "n1",
                           .hostname = "host",
                           .address = "127.0.0.1:4000",
                           .boot_id = "boot",
                           .agent_id = "a1",
                           .labels = labels,
                           .cpus = 8,
                           .memory_mb = 16000,
                           .numa_nodes = 2,
                           .accelerators = accs,
                           .containment = "cgroup-v2"};
        json_t *j = wire_register_encode(&in);
        check_dump(j, "{\"node\":\"n1\",\"hostname\":\"host\",\"address\":\"127.0.0.1:4000\","
                      "\"boot_id\":\"boot\",\"agent_id\":\"a1\",\"labels\":{\"zone\":\"a\"},"
                      "\"inventory\":{\"cpus\":8,\"memory_mb\":16000,\"numa_nodes\":2,"
                      "\"accelerators\":[{\"kind\":\"nvidia-h100\",\"index\":0}],"
                      "\"containment\":\"cgroup-v2\"}}");
        WireRegister out;
        JsonError err;
        CHECK_INT(wire_register_parse(j, &out, &err), 0);
        CHECK_STR(out.node, "n1");
        CHECK_STR(out.hostname, "host");
        CHECK_STR(out.address, "127.0.0.1:4000");
        CHECK_STR(out.boot_id, "boot");
        CHECK_STR(out.agent_id, "a1");
        CHECK(json_equal(out.labels, labels) && json_equal(out.accelerators, accs));
        CHECK(out.inventory == json_object_get(j, "inventory"));
        CHECK(out.cpus == 8 && out.memory_mb == 16000 && out.numa_nodes == 2);
        CHECK_STR(out.containment, "cgroup-v2");
        json_t *again = wire_register_encode(&out);
        CHECK(json_equal(again, j));
        json_decref(again);
        json_decref(j);
        json_decref(labels);
        json_decref(accs);

        /* Absent optional members stay absent both ways. */
        j = wire_register_encode(&(WireRegister){.node = "n2"});
        check_dump(j, "{\"node\":\"n2\",\"inventory\":{\"cpus\":0,\"memory_mb\":0,"
                      "\"numa_nodes\":0}}");
        CHECK_INT(wire_register_parse(j, &out, &err), 0);
        CHECK(!out.hostname && !out.agent_id && !out.labels && !out.accelerators &&
              !out.containment);
        json_decref(j);

        const char *inv = "\"inventory\":{\"cpus\":1}";
        char *t;
        CHECK_STR(register_error("[]"), "");
        CHECK_STR(register_error("{\"node\":\"n\",\"inventory\":{\"cpus\":1}}"), "(ok)");
        CHECK_STR(register_error("{\"inventory\":{\"cpus\":1}}"), "node");
        CHECK_STR(register_error("{\"node\":\"a b\",\"inventory\":{\"cpus\":1}}"), "node");
        CHECK_STR(register_error("{\"node\":7,\"inventory\":{\"cpus\":1}}"), "node");
        CHECK_STR(register_error("{\"node\":\"n\"}"), "inventory");
        CHECK_STR(register_error("{\"node\":\"n\",\"inventory\":{}}"), "inventory.cpus");
        CHECK_STR(register_error("{\"node\":\"n\",\"inventory\":{\"cpus\":\"8\"}}"),
                  "inventory.cpus");
        CHECK_STR(register_error("{\"node\":\"n\",\"inventory\":{\"cpus\":1,\"gpus\":1}}"),
                  "inventory.gpus");
        CHECK_STR(register_error("{\"node\":\"n\",\"inventory\":{\"cpus\":1,"
                                 "\"accelerators\":{}}}"),
                  "inventory.accelerators");
        CHECK_STR(register_error("{\"node\":\"n\",\"inventory\":{\"cpus\":1,"
                                 "\"accelerators\":[{\"index\":0}]}}"),
                  "inventory.accelerators");
        /* The address is host:port and nothing a URL would read as more. */
        static const char *const good_addresses[] = {"127.0.0.1:4000", "node-1.example.com:1",
                                                     "n_2:65535", "[::1]:8", "[fe80::1]:80"};
        static const char *const bad_addresses[] = {"127.0.0.1:18495/secret?",
                                                    "127.0.0.1:80?x=1",
                                                    "user@host:80",
                                                    "host:80#frag",
                                                    "host",
                                                    "host:",
                                                    "host:0",
                                                    "host:65536",
                                                    "host:080",
                                                    "host:+80",
                                                    "host:80 ",
                                                    "ho st:80",
                                                    ":80",
                                                    "-host:80",
                                                    "host:80:81",
                                                    "[::1]",
                                                    "[::1]:",
                                                    "[nope]:80",
                                                    "[::1]x:80",
                                                    "[]:80",
                                                    "[::1%eth0]:80",
                                                    "a\tb:80",
                                                    "h\\x:1"};
        for (size_t i = 0; i < ELEMENTSOF(good_addresses); i++) {
                CHECK(wire_address_valid(good_addresses[i]));
                t = xasprintf("{\"node\":\"n\",\"address\":\"%s\",%s}", good_addresses[i], inv);
                CHECK_STR(register_error(t), "(ok)");
                free(t);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad_addresses); i++) {
                CHECK(!wire_address_valid(bad_addresses[i]));
                json_t *body = json_pack("{s:s,s:s,s:{s:i}}", "node", "n", "address",
                                         bad_addresses[i], "inventory", "cpus", 1);
                WireRegister r;
                JsonError address_err = {0};
                CHECK(wire_register_parse(body, &r, &address_err) < 0);
                CHECK_STR(address_err.field, "address");
                json_decref(body);
        }
        t = xasprintf("{\"node\":\"n\",\"colour\":\"red\",%s}", inv);
        CHECK_STR(register_error(t), "colour");
        free(t);
        t = xasprintf("{\"node\":\"n\",\"labels\":{\"a\":1},%s}", inv);
        CHECK_STR(register_error(t), "labels.a");
        free(t);
        json_t *many = json_array();
        for (int i = 0; i <= 1024; i++)
                json_array_append_new(many, json_pack("{s:s}", "kind", "x"));
        j = json_pack("{s:s,s:{s:i,s:o}}", "node", "n", "inventory", "cpus", 1, "accelerators",
                      many);
        CHECK(wire_register_parse(j, &out, &err) < 0);
        CHECK_STR(err.field, "inventory.accelerators");
        json_decref(j);
}

static void test_register_answer(void) {
        json_t *j = wire_register_answer_encode(
                &(WireRegisterAnswer){.node = "n1", .lease_ms = 3000, .sync_period_ms = 500});
        check_dump(j, "{\"node\":\"n1\",\"lease_ms\":3000,\"sync_period_ms\":500}");
        WireRegisterAnswer a;
        CHECK_INT(wire_register_answer_parse(j, &a), 0);
        CHECK_STR(a.node, "n1");
        CHECK(a.lease_ms == 3000 && a.sync_period_ms == 500);
        json_decref(j);

        /* Missing or nonsensical periods read as 0: the agent keeps its own. */
        j = load("{\"node\":\"n1\",\"lease_ms\":-4,\"sync_period_ms\":\"5\"}");
        CHECK_INT(wire_register_answer_parse(j, &a), 0);
        CHECK(a.lease_ms == 0 && a.sync_period_ms == 0);
        json_decref(j);
        j = load("[]");
        CHECK_INT(wire_register_answer_parse(j, &a), -EBADMSG);
        json_decref(j);
        CHECK_INT(wire_register_answer_parse(NULL, &a), -EBADMSG);
}

/* ---- sync request ---- */

static const char *sync_error(const char *text) {
        static JsonError err;
        json_t *j = load(text);
        WireSync s;
        memset(&err, 0, sizeof(err));
        int k = wire_sync_parse(j, &s, &err);
        if (k == 0)
                wire_sync_clear(&s);
        json_decref(j);
        return k < 0 ? err.field : "(ok)";
}

static void check_rank(const WireRankReport *a, const WireRankReport *b) {
        CHECK(a->job == b->job && a->attempt == b->attempt && a->rank == b->rank);
        CHECK(a->exited == b->exited && a->pid == b->pid && a->exit_code == b->exit_code);
        CHECK(a->signal == b->signal && a->step == b->step && a->hung == b->hung);
        CHECK(a->start_failed == b->start_failed && a->oom_killed == b->oom_killed);
        CHECK(a->node_fault == b->node_fault && util_streq_ptr(a->log_tail, b->log_tail));
}

static void test_sync(void) {
        WireRankReport ranks[] = {
                {.job = 7,
                 .attempt = 1,
                 .rank = 0,
                 .pid = 4242,
                 .exit_code = -1,
                 .step = 41,
                 .hung = true},
                {.job = 7,
                 .attempt = 1,
                 .rank = 1,
                 .exited = true,
                 .exit_code = 127,
                 .step = -1,
                 .start_failed = true,
                 .node_fault = true},
                {.job = 8,
                 .attempt = 2,
                 .rank = 0,
                 .exited = true,
                 .exit_code = -1,
                 .signal = 9,
                 .step = 0,
                 .oom_killed = true,
                 .log_tail = "step 0\nCUDA error: uncorrectable ECC error encountered\n"},
        };
        WireCheckpoint ckpts[] = {{.job = 7, .attempt = 1, .step = 40, .path = "/ckpt/s40"}};
        WireSync in = {.node = "n1",
                       .boot_id = "b",
                       .agent_id = "a1",
                       .ranks = ranks,
                       .n_ranks = 3,
                       .checkpoints = ckpts,
                       .n_checkpoints = 1,
                       .healthy = false,
                       .health_reason = "ecc"};
        json_t *j = wire_sync_encode(&in);
        check_dump(j,
                   "{\"node\":\"n1\",\"boot_id\":\"b\",\"agent_id\":\"a1\",\"ranks\":["
                   "{\"job\":7,\"attempt\":1,\"rank\":0,\"state\":\"running\",\"pid\":4242,"
                   "\"exit_code\":null,\"signal\":null,\"step\":41,\"hung\":true},"
                   "{\"job\":7,\"attempt\":1,\"rank\":1,\"state\":\"exited\",\"pid\":null,"
                   "\"exit_code\":127,\"signal\":null,\"step\":null,\"start_failed\":true,"
                   "\"node_fault\":true},"
                   "{\"job\":8,\"attempt\":2,\"rank\":0,\"state\":\"exited\",\"pid\":null,"
                   "\"exit_code\":null,\"signal\":9,\"step\":0,"
                   "\"log_tail\":\"step 0\\nCUDA error: uncorrectable ECC error encountered\\n\","
                   "\"oom_killed\":true}],"
                   "\"checkpoints\":[{\"job\":7,\"attempt\":1,\"step\":40,"
                   "\"path\":\"/ckpt/s40\"}],"
                   "\"health\":{\"healthy\":false,\"reason\":\"ecc\"}}");
        WireSync out;
        JsonError err;
        CHECK_INT(wire_sync_parse(j, &out, &err), 0);
        CHECK_STR(out.node, "n1");
        CHECK_STR(out.boot_id, "b");
        CHECK_STR(out.agent_id, "a1");
        CHECK_INT(out.n_ranks, 3);
        for (int i = 0; i < 3; i++)
                check_rank(&out.ranks[i], &ranks[i]);
        CHECK_INT(out.n_checkpoints, 1);
        CHECK(out.checkpoints[0].job == 7 && out.checkpoints[0].attempt == 1 &&
              out.checkpoints[0].step == 40);
        CHECK_STR(out.checkpoints[0].path, "/ckpt/s40");
        CHECK(!out.healthy);
        CHECK_STR(out.health_reason, "ecc");
        json_t *again = wire_sync_encode(&out);
        CHECK(json_equal(again, j));
        json_decref(again);
        wire_sync_clear(&out);
        json_decref(j);

        /* A healthy node without ranks; its reason is "" both ways. */
        j = wire_sync_encode(&(WireSync){.node = "n1", .healthy = true});
        check_dump(j, "{\"node\":\"n1\",\"ranks\":[],\"checkpoints\":[],"
                      "\"health\":{\"healthy\":true,\"reason\":\"\"}}");
        CHECK_INT(wire_sync_parse(j, &out, &err), 0);
        CHECK(out.healthy && out.n_ranks == 0 && out.n_checkpoints == 0);
        CHECK_STR(out.health_reason, "");
        wire_sync_clear(&out);
        json_decref(j);

        j = load("{\"node\":\"n1\",\"ranks\":[{\"job\":1,\"attempt\":1,\"rank\":0,"
                 "\"state\":\"exited\",\"exit_code\":3}],\"checkpoints\":[],"
                 "\"health\":{\"healthy\":false,\"reason\":\"ecc\"}}");
        CHECK_INT(wire_sync_parse(j, &out, &err), 0);
        CHECK_INT(out.n_ranks, 1);
        CHECK(out.ranks[0].exited);
        CHECK_INT(out.ranks[0].exit_code, 3);
        CHECK(!out.healthy);
        CHECK_STR(out.health_reason, "ecc");
        wire_sync_clear(&out);
        json_decref(j);

#define KEY "{\"node\":\"n1\",\"ranks\":[{\"job\":1,\"attempt\":1,\"rank\":0,"
        static const char *const bad[][2] = {
                {KEY "\"state\":\"exited\"}]}", "ranks[].exit_code"},
                {KEY "\"state\":\"exited\",\"exit_code\":1,\"signal\":9}]}", "ranks[].signal"},
                {KEY "\"state\":\"gone\"}]}", "ranks[].state"},
                {KEY "\"pid\":1}]}", "ranks[].state"},
                {KEY "\"state\":\"running\",\"pid\":\"1\"}]}", "ranks[].pid"},
                {KEY "\"state\":\"running\",\"exit_code\":256}]}", "ranks[].exit_code"},
                {KEY "\"state\":\"running\",\"step\":-2}]}", "ranks[].step"},
                {KEY "\"state\":\"running\",\"hung\":1}]}", "ranks[].hung"},
                {KEY "\"state\":\"running\",\"colour\":1}]}", "ranks[].colour"},
                /* A node may blame itself only for a rank it could not lay out. */
                {KEY "\"state\":\"exited\",\"exit_code\":1,\"node_fault\":true}]}",
                 "ranks[].node_fault"},
                {KEY "\"state\":\"exited\",\"exit_code\":1,\"log_tail\":7}]}", "ranks[].log_tail"},
                {"{\"node\":\"n1\",\"ranks\":[{\"attempt\":1,\"rank\":0,\"state\":\"running\"}]}",
                 "ranks[].job"},
                {"{\"node\":\"n1\",\"ranks\":[{\"job\":0,\"attempt\":1,\"rank\":0}]}",
                 "ranks[].job"},
                {"{\"node\":\"n1\",\"ranks\":[7]}", "ranks"},
        };
#undef KEY
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CHECK_STR(sync_error(bad[i][0]), bad[i][1]);
        CHECK_STR(sync_error("{\"ranks\":[]}"), "node");
        CHECK_STR(sync_error("{\"node\":\"n1\",\"ranks\":{}}"), "ranks");
        CHECK_STR(sync_error("{\"node\":\"n1\",\"checkpoints\":[{\"job\":1,\"attempt\":1,"
                             "\"step\":3}]}"),
                  "checkpoints[].path");
        CHECK_STR(sync_error("{\"node\":\"n1\",\"checkpoints\":[{\"job\":1,\"attempt\":1,"
                             "\"step\":\"3\",\"path\":\"/c\"}]}"),
                  "checkpoints[].step");
        CHECK_STR(sync_error("{\"node\":\"n1\",\"health\":[]}"), "health");
        CHECK_STR(sync_error("{\"node\":\"n1\",\"health\":{\"healthy\":\"no\"}}"),
                  "health.healthy");
        CHECK_STR(sync_error("{\"node\":\"n1\",\"health\":{\"reason\":3}}"), "health.reason");

        /* Over the limits. */
        char *big = xmalloc(WIRE_MAX_REASON + 2);
        memset(big, 'r', WIRE_MAX_REASON + 1);
        big[WIRE_MAX_REASON + 1] = '\0';
        j = json_pack("{s:s,s:{s:b,s:s}}", "node", "n1", "health", "healthy", 0, "reason", big);
        CHECK(wire_sync_parse(j, &out, &err) < 0);
        CHECK_STR(err.field, "health.reason");
        json_decref(j);
        /* A log tail over its bound is refused whole, not cut (a node cannot hand the
         * failure rules more than FAILRULES_LOG_TAIL bytes to match). */
        big[WIRE_MAX_LOG_TAIL + 1] = '\0';
        j = json_pack("{s:s,s:[{s:i,s:i,s:i,s:s,s:i,s:s}]}", "node", "n1", "ranks", "job", 1,
                      "attempt", 1, "rank", 0, "state", "exited", "exit_code", 1, "log_tail", big);
        CHECK(wire_sync_parse(j, &out, &err) < 0);
        CHECK_STR(err.field, "ranks[].log_tail");
        json_decref(j);
        free(big);
        json_t *many = json_array(), *many_ckpts = json_array();
        for (int i = 0; i <= WIRE_MAX_RANKS; i++)
                json_array_append_new(many, json_pack("{s:i,s:i,s:i,s:s}", "job", 1, "attempt", 1,
                                                      "rank", i, "state", "running"));
        for (int i = 0; i <= WIRE_MAX_CHECKPOINTS; i++)
                json_array_append_new(many_ckpts, json_pack("{s:i,s:i,s:i,s:s}", "job", i + 1,
                                                            "attempt", 1, "step", 1, "path", "/c"));
        j = json_pack("{s:s,s:o}", "node", "n1", "ranks", many);
        CHECK(wire_sync_parse(j, &out, &err) < 0);
        CHECK_STR(err.field, "ranks");
        json_decref(j);
        j = json_pack("{s:s,s:o}", "node", "n1", "checkpoints", many_ckpts);
        CHECK(wire_sync_parse(j, &out, &err) < 0);
        CHECK_STR(err.field, "checkpoints");
        json_decref(j);
}

/* ---- sync answer ---- */

/* A whole answer's text from the controller's plain arrays. */
static char *answer_text_shared(const WireSyncAnswer *a, const WireDesiredRankOut *ranks, size_t n,
                                const WireSharedEnvOut *shared, size_t n_shared) {
        JsonWriter w = {0};
        wire_sync_answer_write_begin(&w, a);
        for (size_t i = 0; i < n; i++)
                wire_desired_rank_write(&w, &ranks[i]);
        wire_sync_answer_write_end(&w, a, shared, n_shared);
        return json_writer_take(&w);
}

static char *answer_text(const WireSyncAnswer *a, const WireDesiredRankOut *ranks, size_t n) {
        return answer_text_shared(a, ranks, n, NULL, 0);
}

static void test_sync_answer_round_trip(void) {
        const char *argv[] = {"python3", "train.py"}, *one[] = {"x"};
        const WireEnvVar env[] = {{"AXCTL_JOB_ID", "7"}, {"NOTE", "a \"quoted\"\n\\ é"}};
        const int devices[] = {0, 1};
        WireDesiredRankOut ranks[] = {
                {.key = {7, 1, 0},
                 .argv = argv,
                 .n_argv = 2,
                 .env = env,
                 .n_env = 2,
                 .workdir = "/srv/exp",
                 .user = "alice",
                 .devices = devices,
                 .n_devices = 2,
                 .accelerator = "nvidia-h100",
                 .checkpoint_dir = "/ckpt/x",
                 .hang_timeout_s = 30,
                 .hang_signal = SIGUSR1,
                 .hang_signal_grace_s = 15,
                 .cpus = 4,
                 .memory_mb = 8192},
                {.key = {8, 2, 3}, .argv = one, .n_argv = 1},
        };
        WireSyncAnswer in = {.version = 12, .lease_ms = 5000, .sync_period_ms = 1000};
        char *text = answer_text(&in, ranks, 2);
        CHECK_STR(text,
                  "{\"version\":12,\"lease_ms\":5000,\"sync_period_ms\":1000,\"ranks\":["
                  "{\"job\":7,\"attempt\":1,\"rank\":0,\"argv\":[\"python3\",\"train.py\"],"
                  "\"env\":{\"AXCTL_JOB_ID\":\"7\",\"NOTE\":\"a \\\"quoted\\\"\\n\\\\ é\"},"
                  "\"user\":\"alice\",\"devices\":[0,1],"
                  "\"hang_timeout_s\":30,\"workdir\":\"/srv/exp\","
                  "\"accelerator\":\"nvidia-h100\",\"checkpoint_dir\":\"/ckpt/x\","
                  "\"cpus\":4,\"memory_mb\":8192,\"hang_signal\":\"SIGUSR1\","
                  "\"hang_signal_grace_s\":15},"
                  "{\"job\":8,\"attempt\":2,\"rank\":3,\"argv\":[\"x\"],\"env\":null,"
                  "\"user\":null,\"devices\":null,\"hang_timeout_s\":0,\"workdir\":null,"
                  "\"accelerator\":null,\"checkpoint_dir\":null,\"cpus\":0,\"memory_mb\":0}]}");
        /* What the agent reads is what was written. */
        WireSyncAnswer out;
        CHECK_INT(wire_sync_answer_parse(load_answer(text), &out), 0);
        CHECK(out.version == 12 && out.lease_ms == 5000 && out.sync_period_ms == 1000);
        CHECK(!out.unchanged);
        CHECK_INT(out.n_ranks, 2);
        for (size_t i = 0; i < 2; i++) {
                const WireDesiredRankOut *a = &ranks[i];
                const WireDesiredRank *b = &out.ranks[i];
                CHECK(!b->error);
                CHECK(a->key.job == b->key.job && a->key.attempt == b->key.attempt &&
                      a->key.rank == b->key.rank);
                CHECK(json_array_size(b->argv) == a->n_argv);
                for (size_t k = 0; k < a->n_argv; k++)
                        CHECK_STR(json_string_value(json_array_get(b->argv, k)), a->argv[k]);
                CHECK(a->env ? json_object_size(b->env) == a->n_env : !b->env);
                for (size_t k = 0; k < a->n_env; k++)
                        CHECK_STR(json_string_value(json_object_get(b->env, a->env[k].key)),
                                  a->env[k].value);
                CHECK(a->devices ? json_array_size(b->devices) == a->n_devices : !b->devices);
                for (size_t k = 0; k < a->n_devices; k++)
                        CHECK(json_integer_value(json_array_get(b->devices, k)) == a->devices[k]);
                CHECK(a->workdir ? strcmp(a->workdir, b->workdir) == 0 : !b->workdir);
                CHECK(a->user ? strcmp(a->user, b->user) == 0 : !b->user);
                CHECK(a->accelerator ? strcmp(a->accelerator, b->accelerator) == 0
                                     : !b->accelerator);
                CHECK(a->checkpoint_dir ? strcmp(a->checkpoint_dir, b->checkpoint_dir) == 0
                                        : !b->checkpoint_dir);
                CHECK(a->hang_timeout_s == b->hang_timeout_s);
                CHECK(a->hang_signal == b->hang_signal);
                CHECK(!a->hang_signal || a->hang_signal_grace_s == b->hang_signal_grace_s);
                CHECK(a->cpus == b->cpus && a->memory_mb == b->memory_mb);
        }
        wire_sync_answer_clear(&out);
        free(text);

        /* No desired ranks: an empty list, which is not the short answer. */
        text = answer_text(&in, NULL, 0);
        CHECK_STR(text, "{\"version\":12,\"lease_ms\":5000,\"sync_period_ms\":1000,\"ranks\":[]}");
        CHECK_INT(wire_sync_answer_parse(load_answer(text), &out), 0);
        CHECK(!out.unchanged && out.n_ranks == 0);
        wire_sync_answer_clear(&out);
        free(text);
}

static void test_parse_sync_answer(void) {
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
        WireSyncAnswer a;
        CHECK(wire_sync_answer_parse(json_loads(text, 0, NULL), &a) == 0);
        CHECK(a.version == 12 && a.lease_ms == 4000 && a.sync_period_ms == 0);
        CHECK(a.n_ranks == 3);
        const WireDesiredRank *d = wire_sync_answer_find(&a, (WireRankKey){7, 1, 0});
        CHECK(d && !d->error);
        CHECK(json_array_size(d->argv) == 2 && strcmp(d->workdir, "/srv") == 0);
        CHECK(strcmp(d->user, "alice") == 0 && strcmp(d->accelerator, "nvidia-h100") == 0);
        CHECK(strcmp(d->checkpoint_dir, "/ckpt/x") == 0 && d->hang_timeout_s == 30);
        CHECK(json_array_size(d->devices) == 2);
        d = wire_sync_answer_find(&a, (WireRankKey){7, 1, 1});
        CHECK(d && d->error && strstr(d->error, "argv"));
        CHECK(!d->workdir);
        d = wire_sync_answer_find(&a, (WireRankKey){8, 3, 0});
        CHECK(d && d->error && strstr(d->error, "user"));
        CHECK(!wire_sync_answer_find(&a, (WireRankKey){7, 2, 0}));
        wire_sync_answer_clear(&a);

        CHECK(wire_sync_answer_parse(json_loads("{\"ranks\": []}", 0, NULL), &a) < 0);
        CHECK(wire_sync_answer_parse(json_loads("{\"version\": 1}", 0, NULL), &a) < 0);
        CHECK(wire_sync_answer_parse(json_loads("{\"version\": \"1\", \"ranks\": []}", 0, NULL),
                                     &a) < 0);
        CHECK(wire_sync_answer_parse(json_loads("[]", 0, NULL), &a) < 0);
        CHECK(wire_sync_answer_parse(NULL, &a) < 0);
}

/*
 * The short answer to a sync whose agent already applied the node's version: the same
 * version, lease and period, no ranks. An agent that does not announce it reads it as
 * malformed, which is why the controller sends it only to agents that do.
 */
static void test_sync_answer_unchanged(void) {
        WireSyncAnswer in = {
                .version = 12, .lease_ms = 5000, .sync_period_ms = 1000, .unchanged = true};
        char *text = answer_text(&in, NULL, 0);
        CHECK_STR(text, "{\"version\":12,\"lease_ms\":5000,\"sync_period_ms\":1000,"
                        "\"unchanged\":true}");
        WireSyncAnswer out;
        CHECK_INT(wire_sync_answer_parse(load_answer(text), &out), 0);
        CHECK(out.unchanged && out.version == 12 && out.lease_ms == 5000 &&
              out.sync_period_ms == 1000);
        CHECK_INT(out.n_ranks, 0);
        CHECK(!wire_sync_answer_find(&out, (WireRankKey){7, 1, 0}));
        wire_sync_answer_clear(&out);
        free(text);

        /* A whole answer is not unchanged, whatever its version. */
        CHECK_INT(wire_sync_answer_parse(load("{\"version\": 12, \"ranks\": [],"
                                              " \"unchanged\": false}"),
                                         &out),
                  0);
        CHECK(!out.unchanged);
        wire_sync_answer_clear(&out);
        /* Both, or a short answer without its version: neither can be trusted. */
        CHECK(wire_sync_answer_parse(load("{\"version\": 12, \"ranks\": [],"
                                          " \"unchanged\": true}"),
                                     &out) == -EBADMSG);
        CHECK(wire_sync_answer_parse(load("{\"unchanged\": true}"), &out) == -EBADMSG);
        CHECK(wire_sync_answer_parse(load("{\"version\": 12, \"unchanged\": 1}"), &out) ==
              -EBADMSG);
}

/* The answer that renews the lease only: no ranks, and nothing else with it. */
static void test_sync_answer_lease_only(void) {
        WireSyncAnswer in = {
                .version = 11, .lease_ms = 5000, .sync_period_ms = 1000, .lease_only = true};
        char *text = answer_text(&in, NULL, 0);
        CHECK_STR(text, "{\"version\":11,\"lease_ms\":5000,\"sync_period_ms\":1000,"
                        "\"lease_only\":true}");
        WireSyncAnswer out;
        CHECK_INT(wire_sync_answer_parse(load_answer(text), &out), 0);
        CHECK(out.lease_only && !out.unchanged && out.version == 11 && out.lease_ms == 5000);
        CHECK_INT(out.n_ranks, 0);
        wire_sync_answer_clear(&out);
        free(text);
        /* With ranks, with unchanged, or without its version: not to be trusted. */
        CHECK(wire_sync_answer_parse(load("{\"version\": 11, \"ranks\": [],"
                                          " \"lease_only\": true}"),
                                     &out) == -EBADMSG);
        CHECK(wire_sync_answer_parse(load("{\"version\": 11, \"unchanged\": true,"
                                          " \"lease_only\": true}"),
                                     &out) == -EBADMSG);
        CHECK(wire_sync_answer_parse(load("{\"lease_only\": true}"), &out) == -EBADMSG);
        CHECK(wire_sync_answer_parse(load("{\"version\": 11, \"lease_only\": 1}"), &out) ==
              -EBADMSG);
}

/* The answer {"version":1,"ranks":ranks,"shared_env":shared} (both taken over), decoded. */
static void shared_answer_parse(json_t *ranks, json_t *shared, WireSyncAnswer *ret) {
        json_t *j = json_pack("{s:i,s:o,s:o}", "version", 1, "ranks", ranks, "shared_env", shared);
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        CHECK_INT(wire_sync_answer_parse(load_answer(text), ret), 0);
        free(text);
}

/* An object of n variables PREFIX0.. whose values are each len bytes of 'v'. */
static json_t *env_of(const char *prefix, int n, size_t len) {
        char *value = xmalloc(len + 1);
        memset(value, 'v', len);
        value[len] = '\0';
        json_t *env = json_object();
        for (int i = 0; i < n; i++) {
                char key[WIRE_MAX_NAME + 1];
                snprintf(key, sizeof(key), "%s%d", prefix, i);
                json_object_set_new(env, key, json_string(value));
        }
        free(value);
        return env;
}

/* A desired rank of job 1 naming shared environment name, with env (taken over; may be
 * NULL). */
static json_t *rank_naming(int rank, const char *name, json_t *env) {
        json_t *o = json_pack("{s:i,s:i,s:i,s:[s],s:s}", "job", 1, "attempt", 1, "rank", rank,
                              "argv", "x", "shared_env", name);
        if (env)
                json_object_set_new(o, "env", env);
        return o;
}

/* The error of a rank of an answer of that one rank, malloc'd; NULL: none. */
static char *shared_rank_error(json_t *rank, json_t *shared) {
        WireSyncAnswer a;
        shared_answer_parse(json_pack("[o]", rank), shared, &a);
        CHECK_INT(a.n_ranks, 1);
        char *error = a.n_ranks == 1 && a.ranks[0].error ? xstrdup(a.ranks[0].error) : NULL;
        wire_sync_answer_clear(&a);
        return error;
}

static void expect_shared_error(json_t *rank, json_t *shared, const char *needle) {
        char *error = shared_rank_error(rank, shared);
        if (!error || !strstr(error, needle))
                fprintf(stderr, "shared_env: error '%s', want '%s'\n", error ? error : "(none)",
                        needle);
        CHECK(error && strstr(error, needle));
        free(error);
}

/*
 * Variables shared by the ranks of an answer: written once, and each rank that names
 * them has them besides its own env (the agent adds them when it builds the rank's
 * environment). A name the answer lacks, a variable both shared and the rank's, or
 * limits broken by the two together, fail that rank. A hostile controller cannot make an
 * answer cost more to decode than its size: nothing shared is copied per rank.
 */
static void test_sync_answer_shared_env(void) {
        const char *argv[] = {"x"};
        const WireEnvVar own0[] = {{"AXCTL_RANK", "0"}}, own1[] = {{"AXCTL_RANK", "1"}};
        const WireEnvVar hosts[] = {{"AXCTL_NODE_HOSTNAMES", "a,b,\"c\""}};
        WireDesiredRankOut ranks[] = {
                {.key = {7, 1, 0},
                 .argv = argv,
                 .n_argv = 1,
                 .env = own0,
                 .n_env = 1,
                 .shared_env = "7"},
                {.key = {7, 1, 1},
                 .argv = argv,
                 .n_argv = 1,
                 .env = own1,
                 .n_env = 1,
                 .shared_env = "7"},
                {.key = {9, 2, 0}, .argv = argv, .n_argv = 1, .shared_env = "9"},
        };
        const WireSharedEnvOut shared[] = {{"7", hosts, 1}, {"9", hosts, 1}};
        WireSyncAnswer in = {.version = 3, .lease_ms = 5000, .sync_period_ms = 1000};
        char *text = answer_text_shared(&in, ranks, 3, shared, 2);
        CHECK(strstr(text, "\"memory_mb\":0,\"shared_env\":\"7\"}"));
        CHECK(strstr(text, "],\"shared_env\":{\"7\":{\"AXCTL_NODE_HOSTNAMES\":"
                           "\"a,b,\\\"c\\\"\"},\"9\":{"));
        WireSyncAnswer out;
        CHECK_INT(wire_sync_answer_parse(load_answer(text), &out), 0);
        CHECK_INT(out.n_ranks, 3);
        for (size_t i = 0; i < out.n_ranks; i++) {
                const WireDesiredRank *d = &out.ranks[i];
                CHECK(!d->error);
                CHECK_STR(json_string_value(json_object_get(d->shared_env, "AXCTL_NODE_HOSTNAMES")),
                          "a,b,\"c\"");
                CHECK(!json_object_get(d->env, "AXCTL_NODE_HOSTNAMES"));
        }
        CHECK_STR(json_string_value(json_object_get(out.ranks[1].env, "AXCTL_RANK")), "1");
        CHECK(!out.ranks[2].env);
        wire_sync_answer_clear(&out);
        free(text);

        /* Names no environment of the answer. */
        expect_shared_error(rank_naming(0, "8", NULL), json_pack("{s:{s:s}}", "7", "H", "h"),
                            "names no shared environment");
        expect_shared_error(json_pack("{s:i,s:i,s:i,s:[s],s:i}", "job", 1, "attempt", 1, "rank", 0,
                                      "argv", "x", "shared_env", 7),
                            json_pack("{s:{s:s}}", "7", "H", "h"), "names no shared environment");
        expect_shared_error(rank_naming(0, "7", NULL), json_pack("[{s:s}]", "H", "h"),
                            "names no shared environment");
        /* The same variable both ways: which one wins would be a guess. */
        expect_shared_error(rank_naming(0, "7", json_pack("{s:s}", "H", "own")),
                            json_pack("{s:{s:s}}", "7", "H", "h"), "both the rank's and shared");
        /* Shared variables are checked as a rank's own. */
        expect_shared_error(rank_naming(0, "7", NULL), json_pack("{s:{s:i}}", "7", "N", 5),
                            "env variable N");
        expect_shared_error(rank_naming(0, "7", NULL), json_pack("{s:{s:s}}", "7", "A=B", "c"),
                            "invalid variable name");
        expect_shared_error(rank_naming(0, "7", NULL),
                            json_pack("{s:o}", "7", env_of("H", 9, WIRE_MAX_STRING - 8)),
                            "larger than");
        /* Each within its limits, together over them. */
        expect_shared_error(rank_naming(0, "7", env_of("OWN", 5, 128 * 1000)),
                            json_pack("{s:o}", "7", env_of("H", 5, 128 * 1000)), "larger than");
        expect_shared_error(rank_naming(0, "7", env_of("OWN", 3000, 1)),
                            json_pack("{s:o}", "7", env_of("H", 2000, 1)),
                            "more than 4096 variables");

        /*
         * Every rank of a full answer names one shared environment as large as allowed:
         * copied into each rank it would take gigabytes. Decoding takes what the text
         * takes.
         */
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        json_t *many = json_array();
        for (int r = 0; r < WIRE_MAX_RANKS; r++)
                json_array_append_new(many, rank_naming(r, "big", NULL));
        shared_answer_parse(many, json_pack("{s:o}", "big", env_of("K", WIRE_MAX_ENV, 200)), &out);
        CHECK_INT(out.n_ranks, WIRE_MAX_RANKS);
        for (size_t i = 0; i < out.n_ranks; i++)
                CHECK(!out.ranks[i].error &&
                      json_object_size(out.ranks[i].shared_env) == WIRE_MAX_ENV);
        getrusage(RUSAGE_SELF, &after);
        CHECK(after.ru_maxrss - before.ru_maxrss < 256 * 1024); /* KiB: under 256 MiB */
        wire_sync_answer_clear(&out);

        /* More shared environments than ranks may be: each rank looks for its own among
         * them, so their number is bounded as the ranks' is. */
        json_t *names = json_object();
        for (int i = 0; i <= WIRE_MAX_RANKS; i++) {
                char name[16];
                snprintf(name, sizeof(name), "%d", i);
                json_object_set_new(names, name, json_object());
        }
        json_t *j = json_pack("{s:i,s:[o],s:o}", "version", 1, "ranks", rank_naming(0, "0", NULL),
                              "shared_env", names);
        CHECK(wire_sync_answer_parse(j, &out) == -EBADMSG);
}

/* The accept list of a sync's query: whole names only, in any place of the list. */
static void test_accepts(void) {
        CHECK(wire_accepts("unchanged", WIRE_ACCEPT_UNCHANGED));
        CHECK(wire_accepts("gzip,unchanged", WIRE_ACCEPT_UNCHANGED));
        CHECK(wire_accepts("unchanged,later", WIRE_ACCEPT_UNCHANGED));
        CHECK(wire_accepts(",,unchanged,", WIRE_ACCEPT_UNCHANGED));
        CHECK(!wire_accepts(NULL, WIRE_ACCEPT_UNCHANGED));
        CHECK(!wire_accepts("", WIRE_ACCEPT_UNCHANGED));
        CHECK(!wire_accepts("unchange", WIRE_ACCEPT_UNCHANGED));
        CHECK(!wire_accepts("unchangedx,xunchanged", WIRE_ACCEPT_UNCHANGED));
        CHECK(!wire_accepts("Unchanged", WIRE_ACCEPT_UNCHANGED));
        CHECK(!wire_accepts("unchanged ", WIRE_ACCEPT_UNCHANGED));
        CHECK(wire_accepts("unchanged,shared_env", WIRE_ACCEPT_SHARED_ENV));
        CHECK(!wire_accepts("unchanged", WIRE_ACCEPT_SHARED_ENV));
        CHECK(wire_accepts("unchanged,shared_env,lease_only", WIRE_ACCEPT_LEASE_ONLY));
}

/* The error of the single desired rank of an answer built from one entry's JSON. */
static char *entry_error(const char *entry) {
        char *text = xasprintf("{\"version\": 1, \"ranks\": [%s]}", entry);
        json_t *json = load(text);
        free(text);
        WireSyncAnswer a;
        CHECK(wire_sync_answer_parse(json, &a) == 0);
        CHECK(a.n_ranks == 1);
        char *error = a.ranks[0].error ? xstrdup(a.ranks[0].error) : NULL;
        wire_sync_answer_clear(&a);
        return error;
}

static void expect_entry_error(const char *entry, const char *needle) {
        char *error = entry_error(entry);
        if (!error || !strstr(error, needle))
                fprintf(stderr, "entry %.200s: error '%s', want '%s'\n", entry,
                        error ? error : "(none)", needle);
        CHECK(error && strstr(error, needle));
        free(error);
}

static void test_hostile_answers(void) {
        static const char *const bad[][2] = {
                {"\"workdir\": \"srv\"", "workdir must be an absolute path"},
                {"\"checkpoint_dir\": \"../x\"", "checkpoint_dir must be an absolute path"},
                {"\"workdir\": \"/srv\\u0000/x\"", "contains a NUL byte"},
                {"\"env\": {\"A=B\": \"1\"}", "invalid variable name"},
                {"\"env\": {\"A\": 1}", "env variable A"},
                {"\"env\": []", "env is not an object"},
                {"\"devices\": 3", "devices must be a list"},
                {"\"user\": 5", "user is not a string"},
                {"\"accelerator\": []", "accelerator is not a string"},
        };
        const char *key = "\"job\": 1, \"attempt\": 1, \"rank\": 0";
        char *e = xasprintf("{%s, \"argv\": [\"x\"], \"workdir\": \"/srv\","
                            " \"hang_timeout_s\": -5}",
                            key);
        char *error = entry_error(e);
        CHECK(!error);
        free(e);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                e = xasprintf("{%s, \"argv\": [\"x\"], %s}", key, bad[i][0]);
                expect_entry_error(e, bad[i][1]);
                free(e);
        }
        e = xasprintf("{%s, \"argv\": [\"a\\u0000b\"]}", key);
        expect_entry_error(e, "argv[0] is longer than");
        free(e);
        e = xasprintf("{%s, \"argv\": [1]}", key);
        expect_entry_error(e, "argv must be a non-empty list of strings");
        free(e);
        e = xasprintf("{%s}", key);
        expect_entry_error(e, "argv must be a non-empty list of strings");
        free(e);

        /* One huge argument, then many that add up past the exec limit. */
        size_t big = WIRE_MAX_STRING + 1;
        char *huge = xmalloc(big + 1);
        memset(huge, 'a', big);
        huge[big] = '\0';
        e = xasprintf("{%s, \"argv\": [\"%s\"]}", key, huge);
        expect_entry_error(e, "argv[0] is longer than");
        free(e);
        huge[WIRE_MAX_STRING / 2] = '\0';
        e = xasprintf("{%s, \"argv\": [\"x\"], \"env\": {\"A\": \"%s\","
                      " \"B\": \"%s\", \"C\": \"%s\", \"D\": \"%s\","
                      " \"E\": \"%s\", \"F\": \"%s\", \"G\": \"%s\","
                      " \"H\": \"%s\", \"I\": \"%s\", \"J\": \"%s\","
                      " \"K\": \"%s\", \"L\": \"%s\", \"M\": \"%s\","
                      " \"N\": \"%s\", \"O\": \"%s\", \"P\": \"%s\","
                      " \"Q\": \"%s\"}}",
                      key, huge, huge, huge, huge, huge, huge, huge, huge, huge, huge, huge, huge,
                      huge, huge, huge, huge, huge);
        expect_entry_error(e, "argv and env together are larger than");
        free(e);
        free(huge);

        /* Too many entries in argv, env or devices. */
        json_t *argv = json_array(), *env = json_object(), *devices = json_array();
        for (int i = 0; i <= WIRE_MAX_ARGS; i++)
                json_array_append_new(argv, json_string("a"));
        for (int i = 0; i <= WIRE_MAX_ENV; i++) {
                char name[16];
                snprintf(name, sizeof(name), "V%d", i);
                json_object_set_new(env, name, json_string(""));
        }
        for (int i = 0; i <= WIRE_MAX_DEVICES; i++)
                json_array_append_new(devices, json_integer(0));
        const struct {
                const char *member;
                json_t *value;
                const char *error;
        } over[] = {{"argv", argv, "argv has more than"},
                    {"env", env, "env has more than"},
                    {"devices", devices, "devices must be a list of at most"}};
        for (size_t i = 0; i < 3; i++) {
                json_t *r = json_pack("{s:i,s:i,s:i,s:[s]}", "job", 1, "attempt", 1, "rank", 0,
                                      "argv", "x");
                json_object_set(r, over[i].member, over[i].value);
                char *text = json_dumps(r, JSON_COMPACT);
                expect_entry_error(text, over[i].error);
                free(text);
                json_decref(r);
        }
        json_decref(argv);
        json_decref(env);
        json_decref(devices);

        /* A hang timeout over a year is a year. */
        WireSyncAnswer a;
        CHECK(wire_sync_answer_parse(load("{\"version\": 1, \"ranks\": [{\"job\": 1,"
                                          " \"attempt\": 1, \"rank\": 0, \"argv\": [\"x\"],"
                                          " \"hang_timeout_s\": 99999999999}]}"),
                                     &a) == 0);
        CHECK(a.n_ranks == 1 && a.ranks[0].hang_timeout_s == WIRE_MAX_HANG_TIMEOUT_S);
        wire_sync_answer_clear(&a);

        /* A limit that cannot be read is not "no limit": the rank fails to start. */
        CHECK(wire_sync_answer_parse(
                      load("{\"version\": 1, \"ranks\": ["
                           "{\"job\": 1, \"attempt\": 1, \"rank\": 0,"
                           " \"argv\": [\"x\"], \"memory_mb\": -5},"
                           "{\"job\": 1, \"attempt\": 1, \"rank\": 1,"
                           " \"argv\": [\"x\"], \"cpus\": \"2\"},"
                           "{\"job\": 1, \"attempt\": 1, \"rank\": 2,"
                           " \"argv\": [\"x\"], \"cpus\": 2, \"memory_mb\": null}]}"),
                      &a) == 0);
        CHECK(a.n_ranks == 3);
        CHECK(a.ranks[0].error && strstr(a.ranks[0].error, "memory_mb"));
        CHECK(a.ranks[1].error && strstr(a.ranks[1].error, "cpus"));
        CHECK(!a.ranks[2].error && a.ranks[2].cpus == 2 && a.ranks[2].memory_mb == 0);
        wire_sync_answer_clear(&a);

        /* Negative keys are not keys: the entry is dropped, not started. */
        CHECK(wire_sync_answer_parse(json_loads("{\"version\": 1, \"ranks\": [{\"job\": -1,"
                                                " \"attempt\": 1, \"rank\": 0,"
                                                " \"argv\": [\"x\"]}]}",
                                                0, NULL),
                                     &a) == 0);
        CHECK(a.n_ranks == 0);
        wire_sync_answer_clear(&a);

        /* More ranks than any node runs: the whole answer is refused. */
        json_t *ranks = json_array();
        for (int i = 0; i <= WIRE_MAX_RANKS; i++)
                json_array_append_new(ranks, json_pack("{s:i, s:i, s:i, s:[s]}", "job", 1,
                                                       "attempt", 1, "rank", i, "argv", "x"));
        CHECK(wire_sync_answer_parse(json_pack("{s:i, s:o}", "version", 1, "ranks", ranks), &a) ==
              -EBADMSG);
}

/* ---- error answers ---- */

static void test_error(void) {
        json_t *j = load("{\"error\":{\"code\":\"unknown_node\",\"message\":\"x\","
                         "\"field\":\"node\"}}");
        WireError e;
        wire_error_parse(j, &e);
        CHECK_STR(e.code, "unknown_node");
        CHECK_STR(e.message, "x");
        CHECK_STR(e.field, "node");
        json_decref(j);
        j = load("{\"error\":{\"code\":3}}");
        wire_error_parse(j, &e);
        CHECK(!e.code && !e.message && !e.field);
        json_decref(j);
        wire_error_parse(NULL, &e);
        CHECK(!e.code && !e.message && !e.field);
        /* Round trip; an empty field is left out. */
        WireError in = {.code = "conflict", .message = "already ended", .field = ""};
        j = wire_error_encode(&in);
        char *text = json_dumps(j, JSON_COMPACT);
        CHECK_STR(text, "{\"error\":{\"code\":\"conflict\",\"message\":\"already ended\"}}");
        free(text);
        wire_error_parse(j, &e);
        CHECK_STR(e.code, "conflict");
        CHECK_STR(e.message, "already ended");
        CHECK(!e.field);
        json_decref(j);
}

/* ---- the JSON writer (jsonwriter.c) ---- */

/* Nesting and separators as json_dumps writes them. */
static void test_writer_shape(void) {
        JsonWriter w = {0};
        json_writer_object_begin(&w);
        json_writer_key(&w, "a");
        json_writer_array_begin(&w);
        json_writer_int(&w, -9223372036854775807LL - 1);
        json_writer_object_begin(&w);
        json_writer_object_end(&w);
        json_writer_array_begin(&w);
        json_writer_array_end(&w);
        json_writer_null(&w);
        json_writer_bool(&w, false);
        json_writer_array_end(&w);
        json_writer_key(&w, "b");
        json_writer_string_or_null(&w, NULL);
        json_writer_key(&w, "c");
        json_writer_string(&w, "");
        json_writer_object_end(&w);
        char *text = json_writer_take(&w);
        json_t *want = json_pack("{s:[I,{},[],n,b],s:n,s:s}", "a",
                                 (json_int_t) (-9223372036854775807LL - 1), 0, "b", "c", "");
        check_dump(want, text);
        json_decref(want);
        free(text);
        CHECK(!w.buf && w.len == 0); /* taken: the writer is empty again */
}

/*
 * Any bytes make a string a strict JSON reader takes back: valid UTF-8 comes back
 * unchanged, in the bytes json_dumps writes; anything else comes back with U+FFFD in
 * place of each byte that is not UTF-8 (the agent refuses a whole answer that is not).
 */
static void test_writer_strings(void) {
        static const unsigned char pieces[][5] = {
                "a",
                "\"",
                "\\",
                "/",
                "\x01",
                "\x1f",
                "\n",
                "\t",
                "\x7f",
                "\xc3\xa9",
                "\xe2\x82\xac",
                "\xf0\x9f\x98\x80",
                "\x80",
                "\xc3",
                "\xe2\x82",
                "\xc0\xaf",
                "\xed\xa0\x80",
                "\xf4\x90\x80\x80",
                "\xff",
                "\xf0\x9f",
                "\xe0\x80\xaf",
                "\xf0\x80\x80\xaf",
                "\xf5\x80\x80\x80",
                "\xc1\xbf",
        };
        unsigned seed = 42;
        for (int round = 0; round < 20000; round++) {
                char in[128] = {0};
                size_t len = 0;
                int n = (int) (rand_r(&seed) % 12);
                for (int i = 0; i < n; i++) {
                        const char *piece =
                                (const char *) pieces[rand_r(&seed) % ELEMENTSOF(pieces)];
                        memcpy(in + len, piece, strlen(piece));
                        len += strlen(piece);
                }
                JsonWriter w = {0};
                json_writer_array_begin(&w);
                json_writer_string(&w, in);
                json_writer_array_end(&w);
                json_error_t e;
                json_t *back = json_loads(w.buf, JSON_REJECT_DUPLICATES, &e);
                if (!back)
                        fprintf(stderr, "unreadable: %s (%s)\n", w.buf, e.text);
                CHECK(back);
                const char *got = json_string_value(json_array_get(back, 0));
                CHECK(got);
                json_t *valid = json_string(in); /* NULL when in is not UTF-8 */
                if (valid) {
                        CHECK_STR(got, in);
                        json_t *arr = json_pack("[o]", valid);
                        check_dump(arr, w.buf);
                        json_decref(arr);
                } else {
                        CHECK(strstr(got, "\xef\xbf\xbd"));
                }
                json_decref(back);
                json_writer_clear(&w);
        }
}

int main(void) {
        test_register();
        test_register_answer();
        test_sync();
        test_sync_answer_round_trip();
        test_parse_sync_answer();
        test_sync_answer_unchanged();
        test_sync_answer_lease_only();
        test_sync_answer_shared_env();
        test_accepts();
        test_hostile_answers();
        test_error();
        test_writer_shape();
        test_writer_strings();
        printf("wire: ok\n");
        return 0;
}
