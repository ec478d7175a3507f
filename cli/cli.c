/* SPDX-License-Identifier: MIT */
/* The top of axctl: global options, the command table and help. */
#include "cli.h"

#include <string.h>
#include <unistd.h>

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
        {"goodput", cli_cmd_goodput, "goodput and badput by cause, per job and project"},
        {"drain", cli_cmd_drain, "stop placing ranks on a node"},
        {"undrain", cli_cmd_undrain, "return a node to service"},
};

static void print_tool_help(FILE *f) {
        fputs("Usage: axctl [--url URL[,URL...]] [--ca-file PATH] [--json] COMMAND [ARGS...]\n"
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
              "                   url, then " CLI_DEFAULT_URL "); several, comma\n"
              "                   separated, for controllers that fail over: axctl\n"
              "                   finds the one that leads\n"
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

/* An option given before the command (--url, --ca-file, --json). */
typedef struct GlobalOption {
        int id;
        const char *value;
} GlobalOption;

static const CliOption global_options[] = {
        {"version", 0, false, OPT_VERSION},
        {},
};

int cli_run(int argc, char **argv, FILE *raw_out, FILE *raw_err) {
        /* What the controller sends (names, reasons, events, messages) is passed on from
         * agents and ranks: nothing of it reaches a terminal as a control sequence. A
         * rank's log is its own bytes: kept as they are for a pipe or file, escaped on a
         * terminal (carriage returns, as progress bars use, kept). */
        FILE *out = cli_escaping_stream(raw_out, false);
        FILE *err = cli_escaping_stream(raw_err, false);
        int out_fd = fileno(raw_out);
        FILE *log_out =
                out_fd >= 0 && isatty(out_fd) ? cli_escaping_stream(raw_out, true) : raw_out;
        if (!out || !err || !log_out) {
                fprintf(raw_err, "axctl: cannot set up the output streams\n");
                if (out)
                        fclose(out);
                if (err)
                        fclose(err);
                return CLI_EXIT_FAILED;
        }
        CliContext ctx = {.out = out, .err = err, .log_out = log_out};
        CliArgs a;
        cli_args_init(&a, &ctx, NULL, NULL, global_options, argc - 1, argv + 1);
        a.rest_at_positional = true;
        /* The config file is read only when a command is about to run: --version and
         * --help need nothing of it, and a broken file must not stand in their way. The
         * options before the command are applied after it, as they override it. */
        _cleanup_free_ GlobalOption *options = xcalloc((size_t) argc, sizeof(*options));
        size_t n_options = 0;
        _cleanup_free_ char *config_error = NULL;
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
                options[n_options++] = (GlobalOption){id, value};
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
        if (cli_context_configure(&ctx, &config_error) < 0) {
                cli_error(&ctx, "%s", config_error);
                goto finish;
        }
        for (size_t i = 0; i < n_options; i++)
                cli_args_apply_common(&ctx, options[i].id, options[i].value);
        r = c->run(&ctx, cargc, cargv);
        fflush(out);
finish:
        cli_context_done(&ctx);
        if (log_out != raw_out)
                fclose(log_out);
        fclose(out);
        fclose(err);
        return r;
}

int cli_main(int argc, char **argv) {
        return cli_run(argc, argv, stdout, stderr);
}
