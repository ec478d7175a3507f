/* SPDX-License-Identifier: MIT */
/* Table-driven tests of the scheduling pass: gang placement, locality, constraints. */
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "sched.h"

/* A node with 8 GPUs: switches 0..3 with two GPUs each, NUMA 0 for switches 0-1. */
static SchedDevice gpus8[2][8];
static SchedLabel rack_a[] = {{"rack", "a"}};
static SchedLabel rack_b[] = {{"rack", "b"}};

static void make_gpus(SchedDevice *d, bool all_free) {
        for (int i = 0; i < 8; i++)
                d[i] = (SchedDevice){.kind = "nvidia-h100", .numa_node = i / 4,
                                     .pcie_switch = i / 2, .free = all_free};
}

static SchedNode node(const char *name, int cpus, SchedDevice *devs, int n_devs,
                      SchedLabel *labels) {
        return (SchedNode){.name = name, .schedulable = true, .cpus_free = cpus,
                           .memory_free_mb = -1, .devices = devs, .n_devices = n_devs,
                           .labels = labels, .n_labels = labels ? 1 : 0};
}

static SchedJob job(int64_t id, int ranks, int rpn, int gpus) {
        return (SchedJob){.id = id, .ranks = ranks, .ranks_per_node = rpn, .cpus = 1,
                          .accelerator = gpus ? "nvidia-h100" : NULL,
                          .accelerators_per_rank = gpus, .created_ms = id};
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
        CHECK_INT(r.wait[0], SCHED_WAIT_CAPACITY);
        CHECK_INT(r.placements[0].rank_node[0], 0);
        CHECK_INT(r.placements[0].rank_node[1], 0);
        CHECK_INT(r.placements[0].rank_node[2], 1);
        CHECK_INT(r.placements[0].rank_node[3], 1);
        sched_result_clear(&r);
        CHECK_INT(sched_job_feasible(nodes, 2, &jobs[0]), SCHED_WAIT_CONSTRAINT);
        CHECK_INT(sched_job_feasible(nodes, 2, &jobs[1]), SCHED_WAIT_NONE);
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
        CHECK_INT(sched_job_feasible(nodes, 3, &jobs[0]), SCHED_WAIT_CONSTRAINT);
}

int main(void) {
        test_gang_all_or_none();
        test_locality();
        test_numa_locality();
        test_avoid_and_priority();
        test_same_label();
        printf("scheduler: ok\n");
        return 0;
}
