/* SPDX-License-Identifier: MIT */
/*
 * The scheduling pass (docs/SCHEDULING.md). Projects take turns by their usage-to-quota
 * ratio, re-evaluated after every job; within a project, aged jobs first, then priority,
 * then the user with the least usage, then age. A job within its project's quota runs at
 * tier 0 and may preempt other projects' borrowers (tier 1) to get its share; a job over
 * quota only borrows what is left once every project had its turn (a second round).
 * A job that does not fit does not block the ones behind it (backfill), except that a
 * job waiting longer than the aging threshold holds back the nodes it needs.
 *
 * Repeated work is avoided: jobs with the same shape (demand and constraints) that failed
 * once fail again in the same pass, since capacity only shrinks during a pass, and the
 * fleet is kept bucketed by free capacity (fleet.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "scheduler.h"
#include "strmap.h"
#include "util.h"

#define QUOTA_EPSILON 1e-6
#define RATIO_INFINITE 1e300

static const char *const wait_names[_SCHED_WAIT_MAX] = {
        [SCHED_WAIT_NONE] = "",
        [SCHED_WAIT_CAPACITY] = "waiting for capacity",
        [SCHED_WAIT_CONSTRAINT] = "no nodes satisfy the job's constraints",
        [SCHED_WAIT_QUOTA] = "over its project's quota, waiting for spare capacity",
        [SCHED_WAIT_RESERVED] = "capacity is held for a job that has waited longer",
        [SCHED_WAIT_PREEMPTING] = "waiting for preempted jobs to release capacity",
};

const char *sched_wait_to_string(SchedWait w) {
        return w >= 0 && w < _SCHED_WAIT_MAX ? wait_names[w] : "";
}

static int name_intern(StrMap *map, int *n, const char *name) {
        void *v = strmap_get(map, name);
        if (v)
                return (int) ((intptr_t) v - 1);
        strmap_put(map, name, (void *) (intptr_t) (*n + 1));
        return (*n)++;
}

typedef struct PJob {
        const SchedJob *job;
        int project, pair, shape, cons;
        int family; /* its shape but for memory */
        bool starving;
        int64_t submitted;
        int64_t dem_cpu, dem_acc; /* whole-job demand of cpus and of its accelerator kind */
        Demand demand;
} PJob;

/* What the pass learned about one job shape; all of it stays true for the pass. */
typedef struct Shape {
        bool failed; /* does not fit the free capacity */
        bool nores_failed; /* would not fit even without this pass's reservations */
        bool reserve_failed; /* no unreserved nodes left to reserve for it */
        signed char feasible; /* fits the empty fleet; -1: not known yet */
        int preempt_failed_project; /* no borrowers to preempt for this project; -1 */
} Shape;

/* Queues of one round: jobs by project, level (aged, priority) and user. */
typedef struct Run {
        int pair, cur, end; /* positions in the queue's order */
} Run;

typedef struct Queue {
        int *order; /* PJob indices */
        int n;
        Run *runs;
        int n_runs;
        int *level_end; /* per run: end of its level's runs */
        int *proj_run, *proj_run_end; /* per project: its runs; -1: none */
        int *uheap, *uheap_n; /* per project: heap of runs of its current level */
        int *pheap;
        int pheap_n;
} Queue;

/*
 * Ids of names by address. The controller hands a pass one copy of each project, user
 * and kind name, so a name seen at that address before needs no hashing; another copy
 * of a name misses here and is found in the map.
 */
#define ADDR_MEMO_SIZE 16 /* the slot is an address's top 4 bits of hash */

typedef struct AddrMemo {
        const char *key[ADDR_MEMO_SIZE];
        int id[ADDR_MEMO_SIZE];
} AddrMemo;

static size_t addr_memo_slot(const char *name) {
        /* Fibonacci hashing: heap addresses differ in their middle bits. */
        return (size_t) (((uint64_t) (uintptr_t) name * 0x9E3779B97F4A7C15ull) >> 60);
}

static int addr_memo_find(const AddrMemo *m, const char *name) {
        size_t i = addr_memo_slot(name);
        return name && m->key[i] == name ? m->id[i] : -1;
}

static int addr_memo_keep(AddrMemo *m, const char *name, int id) {
        size_t i = addr_memo_slot(name);
        m->key[i] = name;
        m->id[i] = id;
        return id;
}

typedef struct Pass {
        const SchedSnapshot *s;
        SchedResult *res;
        Fleet fleet;
        StrMap *kind_map;
        char **kinds;
        int n_kinds;
        StrMap *project_map;
        const char **project_names;
        int n_projects;
        bool *configured;
        double *quota, *ratio; /* quota: n_projects * n_kinds */
        int64_t *usage, *used; /* n_projects * n_kinds: now, and at the start */
        int n_pairs;
        int64_t *pair_usage; /* n_pairs * n_kinds */
        double *pair_dom;
        PJob *jobs;
        Shape *shapes;
        /* Per family (shapes but for memory): the least memory per rank that did not fit
         * the free capacity in this pass; more cannot fit either, as capacity only shrinks
         * (a sweep over memory sizes then plans once per new least size, not per size). */
        int64_t *family_failed_mem;
        Constraint *cons;
        int n_cons;
        int *run_kind, *run_project, *run_pair;
        int *victims, n_victims; /* borrowers, in preemption order */
        int *stopping, n_stopping;
        bool *taken;
        int *chosen;
        bool *blocked; /* per project: round 1 defers its remaining jobs */
        bool reserved_any;
        int reservations_left;
        int *deferred, n_deferred;
        AddrMemo project_at, user_at, kind_at;
        StrMap *user_map;
        int n_users;
        TupleMap pairs; /* (project, user) -> pair id */
} Pass;

static int64_t *usage_row(int64_t *base, int i, int n_kinds) {
        return base + (size_t) i * (size_t) n_kinds;
}

static void project_ratio_update(Pass *P, int p) {
        double r = 0;
        for (int k = 0; k < P->n_kinds; k++) {
                double u = (double) usage_row(P->usage, p, P->n_kinds)[k];
                double q = P->quota[(size_t) p * (size_t) P->n_kinds + (size_t) k];
                if (u <= 0)
                        continue;
                double x = q > QUOTA_EPSILON ? u / q : RATIO_INFINITE;
                if (x > r)
                        r = x;
        }
        P->ratio[p] = r;
}

static void pair_dom_update(Pass *P, int pair) {
        double r = 0;
        for (int k = 0; k < P->n_kinds; k++) {
                double cap = k < P->fleet.n_kinds ? (double) P->fleet.capacity[k] : 0;
                double u = (double) usage_row(P->pair_usage, pair, P->n_kinds)[k];
                if (cap > 0 && u / cap > r)
                        r = u / cap;
        }
        P->pair_dom[pair] = r;
}

static void usage_add(Pass *P, int project, int pair, int kind, int64_t cpu, int64_t acc) {
        int64_t *pu = usage_row(P->usage, project, P->n_kinds);
        pu[0] += cpu;
        if (kind > 0)
                pu[kind] += acc;
        project_ratio_update(P, project);
        if (pair < 0)
                return;
        int64_t *uu = usage_row(P->pair_usage, pair, P->n_kinds);
        uu[0] += cpu;
        if (kind > 0)
                uu[kind] += acc;
        pair_dom_update(P, pair);
}

/* Whether the project stays within its quota with cpu and acc more of kind. */
static bool within_quota(const int64_t *usage, const double *quota, int kind, int64_t cpu,
                         int64_t acc) {
        if (cpu > 0 && (double) (usage[0] + cpu) > quota[0] + QUOTA_EPSILON)
                return false;
        return kind == 0 || acc <= 0 || (double) (usage[kind] + acc) <= quota[kind] + QUOTA_EPSILON;
}

static bool job_within_quota(const Pass *P, const PJob *pj) {
        return within_quota(usage_row(P->usage, pj->project, P->n_kinds),
                            P->quota + (size_t) pj->project * (size_t) P->n_kinds, pj->demand.kind,
                            pj->dem_cpu, pj->dem_acc);
}

/* ---- Queues ---- */

typedef struct SortItem {
        int project, starving, priority, pair;
        int64_t submitted, id;
        int idx;
} SortItem;

static int sort_item_cmp(const void *a, const void *b) {
        const SortItem *x = a, *y = b;
        if (x->project != y->project)
                return x->project < y->project ? -1 : 1;
        if (x->starving != y->starving)
                return x->starving > y->starving ? -1 : 1;
        if (x->priority != y->priority)
                return x->priority > y->priority ? -1 : 1;
        if (x->pair != y->pair)
                return x->pair < y->pair ? -1 : 1;
        if (x->submitted != y->submitted)
                return x->submitted < y->submitted ? -1 : 1;
        return x->id < y->id ? -1 : x->id > y->id;
}

static const PJob *run_head(const Pass *P, const Queue *q, int r) {
        return &P->jobs[q->order[q->runs[r].cur]];
}

/* Users of one level: the least usage first, then the oldest waiting job. */
static bool run_less(const Pass *P, const Queue *q, int a, int b) {
        double da = P->pair_dom[q->runs[a].pair], db = P->pair_dom[q->runs[b].pair];
        if (da != db)
                return da < db;
        const PJob *x = run_head(P, q, a), *y = run_head(P, q, b);
        if (x->submitted != y->submitted)
                return x->submitted < y->submitted;
        return x->job->id < y->job->id;
}

/* Projects: the lowest usage-to-quota ratio first, then their next jobs. */
static bool proj_less(const Pass *P, const Queue *q, int a, int b) {
        if (P->ratio[a] != P->ratio[b])
                return P->ratio[a] < P->ratio[b];
        const PJob *x = run_head(P, q, q->uheap[q->proj_run[a]]);
        const PJob *y = run_head(P, q, q->uheap[q->proj_run[b]]);
        if (x->starving != y->starving)
                return x->starving;
        if (x->job->priority != y->job->priority)
                return x->job->priority > y->job->priority;
        if (x->submitted != y->submitted)
                return x->submitted < y->submitted;
        return a < b;
}

typedef bool (*HeapLess)(const Pass *P, const Queue *q, int a, int b);

static void heap_push(const Pass *P, const Queue *q, int *h, int *n, int v, HeapLess less) {
        int i = (*n)++;
        while (i > 0) {
                int parent = (i - 1) / 2;
                if (!less(P, q, v, h[parent]))
                        break;
                h[i] = h[parent];
                i = parent;
        }
        h[i] = v;
}

static int heap_pop(const Pass *P, const Queue *q, int *h, int *n, HeapLess less) {
        int top = h[0], v = h[--(*n)], i = 0;
        for (;;) {
                int c = 2 * i + 1;
                if (c >= *n)
                        break;
                if (c + 1 < *n && less(P, q, h[c + 1], h[c]))
                        c++;
                if (!less(P, q, h[c], v))
                        break;
                h[i] = h[c];
                i = c;
        }
        if (*n > 0)
                h[i] = v;
        return top;
}

/* Fills project p's user heap with the runs of the level starting at run r. */
static void queue_level_load(const Pass *P, Queue *q, int p, int r) {
        int *h = q->uheap + q->proj_run[p];
        q->uheap_n[p] = 0;
        for (int i = r; i < q->level_end[r]; i++)
                heap_push(P, q, h, &q->uheap_n[p], i, run_less);
}

static void queue_build(Pass *P, Queue *q, const int *jobs, int n) {
        *q = (Queue){.n = n};
        SortItem *items = xcalloc((size_t) n + 1, sizeof(SortItem));
        for (int i = 0; i < n; i++) {
                const PJob *pj = &P->jobs[jobs[i]];
                items[i] = (SortItem){.project = pj->project,
                                      .starving = pj->starving,
                                      .priority = pj->job->priority,
                                      .pair = pj->pair,
                                      .submitted = pj->submitted,
                                      .id = pj->job->id,
                                      .idx = jobs[i]};
        }
        qsort(items, (size_t) n, sizeof(SortItem), sort_item_cmp);
        q->order = xcalloc((size_t) n + 1, sizeof(int));
        q->runs = xcalloc((size_t) n + 1, sizeof(Run));
        q->level_end = xcalloc((size_t) n + 1, sizeof(int));
        q->proj_run = xmalloc(((size_t) P->n_projects + 1) * sizeof(int));
        q->proj_run_end = xmalloc(((size_t) P->n_projects + 1) * sizeof(int));
        memset(q->proj_run, 0xff, ((size_t) P->n_projects + 1) * sizeof(int));
        q->uheap = xcalloc((size_t) n + 1, sizeof(int));
        q->uheap_n = xcalloc((size_t) P->n_projects + 1, sizeof(int));
        q->pheap = xcalloc((size_t) P->n_projects + 1, sizeof(int));
        int level_start = 0;
        for (int i = 0; i < n; i++) {
                const SortItem *it = &items[i], *prev = i > 0 ? &items[i - 1] : NULL;
                q->order[i] = it->idx;
                bool new_project = !prev || prev->project != it->project;
                bool new_level = new_project || prev->starving != it->starving ||
                                 prev->priority != it->priority;
                if (new_level || prev->pair != it->pair) {
                        if (new_level) {
                                for (int r = level_start; r < q->n_runs; r++)
                                        q->level_end[r] = q->n_runs;
                                level_start = q->n_runs;
                        }
                        if (new_project) {
                                if (prev)
                                        q->proj_run_end[prev->project] = q->n_runs;
                                q->proj_run[it->project] = q->n_runs;
                        }
                        q->runs[q->n_runs++] = (Run){.pair = it->pair, .cur = i, .end = i};
                }
                q->runs[q->n_runs - 1].end = i + 1;
        }
        for (int r = level_start; r < q->n_runs; r++)
                q->level_end[r] = q->n_runs;
        if (n > 0)
                q->proj_run_end[items[n - 1].project] = q->n_runs;
        free(items);
        for (int p = 0; p < P->n_projects; p++)
                if (q->proj_run[p] >= 0) {
                        queue_level_load(P, q, p, q->proj_run[p]);
                        heap_push(P, q, q->pheap, &q->pheap_n, p, proj_less);
                }
}

static void queue_done(Queue *q) {
        free(q->order);
        free(q->runs);
        free(q->level_end);
        free(q->proj_run);
        free(q->proj_run_end);
        free(q->uheap);
        free(q->uheap_n);
        free(q->pheap);
}

/* ---- One job's turn ---- */

static int primary_kind(const Demand *d) {
        return d->kind > 0 && d->apr > 0 ? d->kind : 0;
}

static void place(Pass *P, PJob *pj, int tier) {
        SchedResult *res = P->res;
        const Demand *d = &pj->demand;
        int apr = d->kind > 0 ? d->apr : 0;
        SchedPlacement *pl = &res->placements[res->n_placements++];
        *pl = (SchedPlacement){.job = pj->job->id,
                               .n_ranks = d->ranks,
                               .rank_node = xcalloc((size_t) d->ranks + 1, sizeof(int)),
                               .rank_devices =
                                       xcalloc((size_t) d->ranks * (size_t) apr + 1, sizeof(int)),
                               .accelerators_per_rank = apr,
                               .tier = tier};
        fleet_commit(&P->fleet, d, pl->rank_node, pl->rank_devices);
        usage_add(P, pj->project, pj->pair, d->kind, pj->dem_cpu, pj->dem_acc);
}

/* Gives back (sign 1) or takes again (sign -1) the running entries listed. */
static void release_list(Pass *P, const int *list, int n, int sign) {
        for (int i = 0; i < n; i++)
                if (list[i] >= 0)
                        fleet_release(&P->fleet, &P->s->running[list[i]], P->run_kind[list[i]],
                                      sign);
}

/* What running entry r holds of d's primary resource on nodes d allows. */
static int64_t held_for(const Pass *P, int r, const Demand *d) {
        int pk = primary_kind(d);
        if (pk > 0 && P->run_kind[r] != pk)
                return 0;
        return fleet_held_on(&P->fleet, &P->s->running[r], pk, d->cons);
}

/*
 * Whether giving back running entry r may have made d fit, so that planning is worth it:
 * a job that must sit on one node can only fit on one of r's nodes; others are judged
 * by the free total.
 */
static bool worth_planning(const Pass *P, int r, const Demand *d, bool single, int64_t avail,
                           int64_t need) {
        if (avail < need)
                return false;
        if (!single)
                return true;
        const SchedRunning *run = &P->s->running[r];
        for (int k = 0; run->rank_node && k < run->n_ranks; k++) {
                int n = run->rank_node[k];
                if (n >= 0 && n < P->fleet.n_nodes && fleet_node_fits(&P->fleet, n, d))
                        return true;
        }
        return false;
}

/* Whether running entry r has a rank on one of the last plan's nodes. */
static bool on_plan(const Pass *P, int r) {
        const SchedRunning *run = &P->s->running[r];
        for (int k = 0; run->rank_node && k < run->n_ranks; k++)
                for (int p = 0; p < P->fleet.n_plan; p++)
                        if (run->rank_node[k] == P->fleet.plan_node[p])
                                return true;
        return false;
}

/*
 * Frees capacity for a job within its quota: what stopping jobs hold first, then
 * borrowers of other projects in preemption order until the job fits; then drops every
 * borrower the job can do without (those off the planned nodes, then the newest choices
 * first), so the set is minimal. On success the planned nodes are held for the job (a
 * reservation) and the victims are listed.
 */
static bool try_preempt(Pass *P, PJob *pj) {
        Shape *sh = &P->shapes[pj->shape];
        Fleet *f = &P->fleet;
        const Demand *d = &pj->demand;
        if (sh->preempt_failed_project == pj->project || (P->n_victims == 0 && P->n_stopping == 0))
                return false;
        int pk = primary_kind(d);
        if (pk >= f->n_kinds)
                return false;
        bool single = d->ranks == 1 || (d->rpn > 0 && d->rpn >= d->ranks);
        int64_t need = (int64_t) d->ranks * (pk > 0 ? d->apr : d->cpus);
        int64_t avail = f->total_free[pk];
        int n_stop = 0, n = 0;
        int *stop = P->chosen + P->s->n_running; /* second half of the scratch */
        bool worth = false, fits = false;
        for (int i = 0; i < P->n_stopping; i++) {
                int r = P->stopping[i];
                int64_t h = held_for(P, r, d);
                if (h <= 0)
                        continue;
                fleet_release(f, &P->s->running[r], P->run_kind[r], 1);
                stop[n_stop++] = r;
                avail += h;
                worth = worth || worth_planning(P, r, d, single, avail, need);
        }
        if (worth)
                fits = fleet_plan(f, d, PLAN_BEST);
        for (int i = 0; i < P->n_victims && !fits; i++) {
                int r = P->victims[i];
                if (P->taken[r] || P->run_project[r] == pj->project)
                        continue;
                int64_t h = held_for(P, r, d);
                if (h <= 0)
                        continue;
                fleet_release(f, &P->s->running[r], P->run_kind[r], 1);
                P->chosen[n++] = r;
                avail += h;
                if (worth_planning(P, r, d, single, avail, need))
                        fits = fleet_plan(f, d, PLAN_BEST);
        }
        if (!fits) {
                release_list(P, P->chosen, n, -1);
                release_list(P, stop, n_stop, -1);
                sh->preempt_failed_project = pj->project;
                return false;
        }
        /* Victims off the planned nodes are not needed for this plan. */
        for (int i = 0; i < n; i++)
                if (!on_plan(P, P->chosen[i])) {
                        fleet_release(f, &P->s->running[P->chosen[i]], P->run_kind[P->chosen[i]],
                                      -1);
                        P->chosen[i] = -1;
                }
        for (int i = n - 1; i >= 0; i--) {
                int r = P->chosen[i];
                if (r < 0)
                        continue;
                fleet_release(f, &P->s->running[r], P->run_kind[r], -1);
                if (fleet_plan(f, d, PLAN_BEST))
                        P->chosen[i] = -1; /* not needed */
                else
                        fleet_release(f, &P->s->running[r], P->run_kind[r], 1);
        }
        bool ok = fleet_plan(f, d, PLAN_BEST);
        release_list(P, P->chosen, n, -1);
        release_list(P, stop, n_stop, -1);
        if (!ok) /* cannot happen: the state is one that fitted */
                return false;
        fleet_reserve(f, d);
        P->reserved_any = true;
        SchedResult *res = P->res;
        for (int i = 0; i < n; i++) {
                int r = P->chosen[i];
                if (r < 0)
                        continue;
                P->taken[r] = true;
                res->preempt[res->n_preempt++] = P->s->running[r].id;
        }
        return true;
}

static void job_turn(Pass *P, int j, int round) {
        PJob *pj = &P->jobs[j];
        SchedWait *wait = &P->res->wait[j];
        Shape *sh = &P->shapes[pj->shape];
        bool tier0 = job_within_quota(P, pj);
        if (round == 1 && (!tier0 || P->blocked[pj->project])) {
                /* Borrows in the second round. An aged job takes the rest of its project's
                 * queue with it, so that the project's later jobs cannot overtake it. */
                if (pj->starving)
                        P->blocked[pj->project] = true;
                P->deferred[P->n_deferred++] = j;
                return;
        }
        if (sh->feasible == 0) {
                *wait = SCHED_WAIT_CONSTRAINT;
                return;
        }
        int64_t *least_failed = &P->family_failed_mem[pj->family];
        if (pj->demand.mem >= *least_failed)
                sh->failed = true;
        if (!sh->failed) {
                if (!fleet_too_small(&P->fleet, &pj->demand) &&
                    fleet_plan(&P->fleet, &pj->demand, PLAN_BEST)) {
                        place(P, pj, tier0 ? 0 : 1);
                        *wait = SCHED_WAIT_NONE;
                        return;
                }
                sh->failed = true;
                *least_failed = pj->demand.mem;
        }
        if (sh->feasible < 0)
                sh->feasible = fleet_fits(&P->fleet, &pj->demand, FIT_TOTAL);
        if (!sh->feasible) {
                *wait = SCHED_WAIT_CONSTRAINT;
                return;
        }
        if (tier0 && round == 1 && try_preempt(P, pj)) {
                usage_add(P, pj->project, pj->pair, pj->demand.kind, pj->dem_cpu, pj->dem_acc);
                *wait = SCHED_WAIT_PREEMPTING;
                return;
        }
        if (pj->starving && !sh->reserve_failed && P->reservations_left > 0) {
                if (fleet_plan(&P->fleet, &pj->demand, PLAN_RESERVE)) {
                        fleet_reserve(&P->fleet, &pj->demand);
                        P->reserved_any = true;
                        P->reservations_left--;
                        *wait = tier0 ? SCHED_WAIT_CAPACITY : SCHED_WAIT_QUOTA;
                        return;
                }
                sh->reserve_failed = true;
        }
        if (P->reserved_any && !sh->nores_failed) {
                if (fleet_fits(&P->fleet, &pj->demand, FIT_NORES)) {
                        *wait = SCHED_WAIT_RESERVED;
                        return;
                }
                sh->nores_failed = true;
        }
        *wait = tier0 ? SCHED_WAIT_CAPACITY : SCHED_WAIT_QUOTA;
}

static void round_run(Pass *P, const int *jobs, int n, int round) {
        Queue q;
        queue_build(P, &q, jobs, n);
        while (q.pheap_n > 0) {
                int p = heap_pop(P, &q, q.pheap, &q.pheap_n, proj_less);
                int *uh = q.uheap + q.proj_run[p];
                int r = heap_pop(P, &q, uh, &q.uheap_n[p], run_less);
                int j = q.order[q.runs[r].cur++];
                int level_end = q.level_end[r];
                job_turn(P, j, round);
                if (q.runs[r].cur < q.runs[r].end)
                        heap_push(P, &q, uh, &q.uheap_n[p], r, run_less);
                if (q.uheap_n[p] == 0) {
                        if (level_end >= q.proj_run_end[p])
                                continue; /* the project has no more jobs */
                        queue_level_load(P, &q, p, level_end);
                }
                heap_push(P, &q, q.pheap, &q.pheap_n, p, proj_less);
        }
        queue_done(&q);
}

/* ---- Setting up a pass ---- */

typedef struct RunSort {
        int project, tier, priority;
        int64_t started, id;
        int idx;
} RunSort;

/* Tier promotion order: per project, tier 0 first, then priority, then the oldest. */
static int run_tier_cmp(const void *a, const void *b) {
        const RunSort *x = a, *y = b;
        if (x->project != y->project)
                return x->project < y->project ? -1 : 1;
        if (x->tier != y->tier)
                return x->tier < y->tier ? -1 : 1;
        if (x->priority != y->priority)
                return x->priority > y->priority ? -1 : 1;
        if (x->started != y->started)
                return x->started < y->started ? -1 : 1;
        return x->id < y->id ? -1 : x->id > y->id;
}

/* Preemption order: the lowest priority first, then the newest. */
static int run_victim_cmp(const void *a, const void *b) {
        const RunSort *x = a, *y = b;
        if (x->priority != y->priority)
                return x->priority < y->priority ? -1 : 1;
        if (x->started != y->started)
                return x->started > y->started ? -1 : 1;
        return x->id > y->id ? -1 : x->id < y->id;
}

static const char *project_of(const char *p) {
        return p && *p ? p : "default";
}

static int project_intern(Pass *P, const char *name) {
        int n = P->n_projects;
        int id = name_intern(P->project_map, &P->n_projects, name);
        if (P->n_projects > n) {
                P->project_names =
                        xrealloc(P->project_names, (size_t) P->n_projects * sizeof(char *));
                P->project_names[id] = name;
        }
        return id;
}

/* The ids of one job's project, its (project, user) pair and its accelerator kind
 * (accelerator NULL: none, kind 0), running or waiting. */
static void pass_job_names(Pass *P, const char *project, const char *user, const char *accelerator,
                           int *ret_project, int *ret_pair, int *ret_kind) {
        int p = addr_memo_find(&P->project_at, project);
        if (p < 0)
                p = addr_memo_keep(&P->project_at, project, project_intern(P, project_of(project)));
        int u = addr_memo_find(&P->user_at, user);
        if (u < 0)
                u = addr_memo_keep(&P->user_at, user,
                                   name_intern(P->user_map, &P->n_users, user ? user : ""));
        int k = 0;
        if (accelerator && (k = addr_memo_find(&P->kind_at, accelerator)) < 0)
                k = addr_memo_keep(
                        &P->kind_at, accelerator,
                        fleet_kind_intern(P->kind_map, &P->kinds, &P->n_kinds, accelerator));
        *ret_project = p;
        *ret_pair = tuplemap_intern(&P->pairs, (int64_t[]){p, u});
        *ret_kind = k;
}

/* Appends s with its length first: keys and values may hold any character ('=' too), and
 * two different selectors must never name one constraint. */
static char *key_part(char *w, const char *s) {
        return w + sprintf(w, "%zu:%s", strlen(s), s);
}

/* Interns a job's constraints; 0 is "none" (any schedulable node). */
static int cons_intern(Pass *P, StrMap *map, const SchedJob *job) {
        if (!job->same_label && job->n_node_selector == 0)
                return 0;
        size_t len = 24 + (job->same_label ? strlen(job->same_label) : 0);
        for (int i = 0; i < job->n_node_selector; i++)
                len += strlen(job->node_selector[i].key) + strlen(job->node_selector[i].value) + 44;
        _cleanup_free_ char *key = xmalloc(len + 1);
        char *w = key;
        if (job->same_label)
                w = key_part(w, job->same_label);
        else
                *w++ = '-';
        for (int i = 0; i < job->n_node_selector; i++) {
                w = key_part(w, job->node_selector[i].key);
                w = key_part(w, job->node_selector[i].value);
        }
        *w = '\0';
        int n = P->n_cons;
        int id = name_intern(map, &P->n_cons, key);
        if (P->n_cons > n) {
                P->cons = xrealloc(P->cons, (size_t) P->n_cons * sizeof(Constraint));
                fleet_constraint_init(&P->fleet, job, &P->cons[id]);
        }
        return id;
}

static int node_index(const Pass *P, StrMap **map, const char *name) {
        if (!name)
                return -1;
        if (!*map) {
                *map = strmap_new();
                for (int i = 0; i < P->s->n_nodes; i++)
                        strmap_put(*map, P->s->nodes[i].name, (void *) (intptr_t) (i + 1));
        }
        return (int) (intptr_t) strmap_get(*map, name) - 1;
}

static void pass_setup_jobs(Pass *P) {
        const SchedSnapshot *s = P->s;
        int64_t after = s->starvation_after_ms == 0 ? SCHED_STARVATION_AFTER_MS_DEFAULT
                                                    : s->starvation_after_ms;
        StrMap *cons_map = strmap_new(), *node_map = NULL;
        /* Constraint 0: any schedulable node. */
        SchedJob none = {0};
        P->n_cons = 1;
        P->cons = xcalloc(1, sizeof(Constraint));
        fleet_constraint_init(&P->fleet, &none, &P->cons[0]);
        P->jobs = xcalloc((size_t) s->n_jobs + 1, sizeof(PJob));
        for (int i = 0; i < s->n_jobs; i++) {
                const SchedJob *job = &s->jobs[i];
                PJob *pj = &P->jobs[i];
                pj->job = job;
                bool accel = job->accelerator && job->accelerators_per_rank > 0;
                int kind;
                pass_job_names(P, job->project, job->user, accel ? job->accelerator : NULL,
                               &pj->project, &pj->pair, &kind);
                pj->cons = cons_intern(P, cons_map, job);
                pj->submitted = job->submitted_ms ? job->submitted_ms : job->created_ms;
                pj->starving = after >= 0 && s->now_ms - pj->submitted > after;
                pj->demand = (Demand){.kind = kind,
                                      .apr = accel ? job->accelerators_per_rank : 0,
                                      .cpus = job->cpus > 0 ? job->cpus : 0,
                                      .mem = job->memory_mb > 0 ? job->memory_mb : 0,
                                      .ranks = job->ranks,
                                      .rpn = job->ranks_per_node > 0 ? job->ranks_per_node : 0,
                                      .avoid = node_index(P, &node_map, job->avoid_node)};
                pj->dem_cpu = (int64_t) pj->demand.ranks * pj->demand.cpus;
                pj->dem_acc = (int64_t) pj->demand.ranks * pj->demand.apr;
        }
        strmap_free(cons_map);
        strmap_free(node_map);
        /* Shapes, once the constraints array has stopped moving. */
        TupleMap shapes, families;
        tuplemap_init(&shapes, 8, (size_t) s->n_jobs / 4 + 16);
        tuplemap_init(&families, 7, 16);
        for (int i = 0; i < s->n_jobs; i++) {
                PJob *pj = &P->jobs[i];
                Demand *d = &pj->demand;
                d->cons = &P->cons[pj->cons];
                pj->shape =
                        tuplemap_intern(&shapes, (int64_t[]){pj->cons, d->kind, d->apr, d->cpus,
                                                             d->mem, d->ranks, d->rpn, d->avoid});
                pj->family =
                        tuplemap_intern(&families, (int64_t[]){pj->cons, d->kind, d->apr, d->cpus,
                                                               d->ranks, d->rpn, d->avoid});
        }
        P->shapes = xcalloc(shapes.n + 1, sizeof(Shape));
        for (size_t i = 0; i < shapes.n; i++)
                P->shapes[i] = (Shape){.feasible = -1, .preempt_failed_project = -1};
        P->family_failed_mem = xmalloc((families.n + 1) * sizeof(int64_t));
        for (size_t i = 0; i < families.n; i++)
                P->family_failed_mem[i] = INT64_MAX;
        tuplemap_done(&shapes);
        tuplemap_done(&families);
}

static void pass_setup_running(Pass *P) {
        const SchedSnapshot *s = P->s;
        size_t nr = (size_t) s->n_running + 1;
        P->run_kind = xcalloc(nr, sizeof(int));
        P->run_project = xcalloc(nr, sizeof(int));
        P->run_pair = xcalloc(nr, sizeof(int));
        for (int i = 0; i < s->n_running; i++) {
                const SchedRunning *r = &s->running[i];
                bool accel = r->accelerator && r->accelerators_per_rank > 0;
                pass_job_names(P, r->project, r->user, accel ? r->accelerator : NULL,
                               &P->run_project[i], &P->run_pair[i], &P->run_kind[i]);
        }
}

/* Usage of running jobs, their tiers now, and the borrowers that may be preempted. */
static void pass_setup_tiers(Pass *P) {
        const SchedSnapshot *s = P->s;
        int K = P->n_kinds;
        /* Only a project with a borrower running needs its jobs in promotion order: in
         * any other, every job stays at tier 0 whatever the order. */
        bool *borrows = xcalloc((size_t) P->n_projects + 1, sizeof(bool));
        for (int i = 0; i < s->n_running; i++) {
                const SchedRunning *r = &s->running[i];
                int64_t cpu = (int64_t) r->n_ranks * (r->cpus > 0 ? r->cpus : 0);
                int64_t acc =
                        P->run_kind[i] > 0 ? (int64_t) r->n_ranks * r->accelerators_per_rank : 0;
                P->res->running_tier[i] = r->tier;
                if (r->stopping)
                        continue;
                borrows[P->run_project[i]] |= r->tier > 0;
                usage_add(P, P->run_project[i], P->run_pair[i], P->run_kind[i], cpu, acc);
                int64_t *u = usage_row(P->used, P->run_project[i], K);
                u[0] += cpu;
                if (P->run_kind[i] > 0)
                        u[P->run_kind[i]] += acc;
        }
        /* Sorted: those jobs, and the stopping ones (try_preempt frees them in this order). */
        RunSort *rs = xcalloc((size_t) s->n_running + 1, sizeof(RunSort));
        int n_rs = 0;
        for (int i = 0; i < s->n_running; i++) {
                const SchedRunning *r = &s->running[i];
                if (!r->stopping && !borrows[P->run_project[i]]) {
                        P->res->running_tier[i] = 0;
                        continue;
                }
                rs[n_rs++] = (RunSort){.project = P->run_project[i],
                                       .tier = r->tier > 0 ? 1 : 0,
                                       .priority = r->priority,
                                       .started = r->started_ms,
                                       .id = r->id,
                                       .idx = i};
        }
        free(borrows);
        qsort(rs, (size_t) n_rs, sizeof(RunSort), run_tier_cmp);
        int64_t *t0 = xcalloc((size_t) K, sizeof(int64_t));
        P->victims = xcalloc((size_t) s->n_running + 1, sizeof(int));
        P->stopping = xcalloc((size_t) s->n_running + 1, sizeof(int));
        for (int i = 0; i < n_rs; i++) {
                if (i == 0 || rs[i].project != rs[i - 1].project)
                        memset(t0, 0, (size_t) K * sizeof(int64_t));
                int x = rs[i].idx;
                const SchedRunning *r = &s->running[x];
                if (r->stopping) {
                        P->stopping[P->n_stopping++] = x;
                        continue;
                }
                int kind = P->run_kind[x];
                int64_t cpu = (int64_t) r->n_ranks * (r->cpus > 0 ? r->cpus : 0);
                int64_t acc = kind > 0 ? (int64_t) r->n_ranks * r->accelerators_per_rank : 0;
                /* A borrower whose project is back within quota is promoted; tier 0 stays. */
                if (rs[i].tier > 0 &&
                    !within_quota(t0, P->quota + (size_t) rs[i].project * (size_t) K, kind, cpu,
                                  acc)) {
                        P->res->running_tier[x] = 1;
                        P->victims[P->n_victims++] = x;
                        continue;
                }
                P->res->running_tier[x] = 0;
                t0[0] += cpu;
                if (kind > 0)
                        t0[kind] += acc;
        }
        free(t0);
        for (int i = 0; i < P->n_victims; i++) {
                const SchedRunning *r = &s->running[P->victims[i]];
                rs[i] = (RunSort){.priority = r->priority,
                                  .started = r->started_ms,
                                  .id = r->id,
                                  .idx = P->victims[i]};
        }
        qsort(rs, (size_t) P->n_victims, sizeof(RunSort), run_victim_cmp);
        for (int i = 0; i < P->n_victims; i++)
                P->victims[i] = rs[i].idx;
        free(rs);
        P->taken = xcalloc((size_t) s->n_running + 1, sizeof(bool));
        P->chosen = xcalloc(2 * (size_t) s->n_running + 1, sizeof(int));
}

static void pass_result_quotas(Pass *P) {
        SchedResult *res = P->res;
        int K = P->n_kinds;
        res->n_kinds = K;
        res->kinds = xcalloc((size_t) K + 1, sizeof(char *));
        for (int k = 0; k < K; k++)
                res->kinds[k] = xstrdup(P->kinds[k]);
        res->n_projects = P->n_projects;
        res->projects = xcalloc((size_t) P->n_projects + 1, sizeof(SchedProjectQuota));
        for (int p = 0; p < P->n_projects; p++) {
                SchedProjectQuota *pq = &res->projects[p];
                pq->project = xstrdup(P->project_names[p]);
                pq->configured = P->configured[p];
                pq->quota = xcalloc((size_t) K + 1, sizeof(double));
                pq->used = xcalloc((size_t) K + 1, sizeof(int64_t));
                memcpy(pq->quota, P->quota + (size_t) p * (size_t) K, (size_t) K * sizeof(double));
                memcpy(pq->used, usage_row(P->used, p, K), (size_t) K * sizeof(int64_t));
        }
}

static void pass_done(Pass *P) {
        for (int c = 0; c < P->n_cons; c++)
                fleet_constraint_deinit(&P->cons[c]);
        free(P->cons);
        fleet_deinit(&P->fleet);
        strmap_free(P->kind_map);
        for (int k = 0; k < P->n_kinds; k++)
                free(P->kinds[k]);
        free(P->kinds);
        strmap_free(P->project_map);
        free(P->project_names);
        free(P->configured);
        free(P->blocked);
        free(P->quota);
        free(P->ratio);
        free(P->usage);
        free(P->used);
        free(P->pair_usage);
        free(P->pair_dom);
        free(P->jobs);
        free(P->shapes);
        free(P->family_failed_mem);
        free(P->run_kind);
        free(P->run_project);
        free(P->run_pair);
        free(P->victims);
        free(P->stopping);
        free(P->taken);
        free(P->chosen);
        free(P->deferred);
}

int sched_pass(const SchedSnapshot *s, SchedResult *ret) {
        if (!s || !ret || s->n_nodes < 0 || s->n_jobs < 0 || s->n_running < 0)
                return -EINVAL;
        SchedResult res = {
                .placements = xcalloc((size_t) s->n_jobs + 1, sizeof(SchedPlacement)),
                .wait = xcalloc((size_t) s->n_jobs + 1, sizeof(SchedWait)),
                .preempt = xcalloc((size_t) s->n_running + 1, sizeof(int64_t)),
                .running_tier = xcalloc((size_t) s->n_running + 1, sizeof(int)),
        };
        Pass P = {.s = s,
                  .res = &res,
                  .kind_map = strmap_new(),
                  .project_map = strmap_new(),
                  .reservations_left = s->max_reservations == 0 ? SCHED_MAX_RESERVATIONS_DEFAULT
                                                                : s->max_reservations};
        fleet_kind_intern(P.kind_map, &P.kinds, &P.n_kinds, SCHED_KIND_CPUS);

        /* What running jobs hold per node: the node's total when it gives none. The
         * controller's nodes give theirs (but one registered with 0 cpus), and then the
         * running ranks are not walked: at 10,000 nodes, 80,000 scattered loads and a
         * third of a pass's time (docs/PERFORMANCE.md). */
        bool totals_given = true;
        for (int i = 0; i < s->n_nodes && totals_given; i++)
                totals_given = fleet_cpus_total_given(&s->nodes[i]) &&
                               fleet_memory_total_given(&s->nodes[i]);
        int *held_cpu = NULL;
        int64_t *held_mem = NULL;
        if (!totals_given) {
                held_cpu = xcalloc((size_t) s->n_nodes + 1, sizeof(int));
                held_mem = xcalloc((size_t) s->n_nodes + 1, sizeof(int64_t));
                for (int i = 0; i < s->n_running; i++) {
                        const SchedRunning *r = &s->running[i];
                        for (int k = 0; r->rank_node && k < r->n_ranks; k++)
                                if (r->rank_node[k] >= 0 && r->rank_node[k] < s->n_nodes) {
                                        held_cpu[r->rank_node[k]] += r->cpus;
                                        held_mem[r->rank_node[k]] += r->memory_mb;
                                }
                }
        }
        fleet_init(&P.fleet, s->nodes, s->n_nodes, false, P.kind_map, &P.kinds, &P.n_kinds,
                   held_cpu, held_mem);
        free(held_cpu);
        free(held_mem);

        /* Configured projects take part in the split even when idle. */
        for (int i = 0; i < sched_quota_n_projects(s->quota); i++)
                project_intern(&P, sched_quota_project(s->quota, i));
        P.user_map = strmap_new();
        tuplemap_init(&P.pairs, 2, (size_t) s->n_jobs / 4 + (size_t) s->n_running / 4 + 16);
        pass_setup_jobs(&P);
        pass_setup_running(&P);
        P.user_map = strmap_free(P.user_map);
        P.n_pairs = (int) P.pairs.n;
        tuplemap_done(&P.pairs);
        P.pairs = (TupleMap){0};

        int K = P.n_kinds;
        size_t pk = (size_t) P.n_projects * (size_t) K + 1;
        P.configured = xcalloc((size_t) P.n_projects + 1, sizeof(bool));
        P.blocked = xcalloc((size_t) P.n_projects + 1, sizeof(bool));
        P.quota = xcalloc(pk, sizeof(double));
        P.ratio = xcalloc((size_t) P.n_projects + 1, sizeof(double));
        P.usage = xcalloc(pk, sizeof(int64_t));
        P.used = xcalloc(pk, sizeof(int64_t));
        P.pair_usage = xcalloc((size_t) P.n_pairs * (size_t) K + 1, sizeof(int64_t));
        P.pair_dom = xcalloc((size_t) P.n_pairs + 1, sizeof(double));
        int64_t *capacity = xcalloc((size_t) K + 1, sizeof(int64_t));
        for (int k = 0; k < K && k < P.fleet.n_kinds; k++)
                capacity[k] = P.fleet.capacity[k];
        sched_quota_normalise(s->quota, P.kinds, capacity, K, P.project_names, P.n_projects,
                              P.configured, P.quota);
        free(capacity);
        pass_setup_tiers(&P);

        /* Round 1: jobs within quota, by project turns; round 2: the borrowers. */
        int *all = xcalloc((size_t) s->n_jobs + 1, sizeof(int));
        for (int i = 0; i < s->n_jobs; i++)
                all[i] = i;
        P.deferred = xcalloc((size_t) s->n_jobs + 1, sizeof(int));
        round_run(&P, all, s->n_jobs, 1);
        free(all);
        int *deferred = TAKE_PTR(P.deferred);
        int n_deferred = P.n_deferred;
        P.deferred = xcalloc((size_t) n_deferred + 1, sizeof(int));
        round_run(&P, deferred, n_deferred, 2);
        free(deferred);

        pass_result_quotas(&P);
        pass_done(&P);
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
        free(r->preempt);
        free(r->running_tier);
        for (int k = 0; k < r->n_kinds; k++)
                free(r->kinds[k]);
        free(r->kinds);
        for (int p = 0; p < r->n_projects; p++) {
                free(r->projects[p].project);
                free(r->projects[p].quota);
                free(r->projects[p].used);
        }
        free(r->projects);
        *r = (SchedResult){0};
}

struct SchedFeasibility {
        StrMap *kinds;
        char **names;
        int n_names;
        Fleet fleet; /* empty: every device free */
        Constraint any; /* no selector, no same_label; counts its node types once */
};

SchedFeasibility *sched_feasibility_new(const SchedNode *nodes, int n_nodes) {
        SchedFeasibility *fz = xcalloc(1, sizeof(SchedFeasibility));
        fz->kinds = strmap_new();
        fleet_kind_intern(fz->kinds, &fz->names, &fz->n_names, SCHED_KIND_CPUS);
        fleet_init(&fz->fleet, nodes, n_nodes, true, fz->kinds, &fz->names, &fz->n_names, NULL,
                   NULL);
        fleet_constraint_init(&fz->fleet, &(SchedJob){0}, &fz->any);
        return fz;
}

SchedWait sched_feasibility_check(SchedFeasibility *fz, const SchedJob *job) {
        if (job->ranks <= 0)
                return SCHED_WAIT_CONSTRAINT;
        bool accel = job->accelerator && job->accelerators_per_rank > 0;
        int kind = 0;
        if (accel) {
                /* Looked up, not interned: unknown kind names must not grow the table. */
                intptr_t id = (intptr_t) strmap_get(fz->kinds, job->accelerator);
                if (id == 0)
                        return SCHED_WAIT_CONSTRAINT;
                kind = (int) id - 1;
        }
        bool plain = !job->same_label && job->n_node_selector == 0;
        Constraint c = {0};
        if (!plain)
                fleet_constraint_init(&fz->fleet, job, &c);
        Demand d = {.kind = kind,
                    .apr = accel ? job->accelerators_per_rank : 0,
                    .cpus = job->cpus > 0 ? job->cpus : 0,
                    .mem = job->memory_mb > 0 ? job->memory_mb : 0,
                    .ranks = job->ranks,
                    .rpn = job->ranks_per_node > 0 ? job->ranks_per_node : 0,
                    .cons = plain ? &fz->any : &c,
                    .avoid = -1};
        bool ok = fleet_fits(&fz->fleet, &d, FIT_TOTAL);
        fleet_constraint_deinit(&c);
        return ok ? SCHED_WAIT_NONE : SCHED_WAIT_CONSTRAINT;
}

SchedFeasibility *sched_feasibility_free(SchedFeasibility *fz) {
        if (!fz)
                return NULL;
        fleet_constraint_deinit(&fz->any);
        fleet_deinit(&fz->fleet);
        strmap_free(fz->kinds);
        for (int k = 0; k < fz->n_names; k++)
                free(fz->names[k]);
        free(fz->names);
        free(fz);
        return NULL;
}
