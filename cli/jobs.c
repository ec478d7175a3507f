/* SPDX-License-Identifier: MIT */
/*
 * Job commands: `status`, `list`, `cancel` and `wait`. `wait` is what CI scripts
 * branch on, so its exit code is the job's outcome (0 succeeded, 1 failed, 3
 * cancelled, 4 timeout, 5 unreachable, 6 not found). It polls GET /v1/jobs/{id}
 * starting at 200 ms and backing off to 1 s, and rides out a controller restart: once
 * the controller has answered, connection errors and 5xx are retried for
 * CLI_WAIT_OUTAGE_MS before giving up, because the design promises that restarting
 * the controller does not disturb running jobs and CI should not fail because of it.
 */
#include "cli.h"
#include "url.h"

#include <errno.h>
#include <string.h>

#define CLI_WAIT_FIRST_POLL_MS 200
#define CLI_WAIT_MAX_POLL_MS 1000
#define CLI_WAIT_OUTAGE_MS 15000

int cli_exit_for_job_state(const char *state) {
        if (!state)
                return -1;
        if (strcmp(state, "succeeded") == 0)
                return CLI_EXIT_OK;
        if (strcmp(state, "failed") == 0)
                return CLI_EXIT_FAILED;
        if (strcmp(state, "cancelled") == 0)
                return CLI_EXIT_CANCELLED;
        return -1;
}

/* ---- list ---- */

static const char list_help[] =
        "Usage: axctl list [--state S] [--project P] [--limit N] [--all]\n"
        "\n"
        "Lists jobs, newest first: ID NAME PROJECT USER STATE ATTEMPT RESTARTS AGE REASON\n"
        "(AGE since creation). --all follows the pages (next_after) to the end.\n"
        "With --json, prints {\"jobs\": [...], \"next_after\": ...} (with --all, all pages\n"
        "in one list and next_after null).\n";

typedef struct ListQuery {
        const char *state;
        const char *project;
        int64_t limit; /* 0: the controller's default */
        bool all;
} ListQuery;

static char *list_path(const ListQuery *q, int64_t after) {
        _cleanup_free_ char *state = q->state ? url_escape(q->state) : NULL;
        _cleanup_free_ char *project = q->project ? url_escape(q->project) : NULL;
        _cleanup_free_ char *limit = q->limit > 0 ? xasprintf("%lld", (long long) q->limit) : NULL;
        _cleanup_free_ char *after_s = after > 0 ? xasprintf("%lld", (long long) after) : NULL;
        const char *keys[] = {"state", "project", "limit", "after"};
        const char *values[] = {state, project, limit, after_s};

        char *path = xstrdup("/v1/jobs");
        char sep = '?';
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                if (!values[i])
                        continue;
                char *p = xasprintf("%s%c%s=%s", path, sep, keys[i], values[i]);
                free(path);
                path = p;
                sep = '&';
        }
        return path;
}

static void print_job_table(const CliContext *ctx, json_t *jobs) {
        static const char *const headers[] = {"ID",      "NAME",     "PROJECT", "USER",  "STATE",
                                              "ATTEMPT", "RESTARTS", "AGE",     "REASON"};
        _cleanup_table_ CliTable *t = cli_table_new(ELEMENTSOF(headers), headers);
        int64_t now = util_wall_ms();
        size_t i;
        json_t *job;
        json_array_foreach(jobs, i, job) {
                const char *keys[] = {"id",    "name",    "project", "user",
                                      "state", "attempt", "restarts"};
                char *cells[9] = {};
                for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                        cells[k] = cli_json_cell(json_object_get(job, keys[k]));
                char age[32];
                cli_format_age_since(json_string_value(json_object_get(job, "created_at")), now,
                                     age, sizeof(age));
                cells[7] = xstrdup(age);
                cells[8] = cli_json_cell(json_object_get(job, "reason"));
                cli_table_add_row(t, (const char *const *) cells);
                for (size_t k = 0; k < ELEMENTSOF(cells); k++)
                        free(cells[k]);
        }
        cli_table_print(t, ctx->out);
}

static int list_run(const CliContext *ctx, const ListQuery *q) {
        _cleanup_json_ json_t *all = json_array();
        _cleanup_json_ json_t *first = NULL;
        int64_t after = 0;
        for (;;) {
                _cleanup_free_ char *path = list_path(q, after);
                json_t *page = NULL;
                int r = cli_api_call(ctx, "GET", path, NULL, NULL, &page);
                if (r != CLI_EXIT_OK)
                        return r;
                json_t *jobs = json_object_get(page, "jobs");
                if (!json_is_array(jobs)) {
                        json_decref(page);
                        cli_error(ctx, "unexpected answer from controller: no \"jobs\" list");
                        return CLI_EXIT_UNREACHABLE;
                }
                json_array_extend(all, jobs);
                json_t *next_v = json_object_get(page, "next_after");
                int64_t next = json_is_integer(next_v) ? json_integer_value(next_v) : 0;
                if (!first)
                        first = page;
                else
                        json_decref(page);
                /* Ids only shrink page by page; anything else would loop forever. */
                if (!q->all || next <= 0 || (after > 0 && next >= after))
                        break;
                after = next;
        }

        if (ctx->json) {
                if (q->all) {
                        _cleanup_json_ json_t *out =
                                json_pack("{s:O,s:n}", "jobs", all, "next_after");
                        cli_json_print(ctx->out, out);
                } else {
                        cli_json_print(ctx->out, first);
                }
                return CLI_EXIT_OK;
        }
        print_job_table(ctx, all);
        return CLI_EXIT_OK;
}

enum {
        OPT_STATE = 1,
        OPT_PROJECT,
        OPT_LIMIT,
        OPT_ALL,
        OPT_ENV,
        OPT_RANK,
        OPT_ATTEMPT,
        OPT_TIMEOUT,
};

/* Applies one of list's own options; returns 1 when id was not one of them. */
static int list_option(const CliContext *ctx, ListQuery *q, int id, const char *value) {
        switch (id) {
        case OPT_STATE:
                q->state = value;
                return CLI_EXIT_OK;
        case OPT_PROJECT:
                q->project = value;
                return CLI_EXIT_OK;
        case OPT_LIMIT:
                return cli_parse_int(ctx, "--limit", value, 1, INT32_MAX, &q->limit);
        case OPT_ALL:
                q->all = true;
                return CLI_EXIT_OK;
        }
        return 1;
}

int cli_cmd_list(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {
                {"state", 0, true, OPT_STATE},
                {"project", 0, true, OPT_PROJECT},
                {"limit", 0, true, OPT_LIMIT},
                {"all", 0, false, OPT_ALL},
                {},
        };
        ListQuery q = {};
        CliArgs a;
        cli_args_init(&a, ctx, "list", list_help, options, argc, argv);
        for (;;) {
                const char *value;
                int id = cli_args_next_own(&a, &value);
                if (id == CLI_ARG_END)
                        break;
                if (id == CLI_ARG_EXIT)
                        return a.exit;
                if (id == CLI_ARG_POSITIONAL)
                        return cli_args_unexpected(ctx, "list", value);
                int r = list_option(ctx, &q, id, value);
                if (r != CLI_EXIT_OK)
                        return CLI_EXIT_USAGE;
        }
        return list_run(ctx, &q);
}

/* ---- status ---- */

static const char status_help[] =
        "Usage: axctl status [JOB] [--env [--rank N] [--attempt A]]\n"
        "       axctl status [--state S] [--project P] [--limit N] [--all]\n"
        "\n"
        "Without JOB, the same as `axctl list`. With JOB, a summary (\"key: value\" lines:\n"
        "job, name, project, user, state, attempt, restarts, reason, exit code, created,\n"
        "started, finished, checkpoint, goodput, badput by cause, checkpoint advice when\n"
        "measured, command), then an ATTEMPT table and a RANK table.\n"
        "\n"
        "  --env          print the environment each rank got (from its log), as\n"
        "                 \"# rank N\" followed by KEY=VALUE lines; with --json,\n"
        "                 {\"ranks\": [{\"rank\": N, \"env\": {...}}]}\n"
        "  --rank N       only this rank (with --env)\n"
        "  --attempt A    that attempt's logs (with --env; default the latest)\n";

static void print_time_line(FILE *f, const char *key, json_t *v, int64_t now) {
        const char *s = json_string_value(v);
        if (!s) {
                fprintf(f, "%-12s-\n", key);
                return;
        }
        char age[32];
        cli_format_age_since(s, now, age, sizeof(age));
        fprintf(f, "%-12s%s (%s ago)\n", key, s, age);
}

static void print_value_line(FILE *f, const char *key, json_t *v) {
        _cleanup_free_ char *cell = cli_json_cell(v);
        fprintf(f, "%-12s%s\n", key, *cell ? cell : "-");
}

static void print_attempts(FILE *f, json_t *attempts, int64_t now) {
        static const char *const headers[] = {"ATTEMPT",     "STATE", "RESUME-STEP",
                                              "STARTED",     "ENDED", "END-REASON",
                                              "BLAMED-NODE", "CLASS", "DETAIL"};
        _cleanup_table_ CliTable *t = cli_table_new(ELEMENTSOF(headers), headers);
        size_t i;
        json_t *at;
        json_array_foreach(attempts, i, at) {
                char started[32], ended[32];
                _cleanup_free_ char *num = cli_json_cell(json_object_get(at, "attempt"));
                _cleanup_free_ char *state = cli_json_cell(json_object_get(at, "state"));
                _cleanup_free_ char *resume = cli_json_cell(json_object_get(at, "resume_step"));
                _cleanup_free_ char *reason = cli_json_cell(json_object_get(at, "end_reason"));
                _cleanup_free_ char *blamed = cli_json_cell(json_object_get(at, "blamed_node"));
                _cleanup_free_ char *cls = cli_json_cell(json_object_get(at, "failure_class"));
                _cleanup_free_ char *detail = cli_json_cell(json_object_get(at, "detail"));
                cli_format_age_since(json_string_value(json_object_get(at, "started_at")), now,
                                     started, sizeof(started));
                cli_format_age_since(json_string_value(json_object_get(at, "ended_at")), now, ended,
                                     sizeof(ended));
                const char *cells[] = {num,    state,  resume, started, ended,
                                       reason, blamed, cls,    detail};
                cli_table_add_row(t, cells);
        }
        cli_table_print(t, f);
}

static char *devices_cell(json_t *devices) {
        if (!json_is_array(devices) || json_array_size(devices) == 0)
                return xstrdup("-");
        char *s = xstrdup("");
        size_t i;
        json_t *d;
        json_array_foreach(devices, i, d) {
                _cleanup_free_ char *cell = cli_json_cell(d);
                char *n = xasprintf("%s%s%s", s, i ? "," : "", cell);
                free(s);
                s = n;
        }
        return s;
}

static void print_ranks(FILE *f, json_t *ranks) {
        static const char *const headers[] = {"RANK", "ATTEMPT", "NODE", "STATE",  "PID",
                                              "EXIT", "SIGNAL",  "STEP", "DEVICES"};
        static const char *const keys[] = {"rank", "attempt",   "node",   "state",
                                           "pid",  "exit_code", "signal", "step"};
        _cleanup_table_ CliTable *t = cli_table_new(ELEMENTSOF(headers), headers);
        size_t i;
        json_t *rank;
        json_array_foreach(ranks, i, rank) {
                char *cells[ELEMENTSOF(headers)];
                for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                        cells[k] = cli_json_cell(json_object_get(rank, keys[k]));
                cells[8] = devices_cell(json_object_get(rank, "devices"));
                cli_table_add_row(t, (const char *const *) cells);
                for (size_t k = 0; k < ELEMENTSOF(cells); k++)
                        free(cells[k]);
        }
        cli_table_print(t, f);
}

static void print_job_summary(FILE *f, json_t *job) {
        int64_t now = util_wall_ms();
        print_value_line(f, "job:", json_object_get(job, "id"));
        print_value_line(f, "name:", json_object_get(job, "name"));
        print_value_line(f, "project:", json_object_get(job, "project"));
        print_value_line(f, "user:", json_object_get(job, "user"));
        print_value_line(f, "state:", json_object_get(job, "state"));
        print_value_line(f, "attempt:", json_object_get(job, "attempt"));
        print_value_line(f, "restarts:", json_object_get(job, "restarts"));
        print_value_line(f, "reason:", json_object_get(job, "reason"));
        print_value_line(f, "exit code:", json_object_get(job, "exit_code"));
        print_time_line(f, "created:", json_object_get(job, "created_at"), now);
        print_time_line(f, "started:", json_object_get(job, "started_at"), now);
        print_time_line(f, "finished:", json_object_get(job, "finished_at"), now);

        json_t *ck = json_object_get(job, "last_checkpoint");
        if (json_is_object(ck)) {
                _cleanup_free_ char *step = cli_json_cell(json_object_get(ck, "step"));
                _cleanup_free_ char *path = cli_json_cell(json_object_get(ck, "path"));
                fprintf(f, "%-12sstep %s at %s\n", "checkpoint:", step, path);
        } else {
                fprintf(f, "%-12s-\n", "checkpoint:");
        }
        cli_print_goodput(f, json_object_get(job, "goodput"));

        json_t *command = json_object_get(json_object_get(job, "spec"), "command");
        if (json_is_array(command)) {
                fprintf(f, "%-12s", "command:");
                size_t i;
                json_t *word;
                json_array_foreach(command, i, word)
                        fprintf(f, "%s%s", i ? " " : "", json_string_value(word) ?: "");
                fputc('\n', f);
        }

        json_t *attempts = json_object_get(job, "attempts");
        if (json_is_array(attempts) && json_array_size(attempts) > 0) {
                fputc('\n', f);
                print_attempts(f, attempts, now);
        }
        json_t *ranks = json_object_get(job, "ranks");
        if (json_is_array(ranks) && json_array_size(ranks) > 0) {
                fputc('\n', f);
                print_ranks(f, ranks);
        }
        fflush(f);
}

int cli_cmd_status(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {
                {"state", 0, true, OPT_STATE},     {"project", 0, true, OPT_PROJECT},
                {"limit", 0, true, OPT_LIMIT},     {"all", 0, false, OPT_ALL},
                {"env", 0, false, OPT_ENV},        {"rank", 0, true, OPT_RANK},
                {"attempt", 0, true, OPT_ATTEMPT}, {},
        };
        ListQuery q = {};
        bool list_flags = false, env = false;
        int64_t rank = -1, attempt = -1, id = 0;
        CliArgs a;
        cli_args_init(&a, ctx, "status", status_help, options, argc, argv);
        for (;;) {
                const char *value;
                int id_opt = cli_args_next_own(&a, &value);
                int r = CLI_EXIT_OK;
                if (id_opt == CLI_ARG_END)
                        break;
                switch (id_opt) {
                case CLI_ARG_EXIT:
                        return a.exit;
                case CLI_ARG_POSITIONAL:
                        if (id > 0)
                                return cli_args_unexpected(ctx, "status", value);
                        r = cli_parse_job_id(ctx, value, &id);
                        break;
                case OPT_ENV:
                        env = true;
                        break;
                case OPT_RANK:
                        r = cli_parse_int(ctx, "--rank", value, 0, INT32_MAX, &rank);
                        break;
                case OPT_ATTEMPT:
                        r = cli_parse_int(ctx, "--attempt", value, 1, INT32_MAX, &attempt);
                        break;
                default:
                        list_flags = true;
                        r = list_option(ctx, &q, id_opt, value);
                }
                if (r != CLI_EXIT_OK)
                        return CLI_EXIT_USAGE;
        }

        if (id == 0) {
                if (env || rank >= 0 || attempt >= 0)
                        return cli_args_missing(ctx, "status --env", "a JOB");
                return list_run(ctx, &q);
        }
        if (list_flags) {
                cli_error(ctx, "--state, --project, --limit and --all are for listing; "
                               "they do not go with a JOB (see axctl status --help)");
                return CLI_EXIT_USAGE;
        }
        if (!env && (rank >= 0 || attempt >= 0)) {
                cli_error(ctx, "--rank and --attempt go with --env (see axctl status --help)");
                return CLI_EXIT_USAGE;
        }

        _cleanup_free_ char *path = xasprintf("/v1/jobs/%lld", (long long) id);
        _cleanup_json_ json_t *job = NULL;
        int r = cli_api_call(ctx, "GET", path, NULL, NULL, &job);
        if (r != CLI_EXIT_OK)
                return r;
        if (env)
                return cli_print_rank_env(ctx, job, rank, attempt);
        if (ctx->json)
                cli_json_print(ctx->out, job);
        else
                print_job_summary(ctx->out, job);
        return CLI_EXIT_OK;
}

/* ---- cancel ---- */

static const char cancel_help[] =
        "Usage: axctl cancel JOB\n"
        "\n"
        "Cancels a job and prints its new state line (\"cancelled\", or the state it is\n"
        "in while its ranks stop). A job that already ended: message and exit 1.\n";

/* Parses "COMMAND JOB [options]": returns -1 with *ret_id set when the command is to
 * run, else the exit status to return (0 after the help). Options other than the
 * common ones go to option_cb. */
static int parse_job_only(CliContext *ctx, const char *command, const char *help,
                          const CliOption *options, int argc, char **argv, int64_t *ret_id,
                          int (*option_cb)(CliContext *ctx, int id, const char *value,
                                           void *userdata),
                          void *userdata) {
        CliArgs a;
        cli_args_init(&a, ctx, command, help, options, argc, argv);
        *ret_id = 0;
        for (;;) {
                const char *value;
                int id = cli_args_next_own(&a, &value);
                if (id == CLI_ARG_END)
                        break;
                if (id == CLI_ARG_EXIT)
                        return a.exit;
                if (id == CLI_ARG_POSITIONAL) {
                        if (*ret_id > 0)
                                return cli_args_unexpected(ctx, command, value);
                        if (cli_parse_job_id(ctx, value, ret_id) != CLI_EXIT_OK)
                                return CLI_EXIT_USAGE;
                        continue;
                }
                int r = option_cb ? option_cb(ctx, id, value, userdata) : CLI_EXIT_USAGE;
                if (r != CLI_EXIT_OK)
                        return r;
        }
        if (*ret_id == 0)
                return cli_args_missing(ctx, command, "a JOB id");
        return -1;
}

int cli_cmd_cancel(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {{}};
        int64_t id;
        int r = parse_job_only(ctx, "cancel", cancel_help, options, argc, argv, &id, NULL, NULL);
        if (r >= 0)
                return r;

        _cleanup_free_ char *path = xasprintf("/v1/jobs/%lld/cancel", (long long) id);
        _cleanup_json_ json_t *job = NULL;
        r = cli_api_call(ctx, "POST", path, NULL, NULL, &job);
        if (r != CLI_EXIT_OK)
                return r;
        if (ctx->json) {
                cli_json_print(ctx->out, job);
        } else {
                _cleanup_free_ char *line = cli_job_state_line(job);
                fprintf(ctx->out, "%s\n", line);
        }
        return CLI_EXIT_OK;
}

/* ---- wait ---- */

static const char wait_help[] =
        "Usage: axctl wait JOB [--timeout S]\n"
        "\n"
        "Waits until the job ends and prints its state line:\n"
        "  <state>[: <reason>][ (exit code N)]      e.g. \"failed: rank 1 exited (exit code 3)\"\n"
        "(with --json, the final job view). Polls every 200 ms, backing off to 1 s.\n"
        "If the controller stops answering after it has answered once, waits up to 15 s\n"
        "for it to come back.\n"
        "\n"
        "Exit codes:\n"
        "  0  succeeded          4  --timeout passed (the job keeps running)\n"
        "  1  failed             5  controller unreachable or API error\n"
        "  2  usage              6  no such job\n"
        "  3  cancelled\n";

int cli_job_wait(const CliContext *ctx, int64_t id, int64_t timeout_ms) {
        _cleanup_free_ char *path = xasprintf("/v1/jobs/%lld", (long long) id);
        int64_t start = util_now_ms();
        int64_t deadline = timeout_ms > 0 ? start + timeout_ms : 0;
        int64_t interval = CLI_WAIT_FIRST_POLL_MS;
        int64_t outage_since = 0;
        bool answered = false;
        _cleanup_free_ char *last_state = NULL;

        for (;;) {
                int64_t now = util_now_ms();
                long request_timeout = 10000;
                if (deadline && deadline - now + 1000 < request_timeout)
                        request_timeout = (long) (deadline - now + 1000);
                CliRequest req = {.method = "GET", .path = path, .timeout_ms = request_timeout};
                CliResponse resp;
                cli_http_perform(ctx, &req, &resp);
                now = util_now_ms();

                bool transient = resp.status == 0 || resp.status >= 500;
                if (transient && answered) {
                        if (outage_since == 0)
                                outage_since = now;
                        if (now - outage_since > CLI_WAIT_OUTAGE_MS) {
                                int r = cli_report_failure(ctx, &resp);
                                cli_response_done(&resp);
                                return r;
                        }
                } else if (resp.status != 200) {
                        int r = cli_report_failure(ctx, &resp);
                        cli_response_done(&resp);
                        return r;
                } else {
                        _cleanup_json_ json_t *job = json_loads(resp.body, 0, NULL);
                        const char *state = json_string_value(json_object_get(job, "state"));
                        if (!state) {
                                cli_error(ctx, "unexpected answer from controller: no job state");
                                cli_response_done(&resp);
                                return CLI_EXIT_UNREACHABLE;
                        }
                        answered = true;
                        outage_since = 0;
                        int code = cli_exit_for_job_state(state);
                        if (code >= 0) {
                                if (ctx->json) {
                                        cli_json_print(ctx->out, job);
                                } else {
                                        _cleanup_free_ char *line = cli_job_state_line(job);
                                        fprintf(ctx->out, "%s\n", line);
                                        fflush(ctx->out);
                                }
                                cli_response_done(&resp);
                                return code;
                        }
                        /* A change means things are moving: look again soon. */
                        if (!util_streq_ptr(last_state, state)) {
                                free(last_state);
                                last_state = xstrdup(state);
                                interval = CLI_WAIT_FIRST_POLL_MS;
                        }
                }
                cli_response_done(&resp);

                if (deadline && now >= deadline) {
                        cli_error(ctx, "timed out after %.1fs waiting for job %lld (state %s)",
                                  (double) timeout_ms / 1000.0, (long long) id,
                                  last_state ? last_state : "unknown");
                        return CLI_EXIT_TIMEOUT;
                }
                int64_t pause = interval;
                if (deadline && deadline - now < pause)
                        pause = deadline - now;
                cli_sleep_ms(pause);
                interval = interval * 3 / 2;
                if (interval > CLI_WAIT_MAX_POLL_MS)
                        interval = CLI_WAIT_MAX_POLL_MS;
        }
}

static int wait_option(CliContext *ctx, int id, const char *value, void *userdata) {
        if (id == OPT_TIMEOUT)
                return cli_parse_seconds(ctx, "--timeout", value, userdata);
        return CLI_EXIT_USAGE;
}

int cli_cmd_wait(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {
                {"timeout", 0, true, OPT_TIMEOUT},
                {},
        };
        int64_t id, timeout_ms = 0;
        int r = parse_job_only(ctx, "wait", wait_help, options, argc, argv, &id, wait_option,
                               &timeout_ms);
        if (r >= 0)
                return r;
        return cli_job_wait(ctx, id, timeout_ms);
}
