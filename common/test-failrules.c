/* SPDX-License-Identifier: MIT */
/*
 * The shipped operator rules (profiles/failure-rules.json, the path is argv[1]) load,
 * and real vendor log lines (sources in docs/FAILURE-RULES.md) get the action they
 * should while well-known application errors match nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
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
