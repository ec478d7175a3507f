/* SPDX-License-Identifier: MIT */
#include "longpoll.h"

#include <stdlib.h>

#include "util.h"

static void heap_swap(LongPolls *lp, size_t a, size_t b) {
        LongPoll *t = lp->heap[a];
        lp->heap[a] = lp->heap[b];
        lp->heap[b] = t;
        lp->heap[a]->heap_pos = a;
        lp->heap[b]->heap_pos = b;
}

static void heap_up(LongPolls *lp, size_t i) {
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (lp->heap[parent]->deadline_ms <= lp->heap[i]->deadline_ms)
                        return;
                heap_swap(lp, i, parent);
                i = parent;
        }
}

static void heap_down(LongPolls *lp, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, least = i;
                if (l < lp->n && lp->heap[l]->deadline_ms < lp->heap[least]->deadline_ms)
                        least = l;
                if (r < lp->n && lp->heap[r]->deadline_ms < lp->heap[least]->deadline_ms)
                        least = r;
                if (least == i)
                        return;
                heap_swap(lp, i, least);
                i = least;
        }
}

void longpolls_add(LongPolls *lp, LongPoll *p) {
        if (lp->n == lp->cap) {
                lp->cap = lp->cap ? lp->cap * 2 : 256;
                lp->heap = xrealloc(lp->heap, lp->cap * sizeof(LongPoll *));
        }
        p->heap_pos = lp->n;
        lp->heap[lp->n++] = p;
        heap_up(lp, p->heap_pos);
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
                heap_swap(lp, i, lp->n);
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
        heap_down(lp, p->heap_pos);
        heap_up(lp, p->heap_pos);
}

LongPoll *longpolls_of_node(const LongPolls *lp, int node) {
        return node >= 0 && node < lp->cap_nodes ? lp->by_node[node] : NULL;
}

LongPoll *longpolls_earliest(const LongPolls *lp) {
        return lp->n > 0 ? lp->heap[0] : NULL;
}

void longpolls_clear(LongPolls *lp) {
        free(lp->heap);
        free(lp->by_node);
        *lp = (LongPolls){0};
}
