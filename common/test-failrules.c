/* SPDX-License-Identifier: MIT */
/*
 * The shipped operator rules (profiles/failure-rules.json, the path is argv[1]) load,
 * and real vendor log lines (sources in docs/FAILURE-RULES.md) get the action they
 * should while well-known application errors match nothing. Matching runs on the
 * controller's loop: the worst a job can make it cost (its 8 rules of the slowest kind
 * allowed, against a log tail of one long line) is timed and bounded.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/unit/check.h"
#include "failrules.h"
#include "util.h"

static const struct {
        const char *line;
        FailRuleAction want; /* _FAILRULE_ACTION_INVALID: no rule may match */
} samples[] = {
        {"May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
         FAILRULE_NODE_FAULT},
        {"Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, "
         "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been "
         "detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.",
         FAILRULE_NODE_FAULT},
        {"RuntimeError: CUDA error: uncorrectable ECC error encountered", FAILRULE_NODE_FAULT},
        {"RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
         FAILRULE_NODE_FAULT},
        {"kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from "
         "peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
         FAILRULE_NODE_FAULT},
        {"(FATAL-RT-UNDEFINED-STATE) Uncorrectable HBM memory error is detected. Execution "
         "results may be invalid. Please terminate this instance to prevent future impact from "
         "the hardware error.",
         FAILRULE_NODE_FAULT},
        {"[  183.650625] mce: Uncorrected hardware memory error in user-access at 8a398a400",
         FAILRULE_NODE_FAULT},
        {"(FATAL-RT-UNDEFINED-STATE) missing collectives status on Neuron Device 0 NC 0, model 0 "
         "- suspected hang in collectives operation 0 out of 100",
         FAILRULE_RETRY},
        {"RuntimeError: CUDA error: an illegal memory access was encountered",
         _FAILRULE_ACTION_INVALID},
        {"RuntimeError: CUDA error: unknown error", _FAILRULE_ACTION_INVALID},
        {"NVRM: Xid (PCI:0000:b5:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
         "Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address",
         _FAILRULE_ACTION_INVALID},
        {"Traceback (most recent call last):\nZeroDivisionError: division by zero",
         _FAILRULE_ACTION_INVALID},
};

/* The bound on a failed rank's matching against a job's rules, ms: a stall of the
 * controller's loop that a job controls. Measured 11-32 ms on a loaded 2-core machine,
 * 175-245 ms before lines were matched in pieces (docs/PERFORMANCE.md). */
#define JOB_RULES_MAX_MS 100.0

static double elapsed_ms(const struct timespec *from) {
        struct timespec to;
        clock_gettime(CLOCK_MONOTONIC, &to);
        return (double) (to.tv_sec - from->tv_sec) * 1e3 +
               (double) (to.tv_nsec - from->tv_nsec) / 1e6;
}

/* The fastest of 3 matches of text against r, ms: what matching costs, not what the
 * other processes of a shared machine cost it. */
static double match_ms(const FailRules *r, const char *text) {
        double best = 1e9;
        for (int i = 0; i < 3; i++) {
                struct timespec from;
                FailRuleMatch m;
                clock_gettime(CLOCK_MONOTONIC, &from);
                CHECK(!failrules_match(r, text, &m));
                double ms = elapsed_ms(&from);
                best = ms < best ? ms : best;
        }
        return best;
}

/*
 * A job's FAILRULES_MAX_JOB rules of the slowest kind found (an alternation or a .*
 * under a star, repeated to the pattern's size, that never matches), against a tail
 * that is one line: glibc tries every start in a line and scans on to its end.
 */
static void test_worst_case_is_bounded(const FailRules *operator_rules) {
        static const char *const units[] = {"(a|aa)*", "(.|..)*", "(.*)", "(a|b|c|d|e|f|g|h)*"};
        json_t *list = json_array();
        for (int i = 0; i < FAILRULES_MAX_JOB; i++) {
                const char *unit = units[i % ELEMENTSOF(units)];
                char pattern[FAILRULE_MAX_PATTERN + 1] = "";
                while (strlen(pattern) + strlen(unit) + 1 <= FAILRULE_MAX_PATTERN)
                        strcat(pattern, unit);
                strcat(pattern, "b");
                json_array_append_new(
                        list, json_pack("{s:s, s:s}", "pattern", pattern, "action", "fatal"));
        }
        FailRules job = {0};
        JsonError err = {0};
        CHECK_INT(failrules_parse(list, "failure_rules", FAILRULES_MAX_JOB, &job, &err), 0);
        json_decref(list);
        char *line = xmalloc(FAILRULES_LOG_TAIL + 1);
        memset(line, 'a', FAILRULES_LOG_TAIL);
        line[FAILRULES_LOG_TAIL] = '\0';
        double job_ms = match_ms(&job, line), operator_ms = match_ms(operator_rules, line);
        printf("failrules: a job's %d slowest rules on a %d-byte line: %.2f ms; the operator's "
               "%d rules: %.2f ms\n",
               job.n, FAILRULES_LOG_TAIL, job_ms, operator_rules->n, operator_ms);
        CHECK(job_ms < JOB_RULES_MAX_MS);
        free(line);
        failrules_clear(&job);
}

/* A long line is matched in pieces: what lies within one is still found, and pieces
 * start on a character. */
static void test_long_lines_match_in_pieces(void) {
        json_t *list =
                json_pack("[{s:s, s:s}, {s:s, s:s}]", "pattern", "status=12 opcode", "action",
                          "node_fault", "pattern", "^\xc3\xa9\xc3\xa9", "action", "retry");
        FailRules rules = {0};
        JsonError err = {0};
        CHECK_INT(failrules_parse(list, "failure_rules", FAILRULES_MAX_JOB, &rules, &err), 0);
        json_decref(list);
        char text[2048];
        snprintf(text, sizeof(text), "step 1\n%0700d NCCL WARN with status=12 opcode=0\nend\n", 0);
        FailRuleMatch m;
        CHECK(failrules_match(&rules, text, &m));
        CHECK_INT(m.index, 0);
        /* "a" and 300 two-byte characters: the second piece starts on the 129th. */
        char *p = text;
        *p++ = 'a';
        for (int i = 0; i < 300; i++)
                p += sprintf(p, "\xc3\xa9");
        *p = '\0';
        CHECK(failrules_match(&rules, text, &m));
        CHECK_INT(m.index, 1);
        failrules_clear(&rules);
}

int main(int argc, char **argv) {
        CHECK(argc == 2);
        FailRules rules = {0};
        JsonError err = {0};
        int r = failrules_load(argv[1], &rules, &err);
        if (r < 0)
                fprintf(stderr, "%s: %s: %s\n", argv[1], err.field, err.message);
        CHECK_INT(r, 0);
        CHECK(rules.n > 20);
        for (size_t i = 0; i < ELEMENTSOF(samples); i++) {
                /* Each sample inside a log tail, with other lines around it. */
                char *tail = xasprintf("step 41 loss 2.3\n%s\nexiting\n", samples[i].line);
                FailRuleMatch m;
                bool hit = failrules_match(&rules, tail, &m);
                if (hit != (samples[i].want != _FAILRULE_ACTION_INVALID) ||
                    (hit && m.rule->action != samples[i].want))
                        fprintf(stderr, "sample %zu: %s\n  matched %s\n", i, samples[i].line,
                                hit ? m.rule->pattern : "nothing");
                CHECK(hit == (samples[i].want != _FAILRULE_ACTION_INVALID));
                CHECK(!hit || m.rule->action == samples[i].want);
                free(tail);
        }

        test_worst_case_is_bounded(&rules);
        test_long_lines_match_in_pieces();

        /* A file that is not a regular file, or not a list of rules, is refused and the
         * rules in force stay. */
        FailRules keep = rules;
        CHECK(failrules_load("/dev/null", &rules, &err) == -EINVAL);
        CHECK(failrules_load("/nonexistent/rules.json", &rules, &err) == -ENOENT);
        char *dir = check_tmpdir("failrules");
        char *path = xasprintf("%s/rules.json", dir);
        CHECK(util_write_file_atomic(path, "{\"pattern\": \"x\"}", 16) == 0);
        CHECK(failrules_load(path, &rules, &err) == -EINVAL);
        CHECK(rules.rules == keep.rules && rules.n == keep.n);
        failrules_clear(&rules);
        unlink(path);
        rmdir(dir);
        free(path);
        free(dir);
        printf("failrules: ok\n");
        return 0;
}
