/* SPDX-License-Identifier: MIT */
/*
 * The rank's log pump. A rank's stdout and stderr are a pipe, not its log file: the
 * shim reads the pipe and appends to <log>, so it can cap the file. When a write would
 * take the file past its cap, the pump rotates: <log>.N-1 becomes <log>.N, ..., <log>
 * becomes <log>.1 and a new <log> starts (keep 0: the old file is simply dropped), at a
 * line boundary where one lies within the cap. A node therefore holds at most
 * (keep + 1) caps of any rank's output.
 *
 * The rank never waits on the disk: bytes that cannot be written (the disk is full, a
 * rotation failed) are read from the pipe all the same, counted and dropped, and a line
 * saying how many is added to the log as soon as it can be written again, and at the
 * end. Everything here runs in the shim, a single-threaded process, and never blocks
 * on the pipe.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct LogPumpLimits {
        int64_t max_bytes; /* size of one log file; 0: no cap */
        int keep; /* rotated files kept: <log>.1 ... <log>.keep */
} LogPumpLimits;

#define LOGPUMP_DEFAULT_MAX_MB 100
#define LOGPUMP_DEFAULT_KEEP 2
#define LOGPUMP_MAX_KEEP 100

typedef struct LogPump LogPump;

/*
 * Opens log_path for appending (O_NOFOLLOW) and a pipe. Returns 0 with the pump and
 * the pipe's write end (for the rank's stdout and stderr, close-on-exec to be cleared
 * by dup2) or -errno. The pump's own descriptors are close-on-exec and numbered 10 or
 * above, so that the caller's dup2 onto 0 to 3 cannot hit them.
 */
int logpump_open(const char *log_path, const LogPumpLimits *limits, LogPump **ret,
                 int *ret_write_fd);
/* Moves the pump's two descriptors to first_fd and first_fd + 1; returns first_fd + 2,
 * the lowest descriptor the caller may close everything from, or -errno. */
int logpump_fds_move(LogPump *p, int first_fd);
/* The pipe's read end (non-blocking): poll it for POLLIN. */
int logpump_fd(const LogPump *p);
/* Gives the log, and the files rotation creates later, to uid:gid. */
void logpump_set_owner(LogPump *p, uid_t uid, gid_t gid);

/*
 * Moves what the pipe holds into the log, at most a few MiB per call so the caller's
 * other duties (the lease) wait little. Returns false once every writer has closed the
 * pipe.
 */
bool logpump_run(LogPump *p);
/* Appends a line of the supervisor's own to the log (it goes through the same cap). */
void logpump_note(LogPump *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Once no writer is left: moves the rest of the pipe into the log, notes the bytes that
 * were dropped, closes everything and frees p.
 */
void logpump_finish(LogPump *p);

/* Bytes read from the pipe but not written to any log file so far. */
uint64_t logpump_dropped(const LogPump *p);
