/* SPDX-License-Identifier: MIT */
/*
 * Tests of the scheduling pass: gang placement, locality, constraints, and the policy:
 * order across and within projects, tiers, preemption, backfill, aging and reservations.
 * Most cases use 4-cpu nodes so that one 4-cpu job fills one node.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "util.h"
#include "scheduler.h"

/* A node with 8 GPUs: switches 0..3 with two GPUs each, NUMA 0 for switches 0-1. */
static SchedDevice gpus8[2][8];
static SchedLabel rack_a[] = {{"rack", "a"}};
static SchedLabel rack_b[] = {{"rack", "b"}};

static void make_gpus(SchedDevice *d, bool all_free) {
        for (int i = 0; i < 8; i++)
                d[i] = (SchedDevice){.kind = "nvidia-h100",
                                     .numa_node = i / 4,
                                     .pcie_switch = i / 2,
                                     .free = all_free};
}

static SchedNode node(const char *name, int cpus, SchedDevice *devs, int n_devs,
                      SchedLabel *labels) {
        return (SchedNode){.name = name,
                           .schedulable = true,
                           .cpus_free = cpus,
                           .memory_free_mb = -1,
                           .devices = devs,
                           .n_devices = n_devs,
                           .labels = labels,
                           .n_labels = labels ? 1 : 0};
}

static SchedJob job(int64_t id, int ranks, int rpn, int gpus) {
        return (SchedJob){.id = id,
                          .ranks = ranks,
                          .ranks_per_node = rpn,
                          .cpus = 1,
                          .accelerator = gpus ? "nvidia-h100" : NULL,
                          .accelerators_per_rank = gpus,
                          .created_ms = id};
}

/* One submit's check, on a judge of its own. */
static SchedWait feasible(const SchedNode *nodes, int n_nodes, const SchedJob *job) {
        SchedFeasibility *fz = sched_feasibility_new(nodes, n_nodes);
        SchedWait w = sched_feasibility_check(fz, job);
        sched_feasibility_free(fz);
        return w;
}

static void test_gang_all_or_none(void) {
        SchedNode nodes[] = {node("n1", 2, NULL, 0, NULL), node("n2", 2, NULL, 0, NULL)};
        SchedJob jobs[] = {job(1, 5, 0, 0), job(2, 4, 2, 0)};
        SchedSnapshot s = {nodes, 2, jobs, 2};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        /* Job 1 needs 5 cpus of 4: nothing placed for it; job 2 backfills. */
        CHECK_INT(r.n_placements, 1);
        CHECK_INT(r.placements[0].job, 2);
        CHECK_INT(r.wait[0], SCHED_WAIT_CONSTRAINT); /* 5 cpus of 4 even when empty */
        CHECK_INT(r.placements[0].rank_node[0], 0);
        CHECK_INT(r.placements[0].rank_node[1], 0);
        CHECK_INT(r.placements[0].rank_node[2], 1);
        CHECK_INT(r.placements[0].rank_node[3], 1);
        sched_result_clear(&r);
        CHECK_INT(feasible(nodes, 2, &jobs[0]), SCHED_WAIT_CONSTRAINT);
        CHECK_INT(feasible(nodes, 2, &jobs[1]), SCHED_WAIT_NONE);
}

static void test_locality(void) {
        make_gpus(gpus8[0], true);
        /* GPUs 0, 2, 4 taken: switch 0, 1 and 2 each have one free; switch 3 two. */
        gpus8[0][0].free = gpus8[0][2].free = gpus8[0][4].free = false;
        SchedNode nodes[] = {node("n1", 64, gpus8[0], 8, NULL)};
        SchedJob jobs[] = {job(1, 1, 0, 2), job(2, 1, 0, 3)};
        SchedSnapshot s = {nodes, 1, jobs, 2};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 2);
        /* Two GPUs: both on switch 3. */
        CHECK_INT(r.placements[0].rank_devices[0], 6);
        CHECK_INT(r.placements[0].rank_devices[1], 7);
        /* Three more: no switch has 3 free; NUMA 0 has 1, 3 free... only 2 → any: 1,3,5. */
        CHECK_INT(r.placements[1].rank_devices[0], 1);
        CHECK_INT(r.placements[1].rank_devices[1], 3);
        CHECK_INT(r.placements[1].rank_devices[2], 5);
        sched_result_clear(&r);
}

static void test_numa_locality(void) {
        make_gpus(gpus8[0], true);
        SchedNode nodes[] = {node("n1", 64, gpus8[0], 8, NULL)};
        SchedJob jobs[] = {job(1, 2, 0, 4)};
        SchedSnapshot s = {nodes, 1, jobs, 1};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 1);
        for (int i = 0; i < 4; i++)
                CHECK(r.placements[0].rank_devices[i] < 4); /* rank 0 on NUMA 0 */
        for (int i = 4; i < 8; i++)
                CHECK(r.placements[0].rank_devices[i] >= 4); /* rank 1 on NUMA 1 */
        sched_result_clear(&r);
}

static void test_avoid_and_priority(void) {
        SchedNode nodes[] = {node("n1", 4, NULL, 0, NULL), node("n2", 4, NULL, 0, NULL)};
        SchedJob jobs[] = {job(1, 4, 0, 0), job(2, 4, 0, 0)};
        jobs[0].avoid_node = "n1";
        jobs[1].priority = 5; /* placed first, on the tightest node n1 */
        SchedSnapshot s = {nodes, 2, jobs, 2};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 2);
        CHECK_INT(r.placements[0].job, 2);
        CHECK_INT(r.placements[0].rank_node[0], 0);
        CHECK_INT(r.placements[1].job, 1);
        CHECK_INT(r.placements[1].rank_node[0], 1);
        sched_result_clear(&r);

        /* Only the avoided node has room: it is used rather than leaving the job waiting. */
        nodes[1].schedulable = false;
        SchedSnapshot s2 = {nodes, 2, jobs, 1};
        CHECK_INT(sched_pass(&s2, &r), 0);
        CHECK_INT(r.n_placements, 1);
        CHECK_INT(r.placements[0].rank_node[0], 0);
        sched_result_clear(&r);
}

static void test_same_label(void) {
        SchedNode nodes[] = {node("n1", 2, NULL, 0, rack_a), node("n2", 2, NULL, 0, rack_b),
                             node("n3", 2, NULL, 0, rack_b)};
        SchedJob jobs[] = {job(1, 4, 2, 0)};
        jobs[0].same_label = "rack";
        SchedSnapshot s = {nodes, 3, jobs, 1};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 1);
        CHECK_INT(r.placements[0].rank_node[0], 1);
        CHECK_INT(r.placements[0].rank_node[2], 2);
        sched_result_clear(&r);
        SchedLabel sel[] = {{"rack", "a"}};
        jobs[0].node_selector = sel;
        jobs[0].n_node_selector = 1;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 0);
        sched_result_clear(&r);
        CHECK_INT(feasible(nodes, 3, &jobs[0]), SCHED_WAIT_CONSTRAINT);
        /* Groups are found for nodes the constraint allows, whatever comes before them. */
        SchedNode shifted[] = {node("n0", 2, NULL, 0, NULL), nodes[0], nodes[1], nodes[2]};
        jobs[0].n_node_selector = 0;
        SchedSnapshot s4 = {shifted, 4, jobs, 1};
        CHECK_INT(sched_pass(&s4, &r), 0);
        CHECK_INT(r.n_placements, 1);
        for (int k = 0; k < 4; k++)
                CHECK(r.placements[0].rank_node[k] == 2 || r.placements[0].rank_node[k] == 3);
        sched_result_clear(&r);
        jobs[0].n_node_selector = 1;

        /* One feasibility judge for many submits gives each the answer of its own. */
        SchedFeasibility *fz = sched_feasibility_new(nodes, 3);
        SchedJob plain = job(2, 6, 0, 0), big = job(3, 7, 0, 0), gpu = job(4, 1, 0, 1);
        for (int round = 0; round < 2; round++) { /* the second from what the first kept */
                CHECK_INT(sched_feasibility_check(fz, &plain), SCHED_WAIT_NONE);
                CHECK_INT(sched_feasibility_check(fz, &big), SCHED_WAIT_CONSTRAINT);
                CHECK_INT(sched_feasibility_check(fz, &gpu), SCHED_WAIT_CONSTRAINT); /* no kind */
                CHECK_INT(sched_feasibility_check(fz, &jobs[0]), SCHED_WAIT_CONSTRAINT);
        }
        jobs[0].n_node_selector = 0;
        CHECK_INT(sched_feasibility_check(fz, &jobs[0]), SCHED_WAIT_NONE); /* rack b: 4 */
        jobs[0].ranks = 5;
        CHECK_INT(sched_feasibility_check(fz, &jobs[0]), SCHED_WAIT_CONSTRAINT);
        sched_feasibility_free(fz);
}

/* ---- Policy ---- */

#define NOW 10000000
#define MAX_NODES 8
#define MAX_RANKS 4

static SchedNode cpu_nodes[MAX_NODES];
static char cpu_names[MAX_NODES][16];

/* n nodes of 4 cpus each. */
static SchedNode *fleet4(int n) {
        for (int i = 0; i < n; i++) {
                snprintf(cpu_names[i], sizeof(cpu_names[i]), "n%d", i);
                cpu_nodes[i] = node(cpu_names[i], 4, NULL, 0, NULL);
                cpu_nodes[i].cpus_total = 4;
        }
        return cpu_nodes;
}

static SchedJob pjob(int64_t id, const char *project, const char *user, int priority, int ranks,
                     int cpus) {
        return (SchedJob){.id = id,
                          .project = project,
                          .user = user,
                          .priority = priority,
                          .created_ms = NOW - 1000 + id,
                          .ranks = ranks,
                          .cpus = cpus};
}

/* A running job of 4-cpu ranks on the given nodes; takes their cpus. */
typedef struct Held {
        int nodes[MAX_RANKS];
} Held;

static Held held_pool[32];
static int n_held;

static SchedRunning run4(SchedNode *nodes, int64_t id, const char *project, const char *user,
                         int priority, int tier, int64_t started, int n_ranks, int n0, int n1) {
        Held *h = &held_pool[n_held++];
        h->nodes[0] = n0;
        h->nodes[1] = n1;
        for (int r = 0; r < n_ranks; r++)
                nodes[h->nodes[r]].cpus_free -= 4;
        return (SchedRunning){.id = id,
                              .project = project,
                              .user = user,
                              .priority = priority,
                              .tier = tier,
                              .started_ms = started,
                              .cpus = 4,
                              .n_ranks = n_ranks,
                              .rank_node = h->nodes};
}

static SchedQuota *quota_of(const char *text) {
        SchedQuota *q = NULL;
        char *error = NULL;
        int r = sched_quota_parse(text, &q, &error);
        if (r < 0)
                fprintf(stderr, "quota: %s\n", error);
        CHECK_INT(r, 0);
        return q;
}

static void check_placed(const SchedResult *r, const int64_t *want, int n) {
        CHECK_INT(r->n_placements, n);
        for (int i = 0; i < n; i++)
                CHECK_INT(r->placements[i].job, want[i]);
}

static void test_order_across_projects(void) {
        SchedQuota *q = quota_of("[project a]\nshare = 1\n[project b]\nshare = 1\n");
        SchedNode *nodes = fleet4(6);
        n_held = 0;
        SchedRunning running[] = {run4(nodes, 100, "a", "u", 0, 0, 1, 1, 0, 0)};
        SchedJob jobs[] = {pjob(1, "a", "u", 0, 1, 4), pjob(2, "a", "u", 0, 1, 4),
                           pjob(3, "a", "u", 0, 1, 4), pjob(4, "b", "u", 0, 1, 4),
                           pjob(5, "b", "u", 0, 1, 4), pjob(6, "b", "u", 0, 1, 4)};
        SchedSnapshot s = {.nodes = nodes,
                           .n_nodes = 6,
                           .jobs = jobs,
                           .n_jobs = 6,
                           .running = running,
                           .n_running = 1,
                           .quota = q,
                           .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        /* b (usage 0) first; then ties go to the older job; a's third job is over quota
         * (12 of 24 cpus each) and finds nothing to borrow. */
        check_placed(&r, (int64_t[]){4, 1, 5, 2, 6}, 5);
        for (int i = 0; i < 5; i++)
                CHECK_INT(r.placements[i].tier, 0);
        CHECK_INT(r.wait[2], SCHED_WAIT_QUOTA);
        CHECK_STR(sched_wait_to_string(r.wait[2]),
                  "over its project's quota, waiting for spare capacity");
        /* The quota table: cpus, both projects configured, half of 24 cpus each. */
        CHECK_INT(r.n_kinds, 1);
        CHECK_STR(r.kinds[0], "cpus");
        CHECK_INT(r.n_projects, 2);
        CHECK_STR(r.projects[0].project, "a");
        CHECK(r.projects[0].configured);
        CHECK(r.projects[0].quota[0] > 11.99 && r.projects[0].quota[0] < 12.01);
        CHECK_INT(r.projects[0].used[0], 4);
        CHECK_INT(r.projects[1].used[0], 0);
        sched_result_clear(&r);
        sched_quota_free(q);
}

typedef struct OrderCase {
        const char *name;
        int n_nodes;
        int n_running; /* 4-cpu jobs of user u1, one node each from node 0 */
        SchedJob jobs[4];
        int n_jobs;
        int64_t want[4];
        int n_want;
} OrderCase;

static void test_order_within_project(void) {
        static const OrderCase cases[] = {
                {"user with less usage first, then the older job",
                 3,
                 1,
                 {{.id = 1, .user = "u1"}, {.id = 2, .user = "u2"}, {.id = 3, .user = "u2"}},
                 3,
                 {2, 1},
                 2},
                {"priority before users",
                 3,
                 1,
                 {{.id = 1, .user = "u2"},
                  {.id = 2, .user = "u1", .priority = 3},
                  {.id = 3, .user = "u2"}},
                 3,
                 {2, 1},
                 2},
                {"users alternate",
                 5,
                 0,
                 {{.id = 1, .user = "u1"},
                  {.id = 2, .user = "u1"},
                  {.id = 3, .user = "u2"},
                  {.id = 4, .user = "u2"}},
                 4,
                 {1, 3, 2, 4},
                 4},
                {"age within a user",
                 2,
                 0,
                 {{.id = 2, .user = "u1"}, {.id = 1, .user = "u1"}, {.id = 3, .user = "u1"}},
                 3,
                 {1, 2},
                 2},
        };
        for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
                const OrderCase *oc = &cases[c];
                SchedNode *nodes = fleet4(oc->n_nodes);
                n_held = 0;
                SchedRunning running[2];
                for (int i = 0; i < oc->n_running; i++)
                        running[i] = run4(nodes, 100 + i, "p", "u1", 0, 0, 1, 1, i, i);
                SchedJob jobs[4];
                for (int i = 0; i < oc->n_jobs; i++) {
                        jobs[i] = oc->jobs[i];
                        jobs[i].project = "p";
                        jobs[i].ranks = 1;
                        jobs[i].cpus = 4;
                        jobs[i].created_ms = NOW - 1000 + jobs[i].id;
                }
                SchedSnapshot s = {.nodes = nodes,
                                   .n_nodes = oc->n_nodes,
                                   .jobs = jobs,
                                   .n_jobs = oc->n_jobs,
                                   .running = running,
                                   .n_running = oc->n_running,
                                   .now_ms = NOW};
                SchedResult r;
                CHECK_INT(sched_pass(&s, &r), 0);
                if (r.n_placements != oc->n_want)
                        fprintf(stderr, "case: %s\n", oc->name);
                check_placed(&r, oc->want, oc->n_want);
                sched_result_clear(&r);
        }
}

static void test_tiers(void) {
        /* b is idle but configured: a's quota is half the fleet, the rest is borrowed. */
        SchedQuota *q = quota_of("[project a]\n[project b]\n");
        SchedNode *nodes = fleet4(4);
        SchedJob jobs[] = {pjob(1, "a", "u", 0, 1, 4), pjob(2, "a", "u", 0, 1, 4),
                           pjob(3, "a", "u", 0, 1, 4)};
        SchedSnapshot s = {
                .nodes = nodes, .n_nodes = 4, .jobs = jobs, .n_jobs = 3, .quota = q, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){1, 2, 3}, 3);
        CHECK_INT(r.placements[0].tier, 0);
        CHECK_INT(r.placements[1].tier, 0);
        CHECK_INT(r.placements[2].tier, 1);
        sched_result_clear(&r);

        /* A project with no share only borrows; with nothing spare it waits on quota. */
        SchedQuota *q0 = quota_of("[project a]\n[project z]\nshare = 0\n");
        SchedJob zjobs[] = {pjob(1, "z", "u", 0, 1, 4)};
        SchedSnapshot s0 = {.nodes = nodes,
                            .n_nodes = 4,
                            .jobs = zjobs,
                            .n_jobs = 1,
                            .quota = q0,
                            .now_ms = NOW};
        CHECK_INT(sched_pass(&s0, &r), 0);
        CHECK_INT(r.n_placements, 1);
        CHECK_INT(r.placements[0].tier, 1);
        sched_result_clear(&r);
        for (int i = 0; i < 4; i++)
                nodes[i].cpus_free = 0;
        CHECK_INT(sched_pass(&s0, &r), 0);
        CHECK_INT(r.n_placements, 0);
        CHECK_INT(r.wait[0], SCHED_WAIT_QUOTA);
        sched_result_clear(&r);
        sched_quota_free(q0);
        sched_quota_free(q);
}

typedef struct PreemptCase {
        const char *name;
        int prio12, prio13; /* priorities of a's borrowers 12 (older) and 13 (newer) */
        int tier12, tier13;
        bool stopping13;
        int ranks; /* of b's job, 4 cpus each */
        SchedWait want_wait;
        int64_t want_preempt[2];
        int n_preempt;
} PreemptCase;

static void test_preemption(void) {
        static const PreemptCase cases[] = {
                {"newest borrower first", 0, 0, 1, 1, false, 1, SCHED_WAIT_PREEMPTING, {13}, 1},
                {"lowest priority first", 0, 1, 1, 1, false, 1, SCHED_WAIT_PREEMPTING, {12}, 1},
                {"as many as needed", 0, 0, 1, 1, false, 2, SCHED_WAIT_PREEMPTING, {13, 12}, 2},
                {"never tier 0", 0, 0, 0, 0, false, 1, SCHED_WAIT_CAPACITY, {0}, 0},
                {"not beyond b's quota", 0, 0, 1, 1, false, 3, SCHED_WAIT_QUOTA, {0}, 0},
                {"a stopping job frees enough", 0, 0, 1, 1, true, 1, SCHED_WAIT_PREEMPTING, {0}, 0},
                /* Its project has no borrower left: the pass need not sort its jobs, but
                 * must still list the stopping one. */
                {"a stopping tier-0 job frees enough",
                 0,
                 0,
                 0,
                 0,
                 true,
                 1,
                 SCHED_WAIT_PREEMPTING,
                 {0},
                 0},
        };
        SchedQuota *q = quota_of("[project a]\nshare = 1\n[project b]\nshare = 1\n");
        for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
                const PreemptCase *pc = &cases[c];
                SchedNode *nodes = fleet4(4);
                n_held = 0;
                SchedRunning running[] = {
                        run4(nodes, 10, "a", "u", 0, 0, 100, 1, 0, 0),
                        run4(nodes, 11, "a", "u", 0, 0, 110, 1, 1, 1),
                        run4(nodes, 12, "a", "u", pc->prio12, pc->tier12, 200, 1, 2, 2),
                        run4(nodes, 13, "a", "u", pc->prio13, pc->tier13, 300, 1, 3, 3),
                };
                running[3].stopping = pc->stopping13;
                SchedJob jobs[] = {pjob(20, "b", "v", 0, pc->ranks, 4)};
                SchedSnapshot s = {.nodes = nodes,
                                   .n_nodes = 4,
                                   .jobs = jobs,
                                   .n_jobs = 1,
                                   .running = running,
                                   .n_running = 4,
                                   .quota = q,
                                   .now_ms = NOW};
                SchedResult r;
                CHECK_INT(sched_pass(&s, &r), 0);
                if (r.wait[0] != pc->want_wait || r.n_preempt != pc->n_preempt)
                        fprintf(stderr, "case: %s\n", pc->name);
                CHECK_INT(r.n_placements, 0);
                CHECK_INT(r.wait[0], pc->want_wait);
                CHECK_INT(r.n_preempt, pc->n_preempt);
                for (int i = 0; i < pc->n_preempt; i++)
                        CHECK_INT(r.preempt[i], pc->want_preempt[i]);
                sched_result_clear(&r);
        }
        sched_quota_free(q);
}

static void test_promotion(void) {
        /* a borrowed while b was busy; now a holds only its quota: promoted to tier 0. */
        SchedQuota *q = quota_of("[project a]\n[project b]\n");
        SchedNode *nodes = fleet4(4);
        n_held = 0;
        SchedRunning running[] = {run4(nodes, 10, "a", "u", 0, 0, 100, 1, 0, 0),
                                  run4(nodes, 11, "a", "u", 0, 1, 200, 1, 1, 1),
                                  run4(nodes, 12, "b", "u", 0, 1, 300, 1, 2, 2),
                                  run4(nodes, 13, "b", "u", 0, 1, 300, 2, 3, 3)};
        /* b's 13 holds a rank on n3 twice: b uses 12 cpus of its 8. */
        nodes[3].cpus_free = 0;
        SchedSnapshot s = {.nodes = nodes,
                           .n_nodes = 4,
                           .running = running,
                           .n_running = 4,
                           .quota = q,
                           .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.running_tier[0], 0);
        CHECK_INT(r.running_tier[1], 0);
        CHECK_INT(r.running_tier[2], 0); /* b: 4 of 8 */
        CHECK_INT(r.running_tier[3], 1); /* b: 4 + 8 > 8 */
        sched_result_clear(&r);
        sched_quota_free(q);
}

static void test_backfill_and_reservation(void) {
        SchedNode *nodes = fleet4(2);
        nodes[0].cpus_free = 2;
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 2, 4), pjob(2, "p", "u", 0, 1, 2)};
        jobs[0].ranks_per_node = 1;
        SchedSnapshot s = {.nodes = nodes,
                           .n_nodes = 2,
                           .jobs = jobs,
                           .n_jobs = 2,
                           .now_ms = NOW,
                           .starvation_after_ms = 60000};
        SchedResult r;
        /* Fresh: the big job waits, the small one backfills. */
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){2}, 1);
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        sched_result_clear(&r);
        /* Aged: the big job holds both nodes; the small one is held behind it. */
        jobs[0].submitted_ms = NOW - 60001;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 0);
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        CHECK_INT(r.wait[1], SCHED_WAIT_RESERVED);
        sched_result_clear(&r);
        /* Aging disabled, or no reservations allowed: backfill again. */
        s.max_reservations = -1;
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){2}, 1);
        sched_result_clear(&r);
        s.max_reservations = 0;
        s.starvation_after_ms = -1;
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){2}, 1);
        sched_result_clear(&r);
}

/*
 * A stream of small jobs that alone would keep both nodes busy forever: the big job
 * must still start once it has waited past the aging threshold.
 */
#define TICK_MS 60000
#define SMALL_TICKS 3

static int stream_big_start(int64_t starvation_after_ms, int ticks) {
        SchedNode *nodes = fleet4(2);
        SchedJob queue[256];
        SchedRunning running[64];
        int rank_node[64];
        int64_t ends[64];
        int n_queue = 0, n_run = 0;
        int64_t next_id = 2;
        for (int t = 0; t < ticks; t++) {
                int64_t now = (int64_t) t * TICK_MS;
                /* The big job comes once small ones already run. */
                if (t == 1)
                        queue[n_queue++] = (SchedJob){.id = 1,
                                                      .project = "p",
                                                      .user = "big",
                                                      .ranks = 2,
                                                      .ranks_per_node = 1,
                                                      .cpus = 4,
                                                      .created_ms = now};
                /* Finished small jobs leave; three new ones arrive. */
                for (int i = 0; i < n_run;)
                        if (ends[i] <= now) {
                                nodes[rank_node[i]].cpus_free += 1;
                                running[i] = running[n_run - 1];
                                rank_node[i] = rank_node[n_run - 1];
                                ends[i] = ends[n_run - 1];
                                n_run--;
                        } else
                                i++;
                for (int i = 0; i < n_run; i++)
                        running[i].rank_node = &rank_node[i];
                for (int k = 0; k < 3 && n_queue < 256; k++)
                        queue[n_queue++] = (SchedJob){.id = next_id++,
                                                      .project = "p",
                                                      .user = "small",
                                                      .ranks = 1,
                                                      .cpus = 1,
                                                      .created_ms = now};
                SchedSnapshot s = {.nodes = nodes,
                                   .n_nodes = 2,
                                   .jobs = queue,
                                   .n_jobs = n_queue,
                                   .running = running,
                                   .n_running = n_run,
                                   .now_ms = now,
                                   .starvation_after_ms = starvation_after_ms};
                SchedResult r;
                CHECK_INT(sched_pass(&s, &r), 0);
                for (int p = 0; p < r.n_placements; p++) {
                        const SchedPlacement *pl = &r.placements[p];
                        if (pl->job == 1) {
                                sched_result_clear(&r);
                                return t;
                        }
                        CHECK(n_run < 64);
                        rank_node[n_run] = pl->rank_node[0];
                        nodes[pl->rank_node[0]].cpus_free -= 1;
                        CHECK(nodes[pl->rank_node[0]].cpus_free >= 0);
                        ends[n_run] = now + SMALL_TICKS * TICK_MS;
                        running[n_run] = (SchedRunning){.id = pl->job,
                                                        .project = "p",
                                                        .user = "small",
                                                        .cpus = 1,
                                                        .n_ranks = 1,
                                                        .started_ms = now};
                        n_run++;
                        for (int i = 0; i < n_queue; i++)
                                if (queue[i].id == pl->job) {
                                        queue[i] = queue[--n_queue];
                                        break;
                                }
                }
                for (int i = 0; i < n_run; i++)
                        running[i].rank_node = &rank_node[i];
                sched_result_clear(&r);
        }
        return -1;
}

static void test_starvation(void) {
        /* Without aging the small jobs keep the big one out for good. */
        CHECK_INT(stream_big_start(-1, 40), -1);
        /* With it, the big job (queued at tick 1) is aged from tick 7, reserves both
         * nodes, and starts once the small jobs running then have finished. */
        int t = stream_big_start(5 * TICK_MS, 40);
        CHECK(t >= 7 && t <= 7 + SMALL_TICKS);
}

static void test_constraints(void) {
        SchedNode nodes[] = {node("n1", 8, NULL, 0, rack_a), node("n2", 2, NULL, 0, rack_b)};
        nodes[0].schedulable = false; /* draining: never gets ranks */
        SchedLabel sel_c[] = {{"rack", "c"}};
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 1, 4), pjob(2, "p", "u", 0, 1, 2),
                           pjob(3, "p", "u", 0, 1, 1), pjob(4, "p", "u", 0, 1, 1)};
        jobs[2].node_selector = sel_c;
        jobs[2].n_node_selector = 1;
        jobs[3].accelerator = "tpu-v5";
        jobs[3].accelerators_per_rank = 1;
        SchedSnapshot s = {.nodes = nodes, .n_nodes = 2, .jobs = jobs, .n_jobs = 4, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){2}, 1);
        CHECK_INT(r.placements[0].rank_node[0], 1);
        CHECK_INT(r.wait[0], SCHED_WAIT_CONSTRAINT);
        CHECK_INT(r.wait[2], SCHED_WAIT_CONSTRAINT);
        CHECK_INT(r.wait[3], SCHED_WAIT_CONSTRAINT);
        sched_result_clear(&r);
        CHECK_INT(feasible(nodes, 2, &jobs[0]), SCHED_WAIT_CONSTRAINT);
        CHECK_INT(feasible(nodes, 2, &jobs[1]), SCHED_WAIT_NONE);
        /* Full but schedulable: capacity, not constraint. */
        nodes[1].cpus_free = 0;
        nodes[1].cpus_total = 2;
        SchedSnapshot s2 = {
                .nodes = nodes, .n_nodes = 2, .jobs = &jobs[1], .n_jobs = 1, .now_ms = NOW};
        CHECK_INT(sched_pass(&s2, &r), 0);
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        sched_result_clear(&r);
}

/* A selector looks at the nodes under its rarest label and checks the rest of it there:
 * every pair must match, on a schedulable node. */
static void test_selector_pairs(void) {
        SchedLabel l1[] = {{"rack", "a"}, {"gen", "5"}}, l2[] = {{"rack", "a"}, {"gen", "4"}},
                   l3[] = {{"rack", "b"}, {"gen", "5"}}, l4[] = {{"rack", "a"}, {"gen", "5"}};
        SchedNode nodes[] = {node("n1", 4, NULL, 0, l1), node("n2", 4, NULL, 0, l2),
                             node("n3", 4, NULL, 0, l3), node("n4", 4, NULL, 0, l4)};
        for (int i = 0; i < 4; i++)
                nodes[i].n_labels = 2;
        nodes[0].schedulable = false;
        SchedLabel a5[] = {{"gen", "5"}, {"rack", "a"}}, b4[] = {{"rack", "b"}, {"gen", "4"}};
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 1, 4), pjob(2, "p", "u", 0, 2, 4),
                           pjob(3, "p", "u", 0, 1, 1)};
        jobs[0].node_selector = jobs[1].node_selector = a5;
        jobs[0].n_node_selector = jobs[1].n_node_selector = 2;
        jobs[2].node_selector = b4;
        jobs[2].n_node_selector = 2;
        SchedSnapshot s = {.nodes = nodes, .n_nodes = 4, .jobs = jobs, .n_jobs = 3, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){1}, 1);
        CHECK_INT(r.placements[0].rank_node[0], 3); /* n1 matches too, but is not schedulable */
        CHECK_INT(r.wait[1], SCHED_WAIT_CONSTRAINT); /* two ranks of 4 cpus: n4 alone */
        CHECK_INT(r.wait[2], SCHED_WAIT_CONSTRAINT); /* rack b has no gen 4 */
        sched_result_clear(&r);
}

/* Selectors are told apart whatever their keys and values hold: {"a=b": "c"} and
 * {"a": "b=c"} are two constraints (they were one, and the second job went where the
 * first one's selector pointed). Bitmaps past 64 nodes: nodes 63, 64 and 128 match. */
static void test_selector_identity(void) {
        static SchedNode many[130];
        static char names[130][8];
        SchedLabel ab_c[] = {{"a=b", "c"}}, a_bc[] = {{"a", "b=c"}}, mark[] = {{"m", "1"}};
        for (int i = 0; i < 130; i++) {
                snprintf(names[i], sizeof(names[i]), "n%d", i);
                many[i] = node(names[i], 1, NULL, 0, NULL);
        }
        many[0].labels = ab_c;
        many[1].labels = a_bc;
        many[0].n_labels = many[1].n_labels = 1;
        for (int i = 63; i <= 128; i += i == 64 ? 64 : 1) {
                many[i].labels = mark;
                many[i].n_labels = 1;
        }
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 1, 1), pjob(2, "p", "u", 0, 1, 1),
                           pjob(3, "p", "u", 0, 3, 1), pjob(4, "p", "u", 0, 1, 1)};
        jobs[0].node_selector = ab_c;
        jobs[1].node_selector = a_bc;
        jobs[2].node_selector = jobs[3].node_selector = mark;
        for (int j = 0; j < 4; j++)
                jobs[j].n_node_selector = 1;
        SchedSnapshot s = {.nodes = many, .n_nodes = 130, .jobs = jobs, .n_jobs = 4, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        check_placed(&r, (int64_t[]){1, 2, 3}, 3);
        CHECK_INT(r.placements[0].rank_node[0], 0);
        CHECK_INT(r.placements[1].rank_node[0], 1);
        bool on[130] = {false};
        for (int k = 0; k < 3; k++)
                on[r.placements[2].rank_node[k]] = true;
        CHECK(on[63] && on[64] && on[128]);
        CHECK_INT(r.wait[3], SCHED_WAIT_CAPACITY); /* the marked nodes are full */
        sched_result_clear(&r);
}

/* A pass over two nodes of cpus0 and cpus1 cpus with the given free memory (MiB). */
static void memory_pass(int cpus0, int cpus1, int64_t free0, int64_t free1, SchedJob *jobs,
                        int n_jobs, SchedResult *r) {
        SchedNode nodes[] = {node("n1", cpus0, NULL, 0, NULL), node("n2", cpus1, NULL, 0, NULL)};
        nodes[0].memory_free_mb = free0;
        nodes[1].memory_free_mb = free1;
        nodes[0].memory_total_mb = nodes[1].memory_total_mb = 8000;
        SchedSnapshot s = {
                .nodes = nodes, .n_nodes = 2, .jobs = jobs, .n_jobs = n_jobs, .now_ms = NOW};
        CHECK_INT(sched_pass(&s, r), 0);
}

/* Memory per rank beyond every node's free memory waits for capacity (its nodes could
 * take it empty); the largest free amount itself still fits. Once a size failed, larger
 * sizes of its family (the same shape but for memory) wait without a plan of their own,
 * and smaller ones are still planned. */
static void test_memory_bounds(void) {
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 1, 1), pjob(2, "p", "u", 0, 1, 1)};
        jobs[0].memory_mb = 3001;
        jobs[1].memory_mb = 3000;
        SchedResult r;
        memory_pass(4, 4, 1000, 3000, jobs, 2, &r);
        check_placed(&r, (int64_t[]){2}, 1);
        CHECK_INT(r.placements[0].rank_node[0], 1);
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        sched_result_clear(&r);

        SchedJob family[] = {pjob(1, "p", "u", 0, 1, 2), pjob(2, "p", "u", 0, 1, 2),
                             pjob(3, "p", "u", 0, 1, 2)};
        family[0].memory_mb = 5000; /* n1 lacks the memory, n2 the cpus */
        family[1].memory_mb = 6000;
        family[2].memory_mb = 3000;
        memory_pass(4, 1, 4000, 8000, family, 3, &r);
        check_placed(&r, (int64_t[]){3}, 1);
        CHECK_INT(r.placements[0].rank_node[0], 0);
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        CHECK_INT(r.wait[1], SCHED_WAIT_CAPACITY);
        sched_result_clear(&r);
}

/* A node that gives no total has it from its free capacity and what the running jobs
 * hold there: a job that fits the node empty waits for capacity, not for ever. The
 * ranks are walked only when some node gives no total, so each resource is left out
 * alone once, and then neither; the node that leaves one out is not the first. n1 only
 * keeps the job within its project's quota. */
static void test_totals_from_running(void) {
        int on_n2[] = {1};
        SchedRunning holder = {.id = 100,
                               .project = "p",
                               .user = "u",
                               .started_ms = 1,
                               .cpus = 12,
                               .memory_mb = 3000,
                               .n_ranks = 1,
                               .rank_node = on_n2};
        SchedLabel rack = {"rack", "a"};
        SchedJob want = pjob(1, "p", "u", 0, 1, 8);
        want.memory_mb = 3500;
        want.node_selector = &rack;
        want.n_node_selector = 1;
        enum {
                CPUS_LEFT_OUT,
                MEMORY_LEFT_OUT,
                BOTH_GIVEN
        };
        for (int left_out = CPUS_LEFT_OUT; left_out <= BOTH_GIVEN; left_out++) {
                SchedNode nodes[] = {node("n1", 16, NULL, 0, NULL), node("n2", 4, NULL, 0, &rack)};
                nodes[0].cpus_total = 16;
                nodes[0].memory_free_mb = nodes[0].memory_total_mb = 8000;
                nodes[1].memory_free_mb = 1000; /* the holder's 12 cpus and 3000 MiB in use */
                nodes[1].cpus_total = left_out == CPUS_LEFT_OUT ? 0 : 16;
                nodes[1].memory_total_mb = left_out == MEMORY_LEFT_OUT ? 0 : 4000;
                SchedSnapshot s = {.nodes = nodes,
                                   .n_nodes = 2,
                                   .jobs = &want,
                                   .n_jobs = 1,
                                   .running = &holder,
                                   .n_running = 1,
                                   .now_ms = NOW};
                SchedResult r;
                CHECK_INT(sched_pass(&s, &r), 0);
                CHECK_INT(r.n_placements, 0);
                CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
                sched_result_clear(&r);
        }
}

static void test_edges(void) {
        /* No nodes: nothing can ever fit. */
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 1, 1), pjob(2, "p", "u", 0, 0, 1)};
        SchedSnapshot s = {.jobs = jobs, .n_jobs = 2, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 0);
        CHECK_INT(r.wait[0], SCHED_WAIT_CONSTRAINT);
        CHECK_INT(r.wait[1], SCHED_WAIT_CONSTRAINT); /* no ranks */
        sched_result_clear(&r);
        /* No jobs: the pass still reports quotas, e.g. for the API. */
        SchedQuota *q = quota_of("[project a]\nshare = 3\n[project b]\n");
        SchedNode *nodes = fleet4(2);
        SchedSnapshot s2 = {.nodes = nodes, .n_nodes = 2, .quota = q, .now_ms = NOW};
        CHECK_INT(sched_pass(&s2, &r), 0);
        CHECK_INT(r.n_projects, 2);
        CHECK(r.projects[0].quota[0] > 5.99 && r.projects[0].quota[0] < 6.01);
        CHECK(r.projects[1].quota[0] > 1.99 && r.projects[1].quota[0] < 2.01);
        sched_result_clear(&r);
        sched_quota_free(q);
        CHECK_INT(sched_pass(NULL, &r), -EINVAL);
}

/* More distinct users and job shapes in one pass than its tables first expect: they
 * grow (a full table once made the pass loop forever). */
static void test_many_users_and_shapes(void) {
        enum {
                N = 600
        };
        static char users[2 * N][16];
        static SchedJob jobs[N];
        static SchedRunning running[N];
        for (int i = 0; i < N; i++) {
                snprintf(users[i], sizeof(users[i]), "u%d", i);
                snprintf(users[N + i], sizeof(users[N + i]), "r%d", i);
                jobs[i] = pjob(i + 1, "p", users[i], 0, 1, 1 + i); /* a shape each */
                running[i] = (SchedRunning){.id = N + i + 1, .project = "p", .user = users[N + i]};
        }
        SchedSnapshot s = {.nodes = fleet4(2),
                           .n_nodes = 2,
                           .jobs = jobs,
                           .n_jobs = N,
                           .running = running,
                           .n_running = N,
                           .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK(r.n_placements >= 2);
        for (int i = 4; i < N; i++)
                CHECK_INT(r.wait[i], SCHED_WAIT_CONSTRAINT); /* more cpus than a node has */
        sched_result_clear(&r);
}

/* Whether a waiting job could ever fit is counted over node types (nodes of equal
 * capacity): ranks add up across types, ranks_per_node needs nodes that take that many,
 * and a node that is not schedulable counts for nothing. */
static void test_feasible_by_node_type(void) {
        SchedNode nodes[] = {node("a", 0, NULL, 0, NULL), node("b", 0, NULL, 0, NULL),
                             node("c", 0, NULL, 0, NULL), node("d", 0, NULL, 0, NULL)};
        int totals[] = {4, 4, 8, 16};
        for (int i = 0; i < 4; i++)
                nodes[i].cpus_total = totals[i]; /* all busy: nothing is placed */
        nodes[3].schedulable = false;
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 4, 4), /* 1 + 1 + 2 ranks */
                           pjob(2, "p", "u", 0, 5, 4), /* only with the down node */
                           pjob(3, "p", "u", 0, 2, 4), pjob(4, "p", "u", 0, 3, 4)};
        jobs[2].ranks_per_node = 2; /* c alone */
        jobs[3].ranks_per_node = 2; /* two nodes taking 2 ranks of 4 cpus: c only */
        SchedSnapshot s = {.nodes = nodes, .n_nodes = 4, .jobs = jobs, .n_jobs = 4, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 0);
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        CHECK_INT(r.wait[1], SCHED_WAIT_CONSTRAINT);
        CHECK_INT(r.wait[2], SCHED_WAIT_CAPACITY);
        CHECK_INT(r.wait[3], SCHED_WAIT_CONSTRAINT);
        sched_result_clear(&r);
}

static void test_gpu_fleet_mix(void) {
        /* CPU jobs keep off GPU nodes while CPU nodes have room. */
        make_gpus(gpus8[0], true);
        SchedNode nodes[] = {node("gpu", 16, gpus8[0], 8, NULL), node("cpu", 16, NULL, 0, NULL)};
        SchedJob jobs[] = {pjob(1, "p", "u", 0, 1, 8), pjob(2, "p", "u", 0, 1, 8),
                           pjob(3, "p", "u", 0, 1, 8)};
        SchedSnapshot s = {.nodes = nodes, .n_nodes = 2, .jobs = jobs, .n_jobs = 3, .now_ms = NOW};
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        CHECK_INT(r.n_placements, 3);
        CHECK_INT(r.placements[0].rank_node[0], 1);
        CHECK_INT(r.placements[1].rank_node[0], 1);
        CHECK_INT(r.placements[2].rank_node[0], 0);
        CHECK_INT(r.n_kinds, 2);
        CHECK_STR(r.kinds[1], "nvidia-h100");
        sched_result_clear(&r);
}

/* One name given as several copies (and one copy as several names' slots) is one name:
 * the pass tells names apart by address only when the address says they are equal. */
static void test_names_by_copy(void) {
        SchedQuota *q = quota_of("[project a]\nshare = 1\n[project b]\nshare = 1\n");
        SchedNode *nodes = fleet4(6);
        n_held = 0;
        char *a1 = xstrdup("a"), *a2 = xstrdup("a"), *u1 = xstrdup("u");
        SchedRunning running[] = {run4(nodes, 100, a1, u1, 0, 0, 1, 1, 0, 0),
                                  run4(nodes, 101, a2, "u", 0, 0, 2, 1, 1, 0),
                                  run4(nodes, 102, "a", u1, 0, 0, 3, 1, 2, 0),
                                  run4(nodes, 103, "b", "u", 0, 0, 4, 1, 3, 0)};
        SchedSnapshot s = {.nodes = nodes, .n_nodes = 6, .running = running, .n_running = 4};
        s.quota = q; /* a and b: share 1 each */
        SchedResult r;
        CHECK_INT(sched_pass(&s, &r), 0);
        int seen_a = 0;
        for (int p = 0; p < r.n_projects; p++)
                if (strcmp(r.projects[p].project, "a") == 0) {
                        seen_a++;
                        CHECK_INT(r.projects[p].used[0], 12); /* all three jobs' cpus */
                }
        CHECK_INT(seen_a, 1);
        sched_result_clear(&r);
        /* GPU nodes whose kind names are copies of one name: one kind. */
        make_gpus(gpus8[0], true);
        make_gpus(gpus8[1], true);
        char *kind = xstrdup("nvidia-h100");
        for (int d = 4; d < 8; d++)
                gpus8[1][d].kind = kind;
        SchedNode gpu_nodes[] = {node("g0", 16, gpus8[0], 8, NULL),
                                 node("g1", 16, gpus8[1], 8, NULL)};
        SchedJob jobs[] = {job(1, 2, 1, 8)};
        SchedSnapshot g = {
                .nodes = gpu_nodes, .n_nodes = 2, .jobs = jobs, .n_jobs = 1, .now_ms = NOW};
        CHECK_INT(sched_pass(&g, &r), 0);
        CHECK_INT(r.n_kinds, 2);
        CHECK_INT(r.n_placements, 1); /* 8 GPUs on each node, all of one kind */
        sched_result_clear(&r);
        make_gpus(gpus8[1], true);
        free(kind);
        free(a1);
        free(a2);
        free(u1);
        sched_quota_free(q);
}

int main(void) {
        test_gang_all_or_none();
        test_locality();
        test_numa_locality();
        test_avoid_and_priority();
        test_same_label();
        test_order_across_projects();
        test_order_within_project();
        test_tiers();
        test_preemption();
        test_promotion();
        test_backfill_and_reservation();
        test_starvation();
        test_constraints();
        test_selector_pairs();
        test_selector_identity();
        test_memory_bounds();
        test_totals_from_running();
        test_edges();
        test_many_users_and_shapes();
        test_feasible_by_node_type();
        test_gpu_fleet_mix();
        test_names_by_copy();
        printf("scheduler: ok\n");
        return 0;
}
