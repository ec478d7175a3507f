/* SPDX-License-Identifier: MIT */
/*
 * A small string-keyed hash map (open addressing, linear probing) for lookups the
 * controller does on every request: idempotency keys and node names. Keys are copied;
 * values are borrowed pointers.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct StrMap StrMap;

StrMap *strmap_new(void);
StrMap *strmap_free(StrMap *m);
void *strmap_get(const StrMap *m, const char *key);
/* Inserts or replaces. */
void strmap_put(StrMap *m, const char *key, void *value);
/* The map's own copy of key (added with no value when absent): one address per string,
 * valid until the key is removed or the map freed. */
const char *strmap_intern(StrMap *m, const char *key);
void strmap_remove(StrMap *m, const char *key);
size_t strmap_size(const StrMap *m);
/* The map's string hash (FNV-1a), for callers that need a stable short name of a string. */
uint64_t strmap_hash(const char *s);
