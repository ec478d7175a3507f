/* SPDX-License-Identifier: MIT */
/*
 * The rank's log pump; see logpump.h. The file is only ever appended to, and rotated by
 * renaming, so a reader holding it open (the log server following it) reads to its end
 * and then finds its successor by name.
 */
#include "logpump.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Read per logpump_run call: about a disk's worth of a few milliseconds. */
#define LOGPUMP_READ_ROUNDS 32
/* A larger pipe absorbs bursts while the shim is busy; best effort (pipe-max-size). */
#define LOGPUMP_PIPE_BYTES (1024 * 1024)
#define LOGPUMP_LOW_FD 10

struct LogPump {
        const char *path; /* borrowed: the launch's, alive for the shim's lifetime */
        LogPumpLimits limits;
        int rd; /* the pipe */
        int log; /* the current file; -1 after a rotation that could not open a new one */
        int64_t size; /* of the current file */
        uid_t uid;
        gid_t gid;
        bool chown;
        uint64_t dropped; /* since the last note */
        uint64_t dropped_total;
        int drop_errno; /* why the last bytes were dropped */
        bool stuck; /* the last rotation failed */
};

static char buffer[64 * 1024];

/* dups fd to LOGPUMP_LOW_FD or above, close-on-exec, closing fd; -errno. */
static int logpump_fd_raise(int fd) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, LOGPUMP_LOW_FD);
        int r = high < 0 ? -errno : high;
        close(fd);
        return r;
}

static int logpump_open_file(LogPump *p) {
        int fd = open(p->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        if (p->chown)
                (void) fchown(fd, p->uid, p->gid);
        p->size = (int64_t) st.st_size;
        return fd;
}

int logpump_open(const char *log_path, const LogPumpLimits *limits, LogPump **ret,
                 int *ret_write_fd) {
        LogPump *p = xcalloc(1, sizeof(*p));
        p->path = log_path;
        p->limits = limits ? *limits : (LogPumpLimits){0};
        p->rd = p->log = -1;
        int pipefd[2] = {-1, -1}, r;
        if ((r = logpump_open_file(p)) < 0 || (p->log = logpump_fd_raise(r)) < 0 ||
            pipe2(pipefd, O_CLOEXEC) < 0) {
                r = r < 0 ? r : p->log < 0 ? p->log : -errno;
                goto fail;
        }
        (void) fcntl(pipefd[0], F_SETPIPE_SZ, LOGPUMP_PIPE_BYTES);
        if ((p->rd = logpump_fd_raise(pipefd[0])) < 0) {
                r = p->rd;
                close(pipefd[1]);
                goto fail;
        }
        if ((r = logpump_fd_raise(pipefd[1])) < 0)
                goto fail;
        (void) fcntl(p->rd, F_SETFL, O_NONBLOCK);
        *ret_write_fd = r;
        *ret = p;
        return 0;
fail:
        if (p->log >= 0)
                close(p->log);
        if (p->rd >= 0)
                close(p->rd);
        free(p);
        return r;
}

int logpump_fds_move(LogPump *p, int first_fd) {
        if (dup3(p->rd, first_fd, O_CLOEXEC) < 0 || dup3(p->log, first_fd + 1, O_CLOEXEC) < 0)
                return -errno;
        close(p->rd);
        close(p->log);
        p->rd = first_fd;
        p->log = first_fd + 1;
        return first_fd + 2;
}

int logpump_fd(const LogPump *p) {
        return p->rd;
}

void logpump_set_owner(LogPump *p, uid_t uid, gid_t gid) {
        p->uid = uid;
        p->gid = gid;
        p->chown = true;
        if (p->log >= 0)
                (void) fchown(p->log, uid, gid);
}

uint64_t logpump_dropped(const LogPump *p) {
        return p->dropped_total;
}

static void logpump_drop(LogPump *p, size_t n, int err) {
        p->dropped += n;
        p->dropped_total += n;
        p->drop_errno = err;
}

/* <path>.<n>, or <path> itself for 0. */
static void logpump_name(const LogPump *p, int n, char *out, size_t size) {
        if (n == 0)
                snprintf(out, size, "%s", p->path);
        else
                snprintf(out, size, "%s.%d", p->path, n);
}

/* Starts a new file; 0 or -errno (then nothing is written until a rotation works). */
static int logpump_rotate(LogPump *p) {
        char from[PATH_MAX], to[PATH_MAX];
        logpump_name(p, p->limits.keep, to, sizeof(to));
        if (unlink(to) < 0 && errno != ENOENT)
                return -errno;
        /* With keep 0 that was the current file itself. A name missing from the
         * chain (removed by hand) leaves a gap, no error. */
        for (int n = p->limits.keep; n > 0; n--) {
                logpump_name(p, n - 1, from, sizeof(from));
                logpump_name(p, n, to, sizeof(to));
                if (rename(from, to) < 0 && errno != ENOENT)
                        return -errno;
        }
        if (p->log >= 0)
                close(p->log);
        p->log = -1;
        int fd = logpump_open_file(p);
        if (fd < 0)
                return fd;
        p->log = fd;
        return 0;
}

/* Writes all of data to the current file; what cannot be written is dropped. */
static void logpump_write_file(LogPump *p, const char *data, size_t len) {
        while (len > 0) {
                ssize_t n = write(p->log, data, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        logpump_drop(p, len, n < 0 ? errno : EIO);
                        return;
                }
                data += n;
                len -= (size_t) n;
                p->size += n;
        }
}

/* How much of data goes into the current file before the next rotation: up to the
 * last line end that fits, or what fits when no line end does and the file is new. */
static size_t logpump_room(const LogPump *p, const char *data, size_t len) {
        if (p->limits.max_bytes <= 0)
                return len;
        int64_t room = p->limits.max_bytes - p->size;
        if (room <= 0)
                return 0;
        if ((int64_t) len <= room)
                return len;
        const char *nl = memrchr(data, '\n', (size_t) room);
        if (nl)
                return (size_t) (nl - data) + 1;
        return p->size == 0 ? (size_t) room : 0;
}

/* A rotation failed: says so once, past the cap, and drops output from then on (each
 * later write tries to rotate again). */
static void logpump_stuck(LogPump *p, int err) {
        if (p->stuck || p->log < 0)
                return;
        p->stuck = true;
        char line[256];
        int n = snprintf(line, sizeof(line),
                         "\naxagent: cannot rotate this log (%s): the rank's output is dropped, "
                         "and counted, until it can be\n",
                         strerror(err));
        if (write(p->log, line, (size_t) n) > 0)
                p->size += n;
}

static void logpump_write(LogPump *p, const char *data, size_t len) {
        while (len > 0) {
                if (p->log < 0) {
                        /* An earlier rotation could not open the new file: try again. */
                        int fd = logpump_open_file(p);
                        if (fd < 0) {
                                logpump_drop(p, len, -fd);
                                return;
                        }
                        p->log = fd;
                }
                size_t take = logpump_room(p, data, len);
                if (take == 0) {
                        int r = logpump_rotate(p);
                        if (r < 0) {
                                logpump_stuck(p, -r);
                                logpump_drop(p, len, -r);
                                return;
                        }
                        p->stuck = false;
                        continue;
                }
                logpump_write_file(p, data, take);
                data += take;
                len -= take;
        }
}

/* Tells the reader of the log how much it is missing, once a line can be written;
 * past_cap: at the end, even beyond the cap (by that one line). */
static void logpump_note_dropped(LogPump *p, bool past_cap) {
        if (p->dropped == 0 || p->log < 0)
                return;
        char line[256];
        int n = snprintf(
                line, sizeof(line),
                "\naxagent: %" PRIu64 " bytes of the rank's output were dropped: %s\n", p->dropped,
                p->drop_errno == ENOSPC || p->drop_errno == EDQUOT ? "the log's disk is full"
                                                                   : strerror(p->drop_errno));
        uint64_t missing = p->dropped, total = p->dropped_total;
        p->dropped = 0;
        if (past_cap)
                logpump_write_file(p, line, (size_t) n);
        else
                logpump_write(p, line, (size_t) n);
        if (p->dropped_total != total) {
                /* The note did not make it either: say so next time, counting the
                 * rank's bytes only. */
                p->dropped_total = total;
                p->dropped = missing;
        }
}

/* Moves a bounded amount: 1 when more may be waiting, 0 when the pipe is empty, -1 at
 * its end (every writer closed it). */
static int logpump_drain(LogPump *p) {
        for (int i = 0; i < LOGPUMP_READ_ROUNDS; i++) {
                ssize_t n = read(p->rd, buffer, sizeof(buffer));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? 0 : -1;
                if (n == 0)
                        return -1;
                if (p->dropped > 0 && !p->stuck)
                        logpump_note_dropped(p, false);
                logpump_write(p, buffer, (size_t) n);
        }
        return 1;
}

bool logpump_run(LogPump *p) {
        return logpump_drain(p) >= 0;
}

void logpump_note(LogPump *p, const char *fmt, ...) {
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        logpump_write(p, line, strnlen(line, sizeof(line)));
}

void logpump_finish(LogPump *p) {
        if (!p)
                return;
        /* Stops at an empty pipe too: a writer that escaped must not hold us. */
        while (logpump_drain(p) > 0)
                ;
        logpump_note_dropped(p, true);
        close(p->rd);
        if (p->log >= 0)
                close(p->log);
        free(p);
}
