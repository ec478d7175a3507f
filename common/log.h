/* SPDX-License-Identifier: MIT */
/*
 * Logging for the top of each program (main loops, request handlers). Library code
 * returns errors instead of logging.
 *
 * Two sinks, chosen once by log_setup():
 *  - stderr: one "TIME LEVEL ident: message" line per call, for people and tests;
 *  - the systemd journal, when stderr is the journal stream systemd gave the service
 *    ($JOURNAL_STREAM names stderr's device and inode): one structured entry per call
 *    with MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE/CODE_LINE/CODE_FUNC and, from
 *    log_job(), JOB_ID, NODE and ATTEMPT, so `journalctl JOB_ID=7` shows one job's story
 *    across the controller and every agent.
 * Entries go over journald's documented native protocol (a datagram of KEY=value
 * fields, what sd_journal_send() writes) so that programs linking common/ need not
 * link libsystemd. If the journal socket refuses an entry the line goes to stderr,
 * which under systemd still reaches the journal, only without the extra fields.
 */
#pragma once

#include <stdint.h>

#include "util.h"

typedef enum LogLevel {
        LOG_LEVEL_ERROR,
        LOG_LEVEL_WARNING,
        LOG_LEVEL_INFO,
        LOG_LEVEL_DEBUG,
        _LOG_LEVEL_MAX,
        _LOG_LEVEL_INVALID = -1,
} LogLevel;

/* Sets the identifier and the most verbose level shown, and picks the sink (above). */
void log_setup(const char *ident, LogLevel max_level);
/* Parses "error", "warning", "info" or "debug"; _LOG_LEVEL_INVALID otherwise. */
LogLevel log_level_from_string(const char *s);
const char *log_level_to_string(LogLevel level);

/*
 * Whether stderr is the journal stream of this service, as systemd documents it for
 * $JOURNAL_STREAM ("DEVICE:INODE" of the stream; compared, since a child may inherit
 * the variable with another stderr).
 */
bool log_stderr_is_journal(void);
/*
 * Sends entries to the journald native socket at socket_path from now on; NULL goes
 * back to stderr lines. log_setup() calls it with /run/systemd/journal/socket; tests
 * call it with a socket of their own. Returns 0 or -errno (then stderr is used).
 */
int log_open_journal(const char *socket_path);

/* The one entry point; the macros below fill in the source location. */
void log_full(LogLevel level, const char *file, int line, const char *func, int64_t job,
              const char *node, int attempt, const char *fmt, ...) _printf_(8, 9);
/* log_full() without location or fields, for callers that hold a level in a variable. */
void log_msg(LogLevel level, const char *fmt, ...) _printf_(2, 3);

#define log_at_(level, ...) log_full((level), __FILE__, __LINE__, __func__, 0, NULL, 0, __VA_ARGS__)
#define log_error(...) log_at_(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warning(...) log_at_(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_info(...) log_at_(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_at_(LOG_LEVEL_DEBUG, __VA_ARGS__)

/*
 * A message about a job, a node or a rank's attempt: the journal entry carries JOB_ID
 * (when job > 0), NODE (when node is not NULL) and ATTEMPT (when attempt > 0). On
 * stderr only the message is printed, so say the job or node in the text as well.
 */
#define log_job(level, job, node, attempt, ...) \
        log_full((level), __FILE__, __LINE__, __func__, (job), (node), (attempt), __VA_ARGS__)

/* Logs at error level and returns r (a negative errno), for "return log_error_errno(...)". */
#define log_error_errno(r, ...) (log_error(__VA_ARGS__), (r))
