/* SPDX-License-Identifier: MIT */
/*
 * stderr lines or structured journal entries; see log.h. The journal side writes the
 * native protocol of systemd's JOURNAL_NATIVE_PROTOCOL document: one datagram per
 * entry to journald's socket, each field "KEY=value\n", or for a value holding a
 * newline "KEY\n", its length as 64-bit little endian, the value and "\n".
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

static const char *log_ident = "axctl";
static LogLevel log_max_level = LOG_LEVEL_INFO;
/* The datagram socket connected to journald, or -1 for stderr lines. */
static int journal_fd = -1;

static const char *const level_names[_LOG_LEVEL_MAX] = {
        [LOG_LEVEL_ERROR] = "error",
        [LOG_LEVEL_WARNING] = "warning",
        [LOG_LEVEL_INFO] = "info",
        [LOG_LEVEL_DEBUG] = "debug",
};

/* syslog(3) priorities, which journald expects in PRIORITY=. */
static const char level_priorities[_LOG_LEVEL_MAX] = {
        [LOG_LEVEL_ERROR] = '3',
        [LOG_LEVEL_WARNING] = '4',
        [LOG_LEVEL_INFO] = '6',
        [LOG_LEVEL_DEBUG] = '7',
};

bool log_stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        if (!e || !*e)
                return false;
        uintmax_t dev, ino;
        char end;
        if (sscanf(e, "%ju:%ju%c", &dev, &ino, &end) != 2)
                return false;
        struct stat st;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (uintmax_t) st.st_dev == dev && (uintmax_t) st.st_ino == ino;
}

int log_open_journal(const char *socket_path) {
        if (journal_fd >= 0)
                close(journal_fd);
        journal_fd = -1;
        if (!socket_path)
                return 0;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* connect() once: every entry is then one send(), and a missing journald shows now. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        journal_fd = fd;
        return 0;
}

void log_setup(const char *ident, LogLevel max_level) {
        log_ident = ident;
        log_max_level = max_level;
        (void) log_open_journal(log_stderr_is_journal() ? JOURNAL_SOCKET : NULL);
}

LogLevel log_level_from_string(const char *s) {
        for (int i = 0; i < _LOG_LEVEL_MAX; i++)
                if (s && strcmp(s, level_names[i]) == 0)
                        return (LogLevel) i;
        return _LOG_LEVEL_INVALID;
}

const char *log_level_to_string(LogLevel level) {
        return level >= 0 && level < _LOG_LEVEL_MAX ? level_names[level] : NULL;
}

/* An entry under construction; fields that do not fit are dropped, never split. */
typedef struct JournalEntry {
        char buf[8192];
        size_t len;
} JournalEntry;

static void entry_add(JournalEntry *e, const char *key, const char *value) {
        size_t klen = strlen(key), vlen = strlen(value);
        bool binary = memchr(value, '\n', vlen) != NULL;
        size_t need = klen + 1 + (binary ? 8 : 0) + vlen + 1;
        if (e->len + need > sizeof(e->buf))
                return;
        char *p = e->buf + e->len;
        memcpy(p, key, klen);
        p += klen;
        if (binary) {
                *p++ = '\n';
                uint64_t n = vlen;
                for (int i = 0; i < 8; i++)
                        *p++ = (char) ((n >> (8 * i)) & 0xff);
        } else
                *p++ = '=';
        memcpy(p, value, vlen);
        p += vlen;
        *p++ = '\n';
        e->len = (size_t) (p - e->buf);
}

/* Sends one entry; 0 or -errno (journald gone, buffer full), then the caller prints. */
static int journal_send(LogLevel level, const char *file, int line, const char *func, int64_t job,
                        const char *node, int attempt, const char *message) {
        JournalEntry e = {.len = 0};
        char num[32];
        char prio[2] = {level_priorities[level], '\0'};
        entry_add(&e, "PRIORITY", prio);
        entry_add(&e, "SYSLOG_IDENTIFIER", log_ident);
        if (job > 0) {
                snprintf(num, sizeof(num), "%" PRId64, job);
                entry_add(&e, "JOB_ID", num);
        }
        if (node)
                entry_add(&e, "NODE", node);
        if (attempt > 0) {
                snprintf(num, sizeof(num), "%d", attempt);
                entry_add(&e, "ATTEMPT", num);
        }
        if (file) {
                entry_add(&e, "CODE_FILE", file);
                snprintf(num, sizeof(num), "%d", line);
                entry_add(&e, "CODE_LINE", num);
                entry_add(&e, "CODE_FUNC", func);
        }
        /* Last, so a long message can only lose itself, never the fields. */
        entry_add(&e, "MESSAGE", message);
        if (send(journal_fd, e.buf, e.len, MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

__attribute__((format(printf, 8, 0))) static void log_va(LogLevel level, const char *file, int line,
                                                         const char *func, int64_t job,
                                                         const char *node, int attempt,
                                                         const char *fmt, va_list ap) {
        if (level < 0 || level >= _LOG_LEVEL_MAX || level > log_max_level)
                return;
        char msg[4096];
        int saved_errno = errno;
        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (journal_fd >= 0 &&
            journal_send(level, file, line, func, job, node, attempt, msg) == 0) {
                errno = saved_errno;
                return;
        }
        char tbuf[32];
        /* One write per line, so lines of concurrent processes do not interleave. */
        fprintf(stderr, "%s %s %s: %s\n", util_format_time(util_wall_ms(), tbuf, sizeof(tbuf)),
                level_names[level], log_ident, msg);
        errno = saved_errno;
}

void log_full(LogLevel level, const char *file, int line, const char *func, int64_t job,
              const char *node, int attempt, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_va(level, file, line, func, job, node, attempt, fmt, ap);
        va_end(ap);
}

void log_msg(LogLevel level, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_va(level, NULL, 0, NULL, 0, NULL, 0, fmt, ap);
        va_end(ap);
}
