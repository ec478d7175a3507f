/* SPDX-License-Identifier: MIT */
/*
 * Strict JSON field readers over jansson, shared by the spec parser and the agent
 * protocol decoder. Each reader checks type and range and, on failure, fills a
 * JsonError naming the offending field, so callers can answer "400, field X".
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct JsonError {
        char field[128];
        char message[256];
} JsonError;

/* Fills err (if not NULL) and returns -EINVAL. */
int json_error_set(JsonError *err, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Rejects keys of obj not in the NULL-terminated allowed list; prefix is prepended to the
 * field name in the error ("resources." for nested objects).
 */
int json_check_keys(json_t *obj, const char *prefix, const char *const *allowed, JsonError *err);

/* Integer field in [min,max]; absent leaves *ret untouched and returns 0 unless required. */
int json_get_int(json_t *obj, const char *key, const char *field, bool required, int64_t min,
                 int64_t max, int64_t *ret, JsonError *err);
/* String field of 1..max_len bytes; *ret points into obj (borrowed). */
int json_get_string(json_t *obj, const char *key, const char *field, bool required, size_t max_len,
                    const char **ret, JsonError *err);
int json_get_bool(json_t *obj, const char *key, const char *field, bool *ret, JsonError *err);
/* Object whose values are all strings, at most max_keys entries; *ret borrowed. */
int json_get_string_map(json_t *obj, const char *key, const char *field, size_t max_keys,
                        size_t max_len, json_t **ret, JsonError *err);

/* Copies a JSON string object value or returns NULL. */
const char *json_str(json_t *obj, const char *key);
/* Integer value or def when absent / not an integer. */
int64_t json_int(json_t *obj, const char *key, int64_t def);
