/* SPDX-License-Identifier: MIT */
#include "longpoll.h"

#include <stdlib.h>

#include "util.h"

static void heap_place(LongPolls *lp, size_t i, LongPollSlot slot) {
        lp->heap[i] = slot;
        slot.poll->heap_pos = i;
}

/* Both sifts move a hole rather than swap: each level writes one entry. */
static void heap_up(LongPolls *lp, size_t i) {
        LongPollSlot slot = lp->heap[i];
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (lp->heap[parent].deadline_ms <= slot.deadline_ms)
                        break;
                heap_place(lp, i, lp->heap[parent]);
                i = parent;
        }
        heap_place(lp, i, slot);
}

static void heap_down(LongPolls *lp, size_t i) {
        LongPollSlot slot = lp->heap[i];
        for (;;) {
                size_t child = 2 * i + 1;
                if (child >= lp->n)
                        break;
                if (child + 1 < lp->n &&
                    lp->heap[child + 1].deadline_ms < lp->heap[child].deadline_ms)
                        child++;
                if (lp->heap[child].deadline_ms >= slot.deadline_ms)
                        break;
                heap_place(lp, i, lp->heap[child]);
                i = child;
        }
        heap_place(lp, i, slot);
}

void longpolls_add(LongPolls *lp, LongPoll *p) {
        if (lp->n == lp->cap) {
                lp->cap = lp->cap ? lp->cap * 2 : 256;
                lp->heap = xrealloc(lp->heap, lp->cap * sizeof(LongPollSlot));
        }
        size_t last = lp->n++;
        heap_place(lp, last, (LongPollSlot){p->deadline_ms, p});
        heap_up(lp, last);
        if (p->node >= lp->cap_nodes) {
                int cap = lp->cap_nodes ? lp->cap_nodes : 256;
                while (cap <= p->node)
                        cap *= 2;
                lp->by_node = xrealloc(lp->by_node, (size_t) cap * sizeof(LongPoll *));
                for (int i = lp->cap_nodes; i < cap; i++)
                        lp->by_node[i] = NULL;
                lp->cap_nodes = cap;
        }
        p->node_prev = NULL;
        p->node_next = lp->by_node[p->node];
        if (p->node_next)
                p->node_next->node_prev = p;
        lp->by_node[p->node] = p;
}

void longpolls_remove(LongPolls *lp, LongPoll *p) {
        size_t i = p->heap_pos;
        lp->n--;
        if (i != lp->n) {
                heap_place(lp, i, lp->heap[lp->n]);
                heap_down(lp, i);
                heap_up(lp, i);
        }
        if (p->node_prev)
                p->node_prev->node_next = p->node_next;
        else
                lp->by_node[p->node] = p->node_next;
        if (p->node_next)
                p->node_next->node_prev = p->node_prev;
        p->node_prev = p->node_next = NULL;
}

void longpolls_set_deadline(LongPolls *lp, LongPoll *p, int64_t deadline_ms) {
        p->deadline_ms = deadline_ms;
        lp->heap[p->heap_pos].deadline_ms = deadline_ms;
        heap_down(lp, p->heap_pos);
        heap_up(lp, p->heap_pos);
}

LongPoll *longpolls_of_node(const LongPolls *lp, int node) {
        return node >= 0 && node < lp->cap_nodes ? lp->by_node[node] : NULL;
}

LongPoll *longpolls_earliest(const LongPolls *lp) {
        return lp->n > 0 ? lp->heap[0].poll : NULL;
}

void longpolls_clear(LongPolls *lp) {
        free(lp->heap);
        free(lp->by_node);
        *lp = (LongPolls){0};
}
