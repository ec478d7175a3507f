/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every axctl binary needs: clocks, cleanup attributes, files written
 * atomically, directory creation and time formatting. Library-like: nothing here logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

static inline void freep(void *p) {
        free(*(void **) p);
}
static inline void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hands ownership of a pointer to the caller: returns it and clears the variable. */
#define TAKE_PTR(p)                     \
        ({                              \
                __typeof__(p) _p = (p); \
                (p) = NULL;             \
                _p;                     \
        })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static inline int min_int(int a, int b) {
        return a < b ? a : b;
}

/* Makes room for need elements in a growing array (doubling, at least 16). */
#define GROW_TO(arr, need, cap)                                                   \
        do {                                                                      \
                if ((need) > (cap)) {                                             \
                        (cap) = (cap) ? (cap) *2 : 16;                            \
                        if ((cap) < (need))                                       \
                                (cap) = (need);                                   \
                        (arr) = xrealloc((arr), (size_t) (cap) * sizeof(*(arr))); \
                }                                                                 \
        } while (0)
/* Makes room for one more element, the nth. */
#define GROW(arr, n, cap) GROW_TO(arr, (n) + 1, cap)

/* Milliseconds on CLOCK_MONOTONIC: for deadlines and intervals. */
int64_t util_now_ms(void);
/* The same clock in microseconds: for measuring durations. */
int64_t util_now_us(void);
/* Milliseconds on CLOCK_BOOTTIME: monotonic and counting suspend, one clock for every
 * process of a host (the node lease the agent shares with its rank supervisors). */
int64_t util_boot_ms(void);
/* Milliseconds since the Unix epoch: for timestamps shown to people and stored. */
int64_t util_wall_ms(void);
/* Writes "2026-11-22T02:33:35.123Z" into buf (at least 32 bytes); returns buf. */
char *util_format_time(int64_t wall_ms, char *buf, size_t size);

/* Creates path and its parents; 0 or -errno. */
int util_mkdir_p(const char *path, mode_t mode);
/* Replaces path with data through a temporary file and rename; 0 or -errno. */
int util_write_file_atomic(const char *path, const void *data, size_t len);
/* Reads a whole file (NUL-terminated); 0 or -errno, *ret_data owned by the caller. */
int util_read_file(const char *path, char **ret_data, size_t *ret_len);
/* Removes a directory tree; 0 or -errno. */
int util_rm_rf(const char *path);

/* malloc that aborts on out-of-memory: used where failing cannot be handled sensibly. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) _printf_(1, 2);

bool util_streq_ptr(const char *a, const char *b);

/*
 * Makes s[0..len) a valid UTF-8 string in place, as JSON needs: NULs become spaces,
 * bytes that start no valid sequence (overlong, surrogate, cut short) become '?'.
 */
void util_utf8_sanitize(char *s, size_t len);
/* The length of the longest prefix of s[0..len) of at most max bytes that cuts no
 * character. */
size_t util_utf8_cut(const char *s, size_t len, size_t max);
