/* SPDX-License-Identifier: MIT */
/*
 * What ranks printed and what happened to jobs: `logs` (a rank's log, streamed by the
 * controller from the agent that holds it; redirects are followed too, and `logs -f`
 * goes on through a failover), `status --env` (the environment block the agent writes
 * at the top of every rank log) and `events` (the audit trail, optionally followed by
 * polling /v1/events?after=SEQ).
 */
#include "cli.h"

#include <string.h>

#define CLI_EVENTS_POLL_MS 500
#define CLI_EVENTS_OUTAGE_MS 15000
/* logs -f rides out a controller restart or failover as `wait` does. */
#define CLI_LOGS_OUTAGE_MS 15000
#define CLI_LOGS_RETRY_MS 250

static const char env_begin[] = "--- axctl environment ---";
static const char env_end[] = "--- end environment ---";

static bool line_is(const char *line, size_t len, const char *marker) {
        /* Tolerate CRLF and trailing blanks: logs pass through many hands. */
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
                len--;
        return len == strlen(marker) && strncmp(line, marker, len) == 0;
}

char *cli_env_block_extract(const char *log) {
        const char *block = NULL; /* first line of the latest complete block */
        size_t block_len = 0;
        const char *open = NULL;
        for (const char *p = log; p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                const char *next = nl ? nl + 1 : NULL;
                if (line_is(p, len, env_begin)) {
                        open = next;
                } else if (open && line_is(p, len, env_end)) {
                        /* A log appended across restarts holds several; the last is current. */
                        block = open;
                        block_len = (size_t) (p - open);
                        open = NULL;
                }
                p = next;
        }
        if (!block)
                return NULL;
        char *s = xmalloc(block_len + 1);
        memcpy(s, block, block_len);
        s[block_len] = '\0';
        return s;
}

static char *logs_path(int64_t id, int64_t rank, int64_t attempt, bool follow) {
        _cleanup_free_ char *attempt_q =
                attempt > 0 ? xasprintf("&attempt=%lld", (long long) attempt) : NULL;
        return xasprintf("/v1/jobs/%lld/logs?rank=%lld%s%s", (long long) id, (long long) rank,
                         attempt_q ? attempt_q : "", follow ? "&follow=1" : "");
}

/* Fetches one rank's log and prints its environment block; adds it to json_out when
 * printing JSON. Returns an exit code. */
static int print_one_env(const CliContext *ctx, int64_t id, int64_t rank, int64_t attempt,
                         json_t *json_out) {
        _cleanup_free_ char *path = logs_path(id, rank, attempt, false);
        CliRequest req = {
                .method = "GET", .path = path, .follow_redirects = true, .timeout_ms = 30000};
        CliResponse resp;
        cli_http_perform(ctx, &req, &resp);
        if (resp.status < 200 || resp.status >= 300) {
                int r = cli_report_failure(ctx, &resp);
                cli_response_done(&resp);
                return r;
        }
        _cleanup_free_ char *block = cli_env_block_extract(resp.body);
        cli_response_done(&resp);
        if (!block) {
                cli_error(ctx, "the log of rank %lld of job %lld has no environment block",
                          (long long) rank, (long long) id);
                return CLI_EXIT_FAILED;
        }

        if (!json_out) {
                fprintf(ctx->out, "# rank %lld\n%s", (long long) rank, block);
                if (block[0] && block[strlen(block) - 1] != '\n')
                        fputc('\n', ctx->out);
                return CLI_EXIT_OK;
        }
        json_t *env = json_object();
        for (char *line = block, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                char *eq = strchr(line, '=');
                if (!eq)
                        continue;
                *eq = '\0';
                json_object_set_new(env, line, json_string(eq + 1));
        }
        json_array_append_new(json_out,
                              json_pack("{s:I,s:o}", "rank", (json_int_t) rank, "env", env));
        return CLI_EXIT_OK;
}

int cli_print_rank_env(const CliContext *ctx, const json_t *job, int64_t rank, int64_t attempt) {
        int64_t id = json_integer_value(json_object_get(job, "id"));
        _cleanup_json_ json_t *wanted = json_array();
        if (rank >= 0) {
                json_array_append_new(wanted, json_integer(rank));
        } else {
                /* The job view lists the ranks of its current attempt; each rank once. */
                size_t i;
                json_t *r;
                json_array_foreach(json_object_get(job, "ranks"), i, r) {
                        json_int_t n = json_integer_value(json_object_get(r, "rank"));
                        bool seen = false;
                        size_t k;
                        json_t *w;
                        json_array_foreach(wanted, k, w) seen = seen || json_integer_value(w) == n;
                        if (!seen)
                                json_array_append_new(wanted, json_integer(n));
                }
        }
        if (json_array_size(wanted) == 0) {
                cli_error(ctx, "job %lld has no ranks yet", (long long) id);
                return CLI_EXIT_FAILED;
        }

        _cleanup_json_ json_t *out = ctx->json ? json_array() : NULL;
        int ret = CLI_EXIT_OK;
        size_t i;
        json_t *w;
        json_array_foreach(wanted, i, w) {
                int r = print_one_env(ctx, id, json_integer_value(w), attempt, out);
                if (r != CLI_EXIT_OK && ret == CLI_EXIT_OK)
                        ret = r;
        }
        if (out) {
                _cleanup_json_ json_t *doc = json_pack("{s:O}", "ranks", out);
                cli_json_print(ctx->out, doc);
        }
        fflush(ctx->out);
        return ret;
}

/* ---- logs ---- */

static const char logs_help[] =
        "Usage: axctl logs JOB [--rank N] [--attempt A] [-f]\n"
        "\n"
        "Prints a rank's log (rank 0 and the latest attempt by default) to stdout as it\n"
        "is, fetched from the node that ran the rank. On a terminal, control characters\n"
        "but newline, tab and carriage return are shown as \\xNN (pipe it to keep them).\n"
        "\n"
        "  --rank N       which rank (default 0)\n"
        "  --attempt A    which attempt (default the latest)\n"
        "  -f, --follow   keep printing as the log grows, until interrupted\n";

enum {
        OPT_RANK = 1,
        OPT_ATTEMPT,
        OPT_FOLLOW,
};

/*
 * logs -f: follow=1 asks the controller to stream until the rank ends. A stream that
 * breaks instead (the controller died, or failed over to another) is asked for again,
 * from the same controller or the next leader, and what was printed already is skipped,
 * so the output goes on as if nothing happened. The attempt is fixed first: bytes of
 * one attempt's log would not skip another's.
 */
static int logs_follow(const CliContext *ctx, int64_t id, int64_t rank, int64_t attempt) {
        if (attempt == 0) {
                _cleanup_free_ char *job_path = xasprintf("/v1/jobs/%lld", (long long) id);
                _cleanup_json_ json_t *job = NULL;
                int r = cli_api_call(ctx, "GET", job_path, NULL, NULL, &job);
                if (r != CLI_EXIT_OK)
                        return r;
                attempt = json_integer_value(json_object_get(job, "attempt"));
        }
        _cleanup_free_ char *path = logs_path(id, rank, attempt, true);
        uint64_t printed = 0;
        int64_t outage_since = 0;
        for (;;) {
                CliRequest req = {.method = "GET",
                                  .path = path,
                                  .follow_redirects = true,
                                  .stream = true,
                                  .stream_skip = printed};
                CliResponse resp;
                cli_http_perform(ctx, &req, &resp);
                if (resp.streamed > printed) {
                        printed = resp.streamed;
                        outage_since = 0;
                }
                bool ended = resp.status >= 200 && resp.status < 300;
                bool broken = resp.status == 0 || resp.status == 503;
                int64_t now = util_now_ms();
                if (broken && outage_since == 0)
                        outage_since = now;
                if (ended || !broken || now - outage_since > CLI_LOGS_OUTAGE_MS) {
                        int r = ended ? CLI_EXIT_OK : cli_report_failure(ctx, &resp);
                        cli_response_done(&resp);
                        return r;
                }
                cli_response_done(&resp);
                cli_sleep_ms(CLI_LOGS_RETRY_MS);
        }
}

int cli_cmd_logs(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {
                {"rank", 'r', true, OPT_RANK},
                {"attempt", 'a', true, OPT_ATTEMPT},
                {"follow", 'f', false, OPT_FOLLOW},
                {},
        };
        int64_t id = 0, rank = 0, attempt = 0;
        bool follow = false;
        CliArgs a;
        cli_args_init(&a, ctx, "logs", logs_help, options, argc, argv);
        for (;;) {
                const char *value;
                int opt = cli_args_next_own(&a, &value);
                int r = CLI_EXIT_OK;
                if (opt == CLI_ARG_END)
                        break;
                switch (opt) {
                case CLI_ARG_EXIT:
                        return a.exit;
                case CLI_ARG_POSITIONAL:
                        if (id > 0)
                                return cli_args_unexpected(ctx, "logs", value);
                        r = cli_parse_job_id(ctx, value, &id);
                        break;
                case OPT_RANK:
                        r = cli_parse_int(ctx, "--rank", value, 0, INT32_MAX, &rank);
                        break;
                case OPT_ATTEMPT:
                        r = cli_parse_int(ctx, "--attempt", value, 1, INT32_MAX, &attempt);
                        break;
                case OPT_FOLLOW:
                        follow = true;
                        break;
                }
                if (r != CLI_EXIT_OK)
                        return CLI_EXIT_USAGE;
        }
        if (id == 0)
                return cli_args_missing(ctx, "logs", "a JOB id");

        if (follow)
                return logs_follow(ctx, id, rank, attempt);
        _cleanup_free_ char *path = logs_path(id, rank, attempt, false);
        CliRequest req = {.method = "GET", .path = path, .follow_redirects = true, .stream = true};
        CliResponse resp;
        cli_http_perform(ctx, &req, &resp);
        int r = CLI_EXIT_OK;
        if (resp.status < 200 || resp.status >= 300)
                r = cli_report_failure(ctx, &resp);
        cli_response_done(&resp);
        return r;
}

/* ---- events ---- */

static const char events_help[] =
        "Usage: axctl events [JOB] [-f]\n"
        "\n"
        "Prints the audit trail (of one job, or of the cluster) as a table:\n"
        "SEQ TIME JOB NODE KIND DETAIL (TIME in RFC 3339 as the API gives it).\n"
        "\n"
        "  -f, --follow   keep polling for new events every 500 ms until interrupted\n"
        "\n"
        "With --json: the API's {\"events\": [...]}; with --json -f, one compact JSON\n"
        "event per line (JSON Lines).\n";

static void events_add(const CliContext *ctx, CliTable *t, json_t *events, int64_t job, bool follow,
                       int64_t *last_seq) {
        size_t i;
        json_t *e;
        json_array_foreach(events, i, e) {
                json_int_t seq = json_integer_value(json_object_get(e, "seq"));
                if (seq > *last_seq)
                        *last_seq = seq;
                if (job > 0 && json_integer_value(json_object_get(e, "job")) != job)
                        continue;
                if (ctx->json) {
                        char *line =
                                json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
                        fprintf(ctx->out, "%s\n", line ? line : "{}");
                        free(line);
                        continue;
                }
                static const char *const keys[] = {"seq", "time", "job", "node", "kind", "detail"};
                char *cells[ELEMENTSOF(keys)];
                for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                        cells[k] = cli_json_cell(json_object_get(e, keys[k]));
                cli_table_add_row(t, (const char *const *) cells);
                for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                        free(cells[k]);
        }
        if (!ctx->json || !follow)
                cli_table_print(t, ctx->out);
        fflush(ctx->out);
}

static int events_follow(const CliContext *ctx, CliTable *t, int64_t job, int64_t last_seq) {
        int64_t outage_since = 0;
        for (;;) {
                cli_sleep_ms(CLI_EVENTS_POLL_MS);
                _cleanup_free_ char *path =
                        xasprintf("/v1/events?after=%lld", (long long) last_seq);
                CliRequest req = {.method = "GET", .path = path, .timeout_ms = 10000};
                CliResponse resp;
                cli_http_perform(ctx, &req, &resp);
                if (resp.status == 0 || resp.status >= 500) {
                        /* Ride out a controller restart, as `wait` does. */
                        int64_t now = util_now_ms();
                        if (outage_since == 0)
                                outage_since = now;
                        if (now - outage_since > CLI_EVENTS_OUTAGE_MS) {
                                int r = cli_report_failure(ctx, &resp);
                                cli_response_done(&resp);
                                return r;
                        }
                        cli_response_done(&resp);
                        continue;
                }
                if (resp.status != 200) {
                        int r = cli_report_failure(ctx, &resp);
                        cli_response_done(&resp);
                        return r;
                }
                outage_since = 0;
                _cleanup_json_ json_t *doc = json_loads(resp.body, 0, NULL);
                cli_response_done(&resp);
                json_t *events = json_object_get(doc, "events");
                if (json_is_array(events) && json_array_size(events) > 0)
                        events_add(ctx, t, events, job, true, &last_seq);
        }
}

int cli_cmd_events(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {
                {"follow", 'f', false, OPT_FOLLOW},
                {},
        };
        int64_t id = 0;
        bool follow = false;
        CliArgs a;
        cli_args_init(&a, ctx, "events", events_help, options, argc, argv);
        for (;;) {
                const char *value;
                int opt = cli_args_next_own(&a, &value);
                if (opt == CLI_ARG_END)
                        break;
                if (opt == CLI_ARG_EXIT)
                        return a.exit;
                if (opt == CLI_ARG_POSITIONAL) {
                        if (id > 0)
                                return cli_args_unexpected(ctx, "events", value);
                        if (cli_parse_job_id(ctx, value, &id) != CLI_EXIT_OK)
                                return CLI_EXIT_USAGE;
                } else if (opt == OPT_FOLLOW) {
                        follow = true;
                }
        }

        _cleanup_free_ char *path =
                id > 0 ? xasprintf("/v1/jobs/%lld/events", (long long) id) : xstrdup("/v1/events");
        _cleanup_json_ json_t *doc = NULL;
        int r = cli_api_call(ctx, "GET", path, NULL, NULL, &doc);
        if (r != CLI_EXIT_OK)
                return r;
        json_t *events = json_object_get(doc, "events");
        if (!json_is_array(events)) {
                cli_error(ctx, "unexpected answer from controller: no \"events\" list");
                return CLI_EXIT_UNREACHABLE;
        }
        if (ctx->json && !follow) {
                cli_json_print(ctx->out, doc);
                return CLI_EXIT_OK;
        }

        static const char *const headers[] = {"SEQ", "TIME", "JOB", "NODE", "KIND", "DETAIL"};
        _cleanup_table_ CliTable *t = cli_table_new(ELEMENTSOF(headers), headers);
        int64_t last_seq = 0;
        events_add(ctx, t, events, 0, follow, &last_seq);
        if (!follow)
                return CLI_EXIT_OK;
        return events_follow(ctx, t, id, last_seq);
}
