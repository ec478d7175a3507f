/* SPDX-License-Identifier: MIT */
/*
 * The held agent syncs (long-polls), indexed two ways so that a loop turn's work
 * follows what changed rather than the size of the fleet: by node, to answer those of
 * the nodes whose desired state changed, and in a min-heap by deadline, to answer those
 * whose time is up and to tell the loop when the next one is due.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct LongPoll {
        int node; /* Node.index of the node it waits for */
        int64_t deadline_ms; /* monotonic */
        size_t heap_pos;
        struct LongPoll *node_prev, *node_next;
} LongPoll;

/* A heap entry keeps its poll's deadline beside it, so that sifting compares within the
 * array instead of loading every poll it passes (each a cache miss at fleet scale). */
typedef struct LongPollSlot {
        int64_t deadline_ms;
        LongPoll *poll;
} LongPollSlot;

typedef struct LongPolls {
        LongPollSlot *heap;
        size_t n, cap;
        LongPoll **by_node; /* heads of the per-node lists, by Node.index */
        int cap_nodes;
} LongPolls;

void longpolls_add(LongPolls *lp, LongPoll *p);
void longpolls_remove(LongPolls *lp, LongPoll *p);
/* Moves p's deadline (earlier or later). */
void longpolls_set_deadline(LongPolls *lp, LongPoll *p, int64_t deadline_ms);
/* The first held poll of node, or NULL; follow node_next for the others. */
LongPoll *longpolls_of_node(const LongPolls *lp, int node);
/* The poll with the earliest deadline, or NULL when none is held. */
LongPoll *longpolls_earliest(const LongPolls *lp);
static inline size_t longpolls_count(const LongPolls *lp) {
        return lp->n;
}
void longpolls_clear(LongPolls *lp);
