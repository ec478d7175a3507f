/* SPDX-License-Identifier: MIT */
/* Unit tests of common/: spec validation, the string map, utilities (the agent protocol's
 * codecs: test-wire.c). */
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "checkpoint.h"
#include "spec.h"
#include "strmap.h"
#include "util.h"

/* Parses text as a spec and returns the field of the error, or "" on success. */
static const char *spec_field(const char *text) {
        static JsonError err;
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        CHECK(j);
        JobSpec *spec = NULL;
        memset(&err, 0, sizeof(err));
        int r = spec_parse(j, &spec, &err);
        json_decref(j);
        spec_free(spec);
        return r < 0 ? err.field : "";
}

static void test_spec_errors(void) {
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":2}"), "");
        CHECK_STR(spec_field("{\"ranks\":2}"), "command");
        CHECK_STR(spec_field("{\"command\":[\"x\"]}"), "ranks");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":0}"), "ranks");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":\"2\"}"), "ranks");
        CHECK_STR(spec_field("{\"command\":\"x\",\"ranks\":1}"), "command");
        CHECK_STR(spec_field("{\"command\":[1],\"ranks\":1}"), "command");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"bogus\":1}"), "bogus");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"priority\":-1}"), "priority");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":3,\"ranks_per_node\":2}"),
                  "ranks_per_node");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"resources\":{\"gpus\":1}}"),
                  "resources.gpus");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"resources\":"
                             "{\"accelerators_per_rank\":2}}"),
                  "resources.accelerators_per_rank");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"workdir\":\"rel\"}"), "workdir");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"env\":{\"A\":1}}"), "env.A");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"env\":{\"AXCTL_RANK\":\"1\"}}"),
                  "env");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"framework\":\"tf\"}"),
                  "framework");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"restart\":"
                             "{\"retry_exit_codes\":[2],\"fatal_exit_codes\":[2]}}"),
                  "restart.retry_exit_codes");
        CHECK_STR(spec_field("{\"command\":[\"x\"],\"ranks\":1,\"name\":\"../etc\"}"), "name");
        CHECK_STR(spec_field("[1,2]"), "");
}

static void test_spec_defaults(void) {
        json_t *j = json_pack("{s:[s,s],s:i,s:{s:s}}", "command", "/usr/bin/train", "--x", "ranks",
                              4, "resources", "accelerator", "nvidia-h100");
        JobSpec *spec = NULL;
        JsonError err;
        CHECK_INT(spec_parse(j, &spec, &err), 0);
        CHECK_STR(spec->name, "train");
        CHECK_STR(spec->project, "default");
        CHECK_INT(spec->accelerators_per_rank, 1);
        CHECK_INT(spec->restart.max_restarts, 3);
        json_t *out = spec_to_json(spec);
        /* The normalised form parses back to the same spec. */
        JobSpec *again = NULL;
        CHECK_INT(spec_parse(out, &again, &err), 0);
        CHECK_STR(again->accelerator, "nvidia-h100");
        CHECK_INT(again->ranks, 4);
        json_decref(out);
        json_decref(j);
        spec_free(spec);
        spec_free(again);
}

static void test_strmap(void) {
        StrMap *m = strmap_new();
        char key[32];
        for (int i = 0; i < 1000; i++) {
                snprintf(key, sizeof(key), "k%d", i);
                strmap_put(m, key, (void *) (intptr_t) (i + 1));
        }
        for (int i = 0; i < 1000; i += 2) {
                snprintf(key, sizeof(key), "k%d", i);
                strmap_remove(m, key);
        }
        CHECK_INT(strmap_size(m), 500);
        CHECK(!strmap_get(m, "k0"));
        CHECK_INT((intptr_t) strmap_get(m, "k999"), 1000);
        strmap_free(m);
        /* Interned: one address per string, kept as the map grows; values untouched. */
        m = strmap_new();
        strmap_put(m, "k", (void *) 7);
        const char *k = strmap_intern(m, "k"), *first = strmap_intern(m, "first");
        CHECK(k == strmap_intern(m, "k") && (intptr_t) strmap_get(m, "k") == 7);
        for (int i = 0; i < 1000; i++) {
                char name[16];
                snprintf(name, sizeof(name), "i%d", i);
                strmap_intern(m, name);
        }
        char copy[] = "first";
        CHECK(strmap_intern(m, copy) == first && strcmp(first, "first") == 0);
        CHECK(strmap_intern(m, "k") == k && strmap_size(m) == 1002);
        strmap_free(m);
}

static void test_util(void) {
        char buf[32];
        CHECK_STR(util_format_time(1700000000123, buf, sizeof(buf)), "2023-11-14T22:13:20.123Z");
}

static void test_checkpoint_names(void) {
        int64_t step = -1;
        CHECK(checkpoint_name_parse("step_00000040", &step) == 0 && step == 40);
        CHECK(checkpoint_name_parse("step_5", &step) == 0 && step == 5);
        CHECK(checkpoint_name_parse("step_", &step) < 0);
        CHECK(checkpoint_name_parse("step_12a", &step) < 0);
        CHECK(checkpoint_name_parse("step_ 12", &step) < 0);
        CHECK(checkpoint_name_parse("step_99999999999999999999", &step) < 0);
        CHECK(checkpoint_name_parse("ckpt_1", &step) < 0);
        char *p = checkpoint_path_make("/ckpt/x//", "step_00000007");
        CHECK(strcmp(p, "/ckpt/x/step_00000007") == 0);
        free(p);
        CHECK(checkpoint_path_in_dir("/ckpt/x/", "/ckpt/x/step_00000007", 7));
        CHECK(!checkpoint_path_in_dir("/ckpt/x", "/ckpt/x/step_00000007", 8));
        CHECK(!checkpoint_path_in_dir("/ckpt/x", "/etc/shadow", 7));
        CHECK(!checkpoint_path_in_dir("/ckpt/x", "/ckpt/x/../step_00000007", 7));
        CHECK(!checkpoint_path_in_dir("/ckpt/x", "/ckpt/x/sub/step_00000007", 7));
        CHECK(!checkpoint_path_in_dir("/ckpt/x", "/ckpt/xy/step_00000007", 7));
        CHECK(!checkpoint_path_in_dir(NULL, "/ckpt/x/step_00000007", 7));
}

int main(void) {
        test_checkpoint_names();
        test_spec_errors();
        test_spec_defaults();
        test_strmap();
        test_util();
        printf("common: ok\n");
        return 0;
}
