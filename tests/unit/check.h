/* SPDX-License-Identifier: MIT */
/*
 * The few assertion macros the C unit tests share. A failed check prints where and why
 * and exits 1; meson counts the test as failed.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fresh scratch directory under $TMPDIR (else /tmp), its name starting with what:
 * a malloc'd path. Exits on failure. */
static inline char *check_tmpdir(const char *what) {
        const char *base = getenv("TMPDIR");
        if (!base || !*base)
                base = "/tmp";
        size_t size = strlen(base) + strlen(what) + 16;
        char *path = malloc(size);
        if (!path || snprintf(path, size, "%s/%s-XXXXXX", base, what) >= (int) size ||
            !mkdtemp(path)) {
                perror("scratch directory");
                exit(1);
        }
        return path;
}

#define CHECK(cond)                                                                              \
        do {                                                                                     \
                if (!(cond)) {                                                                   \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                        exit(1);                                                                 \
                }                                                                                \
        } while (0)

#define CHECK_INT(a, b)                                                                           \
        do {                                                                                      \
                long long _a = (long long) (a), _b = (long long) (b);                             \
                if (_a != _b) {                                                                   \
                        fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, \
                                #a, _a, _b);                                                      \
                        exit(1);                                                                  \
                }                                                                                 \
        } while (0)

#define CHECK_STR(a, b)                                                                     \
        do {                                                                                \
                const char *_a = (a), *_b = (b);                                            \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                    \
                        fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, \
                                __LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)");      \
                        exit(1);                                                            \
                }                                                                           \
        } while (0)
