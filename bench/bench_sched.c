/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of one scheduling pass on synthetic fleets: a mix of 8-GPU nodes (PCIe
 * switches, NUMA nodes, rack and slice labels) and CPU nodes, about half full of running
 * jobs (placed by a first pass, some of them borrowers), and a queue of waiting jobs of
 * mixed sizes, projects, users, priorities and ages. Prints the median time of several
 * passes over the same snapshot and what the pass decided.
 *
 *     bench_sched                 1,000 nodes / 10,000 jobs, then 10,000 / 100,000
 *     bench_sched NODES JOBS [REPEATS] [sweep|memsweep]
 *
 * sweep: every waiting job asks for a memory size of its own (one user's sweep, or a
 * hostile one), so a pass meets as many job shapes as jobs. memsweep: the same, with the
 * CPU jobs' ranks asking for 150-250 GiB, more than most CPU nodes have free, so memory
 * rather than cpus turns them away.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler.h"
#include "util.h"

#define GPUS_PER_NODE 8
#define SEED_ID 1000000

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t rng(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

static int rng_below(int n) {
        return (int) (rng() % (uint64_t) n);
}

static double now_seconds(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static const char *const projects[] = {"foundation", "research", "infra", "eval", "adhoc"};
static const char *const quota_text = "[default]\n"
                                      "share = 1\n"
                                      "[project foundation]\n"
                                      "share = 4\n"
                                      "nvidia-h100 = 50%\n"
                                      "[project research]\n"
                                      "share = 2\n"
                                      "[project infra]\n"
                                      "share = 1\n"
                                      "cpus = 3\n"
                                      "[project eval]\n"
                                      "share = 1\n";

typedef struct Fleet {
        SchedNode *nodes;
        int n;
        SchedDevice *devices;
        SchedLabel *labels;
        char *names; /* n * 16 */
        char *values; /* n * 3 * 16 */
} Fleet;

static void fleet_make(Fleet *f, int n) {
        f->n = n;
        f->nodes = xcalloc((size_t) n, sizeof(SchedNode));
        f->devices = xcalloc((size_t) n * GPUS_PER_NODE, sizeof(SchedDevice));
        f->labels = xcalloc((size_t) n * 3, sizeof(SchedLabel));
        f->names = xcalloc((size_t) n, 16);
        f->values = xcalloc((size_t) n * 3, 16);
        for (int i = 0; i < n; i++) {
                bool gpu = i % 10 < 7; /* 70% GPU nodes */
                char *name = f->names + (size_t) i * 16;
                char *rack = f->values + (size_t) i * 48, *slice = rack + 16, *pool = rack + 32;
                snprintf(name, 16, "node%05d", i);
                snprintf(rack, 16, "r%d", i / 32);
                snprintf(slice, 16, "s%d", i / 16);
                snprintf(pool, 16, "%s", gpu ? "gpu" : "cpu");
                SchedLabel *l = f->labels + (size_t) i * 3;
                l[0] = (SchedLabel){"rack", rack};
                l[1] = (SchedLabel){"slice", slice};
                l[2] = (SchedLabel){"pool", pool};
                SchedDevice *d = f->devices + (size_t) i * GPUS_PER_NODE;
                for (int g = 0; gpu && g < GPUS_PER_NODE; g++)
                        d[g] = (SchedDevice){.kind = "nvidia-h100",
                                             .numa_node = g / 4,
                                             .pcie_switch = g / 2,
                                             .free = true};
                f->nodes[i] = (SchedNode){.name = name,
                                          .schedulable = i % 97 != 5,
                                          .cpus_free = gpu ? 96 : 64,
                                          .cpus_total = gpu ? 96 : 64,
                                          .memory_free_mb = gpu ? 1 << 20 : 256 << 10,
                                          .memory_total_mb = gpu ? 1 << 20 : 256 << 10,
                                          .devices = gpu ? d : NULL,
                                          .n_devices = gpu ? GPUS_PER_NODE : 0,
                                          .labels = l,
                                          .n_labels = 3};
        }
}

static void fleet_free(Fleet *f) {
        free(f->nodes);
        free(f->devices);
        free(f->labels);
        free(f->names);
        free(f->values);
}

static SchedLabel slice_selector[] = {{"pool", "gpu"}};

/* Set by the sweep argument: each job its own shape, with memory to spare or not. */
static enum {
        SWEEP_NONE,
        SWEEP_SPARE,
        SWEEP_BINDING
} sweep;

static SchedJob job_make(int64_t id, int64_t now) {
        SchedJob j = {.id = id,
                      .project = projects[rng_below(5)],
                      .priority = rng_below(4),
                      .created_ms = now - rng_below(900000),
                      .cpus = 4,
                      .memory_mb = sweep ? 4096 + id % 100000 : 8192};
        static char users[40][8];
        int u = rng_below(40);
        snprintf(users[u], sizeof(users[u]), "user%d", u);
        j.user = users[u];
        j.submitted_ms = j.created_ms;
        int r = rng_below(100);
        if (r < 45) { /* one GPU */
                j.ranks = 1;
                j.accelerator = "nvidia-h100";
                j.accelerators_per_rank = 1;
        } else if (r < 65) { /* one full node */
                j.ranks = 1;
                j.accelerator = "nvidia-h100";
                j.accelerators_per_rank = 8;
                j.cpus = 32;
        } else if (r < 72) { /* a slice: 2..4 nodes of 8 GPUs, same slice */
                j.ranks = 2 + rng_below(3);
                j.ranks_per_node = 1;
                j.accelerator = "nvidia-h100";
                j.accelerators_per_rank = 8;
                j.cpus = 32;
                j.same_label = "slice";
                j.node_selector = slice_selector;
                j.n_node_selector = 1;
        } else if (r < 80) { /* 4 GPUs x 2..8 ranks, anywhere */
                j.ranks = 2 + rng_below(7);
                j.accelerator = "nvidia-h100";
                j.accelerators_per_rank = 4;
                j.cpus = 16;
        } else { /* CPU work */
                j.ranks = 1 + rng_below(4);
                j.cpus = 2 + 2 * rng_below(8);
                if (sweep == SWEEP_BINDING && id < SEED_ID)
                        j.memory_mb = (150 << 10) + id % 100000;
        }
        return j;
}

/* Turns a pass's placements into running entries and takes their capacity. */
static SchedRunning *running_from(Fleet *f, const SchedJob *jobs, int n_jobs,
                                  const SchedResult *res, int64_t now, int *ret_n) {
        SchedRunning *run = xcalloc((size_t) res->n_placements + 1, sizeof(SchedRunning));
        for (int p = 0; p < res->n_placements; p++) {
                const SchedPlacement *pl = &res->placements[p];
                /* Seed jobs are numbered from SEED_ID in array order. */
                const SchedJob *j = &jobs[pl->job - SEED_ID];
                if (pl->job - SEED_ID >= n_jobs)
                        abort();
                int apr = pl->accelerators_per_rank;
                int *rn = xcalloc((size_t) pl->n_ranks, sizeof(int));
                int *rd = xcalloc((size_t) pl->n_ranks * (size_t) apr + 1, sizeof(int));
                memcpy(rn, pl->rank_node, (size_t) pl->n_ranks * sizeof(int));
                memcpy(rd, pl->rank_devices, (size_t) pl->n_ranks * (size_t) apr * sizeof(int));
                for (int r = 0; r < pl->n_ranks; r++) {
                        SchedNode *n = &f->nodes[rn[r]];
                        n->cpus_free -= j->cpus;
                        n->memory_free_mb -= j->memory_mb;
                        for (int a = 0; a < apr; a++)
                                n->devices[rd[r * apr + a]].free = false;
                }
                run[p] = (SchedRunning){.id = j->id,
                                        .project = j->project,
                                        .user = j->user,
                                        .priority = j->priority,
                                        .tier = pl->tier,
                                        .started_ms = now - rng_below(3600000),
                                        .accelerator = j->accelerator,
                                        .accelerators_per_rank = j->accelerators_per_rank,
                                        .cpus = j->cpus,
                                        .memory_mb = j->memory_mb,
                                        .n_ranks = pl->n_ranks,
                                        .rank_node = rn,
                                        .rank_devices = rd};
        }
        *ret_n = res->n_placements;
        return run;
}

/*
 * Checks a pass against the snapshot: no node over-committed, nothing on a node that is
 * not schedulable, devices free and of the right kind, victims only borrowers. Returns
 * the number of problems found (printed).
 */
static int validate(const SchedSnapshot *s, const SchedResult *res) {
        int bad = 0;
        int *cpus = xcalloc((size_t) s->n_nodes, sizeof(int));
        bool **taken = xcalloc((size_t) s->n_nodes, sizeof(bool *));
        for (int i = 0; i < s->n_nodes; i++)
                taken[i] = xcalloc((size_t) s->nodes[i].n_devices + 1, sizeof(bool));
        for (int p = 0; p < res->n_placements; p++) {
                const SchedPlacement *pl = &res->placements[p];
                const SchedJob *j = NULL;
                for (int i = 0; i < s->n_jobs && !j; i++)
                        if (s->jobs[i].id == pl->job)
                                j = &s->jobs[i];
                for (int r = 0; r < pl->n_ranks; r++) {
                        int n = pl->rank_node[r];
                        const SchedNode *node = &s->nodes[n];
                        if (!node->schedulable)
                                bad += printf("job %lld on unschedulable %s\n", (long long) j->id,
                                              node->name) > 0;
                        cpus[n] += j->cpus;
                        for (int a = 0; a < pl->accelerators_per_rank; a++) {
                                int d = pl->rank_devices[r * pl->accelerators_per_rank + a];
                                if (d < 0 || d >= node->n_devices || taken[n][d] ||
                                    !node->devices[d].free ||
                                    strcmp(node->devices[d].kind, j->accelerator) != 0)
                                        bad += printf("job %lld: bad device %d on %s\n",
                                                      (long long) j->id, d, node->name) > 0;
                                else
                                        taken[n][d] = true;
                        }
                }
        }
        for (int i = 0; i < s->n_nodes; i++) {
                if (cpus[i] > s->nodes[i].cpus_free)
                        bad += printf("%s: %d cpus placed, %d free\n", s->nodes[i].name, cpus[i],
                                      s->nodes[i].cpus_free) > 0;
                free(taken[i]);
        }
        for (int v = 0; v < res->n_preempt; v++)
                for (int i = 0; i < s->n_running; i++)
                        if (s->running[i].id == res->preempt[v] && res->running_tier[i] != 1)
                                bad += printf("preempted %lld is not a borrower\n",
                                              (long long) res->preempt[v]) > 0;
        free(cpus);
        free(taken);
        return bad;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void bench(int n_nodes, int n_jobs, int repeats, const SchedQuota *quota) {
        int64_t now = 1800000000000LL;
        Fleet f;
        fleet_make(&f, n_nodes);
        /* Fill about half the fleet with a first pass over a skewed set of jobs: the
         * "adhoc" project borrows beyond its share, so there are borrowers to preempt. */
        int n_seed = n_nodes * 3;
        SchedJob *seed = xcalloc((size_t) n_seed, sizeof(SchedJob));
        for (int i = 0; i < n_seed; i++) {
                seed[i] = job_make(SEED_ID + i, now);
                if (i % 3 == 0)
                        seed[i].project = "adhoc";
        }
        SchedSnapshot s0 = {.nodes = f.nodes,
                            .n_nodes = f.n,
                            .jobs = seed,
                            .n_jobs = n_seed,
                            .quota = quota,
                            .now_ms = now,
                            .starvation_after_ms = -1};
        SchedResult r0;
        sched_pass(&s0, &r0);
        if (n_seed <= 20000 && validate(&s0, &r0) > 0)
                printf("        seed pass: PROBLEMS FOUND\n");
        int n_run = 0;
        SchedRunning *run = running_from(&f, seed, n_seed, &r0, now, &n_run);
        sched_result_clear(&r0);
        int64_t gpus = 0, gpus_free = 0, cpus = 0, cpus_free = 0;
        for (int i = 0; i < f.n; i++) {
                cpus += f.nodes[i].cpus_total;
                cpus_free += f.nodes[i].cpus_free;
                for (int d = 0; d < f.nodes[i].n_devices; d++) {
                        gpus++;
                        gpus_free += f.nodes[i].devices[d].free;
                }
        }

        SchedJob *jobs = xcalloc((size_t) n_jobs, sizeof(SchedJob));
        for (int i = 0; i < n_jobs; i++)
                jobs[i] = job_make(i + 1, now);
        SchedSnapshot s = {.nodes = f.nodes,
                           .n_nodes = f.n,
                           .jobs = jobs,
                           .n_jobs = n_jobs,
                           .running = run,
                           .n_running = n_run,
                           .quota = quota,
                           .now_ms = now};
        double *t = xcalloc((size_t) repeats, sizeof(double));
        SchedResult res = {0};
        for (int k = 0; k < repeats; k++) {
                if (k > 0)
                        sched_result_clear(&res);
                double t0 = now_seconds();
                sched_pass(&s, &res);
                t[k] = now_seconds() - t0;
        }
        qsort(t, (size_t) repeats, sizeof(double), cmp_double);
        int waits[_SCHED_WAIT_MAX] = {0}, tier1 = 0;
        for (int i = 0; i < n_jobs; i++)
                waits[res.wait[i]]++;
        for (int p = 0; p < res.n_placements; p++)
                tier1 += res.placements[p].tier;
        printf("%6d nodes %7d waiting %6d running (%.0f%% of GPUs, %.0f%% of cpus busy): "
               "pass %.2f ms (median of %d, min %.2f, max %.2f)\n",
               n_nodes, n_jobs, n_run, 100.0 * (double) (gpus - gpus_free) / (double) gpus,
               100.0 * (double) (cpus - cpus_free) / (double) cpus, t[repeats / 2] * 1e3, repeats,
               t[0] * 1e3, t[repeats - 1] * 1e3);
        printf("        placed %d (%d borrowing), preempt %d; waiting: capacity %d, quota %d, "
               "reserved %d, preempting %d, constraint %d\n",
               res.n_placements, tier1, res.n_preempt, waits[SCHED_WAIT_CAPACITY],
               waits[SCHED_WAIT_QUOTA], waits[SCHED_WAIT_RESERVED], waits[SCHED_WAIT_PREEMPTING],
               waits[SCHED_WAIT_CONSTRAINT]);
        /* Validation is quadratic in places: only on the smaller runs. */
        if (n_jobs <= 20000) {
                int bad = validate(&s, &res);
                printf("        validated: %s\n", bad ? "PROBLEMS FOUND" : "ok");
        }
        sched_result_clear(&res);
        for (int i = 0; i < n_run; i++) {
                free((void *) run[i].rank_node);
                free((void *) run[i].rank_devices);
        }
        free(run);
        free(t);
        free(jobs);
        free(seed);
        fleet_free(&f);
}

int main(int argc, char **argv) {
        SchedQuota *quota = NULL;
        char *error = NULL;
        if (sched_quota_parse(quota_text, &quota, &error) < 0) {
                fprintf(stderr, "bench_sched: %s\n", error);
                free(error);
                return 1;
        }
        if (argc >= 3) {
                int repeats = argc >= 4 ? atoi(argv[3]) : 7;
                sweep = argc < 5                           ? SWEEP_NONE
                        : strcmp(argv[4], "sweep") == 0    ? SWEEP_SPARE
                        : strcmp(argv[4], "memsweep") == 0 ? SWEEP_BINDING
                                                           : SWEEP_NONE;
                bench(atoi(argv[1]), atoi(argv[2]), repeats > 0 ? repeats : 1, quota);
        } else {
                bench(1000, 10000, 9, quota);
                bench(10000, 100000, 5, quota);
        }
        sched_quota_free(quota);
        return 0;
}
