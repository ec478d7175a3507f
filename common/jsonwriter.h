/* SPDX-License-Identifier: MIT */
/*
 * Compact JSON text written straight into one buffer, for answers too hot to build as
 * jansson trees first (the sync answer: a tree of every rank's environment cost more
 * than the rest of the sync). For valid UTF-8 the output is what json_dumps
 * (JSON_COMPACT) writes; a byte that is not valid UTF-8 is written as U+FFFD, so one
 * bad value never makes a whole answer unreadable (keys must stay distinct after that:
 * callers write keys they checked).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_WRITER_MAX_DEPTH 16

typedef struct JsonWriter {
        char *buf; /* NUL-terminated after every call */
        size_t len, cap;
        int depth;
        bool want_comma[JSON_WRITER_MAX_DEPTH]; /* a value was written at this depth */
} JsonWriter;

/* Containers; depth beyond JSON_WRITER_MAX_DEPTH aborts (callers nest a fixed shape). */
void json_writer_object_begin(JsonWriter *w);
void json_writer_object_end(JsonWriter *w);
void json_writer_array_begin(JsonWriter *w);
void json_writer_array_end(JsonWriter *w);
/* An object member's key; its value follows. */
void json_writer_key(JsonWriter *w, const char *key);
void json_writer_string(JsonWriter *w, const char *s);
/* s, or null when s is NULL. */
void json_writer_string_or_null(JsonWriter *w, const char *s);
void json_writer_int(JsonWriter *w, int64_t v);
void json_writer_bool(JsonWriter *w, bool v);
void json_writer_null(JsonWriter *w);
/* An object member: key and its value (a NULL string is null). */
void json_writer_member_int(JsonWriter *w, const char *key, int64_t v);
void json_writer_member_string(JsonWriter *w, const char *key, const char *s);
/* The text, owned by the caller; the writer is empty again. */
char *json_writer_take(JsonWriter *w);
void json_writer_clear(JsonWriter *w);
