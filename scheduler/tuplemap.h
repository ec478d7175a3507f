/* SPDX-License-Identifier: MIT */
/* A hash map from fixed-width tuples of integers to dense ids (internal to scheduler/). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Grows as needed: a full table would leave a probe no empty slot to end on. */
typedef struct TupleMap {
        int width;
        size_t cap, n;
        int64_t *keys;
        int *ids; /* -1: empty */
} TupleMap;

void tuplemap_init(TupleMap *m, int width, size_t expect);
void tuplemap_done(TupleMap *m);
/* Returns the id of key (width integers), adding it as the next id when new. */
int tuplemap_intern(TupleMap *m, const int64_t *key);
