/* SPDX-License-Identifier: MIT */
/*
 * `axctl submit`: turns flags (or a spec file, or both) into the job spec of
 * DESIGN.md §3 and POSTs it. The spec carries only what was given, so the controller
 * stays the single place that fills in defaults and validates; the one exception is
 * `user`, which defaults to $USER as people expect. Flags given together with -f are
 * put over the file's fields (nested objects merge), so a CI script can keep one spec
 * file and vary the priority or an environment variable per run.
 */
#include "cli.h"

#include <errno.h>
#include <string.h>

#include "spec.h"

static const char submit_help[] =
        "Usage: axctl submit -f SPEC.json [FLAGS...] [-- COMMAND ARGS...]\n"
        "       axctl submit [FLAGS...] [--] COMMAND ARGS...\n"
        "\n"
        "Submits a job. With -f the spec is read from the file (\"-\" = stdin); flags\n"
        "given as well override the file's fields. Only given fields are sent.\n"
        "\n"
        "Flags:\n"
        "  -f, --file FILE               job spec JSON (\"-\" reads stdin)\n"
        "  --name N                      job name\n"
        "  --project P                   project (quota owner)\n"
        "  --user U                      user (default $USER; with a token, the token's)\n"
        "  --priority N                  priority within the project\n"
        "  --ranks N                     number of ranks (processes)\n"
        "  --ranks-per-node N            ranks on each node\n"
        "  --accelerator KIND            accelerator kind, e.g. nvidia-h100\n"
        "  --accelerators-per-rank N     accelerators for each rank\n"
        "  --cpus N                      CPUs for each rank\n"
        "  --memory-mb N                 memory for each rank, MiB\n"
        "  --framework torch|jax|none    rendezvous environment to set (also axlearn)\n"
        "  --checkpoint-dir D            checkpoint directory (resume from its latest step)\n"
        "  --max-restarts N              restart budget\n"
        "  --hang-timeout S              seconds without progress that count as a hang\n"
        "  --env K=V                     environment for the ranks (repeatable)\n"
        "  --label K=V                   job label (repeatable)\n"
        "  --workdir D                   working directory of the ranks\n"
        "  --idempotency-key K           sent as Idempotency-Key (default\n"
        "                                $AXCTL_IDEMPOTENCY_KEY): resubmitting with the same\n"
        "                                key and spec returns the same job\n"
        "  --wait                        then wait like `axctl wait` (same exit codes)\n"
        "  --timeout S                   with --wait: give up after S seconds (exit 4)\n"
        "  --json                        print the job view as JSON instead of the id\n"
        "\n"
        "Output: the new job's id on its own line (e.g. \"7\"). With --wait, a second\n"
        "line gives the outcome as `axctl wait` prints it; with --json --wait, only the\n"
        "final job view is printed.\n";

enum {
        OPT_FILE = 1,
        OPT_NAME,
        OPT_PROJECT,
        OPT_USER,
        OPT_PRIORITY,
        OPT_RANKS,
        OPT_RANKS_PER_NODE,
        OPT_ACCELERATOR,
        OPT_ACCELERATORS_PER_RANK,
        OPT_CPUS,
        OPT_MEMORY_MB,
        OPT_FRAMEWORK,
        OPT_CHECKPOINT_DIR,
        OPT_MAX_RESTARTS,
        OPT_HANG_TIMEOUT,
        OPT_ENV,
        OPT_LABEL,
        OPT_WORKDIR,
        OPT_IDEMPOTENCY_KEY,
        OPT_WAIT,
        OPT_TIMEOUT,
};

static const CliOption submit_options[] = {
        {"file", 'f', true, OPT_FILE},
        {"name", 0, true, OPT_NAME},
        {"project", 0, true, OPT_PROJECT},
        {"user", 0, true, OPT_USER},
        {"priority", 0, true, OPT_PRIORITY},
        {"ranks", 0, true, OPT_RANKS},
        {"ranks-per-node", 0, true, OPT_RANKS_PER_NODE},
        {"accelerator", 0, true, OPT_ACCELERATOR},
        {"accelerators-per-rank", 0, true, OPT_ACCELERATORS_PER_RANK},
        {"cpus", 0, true, OPT_CPUS},
        {"memory-mb", 0, true, OPT_MEMORY_MB},
        {"framework", 0, true, OPT_FRAMEWORK},
        {"checkpoint-dir", 0, true, OPT_CHECKPOINT_DIR},
        {"max-restarts", 0, true, OPT_MAX_RESTARTS},
        {"hang-timeout", 0, true, OPT_HANG_TIMEOUT},
        {"env", 0, true, OPT_ENV},
        {"label", 0, true, OPT_LABEL},
        {"workdir", 0, true, OPT_WORKDIR},
        {"idempotency-key", 0, true, OPT_IDEMPOTENCY_KEY},
        {"wait", 0, false, OPT_WAIT},
        {"timeout", 0, true, OPT_TIMEOUT},
        {},
};

void cli_submit_done(CliSubmit *s) {
        json_decref(s->spec);
        free(s->spec_file);
        free(s->idempotency_key);
        *s = (CliSubmit){};
}

/* Returns the nested object key of spec, creating it when missing. */
static json_t *spec_object(json_t *spec, const char *key) {
        json_t *o = json_object_get(spec, key);
        if (!json_is_object(o)) {
                o = json_object();
                json_object_set_new(spec, key, o);
        }
        return o;
}

static int set_int(const CliContext *ctx, json_t *obj, const char *key, const char *flag,
                   const char *value, int64_t min) {
        int64_t v;
        int r = cli_parse_int(ctx, flag, value, min, INT32_MAX, &v);
        if (r != CLI_EXIT_OK)
                return r;
        json_object_set_new(obj, key, json_integer(v));
        return CLI_EXIT_OK;
}

static int set_pair(const CliContext *ctx, json_t *obj, const char *flag, const char *value) {
        const char *eq = strchr(value, '=');
        if (!eq || eq == value) {
                cli_error(ctx, "%s: expected KEY=VALUE, got '%s'", flag, value);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *key = strndup(value, (size_t) (eq - value));
        if (!key)
                abort();
        json_object_set_new(obj, key, json_string(eq + 1));
        return CLI_EXIT_OK;
}

static int submit_apply_option(const CliContext *ctx, CliSubmit *s, int id, const char *v) {
        json_t *spec = s->spec;
        switch (id) {
        case OPT_FILE:
                free(s->spec_file);
                s->spec_file = xstrdup(v);
                return CLI_EXIT_OK;
        case OPT_NAME:
                json_object_set_new(spec, "name", json_string(v));
                return CLI_EXIT_OK;
        case OPT_PROJECT:
                json_object_set_new(spec, "project", json_string(v));
                return CLI_EXIT_OK;
        case OPT_USER:
                json_object_set_new(spec, "user", json_string(v));
                return CLI_EXIT_OK;
        case OPT_PRIORITY:
                return set_int(ctx, spec, "priority", "--priority", v, INT32_MIN);
        case OPT_RANKS:
                return set_int(ctx, spec, "ranks", "--ranks", v, 0);
        case OPT_RANKS_PER_NODE:
                return set_int(ctx, spec, "ranks_per_node", "--ranks-per-node", v, 0);
        case OPT_ACCELERATOR:
                json_object_set_new(spec_object(spec, "resources"), "accelerator", json_string(v));
                return CLI_EXIT_OK;
        case OPT_ACCELERATORS_PER_RANK:
                return set_int(ctx, spec_object(spec, "resources"), "accelerators_per_rank",
                               "--accelerators-per-rank", v, 0);
        case OPT_CPUS:
                return set_int(ctx, spec_object(spec, "resources"), "cpus", "--cpus", v, 0);
        case OPT_MEMORY_MB:
                return set_int(ctx, spec_object(spec, "resources"), "memory_mb", "--memory-mb", v,
                               0);
        case OPT_FRAMEWORK:
                /* The controller's own parser decides what is a framework. */
                if (framework_from_string(v) == _FRAMEWORK_INVALID) {
                        cli_error(ctx, "--framework: unknown framework '%s' (torch, jax, none)", v);
                        return CLI_EXIT_USAGE;
                }
                json_object_set_new(spec, "framework", json_string(v));
                return CLI_EXIT_OK;
        case OPT_CHECKPOINT_DIR:
                json_object_set_new(spec, "checkpoint_dir", json_string(v));
                return CLI_EXIT_OK;
        case OPT_MAX_RESTARTS:
                return set_int(ctx, spec_object(spec, "restart"), "max_restarts", "--max-restarts",
                               v, 0);
        case OPT_HANG_TIMEOUT:
                return set_int(ctx, spec, "hang_timeout_s", "--hang-timeout", v, 0);
        case OPT_ENV:
                return set_pair(ctx, spec_object(spec, "env"), "--env", v);
        case OPT_LABEL:
                return set_pair(ctx, spec_object(spec, "labels"), "--label", v);
        case OPT_WORKDIR:
                json_object_set_new(spec, "workdir", json_string(v));
                return CLI_EXIT_OK;
        case OPT_IDEMPOTENCY_KEY:
                free(s->idempotency_key);
                s->idempotency_key = xstrdup(v);
                return CLI_EXIT_OK;
        case OPT_WAIT:
                s->wait = true;
                return CLI_EXIT_OK;
        case OPT_TIMEOUT:
                return cli_parse_seconds(ctx, "--timeout", v, &s->wait_timeout_ms);
        }
        return CLI_EXIT_USAGE;
}

int cli_submit_parse(CliContext *ctx, int argc, char **argv, const char *default_user,
                     CliSubmit *s) {
        *s = (CliSubmit){.spec = json_object()};
        CliArgs a;
        cli_args_init(&a, ctx, "submit", submit_help, submit_options, argc, argv);
        a.rest_at_positional = true;
        int rest = -1;
        for (;;) {
                const char *value;
                int id = cli_args_next_own(&a, &value);
                if (id == CLI_ARG_EXIT) {
                        s->help = a.exit == CLI_EXIT_OK;
                        return a.exit;
                }
                if (id == CLI_ARG_END)
                        break;
                if (id == CLI_ARG_REST) {
                        rest = a.index;
                        break;
                }
                int r = submit_apply_option(ctx, s, id, value);
                if (r != CLI_EXIT_OK)
                        return r;
        }

        if (rest >= 0 && rest < argc) {
                json_t *command = json_array();
                for (int i = rest; i < argc; i++)
                        json_array_append_new(command, json_string(argv[i]));
                json_object_set_new(s->spec, "command", command);
        } else if (!s->spec_file) {
                cli_error(ctx, "submit needs a command after -- or a spec file with -f "
                               "(see axctl submit --help)");
                return CLI_EXIT_USAGE;
        }

        if (!s->idempotency_key) {
                const char *k = getenv("AXCTL_IDEMPOTENCY_KEY");
                if (k && *k)
                        s->idempotency_key = xstrdup(k);
        }
        if (s->wait_timeout_ms > 0 && !s->wait) {
                cli_error(ctx, "--timeout needs --wait (see axctl submit --help)");
                return CLI_EXIT_USAGE;
        }
        /* With a spec file the file may name the user; the default goes in after merging. */
        if (!s->spec_file && !json_object_get(s->spec, "user") && default_user && *default_user)
                json_object_set_new(s->spec, "user", json_string(default_user));
        return CLI_EXIT_OK;
}

int cli_submit_load_file(const CliContext *ctx, CliSubmit *s, FILE *in) {
        const char *name = strcmp(s->spec_file, "-") == 0 ? "<stdin>" : s->spec_file;
        FILE *f = in;
        if (!f) {
                f = fopen(s->spec_file, "re");
                if (!f) {
                        cli_error(ctx, "cannot open %s: %s", name, strerror(errno));
                        return CLI_EXIT_USAGE;
                }
        }
        json_error_t jerr;
        json_t *file_spec = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
        if (f != in)
                fclose(f);
        if (!file_spec) {
                cli_error(ctx, "%s: line %d column %d: %s", name, jerr.line, jerr.column,
                          jerr.text);
                return CLI_EXIT_USAGE;
        }
        if (!json_is_object(file_spec)) {
                cli_error(ctx, "%s: the job spec must be a JSON object", name);
                json_decref(file_spec);
                return CLI_EXIT_USAGE;
        }
        /* Flags win; nested objects (resources, restart, env, labels) merge key by key. */
        json_object_update_recursive(file_spec, s->spec);
        json_decref(s->spec);
        s->spec = file_spec;
        return CLI_EXIT_OK;
}

int cli_cmd_submit(CliContext *ctx, int argc, char **argv) {
        /* Declared before the first goto, so the cleanup never sees an uninitialised value. */
        _cleanup_json_ json_t *job = NULL;
        CliSubmit s;
        /* With a token the controller knows who submits and fills in the user itself;
         * $USER (a CI runner's account, say) would only be refused as another user. */
        const char *default_user = ctx->token ? NULL : getenv("USER");
        int r = cli_submit_parse(ctx, argc, argv, default_user, &s);
        if (r != CLI_EXIT_OK || s.help) {
                cli_submit_done(&s);
                return r;
        }
        if (s.spec_file) {
                bool from_stdin = strcmp(s.spec_file, "-") == 0;
                r = cli_submit_load_file(ctx, &s, from_stdin ? stdin : NULL);
                if (r != CLI_EXIT_OK)
                        goto finish;
                if (!json_object_get(s.spec, "user") && default_user && *default_user)
                        json_object_set_new(s.spec, "user", json_string(default_user));
        }

        r = cli_api_call(ctx, "POST", "/v1/jobs", s.spec, s.idempotency_key, &job);
        if (r != CLI_EXIT_OK)
                goto finish;
        json_t *id = json_object_get(job, "id");
        if (!json_is_integer(id)) {
                cli_error(ctx, "unexpected answer from controller: the job view has no id");
                r = CLI_EXIT_UNREACHABLE;
                goto finish;
        }
        if (!s.wait) {
                if (ctx->json)
                        cli_json_print(ctx->out, job);
                else
                        fprintf(ctx->out, "%lld\n", (long long) json_integer_value(id));
                goto finish;
        }
        if (!ctx->json) {
                fprintf(ctx->out, "%lld\n", (long long) json_integer_value(id));
                fflush(ctx->out);
        }
        r = cli_job_wait(ctx, json_integer_value(id), s.wait_timeout_ms);
finish:
        cli_submit_done(&s);
        return r;
}
