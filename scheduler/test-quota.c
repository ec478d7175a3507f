/* SPDX-License-Identifier: MIT */
/*
 * Table-driven tests of the quota file: parsing, errors that name their line, and the
 * normalisation of shares and percentages against the fleet's capacity per kind.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "scheduler.h"
#include "util.h"

typedef struct ErrorCase {
        const char *text;
        const char *want; /* substring of the message */
} ErrorCase;

static void test_parse_errors(void) {
        static const ErrorCase cases[] = {
                {"share = 1\n", "line 1: setting outside a section: share"},
                {"[project a]\nshare = -1\n", "line 2: share must be a non-negative number"},
                {"[project a]\nshare = 50%\n", "line 2: share must be"},
                {"[project a]\n\n# comment\nnvidia-h100 = 120%\n",
                 "line 4: expected a non-negative"},
                {"[project a]\nnvidia-h100 = lots\n", "line 2: expected"},
                {"[project a]\n[project a]\n", "line 2: duplicate project: a"},
                {"[default]\n[default]\n", "line 2: duplicate section"},
                {"[team a]\n", "line 1: unknown section"},
                {"[project a b]\n", "line 1: invalid project name"},
                {"[project a\n", "line 1: a section header must be"},
                {"[project a]\njust words\n", "line 2: expected 'key = value'"},
                {"[project a]\ncpus = 1\ncpu = 2\n", "line 3: duplicate key: cpus"},
                {"[project a]\nbad key = 1\n", "line 2: invalid key"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                SchedQuota *q = NULL;
                char *error = NULL;
                CHECK_INT(sched_quota_parse(cases[i].text, &q, &error), -EINVAL);
                CHECK(q == NULL);
                if (!error || !strstr(error, cases[i].want))
                        fprintf(stderr, "case %zu: got \"%s\", want \"%s\"\n", i,
                                error ? error : "(null)", cases[i].want);
                CHECK(error && strstr(error, cases[i].want));
                free(error);
        }
}

static void test_parse(void) {
        SchedQuota *q = NULL;
        char *error = NULL;
        const char *text = "# quotas\n"
                           "[default]\n"
                           "share = 0.5\n"
                           "\n"
                           "[project foundation]   ; main\n"
                           "  share = 3  \n"
                           "nvidia-h100 = 50 %\n"
                           "[ project research ]\n"
                           "cpu = 2\r\n";
        CHECK_INT(sched_quota_parse(text, &q, &error), 0);
        CHECK(error == NULL);
        CHECK_INT(sched_quota_n_projects(q), 2);
        CHECK_STR(sched_quota_project(q, 0), "foundation");
        CHECK_STR(sched_quota_project(q, 1), "research");
        CHECK(sched_quota_project(q, 2) == NULL);
        sched_quota_free(q);
        /* An empty file is valid: every project gets share 1. */
        CHECK_INT(sched_quota_parse("", &q, NULL), 0);
        CHECK_INT(sched_quota_n_projects(q), 0);
        sched_quota_free(q);
}

typedef struct NormCase {
        const char *name;
        const char *text; /* NULL: no quota file */
        const char *projects[4];
        int n_projects;
        double want[4][2]; /* per project: cpus, nvidia-h100 */
        bool configured[4];
} NormCase;

static void test_normalise(void) {
        /* A fleet of 100 cpus and 16 GPUs. */
        char *kinds[] = {"cpus", "nvidia-h100"};
        int64_t capacity[] = {100, 16};
        static const NormCase cases[] = {
                {"no file: equal split", NULL, {"a", "b"}, 2, {{50, 8}, {50, 8}}, {0}},
                {"shares",
                 "[project a]\nshare = 3\n[project b]\n",
                 {"a", "b"},
                 2,
                 {{75, 12}, {25, 4}},
                 {true, true}},
                {"percent first, the rest by share",
                 "[project a]\nnvidia-h100 = 50%\n[project b]\n[project c]\n",
                 {"a", "b", "c"},
                 3,
                 {{100.0 / 3, 8}, {100.0 / 3, 4}, {100.0 / 3, 4}},
                 {true, true, true}},
                {"per-kind share",
                 "[project a]\ncpus = 4\n[project b]\n",
                 {"a", "b"},
                 2,
                 {{80, 8}, {20, 8}},
                 {true, true}},
                {"percentages over 100% are scaled",
                 "[project a]\ncpus = 80%\n[project b]\ncpus = 80%\n[project c]\n",
                 {"a", "b", "c"},
                 3,
                 {{50, 16.0 / 3}, {50, 16.0 / 3}, {0, 16.0 / 3}},
                 {true, true, true}},
                {"unconfigured projects get [default]",
                 "[default]\nshare = 2\n[project a]\nshare = 2\n",
                 {"a", "x", "y"},
                 3,
                 {{100.0 / 3, 16.0 / 3}, {100.0 / 3, 16.0 / 3}, {100.0 / 3, 16.0 / 3}},
                 {true, false, false}},
                {"default share 0: only configured projects have quota",
                 "[default]\nshare = 0\n[project a]\n",
                 {"a", "x"},
                 2,
                 {{100, 16}, {0, 0}},
                 {true, false}},
                {"idle configured projects keep their share",
                 "[project a]\n[project b]\n",
                 {"a", "b"},
                 2,
                 {{50, 8}, {50, 8}},
                 {true, true}},
                {"the example of docs/SCHEDULING.md",
                 "[default]\nshare = 1\n[project foundation]\nshare = 3\nnvidia-h100 = 50%\n"
                 "[project research]\nshare = 1\ncpus = 2\n[project interns]\nshare = 0\n",
                 {"foundation", "research", "interns", "adhoc"},
                 4,
                 {{50, 8}, {100.0 / 3, 4}, {0, 0}, {100.0 / 6, 4}},
                 {true, true, true, false}},
        };
        for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
                const NormCase *nc = &cases[c];
                SchedQuota *q = NULL;
                if (nc->text)
                        CHECK_INT(sched_quota_parse(nc->text, &q, NULL), 0);
                bool configured[4];
                double quota[8];
                sched_quota_normalise(q, kinds, capacity, 2, nc->projects, nc->n_projects,
                                      configured, quota);
                for (int p = 0; p < nc->n_projects; p++) {
                        for (int k = 0; k < 2; k++) {
                                double got = quota[p * 2 + k], want = nc->want[p][k];
                                if (got < want - 1e-6 || got > want + 1e-6) {
                                        fprintf(stderr,
                                                "case %s: project %s kind %s: %f, "
                                                "expected %f\n",
                                                nc->name, nc->projects[p], kinds[k], got, want);
                                        CHECK(false);
                                }
                        }
                        CHECK_INT(configured[p], nc->configured[p]);
                }
                sched_quota_free(q);
        }
}

int main(void) {
        test_parse_errors();
        test_parse();
        test_normalise();
        printf("quota: ok\n");
        return 0;
}
