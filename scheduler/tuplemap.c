/* SPDX-License-Identifier: MIT */
/* Open addressing with linear probing; the table doubles when half full. */
#include "tuplemap.h"

#include <string.h>

#include "util.h"

void tuplemap_init(TupleMap *m, int width, size_t expect) {
        size_t cap = 16;
        while (cap < expect * 2)
                cap *= 2;
        *m = (TupleMap){.width = width, .cap = cap};
        m->keys = xcalloc(cap * (size_t) width, sizeof(int64_t));
        m->ids = xmalloc(cap * sizeof(int));
        memset(m->ids, 0xff, cap * sizeof(int));
}

void tuplemap_done(TupleMap *m) {
        free(m->keys);
        free(m->ids);
}

static size_t tuplemap_slot(const TupleMap *m, const int64_t *key) {
        uint64_t h = 1469598103934665603ULL;
        for (int i = 0; i < m->width; i++)
                h = (h ^ (uint64_t) key[i]) * 1099511628211ULL;
        size_t mask = m->cap - 1;
        for (size_t i = (size_t) (h ^ (h >> 29)) & mask;; i = (i + 1) & mask)
                if (m->ids[i] < 0 || memcmp(m->keys + i * (size_t) m->width, key,
                                            (size_t) m->width * sizeof(int64_t)) == 0)
                        return i;
}

/* Doubles the table: the expected size is a guess, and a full table has no empty slot to
 * end a probe (many users' or shapes' jobs in one pass would never return). */
static void tuplemap_grow(TupleMap *m) {
        TupleMap old = *m;
        m->cap *= 2;
        m->keys = xcalloc(m->cap * (size_t) m->width, sizeof(int64_t));
        m->ids = xmalloc(m->cap * sizeof(int));
        memset(m->ids, 0xff, m->cap * sizeof(int));
        for (size_t i = 0; i < old.cap; i++) {
                if (old.ids[i] < 0)
                        continue;
                const int64_t *key = old.keys + i * (size_t) old.width;
                size_t j = tuplemap_slot(m, key);
                memcpy(m->keys + j * (size_t) m->width, key, (size_t) m->width * sizeof(int64_t));
                m->ids[j] = old.ids[i];
        }
        tuplemap_done(&old);
}

/* Returns the id of key, adding it as the next id when new. */
int tuplemap_intern(TupleMap *m, const int64_t *key) {
        size_t i = tuplemap_slot(m, key);
        if (m->ids[i] >= 0)
                return m->ids[i];
        if (2 * (m->n + 1) > m->cap) {
                tuplemap_grow(m);
                i = tuplemap_slot(m, key);
        }
        memcpy(m->keys + i * (size_t) m->width, key, (size_t) m->width * sizeof(int64_t));
        m->ids[i] = (int) m->n++;
        return m->ids[i];
}
