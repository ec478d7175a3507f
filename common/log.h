/* SPDX-License-Identifier: MIT */
/*
 * Logging for the top of each program (main loops, request handlers). Library code
 * returns errors instead of logging. Lines go to stderr as "LEVEL ident: message";
 * the systemd issue adds journald with structured fields.
 */
#pragma once

#include "util.h"

typedef enum LogLevel {
        LOG_LEVEL_ERROR,
        LOG_LEVEL_WARNING,
        LOG_LEVEL_INFO,
        LOG_LEVEL_DEBUG,
        _LOG_LEVEL_MAX,
        _LOG_LEVEL_INVALID = -1,
} LogLevel;

void log_setup(const char *ident, LogLevel max_level);
/* Parses "error", "warning", "info" or "debug"; _LOG_LEVEL_INVALID otherwise. */
LogLevel log_level_from_string(const char *s);
void log_msg(LogLevel level, const char *fmt, ...) _printf_(2, 3);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* Logs at error level and returns r (a negative errno), for "return log_error_errno(...)". */
#define log_error_errno(r, ...) (log_msg(LOG_LEVEL_ERROR, __VA_ARGS__), (r))
