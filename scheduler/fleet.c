/* SPDX-License-Identifier: MIT */
/*
 * Working fleet of one scheduling pass: free capacity per node and kind, bucketed by
 * the free amount, and gang planning over it. A plan walks the buckets of the job's
 * primary resource (its accelerator kind, else cpus): upward from the smallest amount
 * that can take its ranks for a best fit, or downward when filling the largest nodes
 * first, and stops as soon as it has enough nodes. Within a node, a rank's devices are
 * chosen for locality: one PCIe switch if possible, else one NUMA node, else any,
 * taking the tightest group that fits so that large groups stay whole for large ranks.
 */
#include "fleet.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int fleet_kind_intern(StrMap *map, char ***names, int *n, const char *name) {
        void *v = strmap_get(map, name);
        if (v)
                return (int) ((intptr_t) v - 1);
        *names = xrealloc(*names, (size_t) (*n + 1) * sizeof(char *));
        (*names)[*n] = xstrdup(name);
        strmap_put(map, name, (void *) (intptr_t) (*n + 1));
        return (*n)++;
}

static int max_int(int a, int b) {
        return a > b ? a : b;
}

static int clamp_int(int v, int lo, int hi) {
        return v < lo ? lo : v > hi ? hi : v;
}

static int local_kind(const FleetNode *fn, int kind) {
        for (int i = 0; i < fn->n_kinds; i++)
                if (fn->kind_id[i] == kind)
                        return i;
        return -1;
}

/* Slots of a node: cpus, then each accelerator kind, then cpus again on plain nodes. */
static int node_slots(const FleetNode *fn) {
        return 1 + fn->n_kinds + (fn->plain ? 1 : 0);
}

static int slot_amount(const FleetNode *fn, int local) {
        return local == 0 || local > fn->n_kinds ? fn->cpu_free : fn->kind_free[local - 1];
}

static void slot_unlink(Fleet *f, int s) {
        int k = f->slot_kind[s], b = f->slot_bucket[s];
        int p = f->slot_prev[s], nx = f->slot_next[s];
        if (p >= 0)
                f->slot_next[p] = nx;
        else
                f->head[k][b] = nx;
        if (nx >= 0)
                f->slot_prev[nx] = p;
        else
                f->tail[k][b] = p;
}

static void slot_link(Fleet *f, int s, int b) {
        int k = f->slot_kind[s];
        f->slot_bucket[s] = b;
        f->slot_next[s] = -1;
        f->slot_prev[s] = f->tail[k][b];
        if (f->tail[k][b] >= 0)
                f->slot_next[f->tail[k][b]] = s;
        else
                f->head[k][b] = s;
        f->tail[k][b] = s;
}

/* Moves node n's slots to the buckets of its current free amounts. */
static void node_rebucket(Fleet *f, int n) {
        FleetNode *fn = &f->nodes[n];
        if (!fn->usable || fn->reserved)
                return;
        for (int l = 0; l < node_slots(fn); l++) {
                int s = fn->slot + l, k = f->slot_kind[s];
                int b = clamp_int(slot_amount(fn, l), 0, f->bucket_max[k]);
                if (b == f->slot_bucket[s])
                        continue;
                f->total_free[k] += b - f->slot_bucket[s];
                slot_unlink(f, s);
                slot_link(f, s, b);
        }
}

void fleet_init(Fleet *f, const SchedNode *nodes, int n_nodes, bool empty, StrMap *kinds,
                char ***kind_names, int *n_kind_names, const int *held_cpu,
                const int64_t *held_mem) {
        *f = (Fleet){.n_nodes = n_nodes};
        f->nodes = xcalloc((size_t) n_nodes + 1, sizeof(FleetNode));
        /* First: kinds, and the size of the per-node pools. */
        int *dev_kind_all = NULL;
        size_t n_dev = 0, n_local = 0;
        for (int i = 0; i < n_nodes; i++)
                n_dev += (size_t) nodes[i].n_devices;
        dev_kind_all = xcalloc(n_dev + 1, sizeof(int));
        /* The kind looked up last, by address: where nodes share one copy of a kind
         * name (the controller's do), most devices need neither a lookup nor a compare. */
        const char *last_kind = NULL;
        int last_id = -1;
        for (int i = 0, off = 0; i < n_nodes; i++) {
                const SchedNode *sn = &nodes[i];
                int distinct = 0;
                for (int d = 0; d < sn->n_devices; d++) {
                        const char *kind = sn->devices[d].kind;
                        /* Devices of a node usually share one kind: skip the lookup. */
                        if (kind != last_kind)
                                last_id = d > 0 && strcmp(kind, sn->devices[d - 1].kind) == 0
                                                  ? dev_kind_all[off + d - 1]
                                                  : fleet_kind_intern(kinds, kind_names,
                                                                      n_kind_names, kind);
                        last_kind = kind;
                        dev_kind_all[off + d] = last_id;
                        bool seen = false;
                        for (int e = 0; e < d && !seen; e++)
                                seen = dev_kind_all[off + e] == dev_kind_all[off + d];
                        distinct += !seen;
                }
                f->nodes[i].n_kinds = distinct;
                n_local += (size_t) distinct;
                off += sn->n_devices;
        }
        f->n_kinds = *n_kind_names;
        f->int_pool = xcalloc(n_local * 4 + n_dev + 1, sizeof(int));
        f->bool_pool = xcalloc(n_dev + 1, sizeof(bool));
        f->plain_kind = f->n_kinds;
        f->capacity = xcalloc((size_t) f->n_kinds + 1, sizeof(int64_t));
        f->total_free = xcalloc((size_t) f->n_kinds + 1, sizeof(int64_t));
        f->reserved_free = xcalloc((size_t) f->n_kinds + 1, sizeof(int64_t));
        f->bucket_max = xcalloc((size_t) f->n_kinds + 1, sizeof(int));
        int *ip = f->int_pool;
        bool *bp = f->bool_pool;
        for (int i = 0, off = 0; i < n_nodes; i++) {
                const SchedNode *sn = &nodes[i];
                FleetNode *fn = &f->nodes[i];
                int nk = fn->n_kinds;
                fn->node = sn;
                fn->usable = sn->schedulable;
                fn->plain = sn->n_devices == 0;
                fn->kind_id = ip;
                fn->kind_free = ip + nk;
                fn->kind_total = ip + 2 * nk;
                fn->kind_res = ip + 3 * nk;
                fn->dev_kind = ip + 4 * nk;
                fn->dev_free = bp;
                ip += 4 * nk + sn->n_devices;
                bp += sn->n_devices;
                int used = 0;
                for (int d = 0; d < sn->n_devices; d++) {
                        int k = dev_kind_all[off + d];
                        fn->dev_kind[d] = k;
                        fn->dev_free[d] = empty || sn->devices[d].free;
                        int l = 0;
                        while (l < used && fn->kind_id[l] != k)
                                l++;
                        if (l == used)
                                fn->kind_id[used++] = k;
                        fn->kind_total[l]++;
                        fn->kind_free[l] += fn->dev_free[d];
                }
                off += sn->n_devices;
                int held = held_cpu ? held_cpu[i] : 0;
                fn->cpu_total = fleet_cpus_total_given(sn) ? sn->cpus_total : sn->cpus_free + held;
                if (fn->cpu_total < sn->cpus_free)
                        fn->cpu_total = sn->cpus_free;
                fn->cpu_free = empty ? fn->cpu_total : sn->cpus_free;
                fn->mem_tracked = sn->memory_free_mb >= 0 || sn->memory_total_mb > 0;
                if (fn->mem_tracked) {
                        int64_t hm = held_mem ? held_mem[i] : 0;
                        fn->mem_total = fleet_memory_total_given(sn) ? sn->memory_total_mb
                                                                     : sn->memory_free_mb + hm;
                        fn->mem_free = empty || sn->memory_free_mb < 0 ? fn->mem_total
                                                                       : sn->memory_free_mb;
                }
                if (!fn->usable)
                        continue;
                int64_t mem = fn->mem_tracked ? fn->mem_free : INT64_MAX;
                if (mem > f->mem_free_max)
                        f->mem_free_max = mem;
                f->has_plain |= fn->plain;
                f->has_accel |= !fn->plain;
                f->capacity[0] += fn->cpu_total;
                if (fn->cpu_total > f->bucket_max[0])
                        f->bucket_max[0] = fn->cpu_total;
                if (fn->plain && fn->cpu_total > f->bucket_max[f->plain_kind])
                        f->bucket_max[f->plain_kind] = fn->cpu_total;
                for (int l = 0; l < nk; l++) {
                        f->capacity[fn->kind_id[l]] += fn->kind_total[l];
                        if (fn->kind_total[l] > f->bucket_max[fn->kind_id[l]])
                                f->bucket_max[fn->kind_id[l]] = fn->kind_total[l];
                }
                fn->slot = f->n_slots;
                f->n_slots += node_slots(fn);
        }
        free(dev_kind_all);

        /* Buckets, filled in fleet order so that equal nodes keep it. */
        f->head = xcalloc((size_t) f->n_kinds + 1, sizeof(int *));
        f->tail = xcalloc((size_t) f->n_kinds + 1, sizeof(int *));
        for (int k = 0; k <= f->n_kinds; k++) {
                f->head[k] = xmalloc(((size_t) f->bucket_max[k] + 1) * sizeof(int));
                f->tail[k] = xmalloc(((size_t) f->bucket_max[k] + 1) * sizeof(int));
                memset(f->head[k], 0xff, ((size_t) f->bucket_max[k] + 1) * sizeof(int));
                memset(f->tail[k], 0xff, ((size_t) f->bucket_max[k] + 1) * sizeof(int));
        }
        size_t ns = (size_t) f->n_slots + 1;
        f->slot_prev = xcalloc(ns, sizeof(int));
        f->slot_next = xcalloc(ns, sizeof(int));
        f->slot_node = xcalloc(ns, sizeof(int));
        f->slot_kind = xcalloc(ns, sizeof(int));
        f->slot_bucket = xcalloc(ns, sizeof(int));
        for (int i = 0; i < n_nodes; i++) {
                FleetNode *fn = &f->nodes[i];
                if (!fn->usable) {
                        fn->slot = -1;
                        continue;
                }
                for (int l = 0; l < node_slots(fn); l++) {
                        int s = fn->slot + l;
                        int k = l == 0 ? 0 : l <= fn->n_kinds ? fn->kind_id[l - 1] : f->plain_kind;
                        int b = clamp_int(slot_amount(fn, l), 0, f->bucket_max[k]);
                        f->slot_node[s] = i;
                        f->slot_kind[s] = k;
                        f->total_free[k] += b;
                        slot_link(f, s, b);
                }
        }
        f->plan_node = xcalloc((size_t) n_nodes + 1, sizeof(int));
        f->plan_count = xcalloc((size_t) n_nodes + 1, sizeof(int));
        f->node_next = xcalloc((size_t) n_nodes + 1, sizeof(int));
}

void fleet_deinit(Fleet *f) {
        for (int k = 0; k <= f->n_kinds; k++) {
                free(f->head[k]);
                free(f->tail[k]);
        }
        free(f->head);
        free(f->tail);
        free(f->slot_prev);
        free(f->slot_next);
        free(f->slot_node);
        free(f->slot_kind);
        free(f->slot_bucket);
        free(f->plan_node);
        free(f->plan_count);
        free(f->node_next);
        free(f->g_sum);
        free(f->g_head);
        free(f->g_tail);
        free(f->g_touched);
        free(f->capacity);
        free(f->total_free);
        free(f->reserved_free);
        free(f->bucket_max);
        free(f->int_pool);
        free(f->bool_pool);
        free(f->node_type);
        free(f->type_rep);
        strmap_free(f->label_map);
        for (int i = 0; i < f->n_label_nodes; i++)
                free(f->label_nodes[i].nodes);
        free(f->label_nodes);
        free(f->nodes);
        *f = (Fleet){0};
}

static const char *label_get(const SchedNode *n, const char *key) {
        for (int i = 0; i < n->n_labels; i++)
                if (strcmp(n->labels[i].key, key) == 0)
                        return n->labels[i].value;
        return NULL;
}

/* The key's length first, as in sched.c's constraint keys: a key or value may hold any
 * character, and two labels must not share one list of nodes. */
static char *label_key(const char *key, const char *value) {
        return xasprintf("%zu:%s%s", strlen(key), key, value);
}

/* Every node under each of its labels, in node order. */
static void labels_index(Fleet *f) {
        f->label_map = strmap_new();
        int cap = 0;
        for (int i = 0; i < f->n_nodes; i++) {
                const SchedNode *n = f->nodes[i].node;
                for (int l = 0; l < n->n_labels; l++) {
                        _cleanup_free_ char *key = label_key(n->labels[l].key, n->labels[l].value);
                        intptr_t id = (intptr_t) strmap_get(f->label_map, key);
                        if (id == 0) {
                                GROW(f->label_nodes, f->n_label_nodes, cap);
                                f->label_nodes[f->n_label_nodes++] = (LabelNodes){0};
                                id = f->n_label_nodes;
                                strmap_put(f->label_map, key, (void *) id);
                        }
                        LabelNodes *ln = &f->label_nodes[id - 1];
                        if (ln->n > 0 && ln->nodes[ln->n - 1] == i)
                                continue; /* the same label twice on one node */
                        GROW(ln->nodes, ln->n, ln->cap);
                        ln->nodes[ln->n++] = i;
                }
        }
}

/* The nodes carrying the rarest of the job's selector labels, or with no selector every
 * node (NULL with *ret_n the fleet's size); NULL with 0 when some label is on no node. */
static const int *selector_candidates(Fleet *f, const SchedJob *job, int *ret_n) {
        *ret_n = job->n_node_selector == 0 ? f->n_nodes : 0;
        if (job->n_node_selector == 0)
                return NULL;
        if (!f->label_map)
                labels_index(f);
        const LabelNodes *best = NULL;
        for (int s = 0; s < job->n_node_selector; s++) {
                _cleanup_free_ char *key =
                        label_key(job->node_selector[s].key, job->node_selector[s].value);
                intptr_t id = (intptr_t) strmap_get(f->label_map, key);
                if (id == 0)
                        return NULL;
                if (!best || f->label_nodes[id - 1].n < best->n)
                        best = &f->label_nodes[id - 1];
        }
        *ret_n = best->n;
        return best->nodes;
}

/*
 * Only the nodes a selector names are looked at, and only they are listed: a queue of
 * many distinct selectors (one per node label, or a hostile user's) costs what they
 * match, not the fleet each. The bitmap is an eighth of a byte per node.
 */
void fleet_constraint_init(Fleet *f, const SchedJob *job, Constraint *c) {
        *c = (Constraint){.match = xcalloc((size_t) f->n_nodes / 64 + 1, sizeof(uint64_t))};
        int n_cand;
        const int *cand = selector_candidates(f, job, &n_cand);
        c->nodes = xmalloc(((size_t) n_cand + 1) * sizeof(int));
        StrMap *values = NULL;
        if (job->same_label) {
                c->group = xmalloc(((size_t) n_cand + 1) * sizeof(int));
                values = strmap_new();
        }
        for (int k = 0; k < n_cand; k++) {
                int i = cand ? cand[k] : k;
                const SchedNode *n = f->nodes[i].node;
                bool ok = f->nodes[i].usable;
                for (int s = 0; ok && s < job->n_node_selector; s++) {
                        const char *v = label_get(n, job->node_selector[s].key);
                        ok = v && strcmp(v, job->node_selector[s].value) == 0;
                }
                if (ok && job->same_label) {
                        const char *v = label_get(n, job->same_label);
                        ok = v != NULL;
                        if (ok) {
                                void *g = strmap_get(values, v);
                                if (!g) {
                                        g = (void *) (intptr_t) ++c->n_groups;
                                        strmap_put(values, v, g);
                                }
                                c->group[c->n_allowed] = (int) (intptr_t) g - 1;
                        }
                }
                if (!ok)
                        continue;
                c->match[i >> 6] |= UINT64_C(1) << (i & 63);
                c->nodes[c->n_allowed++] = i;
        }
        strmap_free(values);
}

void fleet_constraint_deinit(Constraint *c) {
        free(c->match);
        free(c->nodes);
        free(c->group);
        free(c->type_count);
        *c = (Constraint){0};
}

/* Ranks of d that fit on node n in view (never negative). */
static int fit_of(const FleetNode *fn, const Demand *d, FitView view) {
        int fit = d->ranks;
        if (d->cpus > 0) {
                int cpu = view == FIT_FREE    ? fn->cpu_free
                          : view == FIT_NORES ? fn->cpu_free + fn->cpu_res
                                              : fn->cpu_total;
                fit = min_int(fit, cpu / d->cpus);
        }
        if (d->mem > 0 && fn->mem_tracked) {
                int64_t mem = view == FIT_FREE    ? fn->mem_free
                              : view == FIT_NORES ? fn->mem_free + fn->mem_res
                                                  : fn->mem_total;
                int64_t m = mem / d->mem;
                fit = m < fit ? (int) m : fit;
        }
        if (d->kind > 0 && d->apr > 0) {
                int l = local_kind(fn, d->kind);
                if (l < 0)
                        return 0;
                int a = view == FIT_FREE    ? fn->kind_free[l]
                        : view == FIT_NORES ? fn->kind_free[l] + fn->kind_res[l]
                                            : fn->kind_total[l];
                fit = min_int(fit, a / d->apr);
        }
        return fit < 0 ? 0 : fit;
}

/* Walks the slots of one kind's buckets from `from` to `to` (inclusive, either way). */
typedef struct Scan {
        const Fleet *f;
        int kind, b, to, step, slot;
} Scan;

static void scan_start(Scan *s, const Fleet *f, int kind, int from, int to) {
        *s = (Scan){
                .f = f, .kind = kind, .b = from, .to = to, .step = from <= to ? 1 : -1, .slot = -1};
}

static int scan_next(Scan *s) {
        for (;;) {
                if (s->slot >= 0) {
                        int n = s->f->slot_node[s->slot];
                        s->slot = s->f->slot_next[s->slot];
                        return n;
                }
                if (s->b == s->to + s->step)
                        return -1;
                s->slot = s->f->head[s->kind][s->b];
                s->b += s->step;
        }
}

static void groups_reserve(Fleet *f, int n_groups) {
        if (n_groups <= f->g_cap)
                return;
        int cap = n_groups * 2;
        f->g_sum = xrealloc(f->g_sum, (size_t) cap * sizeof(int64_t));
        f->g_head = xrealloc(f->g_head, (size_t) cap * sizeof(int));
        f->g_tail = xrealloc(f->g_tail, (size_t) cap * sizeof(int));
        f->g_touched = xrealloc(f->g_touched, (size_t) cap * sizeof(int));
        for (int g = f->g_cap; g < cap; g++) {
                f->g_sum[g] = 0;
                f->g_head[g] = f->g_tail[g] = -1;
        }
        f->g_cap = cap;
}

/* Group accumulation: adds node n with value v to its group; returns the group sum. */
static int64_t group_add(Fleet *f, int *n_touched, int g, int n, int64_t v) {
        if (f->g_head[g] < 0) {
                f->g_touched[(*n_touched)++] = g;
                f->g_head[g] = n;
        } else
                f->node_next[f->g_tail[g]] = n;
        f->g_tail[g] = n;
        f->node_next[n] = -1;
        f->g_sum[g] += v;
        return f->g_sum[g];
}

static void groups_reset(Fleet *f, int n_touched) {
        for (int t = 0; t < n_touched; t++) {
                int g = f->g_touched[t];
                f->g_sum[g] = 0;
                f->g_head[g] = f->g_tail[g] = -1;
        }
}

/* Reserved nodes are out of the buckets: plans never see them. */
static bool candidate(const Fleet *f, const Demand *d, int n, bool skip_avoid, bool plain_only) {
        return constraint_allows(d->cons, n) && !(skip_avoid && n == d->avoid) &&
               !(plain_only && !f->nodes[n].plain);
}

/* One planning attempt; see fleet_plan. */
static bool plan_once(Fleet *f, const Demand *d, PlanMode mode, bool skip_avoid, bool plain_only) {
        bool accel = d->kind > 0 && d->apr > 0;
        /* CPU-only jobs restricted to plain nodes walk the plain nodes' own buckets. */
        int pk = accel ? d->kind : plain_only ? f->plain_kind : 0, dp = accel ? d->apr : d->cpus;
        FitView view = mode == PLAN_BEST ? FIT_FREE : FIT_TOTAL;
        int max = f->bucket_max[pk], R = d->ranks;
        const int *group = d->cons->group;
        int n_touched = 0;
        Scan sc;
        f->n_plan = 0;
        if (group)
                groups_reserve(f, d->cons->n_groups);

        if (d->rpn > 0) {
                int want = min_int(d->rpn, R), need = (R + d->rpn - 1) / d->rpn;
                int64_t lo = (int64_t) dp * want;
                if (mode == PLAN_BEST && lo > max)
                        return false;
                if (mode == PLAN_BEST)
                        scan_start(&sc, f, pk, (int) lo, max);
                else
                        scan_start(&sc, f, pk, max, 0);
                for (int n; (n = scan_next(&sc)) >= 0;) {
                        if (!candidate(f, d, n, skip_avoid, plain_only) ||
                            fit_of(&f->nodes[n], d, view) < want)
                                continue;
                        if (!group) {
                                f->plan_node[f->n_plan] = n;
                                f->plan_count[f->n_plan] = min_int(d->rpn, R - f->n_plan * d->rpn);
                                if (++f->n_plan == need)
                                        return true;
                                continue;
                        }
                        int g = constraint_group(d->cons, n);
                        if (group_add(f, &n_touched, g, n, 1) < need)
                                continue;
                        for (int m = f->g_head[g], placed = 0; m >= 0; m = f->node_next[m]) {
                                f->plan_node[f->n_plan] = m;
                                f->plan_count[f->n_plan++] = min_int(d->rpn, R - placed);
                                placed += d->rpn;
                        }
                        groups_reset(f, n_touched);
                        return true;
                }
                groups_reset(f, n_touched);
                f->n_plan = 0;
                return false;
        }

        /* Any ranks per node: the fewest nodes. One node if one takes the whole gang. */
        int64_t lo = (int64_t) dp * R;
        if (mode == PLAN_RESERVE || lo <= max) {
                if (mode == PLAN_BEST)
                        scan_start(&sc, f, pk, (int) lo, max);
                else
                        scan_start(&sc, f, pk, max, 0);
                for (int n; (n = scan_next(&sc)) >= 0;)
                        if (candidate(f, d, n, skip_avoid, plain_only) &&
                            fit_of(&f->nodes[n], d, view) >= R) {
                                f->plan_node[0] = n;
                                f->plan_count[0] = R;
                                f->n_plan = 1;
                                return true;
                        }
        }
        if (R <= 1)
                return false;
        /* Else the largest nodes first. */
        if (mode == PLAN_BEST && dp > max)
                return false;
        scan_start(&sc, f, pk, max, mode == PLAN_BEST ? max_int(dp, 0) : 0);
        int placed = 0;
        for (int n; (n = scan_next(&sc)) >= 0;) {
                if (!candidate(f, d, n, skip_avoid, plain_only))
                        continue;
                int fit = fit_of(&f->nodes[n], d, view);
                if (fit <= 0)
                        continue;
                if (!group) {
                        f->plan_node[f->n_plan] = n;
                        f->plan_count[f->n_plan++] = min_int(fit, R - placed);
                        placed += min_int(fit, R - placed);
                        if (placed == R)
                                return true;
                        continue;
                }
                int g = constraint_group(d->cons, n);
                if (group_add(f, &n_touched, g, n, fit) < R)
                        continue;
                for (int m = f->g_head[g]; m >= 0 && placed < R; m = f->node_next[m]) {
                        int take = min_int(fit_of(&f->nodes[m], d, view), R - placed);
                        f->plan_node[f->n_plan] = m;
                        f->plan_count[f->n_plan++] = take;
                        placed += take;
                }
                groups_reset(f, n_touched);
                return true;
        }
        groups_reset(f, n_touched);
        f->n_plan = 0;
        return false;
}

bool fleet_plan(Fleet *f, const Demand *d, PlanMode mode) {
        if (d->ranks <= 0 || d->kind >= f->n_kinds)
                return false;
        bool accel = d->kind > 0 && d->apr > 0;
        /* CPU-only jobs keep off accelerator nodes while plain nodes can take them. */
        bool plain_first = !accel && f->has_plain && f->has_accel;
        for (int a = d->avoid >= 0 ? 1 : 0; a >= 0; a--)
                for (int p = plain_first ? 1 : 0; p >= 0; p--)
                        if (plan_once(f, d, mode, a, p))
                                return true;
        return false;
}

/* Accelerator kinds a node type's key spells out; a node with more is a type of its own. */
#define TYPE_KINDS 4

static void types_init(Fleet *f) {
        enum {
                WIDTH = 4 + 2 * TYPE_KINDS
        };
        TupleMap types;
        tuplemap_init(&types, WIDTH, 64);
        f->node_type = xcalloc((size_t) f->n_nodes + 1, sizeof(int));
        f->type_rep = xcalloc((size_t) f->n_nodes + 1, sizeof(int));
        for (int n = 0; n < f->n_nodes; n++) {
                const FleetNode *fn = &f->nodes[n];
                int64_t key[WIDTH] = {fn->cpu_total, fn->mem_tracked ? fn->mem_total : -1,
                                      fn->n_kinds, fn->n_kinds > TYPE_KINDS ? n + 1 : 0};
                for (int l = 0; l < fn->n_kinds && l < TYPE_KINDS; l++) {
                        key[4 + 2 * l] = fn->kind_id[l];
                        key[5 + 2 * l] = fn->kind_total[l];
                }
                int t = tuplemap_intern(&types, key);
                if (t == f->n_types)
                        f->type_rep[f->n_types++] = n;
                f->node_type[n] = t;
        }
        tuplemap_done(&types);
}

/*
 * Whether d fits the empty fleet, by node type: O(types) rather than O(nodes) per job
 * shape, so that a queue of many shapes (a user's sweep over memory sizes) does not make
 * every pass walk the fleet once per shape.
 */
static bool fits_total_by_type(Fleet *f, const Demand *d, int want, int64_t need) {
        Constraint *c = d->cons;
        if (!f->node_type)
                types_init(f);
        if (!c->type_count) {
                c->type_count = xcalloc((size_t) f->n_types + 1, sizeof(int));
                for (int i = 0; i < c->n_allowed; i++)
                        c->type_count[f->node_type[c->nodes[i]]]++;
        }
        int64_t sum = 0;
        for (int t = 0; t < f->n_types && sum < need; t++) {
                if (c->type_count[t] == 0)
                        continue;
                int fit = fit_of(&f->nodes[f->type_rep[t]], d, FIT_TOTAL);
                if (fit >= want)
                        sum += (int64_t) c->type_count[t] * (d->rpn > 0 ? 1 : fit);
        }
        return sum >= need;
}

/*
 * Whether d asks for more than the free amounts (plus extra per kind, may be NULL), or a
 * rank for more memory than any usable node had free when the pass began (free memory
 * only shrinks during a pass; memory is not bucketed, so a sweep over memory sizes would
 * otherwise make each size walk the nodes).
 */
static bool over_free(const Fleet *f, const Demand *d, const int64_t *extra) {
        if ((int64_t) d->ranks * d->cpus > f->total_free[0] + (extra ? extra[0] : 0))
                return true;
        if (d->mem > f->mem_free_max)
                return true;
        return d->kind > 0 &&
               (int64_t) d->ranks * d->apr > f->total_free[d->kind] + (extra ? extra[d->kind] : 0);
}

bool fleet_fits(Fleet *f, const Demand *d, FitView view) {
        if (d->ranks <= 0 || d->kind >= f->n_kinds)
                return false;
        const int *group = d->cons->group;
        int want = d->rpn > 0 ? min_int(d->rpn, d->ranks) : 1;
        int64_t need = d->rpn > 0 ? (d->ranks + d->rpn - 1) / d->rpn : d->ranks;
        if (view == FIT_TOTAL && !group)
                return fits_total_by_type(f, d, want, need);
        /* Without reservations at most the free amounts and what reserved nodes had: in a
         * full fleet most shapes are turned away here, not by a walk over the nodes. */
        if (view == FIT_NORES && over_free(f, d, f->reserved_free))
                return false;
        int64_t sum = 0;
        int n_touched = 0;
        if (group)
                groups_reserve(f, d->cons->n_groups);
        for (int i = 0; i < d->cons->n_allowed; i++) {
                int n = d->cons->nodes[i];
                int fit = fit_of(&f->nodes[n], d, view);
                if (fit < want)
                        continue;
                int64_t v = d->rpn > 0 ? 1 : fit;
                int64_t s = group ? group_add(f, &n_touched, group[i], n, v) : (sum += v);
                if (s >= need) {
                        groups_reset(f, n_touched);
                        return true;
                }
        }
        groups_reset(f, n_touched);
        return false;
}

bool fleet_too_small(const Fleet *f, const Demand *d) {
        return d->kind >= f->n_kinds || over_free(f, d, NULL);
}

/*
 * Picks `want` free devices of `kind` on fn for one rank, by locality. Writes their
 * indices to out and marks them used. Returns false (nothing changed) when too few.
 */
static bool pick_devices(FleetNode *fn, int kind, int want, int *out) {
        const SchedNode *n = fn->node;
        if (want == 0)
                return true;
        /* Try groups by switch, then by NUMA node, then the whole node. */
        for (int level = 0; level < 3; level++) {
                int best_group = -2, best_count = 0;
                for (int d = 0; d < n->n_devices; d++) {
                        if (!fn->dev_free[d] || fn->dev_kind[d] != kind)
                                continue;
                        int g = level == 0   ? n->devices[d].pcie_switch
                                : level == 1 ? n->devices[d].numa_node
                                             : 0;
                        if (g < 0)
                                continue;
                        int count = 0;
                        for (int e = 0; e < n->n_devices; e++) {
                                if (!fn->dev_free[e] || fn->dev_kind[e] != kind)
                                        continue;
                                int ge = level == 0   ? n->devices[e].pcie_switch
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
                        if (!fn->dev_free[d] || fn->dev_kind[d] != kind)
                                continue;
                        int g = level == 0   ? n->devices[d].pcie_switch
                                : level == 1 ? n->devices[d].numa_node
                                             : 0;
                        if (g != best_group)
                                continue;
                        fn->dev_free[d] = false;
                        out[got++] = d;
                }
                return true;
        }
        return false;
}

void fleet_commit(Fleet *f, const Demand *d, int *rank_node, int *rank_devices) {
        int apr = d->kind > 0 ? d->apr : 0, r = 0;
        for (int p = 0; p < f->n_plan; p++) {
                int n = f->plan_node[p];
                FleetNode *fn = &f->nodes[n];
                int l = apr > 0 ? local_kind(fn, d->kind) : -1;
                for (int t = 0; t < f->plan_count[p]; t++, r++) {
                        rank_node[r] = n;
                        if (l >= 0) {
                                int *out = rank_devices + (size_t) r * (size_t) apr;
                                /* Counts fit, so the whole-node level always succeeds;
                                 * mark any shortfall rather than read garbage. */
                                if (!pick_devices(fn, d->kind, apr, out))
                                        for (int i = 0; i < apr; i++)
                                                out[i] = -1;
                                fn->kind_free[l] -= apr;
                        }
                        fn->cpu_free -= d->cpus;
                        if (fn->mem_tracked)
                                fn->mem_free -= d->mem;
                }
                node_rebucket(f, n);
        }
}

void fleet_reserve(Fleet *f, const Demand *d) {
        for (int p = 0; p < f->n_plan; p++) {
                int n = f->plan_node[p], c = f->plan_count[p];
                FleetNode *fn = &f->nodes[n];
                fn->cpu_free -= c * d->cpus;
                fn->cpu_res += c * d->cpus;
                if (fn->mem_tracked) {
                        fn->mem_free -= c * d->mem;
                        fn->mem_res += c * d->mem;
                }
                int l = d->kind > 0 && d->apr > 0 ? local_kind(fn, d->kind) : -1;
                if (l >= 0) {
                        fn->kind_free[l] -= c * d->apr;
                        fn->kind_res[l] += c * d->apr;
                }
                /* The whole node is held: out of every bucket until the pass ends. */
                if (fn->usable && !fn->reserved)
                        for (int i = 0; i < node_slots(fn); i++) {
                                int sl = fn->slot + i;
                                f->total_free[f->slot_kind[sl]] -= f->slot_bucket[sl];
                                f->reserved_free[f->slot_kind[sl]] += f->slot_bucket[sl];
                                slot_unlink(f, sl);
                        }
                fn->reserved = true;
        }
}

bool fleet_node_fits(const Fleet *f, int n, const Demand *d) {
        const FleetNode *fn = &f->nodes[n];
        return fn->usable && !fn->reserved && constraint_allows(d->cons, n) &&
               fit_of(fn, d, FIT_FREE) >= d->ranks;
}

void fleet_release(Fleet *f, const SchedRunning *r, int kind, int sign) {
        int apr = kind > 0 ? r->accelerators_per_rank : 0;
        for (int i = 0; i < r->n_ranks; i++) {
                int n = r->rank_node ? r->rank_node[i] : -1;
                if (n < 0 || n >= f->n_nodes)
                        continue;
                FleetNode *fn = &f->nodes[n];
                fn->cpu_free += sign * r->cpus;
                if (fn->mem_tracked)
                        fn->mem_free += sign * r->memory_mb;
                int l = apr > 0 ? local_kind(fn, kind) : -1;
                if (l >= 0) {
                        fn->kind_free[l] += sign * apr;
                        for (int j = 0; r->rank_devices && j < apr; j++) {
                                int dv = r->rank_devices[(size_t) i * (size_t) apr + (size_t) j];
                                if (dv >= 0 && dv < fn->node->n_devices)
                                        fn->dev_free[dv] = sign > 0;
                        }
                }
                node_rebucket(f, n);
        }
}

int64_t fleet_held_on(const Fleet *f, const SchedRunning *r, int kind, const Constraint *c) {
        int64_t held = 0;
        for (int i = 0; i < r->n_ranks; i++) {
                int n = r->rank_node ? r->rank_node[i] : -1;
                if (n < 0 || n >= f->n_nodes || !constraint_allows(c, n))
                        continue;
                held += kind == 0 ? r->cpus : r->accelerators_per_rank;
        }
        return held;
}
