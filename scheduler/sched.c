/* SPDX-License-Identifier: MIT */
/*
 * Scheduling pass and gang placement. Jobs are taken by priority, then age; a job that
 * does not fit does not block smaller ones behind it (backfill). A job is placed on
 * all of its nodes or on none. Within a node, a rank's devices are chosen for locality:
 * one PCIe switch if possible, else one NUMA node, else any, taking the tightest group
 * that fits so that large groups stay whole for large ranks.
 */
#include "sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const wait_names[_SCHED_WAIT_MAX] = {
        [SCHED_WAIT_NONE] = "",
        [SCHED_WAIT_CAPACITY] = "waiting for capacity",
        [SCHED_WAIT_CONSTRAINT] = "no nodes satisfy the job's constraints",
};

const char *sched_wait_to_string(SchedWait w) {
        return w >= 0 && w < _SCHED_WAIT_MAX ? wait_names[w] : "";
}

/* Mutable free capacity of one node during a pass. */
typedef struct FreeNode {
        const SchedNode *node;
        int cpus;
        int64_t memory;
        bool *device_free;
} FreeNode;

static const char *label_get(const SchedNode *n, const char *key) {
        for (int i = 0; i < n->n_labels; i++)
                if (strcmp(n->labels[i].key, key) == 0)
                        return n->labels[i].value;
        return NULL;
}

static bool node_matches(const SchedNode *n, const SchedJob *job) {
        if (!n->schedulable)
                return false;
        for (int i = 0; i < job->n_node_selector; i++) {
                const char *v = label_get(n, job->node_selector[i].key);
                if (!v || strcmp(v, job->node_selector[i].value) != 0)
                        return false;
        }
        if (job->same_label && !label_get(n, job->same_label))
                return false;
        return true;
}

/*
 * Picks `want` free devices of `kind` on fn for one rank, by locality. Writes their
 * indices to out and marks them used. Returns false (nothing changed) when too few.
 */
static bool pick_devices(FreeNode *fn, const char *kind, int want, int *out) {
        const SchedNode *n = fn->node;
        if (want == 0)
                return true;
        /* Try groups by switch, then by NUMA node, then the whole node. */
        for (int level = 0; level < 3; level++) {
                int best_group = -2, best_count = 0;
                for (int d = 0; d < n->n_devices; d++) {
                        if (!fn->device_free[d] || strcmp(n->devices[d].kind, kind) != 0)
                                continue;
                        int g = level == 0 ? n->devices[d].pcie_switch
                                : level == 1 ? n->devices[d].numa_node
                                             : 0;
                        if (g < 0)
                                continue;
                        int count = 0;
                        for (int e = 0; e < n->n_devices; e++) {
                                if (!fn->device_free[e] || strcmp(n->devices[e].kind, kind) != 0)
                                        continue;
                                int ge = level == 0 ? n->devices[e].pcie_switch
                                         : level == 1 ? n->devices[e].numa_node
                                                      : 0;
                                if (ge == g)
                                        count++;
                        }
                        if (count >= want && (best_group == -2 || count < best_count)) {
                                best_group = g;
                                best_count = count;
                        }
                }
                if (best_group == -2)
                        continue;
                int got = 0;
                for (int d = 0; d < n->n_devices && got < want; d++) {
                        if (!fn->device_free[d] || strcmp(n->devices[d].kind, kind) != 0)
                                continue;
                        int g = level == 0 ? n->devices[d].pcie_switch
                                : level == 1 ? n->devices[d].numa_node
                                             : 0;
                        if (g != best_group)
                                continue;
                        fn->device_free[d] = false;
                        out[got++] = d;
                }
                return true;
        }
        return false;
}

static int free_devices_of(const FreeNode *fn, const char *kind) {
        int c = 0;
        for (int d = 0; d < fn->node->n_devices; d++)
                if (fn->device_free[d] && strcmp(fn->node->devices[d].kind, kind) == 0)
                        c++;
        return c;
}

/* How many more ranks of job fit on fn (capacity only). */
static int ranks_fitting(const FreeNode *fn, const SchedJob *job) {
        int fit = job->ranks;
        if (job->cpus > 0)
                fit = min_int(fit, fn->cpus / job->cpus);
        if (job->memory_mb > 0 && fn->memory >= 0)
                fit = min_int(fit, (int) (fn->memory / job->memory_mb));
        if (job->accelerator && job->accelerators_per_rank > 0)
                fit = min_int(fit, free_devices_of(fn, job->accelerator) /
                                           job->accelerators_per_rank);
        return fit;
}

typedef struct Pass {
        FreeNode *free;
        int n;
} Pass;

/* Places one rank on node i: takes cpus, memory and devices. False if devices are
 * too scattered to give the rank its count (cannot happen when counts fit). */
static bool take_rank(FreeNode *fn, const SchedJob *job, int *devices_out) {
        if (job->accelerator && !pick_devices(fn, job->accelerator, job->accelerators_per_rank,
                                              devices_out))
                return false;
        fn->cpus -= job->cpus;
        if (fn->memory >= 0)
                fn->memory -= job->memory_mb;
        return true;
}

/*
 * Tries to place job on the nodes of pass whose index passes `allowed` (label group and
 * avoided node). Fills placement on success and commits the capacity; on failure the
 * pass's capacity is unchanged.
 */
static bool try_place(Pass *pass, const SchedJob *job, const char *group_value,
                      const char *skip_node, SchedPlacement *pl) {
        int n = pass->n;
        int apr = job->accelerator ? job->accelerators_per_rank : 0;
        /* Work on a copy so a failed attempt leaves nothing behind. */
        FreeNode *copy = xcalloc((size_t) n, sizeof(FreeNode));
        int total_devices = 0;
        for (int i = 0; i < n; i++)
                total_devices += pass->free[i].node->n_devices;
        bool *dev_pool = xcalloc((size_t) total_devices + 1, sizeof(bool));
        for (int i = 0, off = 0; i < n; i++) {
                copy[i] = pass->free[i];
                copy[i].device_free = dev_pool + off;
                memcpy(copy[i].device_free, pass->free[i].device_free,
                       (size_t) pass->free[i].node->n_devices * sizeof(bool));
                off += pass->free[i].node->n_devices;
        }

        /* Candidate nodes, tightest fit first (best fit limits fragmentation). */
        int *order = xcalloc((size_t) n + 1, sizeof(int));
        int *fits = xcalloc((size_t) n + 1, sizeof(int));
        int n_cand = 0;
        for (int i = 0; i < n; i++) {
                const SchedNode *node = copy[i].node;
                if (!node_matches(node, job))
                        continue;
                if (skip_node && strcmp(node->name, skip_node) == 0)
                        continue;
                if (group_value && strcmp(label_get(node, job->same_label), group_value) != 0)
                        continue;
                int f = ranks_fitting(&copy[i], job);
                if (job->ranks_per_node > 0 && f < job->ranks_per_node)
                        continue;
                if (f <= 0)
                        continue;
                fits[i] = f;
                order[n_cand++] = i;
        }
        /* Insertion sort by ascending fit; stable, so equal nodes keep fleet order. */
        for (int a = 1; a < n_cand; a++) {
                int v = order[a], b = a - 1;
                while (b >= 0 && fits[order[b]] > fits[v]) {
                        order[b + 1] = order[b];
                        b--;
                }
                order[b + 1] = v;
        }
        int *rank_node = xcalloc((size_t) job->ranks, sizeof(int));
        int *rank_devices = xcalloc((size_t) job->ranks * (size_t) apr + 1, sizeof(int));
        int placed = 0;
        bool ok = true;
        if (job->ranks_per_node == 0) {
                /* Prefer the fewest nodes: if one node fits the whole gang, use the
                 * tightest such node; else fill the largest first. */
                int single = -1;
                for (int k = 0; k < n_cand; k++)
                        if (fits[order[k]] >= job->ranks) {
                                single = order[k];
                                break;
                        }
                if (single < 0)
                        for (int a = 0, b = n_cand - 1; a < b; a++, b--) {
                                int t = order[a];
                                order[a] = order[b];
                                order[b] = t;
                        }
                for (int k = 0; k < n_cand && placed < job->ranks && ok; k++) {
                        int i = single >= 0 ? single : order[k];
                        int take = min_int(fits[i], job->ranks - placed);
                        for (int t = 0; t < take && ok; t++, placed++) {
                                ok = take_rank(&copy[i], job, rank_devices + placed * apr);
                                rank_node[placed] = i;
                        }
                        if (single >= 0)
                                break;
                }
        } else {
                for (int k = 0; k < n_cand && placed < job->ranks && ok; k++) {
                        int i = order[k];
                        for (int t = 0; t < job->ranks_per_node && ok; t++, placed++) {
                                ok = take_rank(&copy[i], job, rank_devices + placed * apr);
                                rank_node[placed] = i;
                        }
                }
        }
        ok = ok && placed == job->ranks;
        if (ok) {
                for (int i = 0; i < n; i++) {
                        pass->free[i].cpus = copy[i].cpus;
                        pass->free[i].memory = copy[i].memory;
                        memcpy(pass->free[i].device_free, copy[i].device_free,
                               (size_t) copy[i].node->n_devices * sizeof(bool));
                }
                pl->job = job->id;
                pl->n_ranks = job->ranks;
                pl->rank_node = rank_node;
                pl->rank_devices = rank_devices;
                pl->accelerators_per_rank = apr;
        } else {
                free(rank_node);
                free(rank_devices);
        }
        free(order);
        free(fits);
        free(dev_pool);
        free(copy);
        return ok;
}

/* Places job in pass, honouring same_label groups and the avoided node. */
static bool place_job(Pass *pass, const SchedJob *job, SchedPlacement *pl) {
        for (int avoid = 1; avoid >= 0; avoid--) {
                const char *skip = avoid ? job->avoid_node : NULL;
                if (avoid && !skip)
                        continue;
                if (!job->same_label) {
                        if (try_place(pass, job, NULL, skip, pl))
                                return true;
                        continue;
                }
                /* One label value at a time, in fleet order of first appearance. */
                for (int i = 0; i < pass->n; i++) {
                        const char *v = label_get(pass->free[i].node, job->same_label);
                        if (!v)
                                continue;
                        bool seen = false;
                        for (int j = 0; j < i && !seen; j++) {
                                const char *w = label_get(pass->free[j].node, job->same_label);
                                seen = w && strcmp(v, w) == 0;
                        }
                        if (!seen && try_place(pass, job, v, skip, pl))
                                return true;
                }
        }
        return false;
}

static int job_order(const void *a, const void *b) {
        const SchedJob *x = *(const SchedJob *const *) a, *y = *(const SchedJob *const *) b;
        if (x->priority != y->priority)
                return x->priority > y->priority ? -1 : 1;
        if (x->created_ms != y->created_ms)
                return x->created_ms < y->created_ms ? -1 : 1;
        return x->id < y->id ? -1 : x->id > y->id;
}

static void pass_init(Pass *pass, const SchedNode *nodes, int n, bool empty) {
        pass->n = n;
        pass->free = xcalloc((size_t) n + 1, sizeof(FreeNode));
        for (int i = 0; i < n; i++) {
                FreeNode *fn = &pass->free[i];
                fn->node = &nodes[i];
                fn->cpus = nodes[i].cpus_free;
                fn->memory = nodes[i].memory_free_mb;
                fn->device_free = xcalloc((size_t) nodes[i].n_devices + 1, sizeof(bool));
                for (int d = 0; d < nodes[i].n_devices; d++)
                        fn->device_free[d] = empty || nodes[i].devices[d].free;
        }
}

static void pass_done(Pass *pass) {
        for (int i = 0; i < pass->n; i++)
                free(pass->free[i].device_free);
        free(pass->free);
}

SchedWait sched_job_feasible(const SchedNode *nodes, int n_nodes, const SchedJob *job) {
        /* cpus_free of an empty node is what the caller passes as its capacity. */
        Pass pass;
        pass_init(&pass, nodes, n_nodes, true);
        SchedPlacement pl = {0};
        SchedJob j = *job;
        j.avoid_node = NULL;
        bool ok = place_job(&pass, &j, &pl);
        pass_done(&pass);
        free(pl.rank_node);
        free(pl.rank_devices);
        return ok ? SCHED_WAIT_NONE : SCHED_WAIT_CONSTRAINT;
}

int sched_pass(const SchedSnapshot *s, SchedResult *ret) {
        Pass pass;
        pass_init(&pass, s->nodes, s->n_nodes, false);
        const SchedJob **order = xcalloc((size_t) s->n_jobs + 1, sizeof(SchedJob *));
        for (int i = 0; i < s->n_jobs; i++)
                order[i] = &s->jobs[i];
        qsort(order, (size_t) s->n_jobs, sizeof(SchedJob *), job_order);
        SchedResult res = {
                .placements = xcalloc((size_t) s->n_jobs + 1, sizeof(SchedPlacement)),
                .wait = xcalloc((size_t) s->n_jobs + 1, sizeof(SchedWait)),
        };
        for (int k = 0; k < s->n_jobs; k++) {
                const SchedJob *job = order[k];
                int idx = (int) (job - s->jobs);
                if (place_job(&pass, job, &res.placements[res.n_placements])) {
                        res.n_placements++;
                        res.wait[idx] = SCHED_WAIT_NONE;
                } else
                        res.wait[idx] = SCHED_WAIT_CAPACITY;
        }
        free(order);
        pass_done(&pass);
        *ret = res;
        return 0;
}

void sched_result_clear(SchedResult *r) {
        for (int i = 0; i < r->n_placements; i++) {
                free(r->placements[i].rank_node);
                free(r->placements[i].rank_devices);
        }
        free(r->placements);
        free(r->wait);
        *r = (SchedResult){0};
}
