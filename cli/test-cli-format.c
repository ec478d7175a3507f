/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of what axctl prints: ages, RFC 3339 parsing, tables, JSON cells, the job
 * state line, the accelerators cell of `nodes` and the environment block that
 * `status --env` cuts out of a rank log.
 */
#include "cli.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static void test_age(void) {
        char buf[32];
        assert(strcmp(cli_format_age(0, buf, sizeof(buf)), "0s") == 0);
        assert(strcmp(cli_format_age(12, buf, sizeof(buf)), "12s") == 0);
        assert(strcmp(cli_format_age(59, buf, sizeof(buf)), "59s") == 0);
        assert(strcmp(cli_format_age(60, buf, sizeof(buf)), "1m") == 0);
        assert(strcmp(cli_format_age(3599, buf, sizeof(buf)), "59m") == 0);
        assert(strcmp(cli_format_age(3600, buf, sizeof(buf)), "1h") == 0);
        assert(strcmp(cli_format_age(2 * 3600 + 59, buf, sizeof(buf)), "2h") == 0);
        assert(strcmp(cli_format_age(86400 * 3 + 5, buf, sizeof(buf)), "3d") == 0);
        /* Clock skew between controller and client must not print "-5s". */
        assert(strcmp(cli_format_age(-5, buf, sizeof(buf)), "0s") == 0);
}

static void test_parse_time(void) {
        int64_t ms;
        assert(cli_parse_time("1970-01-01T00:00:00Z", &ms) == 0 && ms == 0);
        assert(cli_parse_time("1970-01-01T00:00:01.5Z", &ms) == 0 && ms == 1500);
        assert(cli_parse_time("2026-11-22T02:33:35.123Z", &ms) == 0);
        assert(ms == 1795314815123LL);
        assert(cli_parse_time("2026-11-22T03:33:35.123+01:00", &ms) == 0);
        assert(ms == 1795314815123LL);
        assert(cli_parse_time("2026-11-22T02:33:35.123456Z", &ms) == 0);
        assert(ms == 1795314815123LL);
        assert(cli_parse_time("2026-11-22T02:33:35", &ms) < 0);
        assert(cli_parse_time("2026-13-22T02:33:35Z", &ms) < 0);
        assert(cli_parse_time("yesterday", &ms) < 0);
        assert(cli_parse_time("2026-11-22T02:33:35Zjunk", &ms) < 0);
        assert(cli_parse_time(NULL, &ms) < 0);

        char buf[32];
        assert(strcmp(cli_format_age_since("1970-01-01T00:00:00Z", 125000, buf, sizeof(buf)),
                      "2m") == 0);
        assert(strcmp(cli_format_age_since(NULL, 125000, buf, sizeof(buf)), "-") == 0);
        assert(strcmp(cli_format_age_since("bad", 125000, buf, sizeof(buf)), "-") == 0);
}

static char *table_text(CliTable *t) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        cli_table_print(t, f);
        fclose(f);
        return text;
}

static void test_table(void) {
        static const char *const headers[] = {"ID", "NAME", "REASON"};
        CliTable *t = cli_table_new(3, headers);
        const char *r1[] = {"7", "demo", ""};
        const char *r2[] = {"12", "a-much-longer-name", "rank 1 exited\nwith 3"};
        cli_table_add_row(t, r1);
        cli_table_add_row(t, r2);
        _cleanup_free_ char *text = table_text(t);
        assert(strcmp(text, "ID  NAME                REASON\n"
                            "7   demo                -\n"
                            "12  a-much-longer-name  rank 1 exited with 3\n") == 0);

        /* A second print (events -f) adds only the new rows, without the header. */
        const char *r3[] = {"100", "x", NULL};
        cli_table_add_row(t, r3);
        _cleanup_free_ char *more = table_text(t);
        assert(strcmp(more, "100  x                   -\n") == 0);
        cli_table_free(t);

        /* The header alone for an empty list. */
        CliTable *empty = cli_table_new(3, headers);
        _cleanup_free_ char *header = table_text(empty);
        assert(strcmp(header, "ID  NAME  REASON\n") == 0);
        assert(cli_table_free(empty) == NULL);
}

static void test_json_cell(void) {
        _cleanup_json_ json_t *o = json_pack("{s:s,s:i,s:n,s:b,s:[i,i],s:f}", "s", "text", "i", 42,
                                             "n", "b", 1, "a", 0, 1, "r", 1.5);
        const char *keys[] = {"s", "i", "n", "b", "a", "r", "missing"};
        const char *want[] = {"text", "42", "-", "true", "[0,1]", "1.5", "-"};
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_free_ char *c = cli_json_cell(json_object_get(o, keys[i]));
                assert(strcmp(c, want[i]) == 0);
        }
}

static void test_state_line(void) {
        _cleanup_json_ json_t *ok =
                json_pack("{s:s,s:s,s:i}", "state", "succeeded", "reason", "", "exit_code", 0);
        _cleanup_free_ char *l1 = cli_job_state_line(ok);
        assert(strcmp(l1, "succeeded (exit code 0)") == 0);

        _cleanup_json_ json_t *bad = json_pack("{s:s,s:s,s:i}", "state", "failed", "reason",
                                               "rank 1 exited with 3", "exit_code", 3);
        _cleanup_free_ char *l2 = cli_job_state_line(bad);
        assert(strcmp(l2, "failed: rank 1 exited with 3 (exit code 3)") == 0);

        _cleanup_json_ json_t *run = json_pack("{s:s,s:n}", "state", "running", "exit_code");
        _cleanup_free_ char *l3 = cli_job_state_line(run);
        assert(strcmp(l3, "running") == 0);
}

static void test_accelerators_cell(void) {
        _cleanup_json_ json_t *node =
                json_loads("{\"inventory\": {\"cpus\": 8, \"accelerators\": ["
                           "{\"kind\": \"nvidia-h100\", \"index\": 0},"
                           "{\"kind\": \"nvidia-h100\", \"index\": 1},"
                           "{\"kind\": \"fake\", \"index\": 2}]},"
                           " \"free\": {\"cpus\": 4, \"accelerators\": {\"nvidia-h100\": 1}}}",
                           0, NULL);
        assert(node);
        _cleanup_free_ char *c = cli_node_accelerators_cell(node);
        assert(strcmp(c, "nvidia-h100 x2 (1 free), fake x1 (? free)") == 0);

        _cleanup_json_ json_t *cpu_only =
                json_loads("{\"inventory\": {\"cpus\": 8, \"accelerators\": []}}", 0, NULL);
        _cleanup_free_ char *none = cli_node_accelerators_cell(cpu_only);
        assert(strcmp(none, "-") == 0);
}

static void test_env_block(void) {
        const char *log = "starting\n"
                          "--- axctl environment ---\n"
                          "AXCTL_RANK=0\n"
                          "CUDA_VISIBLE_DEVICES=0,1\n"
                          "--- end environment ---\n"
                          "step 1\n"
                          "--- axctl environment ---\r\n"
                          "AXCTL_RANK=0\r\n"
                          "AXCTL_ATTEMPT=2\r\n"
                          "--- end environment ---\r\n"
                          "step 2\n";
        _cleanup_free_ char *block = cli_env_block_extract(log);
        assert(block);
        assert(strcmp(block, "AXCTL_RANK=0\r\nAXCTL_ATTEMPT=2\r\n") == 0);

        _cleanup_free_ char *first = cli_env_block_extract("--- axctl environment ---\n"
                                                           "A=1\n"
                                                           "--- end environment ---\n");
        assert(first && strcmp(first, "A=1\n") == 0);

        /* An unterminated block (log cut short) is not an answer. */
        assert(!cli_env_block_extract("--- axctl environment ---\nA=1\n"));
        assert(!cli_env_block_extract("no block here\n"));
        assert(!cli_env_block_extract(""));
}

int main(void) {
        test_age();
        test_parse_time();
        test_table();
        test_json_cell();
        test_state_line();
        test_accelerators_cell();
        test_env_block();
        printf("cli-format: ok\n");
        return 0;
}
