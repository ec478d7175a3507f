/* SPDX-License-Identifier: MIT */
/* The held-sync index: deadlines come out in order through removals and moves, and
 * each node's list holds exactly its polls. */
#include <stdio.h>
#include <stdlib.h>

#include "../tests/unit/check.h"
#include "longpoll.h"

static int count_of_node(const LongPolls *lp, int node) {
        int n = 0;
        for (LongPoll *p = longpolls_of_node(lp, node); p; p = p->node_next) {
                CHECK(p->node == node);
                n++;
        }
        return n;
}

int main(void) {
        enum {
                N = 1000
        };
        static LongPoll polls[N];
        LongPolls lp = {0};
        srand(7);
        for (int i = 0; i < N; i++) {
                polls[i] = (LongPoll){.node = i % 300, .deadline_ms = rand() % 5000};
                longpolls_add(&lp, &polls[i]);
        }
        CHECK(longpolls_count(&lp) == N);
        CHECK(count_of_node(&lp, 0) == 4 && count_of_node(&lp, 299) == 3);
        CHECK(longpolls_of_node(&lp, 300) == NULL && longpolls_of_node(&lp, 100000) == NULL);
        /* Drop every third, move every fifth to the front or the back. */
        for (int i = 0; i < N; i += 3)
                longpolls_remove(&lp, &polls[i]);
        for (int i = 1; i < N; i += 5)
                if (i % 3 != 0)
                        longpolls_set_deadline(&lp, &polls[i], i % 2 ? 0 : 10000);
        /* Each held poll's entry is where it says, with its deadline beside it. */
        for (int i = 0; i < N; i++) {
                if (i % 3 == 0)
                        continue;
                CHECK(lp.heap[polls[i].heap_pos].poll == &polls[i]);
                CHECK(lp.heap[polls[i].heap_pos].deadline_ms == polls[i].deadline_ms);
        }
        /* Node 0 had 0, 300, 600 and 900, all dropped; node 1 kept 1, 301, 601 and 901. */
        CHECK(count_of_node(&lp, 0) == 0 && count_of_node(&lp, 1) == 4);
        int64_t last = -1;
        size_t seen = 0;
        for (LongPoll *p; (p = longpolls_earliest(&lp));) {
                CHECK(p->deadline_ms >= last);
                last = p->deadline_ms;
                longpolls_remove(&lp, p);
                seen++;
        }
        CHECK(seen == N - (N + 2) / 3);
        for (int node = 0; node < 300; node++)
                CHECK(count_of_node(&lp, node) == 0);
        longpolls_clear(&lp);
        return 0;
}
