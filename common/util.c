/* SPDX-License-Identifier: MIT */
/* Clocks, files and allocation helpers shared by every binary; see util.h. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int64_t util_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t util_boot_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *util_format_time(int64_t wall_ms, char *buf, size_t size) {
        time_t secs = (time_t) (wall_ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        char base[24];
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, size, "%s.%03dZ", base, (int) (wall_ms % 1000));
        return buf;
}

int util_mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *copy = xstrdup(path);
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(copy, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(copy, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int util_write_file_atomic(const char *path, const void *data, size_t len) {
        _cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int) getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        const char *p = data;
        size_t left = len;
        while (left > 0) {
                ssize_t n = write(fd, p, left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        close(fd);
                        unlink(tmp);
                        return r;
                }
                p += n;
                left -= (size_t) n;
        }
        if (fsync(fd) < 0 || close(fd) < 0) {
                int r = -errno;
                unlink(tmp);
                return r;
        }
        if (rename(tmp, path) < 0) {
                int r = -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

int util_read_file(const char *path, char **ret_data, size_t *ret_len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t cap = 4096, len = 0;
        char *buf = xmalloc(cap);
        for (;;) {
                if (len + 1 >= cap) {
                        cap *= 2;
                        buf = xrealloc(buf, cap);
                }
                ssize_t n = read(fd, buf + len, cap - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        free(buf);
                        close(fd);
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        close(fd);
        buf[len] = '\0';
        *ret_data = buf;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int util_rm_rf(const char *path) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode)) {
                DIR *d = opendir(path);
                if (!d)
                        return -errno;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        _cleanup_free_ char *child = xasprintf("%s/%s", path, de->d_name);
                        int r = util_rm_rf(child);
                        if (r < 0) {
                                closedir(d);
                                return r;
                        }
                }
                closedir(d);
                if (rmdir(path) < 0)
                        return -errno;
                return 0;
        }
        if (unlink(path) < 0)
                return -errno;
        return 0;
}

static void *oom(void) {
        fputs("out of memory\n", stderr);
        abort();
}

void *xmalloc(size_t n) {
        void *p = malloc(n ? n : 1);
        return p ? p : oom();
}

void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size ? size : 1);
        return p ? p : oom();
}

void *xrealloc(void *p, size_t n) {
        void *q = realloc(p, n ? n : 1);
        return q ? q : oom();
}

char *xstrdup(const char *s) {
        char *p = strdup(s ? s : "");
        return p ? p : oom();
}

char *xasprintf(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? oom() : s;
}

bool util_streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 when there is none. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
        if (s[0] < 0x80)
                return 1;
        size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
        if (len == 0 || s[0] > 0xF4 || len > n)
                return 0;
        for (size_t i = 1; i < len; i++)
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
        /* Overlong forms, surrogates and code points past U+10FFFF. */
        if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) ||
            (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))
                return 0;
        return len;
}

void util_utf8_sanitize(char *s, size_t len) {
        unsigned char *u = (unsigned char *) s;
        for (size_t i = 0; i < len;) {
                if (u[i] == 0) {
                        u[i++] = ' ';
                        continue;
                }
                size_t k = utf8_sequence(u + i, len - i);
                if (k == 0) {
                        u[i++] = '?';
                        continue;
                }
                i += k;
        }
}

size_t util_utf8_cut(const char *s, size_t len, size_t max) {
        if (len <= max)
                return len;
        size_t n = max;
        while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
                n--;
        return n;
}
