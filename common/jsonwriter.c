/* SPDX-License-Identifier: MIT */
#include "jsonwriter.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void reserve(JsonWriter *w, size_t more) {
        if (w->len + more + 1 <= w->cap)
                return;
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + more + 1)
                cap *= 2;
        w->buf = xrealloc(w->buf, cap);
        w->cap = cap;
}

static void put(JsonWriter *w, const char *s, size_t n) {
        reserve(w, n);
        memcpy(w->buf + w->len, s, n);
        w->len += n;
        w->buf[w->len] = 0;
}

/* Before a value or key: the comma after its sibling. A key's value takes none. */
static void separate(JsonWriter *w) {
        bool *comma = &w->want_comma[w->depth];
        if (*comma)
                put(w, ",", 1);
        *comma = true;
}

static void container_open(JsonWriter *w, const char *bracket) {
        separate(w);
        put(w, bracket, 1);
        if (++w->depth >= JSON_WRITER_MAX_DEPTH)
                abort();
        w->want_comma[w->depth] = false;
}

static void container_close(JsonWriter *w, const char *bracket) {
        w->depth--;
        put(w, bracket, 1);
}

void json_writer_object_begin(JsonWriter *w) {
        container_open(w, "{");
}

void json_writer_object_end(JsonWriter *w) {
        container_close(w, "}");
}

void json_writer_array_begin(JsonWriter *w) {
        container_open(w, "[");
}

void json_writer_array_end(JsonWriter *w) {
        container_close(w, "]");
}

/* The length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF), 0 when there is none. */
static size_t utf8_sequence(const unsigned char *s) {
        unsigned char c = s[0];
        if (c >= 0xc2 && c <= 0xdf)
                return (s[1] & 0xc0) == 0x80 ? 2 : 0;
        if (c >= 0xe0 && c <= 0xef) {
                unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
                return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
        }
        if (c >= 0xf0 && c <= 0xf4) {
                unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
                return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80
                               ? 4
                               : 0;
        }
        return 0;
}

/* Escapes as jansson does: quote, backslash and control characters. */
static void put_string(JsonWriter *w, const char *s) {
        put(w, "\"", 1);
        const unsigned char *p = (const unsigned char *) s;
        for (;;) {
                const unsigned char *run = p;
                while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
                        p++;
                put(w, (const char *) run, (size_t) (p - run));
                if (!*p)
                        break;
                char esc[8];
                if (*p >= 0x80) {
                        size_t n = utf8_sequence(p);
                        if (n) {
                                put(w, (const char *) p, n);
                                p += n;
                        } else {
                                put(w, "\\ufffd", 6);
                                p++;
                        }
                        continue;
                }
                switch (*p) {
                case '"':
                        put(w, "\\\"", 2);
                        break;
                case '\\':
                        put(w, "\\\\", 2);
                        break;
                case '\b':
                        put(w, "\\b", 2);
                        break;
                case '\f':
                        put(w, "\\f", 2);
                        break;
                case '\n':
                        put(w, "\\n", 2);
                        break;
                case '\r':
                        put(w, "\\r", 2);
                        break;
                case '\t':
                        put(w, "\\t", 2);
                        break;
                default:
                        snprintf(esc, sizeof(esc), "\\u%04X", *p);
                        put(w, esc, 6);
                }
                p++;
        }
        put(w, "\"", 1);
}

void json_writer_key(JsonWriter *w, const char *key) {
        separate(w);
        put_string(w, key);
        put(w, ":", 1);
        w->want_comma[w->depth] = false; /* the value follows the colon */
}

void json_writer_string(JsonWriter *w, const char *s) {
        separate(w);
        put_string(w, s);
}

void json_writer_string_or_null(JsonWriter *w, const char *s) {
        if (s)
                json_writer_string(w, s);
        else
                json_writer_null(w);
}

void json_writer_int(JsonWriter *w, int64_t v) {
        char num[24];
        separate(w);
        put(w, num, (size_t) snprintf(num, sizeof(num), "%" PRId64, v));
}

void json_writer_bool(JsonWriter *w, bool v) {
        separate(w);
        put(w, v ? "true" : "false", v ? 4 : 5);
}

void json_writer_null(JsonWriter *w) {
        separate(w);
        put(w, "null", 4);
}

void json_writer_member_int(JsonWriter *w, const char *key, int64_t v) {
        json_writer_key(w, key);
        json_writer_int(w, v);
}

void json_writer_member_string(JsonWriter *w, const char *key, const char *s) {
        json_writer_key(w, key);
        json_writer_string_or_null(w, s);
}

char *json_writer_take(JsonWriter *w) {
        reserve(w, 0);
        char *text = w->buf;
        *w = (JsonWriter){0};
        return text;
}

void json_writer_clear(JsonWriter *w) {
        free(w->buf);
        *w = (JsonWriter){0};
}
