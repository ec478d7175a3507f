/* SPDX-License-Identifier: MIT */
/* Open-addressing string map with tombstones; see strmap.h. */
#include "strmap.h"

#include <stdint.h>
#include <string.h>

#include "util.h"

#define TOMBSTONE ((char *) 1)

typedef struct Slot {
        char *key; /* NULL: empty; TOMBSTONE: removed */
        void *value;
} Slot;

struct StrMap {
        Slot *slots;
        size_t cap; /* power of two */
        size_t used; /* live + tombstones */
        size_t size;
};

uint64_t strmap_hash(const char *s) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return h;
}

StrMap *strmap_new(void) {
        StrMap *m = xcalloc(1, sizeof(StrMap));
        m->cap = 16;
        m->slots = xcalloc(m->cap, sizeof(Slot));
        return m;
}

StrMap *strmap_free(StrMap *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->cap; i++)
                if (m->slots[i].key && m->slots[i].key != TOMBSTONE)
                        free(m->slots[i].key);
        free(m->slots);
        free(m);
        return NULL;
}

static Slot *find(const StrMap *m, const char *key) {
        size_t mask = m->cap - 1;
        for (size_t i = strmap_hash(key) & mask;; i = (i + 1) & mask) {
                Slot *s = &m->slots[i];
                if (!s->key)
                        return NULL;
                if (s->key != TOMBSTONE && strcmp(s->key, key) == 0)
                        return s;
        }
}

void *strmap_get(const StrMap *m, const char *key) {
        Slot *s = find(m, key);
        return s ? s->value : NULL;
}

static void grow(StrMap *m) {
        Slot *old = m->slots;
        size_t old_cap = m->cap;
        m->cap *= 2;
        m->slots = xcalloc(m->cap, sizeof(Slot));
        m->used = m->size = 0;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i].key && old[i].key != TOMBSTONE) {
                        size_t mask = m->cap - 1, j = strmap_hash(old[i].key) & mask;
                        while (m->slots[j].key)
                                j = (j + 1) & mask;
                        m->slots[j] = old[i];
                        m->used++;
                        m->size++;
                }
        free(old);
}

void strmap_put(StrMap *m, const char *key, void *value) {
        Slot *s = find(m, key);
        if (s) {
                s->value = value;
                return;
        }
        if ((m->used + 1) * 4 >= m->cap * 3)
                grow(m);
        size_t mask = m->cap - 1, i = strmap_hash(key) & mask;
        while (m->slots[i].key && m->slots[i].key != TOMBSTONE)
                i = (i + 1) & mask;
        if (!m->slots[i].key)
                m->used++;
        m->slots[i].key = xstrdup(key);
        m->slots[i].value = value;
        m->size++;
}

const char *strmap_intern(StrMap *m, const char *key) {
        Slot *s = find(m, key);
        if (!s) {
                strmap_put(m, key, NULL);
                s = find(m, key);
        }
        return s->key;
}

void strmap_remove(StrMap *m, const char *key) {
        Slot *s = find(m, key);
        if (!s)
                return;
        free(s->key);
        s->key = TOMBSTONE;
        s->value = NULL;
        m->size--;
}

size_t strmap_size(const StrMap *m) {
        return m->size;
}
