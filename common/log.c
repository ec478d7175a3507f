/* SPDX-License-Identifier: MIT */
/* stderr logging with levels; see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *log_ident = "axctl";
static LogLevel log_max_level = LOG_LEVEL_INFO;

static const char *const level_names[_LOG_LEVEL_MAX] = {
        [LOG_LEVEL_ERROR] = "error",
        [LOG_LEVEL_WARNING] = "warning",
        [LOG_LEVEL_INFO] = "info",
        [LOG_LEVEL_DEBUG] = "debug",
};

void log_setup(const char *ident, LogLevel max_level) {
        log_ident = ident;
        log_max_level = max_level;
}

LogLevel log_level_from_string(const char *s) {
        for (int i = 0; i < _LOG_LEVEL_MAX; i++)
                if (s && strcmp(s, level_names[i]) == 0)
                        return (LogLevel) i;
        return _LOG_LEVEL_INVALID;
}

void log_msg(LogLevel level, const char *fmt, ...) {
        if (level > log_max_level)
                return;
        char tbuf[32];
        char line[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* One write per line, so lines of concurrent processes do not interleave. */
        fprintf(stderr, "%s %s %s: %s\n", util_format_time(util_wall_ms(), tbuf, sizeof(tbuf)),
                level_names[level], log_ident, line);
}
