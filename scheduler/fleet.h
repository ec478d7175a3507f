/* SPDX-License-Identifier: MIT */
/*
 * The scheduler's working copy of the fleet during one pass (internal to scheduler/).
 * Each node's free capacity per resource kind (kind 0 is cpus, kinds 1.. accelerator
 * kinds) is kept in buckets indexed by the free amount, so that a placement looks at the
 * tightest nodes first and stops as soon as it has enough, instead of scanning and
 * copying the whole fleet for every job. Free amounts may go negative: capacity held
 * back for a reservation (or for a job waiting on preemptions) is subtracted from the
 * free amount without choosing devices, and is also recorded as "reserved" so that the
 * pass can tell whether a job was only held back by reservations.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "scheduler.h"
#include "strmap.h"
#include "tuplemap.h"

/* Which capacity a fit is measured against. */
typedef enum FitView {
        FIT_FREE, /* what is free now, reservations taken out */
        FIT_NORES, /* what would be free without this pass's reservations */
        FIT_TOTAL, /* the empty node */
} FitView;

/* How candidate nodes are chosen. */
typedef enum PlanMode {
        PLAN_BEST, /* against free capacity, tightest nodes first (best fit) */
        PLAN_RESERVE, /* against total capacity, nodes with the most free first */
} PlanMode;

/* Nodes a job's constraints allow: schedulable, selector matched, same_label present. */
typedef struct Constraint {
        uint64_t *match; /* a bit per node; see constraint_allows */
        int *nodes; /* the nodes allowed, ascending */
        int n_allowed;
        int *group; /* parallel to nodes: index of its same_label value; NULL: none */
        int n_groups;
        int *type_count; /* per node type: nodes allowed; built by the first count of
                            FIT_TOTAL without same_label */
} Constraint;

static inline bool constraint_allows(const Constraint *c, int n) {
        return (c->match[n >> 6] >> (n & 63)) & 1;
}

/* The same_label group of node n, which c allows (a search in c->nodes: a constraint
 * keeps nothing per node of the fleet but its bit). */
static inline int constraint_group(const Constraint *c, int n) {
        int lo = 0, hi = c->n_allowed - 1;
        while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                if (c->nodes[mid] < n)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return c->group[lo];
}

/* What one job asks for, in interned form. */
typedef struct Demand {
        int kind; /* accelerator kind id (>= 1), 0: none */
        int apr; /* accelerators per rank */
        int cpus; /* per rank */
        int64_t mem; /* per rank, MiB */
        int ranks;
        int rpn; /* ranks per node, 0: any */
        Constraint *cons;
        int avoid; /* node index to use only as a last resort, -1: none */
} Demand;

typedef struct FleetNode {
        const SchedNode *node;
        bool usable; /* schedulable: the only nodes ever given ranks */
        bool plain; /* no accelerator devices */
        bool reserved; /* holds a reservation made in this pass */
        int cpu_free, cpu_total, cpu_res;
        bool mem_tracked;
        int64_t mem_free, mem_total, mem_res;
        int slot; /* slot of kind 0 (cpus); slot + 1 + i: the node's i-th accelerator kind;
                     on plain nodes slot + 1: the plain pseudo kind */
        int n_kinds; /* accelerator kinds present on the node */
        int *kind_id, *kind_free, *kind_total, *kind_res; /* per local kind */
        int *dev_kind; /* per device: kind id */
        bool *dev_free; /* per device */
} FleetNode;

/* The nodes carrying one label, ascending. */
typedef struct LabelNodes {
        int *nodes;
        int n, cap;
} LabelNodes;

typedef struct Fleet {
        FleetNode *nodes;
        int n_nodes;
        int n_kinds; /* kinds known when the fleet was built */
        int plain_kind; /* n_kinds: pseudo kind bucketing the cpus of plain nodes only */
        int64_t *capacity; /* per kind: total over usable nodes */
        int64_t *total_free; /* per kind: positive free amounts over usable nodes */
        int64_t *reserved_free; /* per kind: what total_free had of nodes since reserved */
        int64_t mem_free_max; /* most free memory of a usable node at the start, MiB */
        bool has_plain, has_accel;
        /* Buckets: per kind (and plain_kind), slots by free amount 0..bucket_max[kind]. */
        int *bucket_max;
        int **head, **tail;
        int *slot_prev, *slot_next, *slot_node, *slot_kind, *slot_bucket;
        int n_slots;
        /* The last plan: nodes and rank counts. */
        int *plan_node, *plan_count;
        int n_plan;
        /* Scratch for group-aware plans. */
        int64_t *g_sum;
        int *g_head, *g_tail, *g_touched, *node_next;
        int g_cap;
        /* Node types: nodes of one type have the same whole capacity, so whether a job
         * fits the empty fleet is counted by type (built by the first such count). */
        int *node_type; /* per node */
        int *type_rep; /* per type: one of its nodes */
        int n_types;
        /* Nodes by label (label_key -> index + 1 into label_nodes), built by the first
         * constraint with a selector, so that a constraint costs the nodes it names. */
        StrMap *label_map;
        LabelNodes *label_nodes;
        int n_label_nodes;
        /* Pools for the per-node arrays. */
        int *int_pool;
        bool *bool_pool;
} Fleet;

/* Returns the id of kind name in map (adding it: names grows, *n counts). */
int fleet_kind_intern(StrMap *map, char ***names, int *n, const char *name);

/* Whether a node gives its totals itself; fleet_init takes a total it does not give
 * from its free capacity and what running jobs hold there. */
static inline bool fleet_cpus_total_given(const SchedNode *sn) {
        return sn->cpus_total > 0;
}
static inline bool fleet_memory_total_given(const SchedNode *sn) {
        return sn->memory_total_mb > 0 || sn->memory_free_mb < 0; /* < 0: not accounted */
}

/*
 * Builds the working fleet. empty: every device free and cpus/memory at their totals
 * (feasibility). held_cpu/held_mem (may be NULL) are per node amounts held by running
 * jobs, used for the total when the node gives none.
 */
void fleet_init(Fleet *f, const SchedNode *nodes, int n_nodes, bool empty, StrMap *kinds,
                char ***kind_names, int *n_kind_names, const int *held_cpu,
                const int64_t *held_mem);
void fleet_deinit(Fleet *f);

/* Fills c from a job's selector and same_label; free with fleet_constraint_deinit. */
void fleet_constraint_init(Fleet *f, const SchedJob *job, Constraint *c);
void fleet_constraint_deinit(Constraint *c);

/*
 * Plans d: on success fills f->plan_* and returns true. Tries the avoided node only when
 * nothing else fits, and CPU-only jobs on plain nodes before accelerator nodes.
 */
bool fleet_plan(Fleet *f, const Demand *d, PlanMode mode);
/* Whether d fits at all in view (any nodes, no preference): a count over the nodes, or
 * for FIT_TOTAL without same_label over the node types. */
bool fleet_fits(Fleet *f, const Demand *d, FitView view);
/* Cheap rejection: the fleet's total free amount is below the demand, or no node has the
 * memory of one rank free. */
bool fleet_too_small(const Fleet *f, const Demand *d);

/* Takes the last plan: chooses devices by locality; fills rank_node and rank_devices. */
void fleet_commit(Fleet *f, const Demand *d, int *rank_node, int *rank_devices);
/*
 * Holds the last plan's capacity back without choosing devices (a reservation); its nodes
 * are held whole: no later plan of the pass uses them.
 */
void fleet_reserve(Fleet *f, const Demand *d);
/* Gives back (sign 1) or takes again (sign -1) what running job r holds. */
void fleet_release(Fleet *f, const SchedRunning *r, int kind, int sign);
/* Whether node n alone takes all of d's ranks now. */
bool fleet_node_fits(const Fleet *f, int n, const Demand *d);
/* Amount of kind (0: cpus) that r holds on nodes c allows. */
int64_t fleet_held_on(const Fleet *f, const SchedRunning *r, int kind, const Constraint *c);
