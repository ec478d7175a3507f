/* SPDX-License-Identifier: MIT */
/*
 * The small option parser every command shares, and the one-line error. It is
 * hand-written rather than getopt_long so that every mistake produces the one
 * documented line ("axctl: unknown flag --foo for submit (see axctl submit --help)",
 * exit 2), so that `--json`/`--url` work before and after the command, and so that
 * `submit` can stop at the first word of the training command even without "--".
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

void cli_error(const CliContext *ctx, const char *fmt, ...) {
        char line[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* Server messages may carry newlines; the contract is one line per error. */
        for (char *p = line; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        fprintf(ctx->err, "axctl: %s\n", line);
        fflush(ctx->err);
}

static const CliOption common_options[] = {
        {"help", 'h', false, CLI_OPT_HELP},
        {"json", 0, false, CLI_OPT_JSON},
        {"url", 0, true, CLI_OPT_URL},
        {"ca-file", 0, true, CLI_OPT_CA_FILE},
        {},
};

void cli_args_init(CliArgs *a, CliContext *ctx, const char *command, const char *help,
                   const CliOption *options, int argc, char **argv) {
        *a = (CliArgs){
                .ctx = ctx,
                .command = command,
                .help = help,
                .options = options,
                .argc = argc,
                .argv = argv,
        };
}

static const CliOption *option_find(const CliOption *table, const char *name, size_t len,
                                    char short_name) {
        for (const CliOption *o = table; o && o->long_name; o++) {
                if (short_name && o->short_name == short_name)
                        return o;
                if (!short_name && strlen(o->long_name) == len &&
                    strncmp(o->long_name, name, len) == 0)
                        return o;
        }
        return NULL;
}

static int args_unknown(CliArgs *a, const char *flag) {
        if (a->command)
                cli_error(a->ctx, "unknown flag %s for %s (see axctl %s --help)", flag, a->command,
                          a->command);
        else
                cli_error(a->ctx, "unknown flag %s (see axctl --help)", flag);
        return CLI_ARG_ERROR;
}

static int args_needs_value(CliArgs *a, const char *flag) {
        cli_error(a->ctx, "flag %s%s%s needs a value (see axctl%s%s --help)", flag,
                  a->command ? " for " : "", a->command ? a->command : "", a->command ? " " : "",
                  a->command ? a->command : "");
        return CLI_ARG_ERROR;
}

int cli_args_next(CliArgs *a, const char **ret_value) {
        *ret_value = NULL;
        if (a->index >= a->argc)
                return CLI_ARG_END;

        const char *arg = a->argv[a->index];
        if (a->options_done || arg[0] != '-' || arg[1] == '\0') {
                if (a->rest_at_positional && !a->options_done)
                        return CLI_ARG_REST;
                a->index++;
                *ret_value = arg;
                return CLI_ARG_POSITIONAL;
        }
        a->index++;

        if (strcmp(arg, "--") == 0) {
                if (a->rest_at_positional)
                        return CLI_ARG_REST;
                a->options_done = true;
                return cli_args_next(a, ret_value);
        }

        const CliOption *o;
        const char *inline_value = NULL;
        char flag[128];
        if (arg[1] == '-') {
                const char *name = arg + 2;
                const char *eq = strchr(name, '=');
                size_t len = eq ? (size_t) (eq - name) : strlen(name);
                snprintf(flag, sizeof(flag), "--%.*s", (int) len, name);
                o = option_find(a->options, name, len, 0);
                if (!o)
                        o = option_find(common_options, name, len, 0);
                if (eq)
                        inline_value = eq + 1;
        } else {
                snprintf(flag, sizeof(flag), "-%c", arg[1]);
                o = option_find(a->options, NULL, 0, arg[1]);
                if (!o)
                        o = option_find(common_options, NULL, 0, arg[1]);
                if (arg[2] != '\0')
                        inline_value = arg + 2; /* "-fjob.json" */
        }
        if (!o)
                return args_unknown(a, flag);

        if (!o->has_arg) {
                if (inline_value) {
                        cli_error(a->ctx, "flag %s takes no value", flag);
                        return CLI_ARG_ERROR;
                }
                return o->id;
        }
        if (inline_value) {
                *ret_value = inline_value;
                return o->id;
        }
        if (a->index >= a->argc)
                return args_needs_value(a, flag);
        *ret_value = a->argv[a->index++];
        return o->id;
}

int cli_args_next_own(CliArgs *a, const char **ret_value) {
        for (;;) {
                int id = cli_args_next(a, ret_value);
                switch (id) {
                case CLI_OPT_HELP:
                        fputs(a->help, a->ctx->out);
                        a->exit = CLI_EXIT_OK;
                        return CLI_ARG_EXIT;
                case CLI_ARG_ERROR:
                        a->exit = CLI_EXIT_USAGE;
                        return CLI_ARG_EXIT;
                case CLI_OPT_JSON:
                case CLI_OPT_URL:
                case CLI_OPT_CA_FILE:
                        cli_args_apply_common(a->ctx, id, *ret_value);
                        break;
                default:
                        return id;
                }
        }
}

int cli_parse_int(const CliContext *ctx, const char *flag, const char *s, int64_t min, int64_t max,
                  int64_t *ret) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0') {
                cli_error(ctx, "%s: not an integer: '%s'", flag, s);
                return CLI_EXIT_USAGE;
        }
        if (v < min || v > max) {
                cli_error(ctx, "%s: %lld is out of range (%lld..%lld)", flag, v, (long long) min,
                          (long long) max);
                return CLI_EXIT_USAGE;
        }
        *ret = v;
        return CLI_EXIT_OK;
}

int cli_parse_job_id(const CliContext *ctx, const char *s, int64_t *ret) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v <= 0) {
                cli_error(ctx, "invalid job id '%s': expected a positive integer", s);
                return CLI_EXIT_USAGE;
        }
        *ret = v;
        return CLI_EXIT_OK;
}

int cli_parse_seconds(const CliContext *ctx, const char *flag, const char *s, int64_t *ret_ms) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9) {
                cli_error(ctx, "%s: not a number of seconds: '%s'", flag, s);
                return CLI_EXIT_USAGE;
        }
        /* llround for v >= 0, without making every start load libm for one call. */
        *ret_ms = (int64_t) (v * 1000.0 + 0.5);
        return CLI_EXIT_OK;
}

void cli_args_apply_common(CliContext *ctx, int id, const char *value) {
        if (id == CLI_OPT_JSON)
                ctx->json = true;
        else if (id == CLI_OPT_URL)
                cli_context_set_url(ctx, value);
        else if (id == CLI_OPT_CA_FILE)
                cli_context_set_ca_file(ctx, value);
}

int cli_args_unexpected(const CliContext *ctx, const char *command, const char *word) {
        cli_error(ctx, "unexpected argument '%s' for %s (see axctl %s --help)", word, command,
                  command);
        return CLI_EXIT_USAGE;
}

int cli_args_missing(const CliContext *ctx, const char *command, const char *what) {
        cli_error(ctx, "%s needs %s (see axctl %s --help)", command, what, command);
        return CLI_EXIT_USAGE;
}
