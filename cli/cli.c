/* SPDX-License-Identifier: MIT */
/*
 * The top of axctl: global options, the command table, help and the small option
 * parser every command shares. The parser is hand-written rather than getopt_long so
 * that every mistake produces the one documented line ("axctl: unknown flag --foo for
 * submit (see axctl submit --help)", exit 2), so that `--json`/`--url` work before and
 * after the command, and so that `submit` can stop at the first word of the training
 * command even without "--".
 */
#include "cli.h"

#include <curl/curl.h>
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

void cli_args_init(CliArgs *a, const CliContext *ctx, const char *command, const CliOption *options,
                   int argc, char **argv) {
        *a = (CliArgs){
                .ctx = ctx,
                .command = command,
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

int cli_parse_seconds(const CliContext *ctx, const char *flag, const char *s, int64_t *ret_ms) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9) {
                cli_error(ctx, "%s: not a number of seconds: '%s'", flag, s);
                return CLI_EXIT_USAGE;
        }
        *ret_ms = (int64_t) llround(v * 1000.0);
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

typedef struct CliCommand {
        const char *name;
        int (*run)(CliContext *ctx, int argc, char **argv);
        const char *summary;
} CliCommand;

static const CliCommand commands[] = {
        {"submit", cli_cmd_submit, "submit a job (spec file or flags)"},
        {"status", cli_cmd_status, "show one job in detail, or list jobs"},
        {"list", cli_cmd_list, "list jobs"},
        {"cancel", cli_cmd_cancel, "cancel a job"},
        {"wait", cli_cmd_wait, "wait until a job ends; the exit code tells how"},
        {"logs", cli_cmd_logs, "print (or follow) a rank's log"},
        {"events", cli_cmd_events, "print (or follow) the audit trail"},
        {"nodes", cli_cmd_nodes, "list nodes"},
        {"drain", cli_cmd_drain, "stop placing ranks on a node"},
        {"undrain", cli_cmd_undrain, "return a node to service"},
};

static void print_tool_help(FILE *f) {
        fputs("Usage: axctl [--url URL] [--ca-file PATH] [--json] COMMAND [ARGS...]\n"
              "\n"
              "Command line for the axctl training-job orchestrator.\n"
              "\n"
              "Commands:\n",
              f);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
        fputs("  help      show the help of a command\n"
              "\n"
              "Options (before or after the command):\n"
              "  --url URL        controller URL (default $AXCTL_URL, then the config file's\n"
              "                   url, then " CLI_DEFAULT_URL ")\n"
              "  --ca-file PATH   CA certificates to verify an https controller with\n"
              "                   (default $AXCTL_CA_FILE, then the config file's ca_file,\n"
              "                   then the system's)\n"
              "  --json           print the API's JSON (pretty, sorted keys) instead of tables\n"
              "  -h, --help       show help (also: axctl COMMAND --help)\n"
              "  --version        print the version\n"
              "\n"
              "Credentials: the bearer token comes from $AXCTL_TOKEN, else from `token = ...`\n"
              "in the config file ($AXCTL_CONFIG, default ~/.config/axctl/config), which must\n"
              "then be private to its owner (chmod 600). Keys: url, token, ca_file.\n"
              "\n"
              "Exit codes:\n"
              "  0  success (wait: the job succeeded)\n"
              "  1  the job failed; conflict (e.g. cancelling a finished job); other failure\n"
              "  2  usage error or input the controller rejected (HTTP 400/413/422)\n"
              "  3  the job was cancelled (wait)\n"
              "  4  timed out (wait --timeout)\n"
              "  5  controller unreachable or unexpected API error\n"
              "  6  job or node not found (HTTP 404)\n"
              "  7  not authenticated: no token, or the controller rejected it (HTTP 401)\n"
              "  8  not allowed: the token's role may not do this (HTTP 403)\n",
              f);
}

static const CliCommand *command_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(commands[i].name, name) == 0)
                        return &commands[i];
        return NULL;
}

static int run_help(CliContext *ctx, int argc, char **argv) {
        if (argc == 0) {
                print_tool_help(ctx->out);
                return CLI_EXIT_OK;
        }
        const CliCommand *c = command_find(argv[0]);
        if (!c) {
                cli_error(ctx, "unknown command %s (see axctl --help)", argv[0]);
                return CLI_EXIT_USAGE;
        }
        char *help_argv[] = {(char *) "--help", NULL};
        return c->run(ctx, 1, help_argv);
}

enum {
        OPT_VERSION = 1,
};

static const CliOption global_options[] = {
        {"version", 0, false, OPT_VERSION},
        {},
};

int cli_run(int argc, char **argv, FILE *out, FILE *err) {
        CliContext ctx = {.out = out, .err = err};
        /* A broken config file must not stand in the way of --help: it is reported
         * only when a command is about to run. */
        _cleanup_free_ char *config_error = NULL;
        if (cli_context_configure(&ctx, &config_error) < 0)
                cli_context_set_url(&ctx, CLI_DEFAULT_URL);

        CliArgs a;
        cli_args_init(&a, &ctx, NULL, global_options, argc - 1, argv + 1);
        a.rest_at_positional = true;
        int r = CLI_EXIT_USAGE;
        for (;;) {
                const char *value;
                int id = cli_args_next(&a, &value);
                if (id == CLI_ARG_ERROR)
                        goto finish;
                if (id == CLI_OPT_HELP) {
                        print_tool_help(out);
                        r = CLI_EXIT_OK;
                        goto finish;
                }
                if (id == OPT_VERSION) {
                        fprintf(out, "axctl %s\n", AXCTL_VERSION);
                        r = CLI_EXIT_OK;
                        goto finish;
                }
                if (id == CLI_ARG_END) {
                        cli_error(&ctx, "no command given (see axctl --help)");
                        goto finish;
                }
                if (id == CLI_ARG_REST)
                        break;
                cli_args_apply_common(&ctx, id, value);
        }
        if (a.index >= a.argc) {
                cli_error(&ctx, "no command given (see axctl --help)");
                goto finish;
        }

        const char *name = a.argv[a.index];
        int cargc = a.argc - a.index - 1;
        char **cargv = a.argv + a.index + 1;
        if (strcmp(name, "help") == 0) {
                r = run_help(&ctx, cargc, cargv);
                goto finish;
        }
        const CliCommand *c = command_find(name);
        if (!c) {
                cli_error(&ctx, "unknown command %s (see axctl --help)", name);
                goto finish;
        }
        if (config_error) {
                cli_error(&ctx, "%s", config_error);
                goto finish;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = c->run(&ctx, cargc, cargv);
        fflush(out);
        curl_global_cleanup();
finish:
        cli_context_done(&ctx);
        return r;
}

int cli_main(int argc, char **argv) {
        return cli_run(argc, argv, stdout, stderr);
}
