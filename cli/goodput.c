/* SPDX-License-Identifier: MIT */
/*
 * `axctl goodput`: the table of GET /v1/goodput (per job, per project, and summed), and
 * the goodput lines `axctl status JOB` prints. docs/GOODPUT.md defines the buckets.
 */
#include <string.h>

#include "cli.h"
#include "url.h"

/* The badput buckets in the order people read them (productive comes first, apart). */
static const char *const badput[] = {"checkpoint", "queueing", "startup", "lost_work",
                                     "detection",  "restart",  "hang",    "preemption"};

static const char goodput_help[] =
        "Usage: axctl goodput [--project P] [--since WHEN]\n"
        "\n"
        "Goodput (productive time over allocated time) and badput by cause, per job, per\n"
        "project and summed over what the token may see, in accelerator-seconds: one table\n"
        "of projects and one of jobs. docs/GOODPUT.md defines each cause.\n"
        "\n"
        "  --project P    only the jobs of project P\n"
        "  --since WHEN   only the time since WHEN: a duration back from now (90s, 30m,\n"
        "                 24h, 7d) or an RFC 3339 UTC time\n";

/* "93.1%", or "-" when null. */
static void format_ratio(json_t *v, char *buf, size_t size) {
        if (json_is_number(v))
                snprintf(buf, size, "%.1f%%", json_number_value(v) * 100);
        else
                snprintf(buf, size, "-");
}

/* Seconds as people read them: "41s", "12.5m", "3.2h". */
static void format_seconds(json_t *v, char *buf, size_t size) {
        double s = json_number_value(v);
        if (s < 120)
                snprintf(buf, size, "%.0fs", s);
        else if (s < 7200)
                snprintf(buf, size, "%.1fm", s / 60);
        else
                snprintf(buf, size, "%.1fh", s / 3600);
}

void cli_print_goodput(FILE *f, json_t *goodput) {
        if (!json_is_object(goodput))
                return;
        char ratio[16], allocated[32];
        format_ratio(json_object_get(goodput, "ratio"), ratio, sizeof(ratio));
        format_seconds(json_object_get(goodput, "allocated_s"), allocated, sizeof(allocated));
        json_t *secs = json_object_get(goodput, "seconds");
        char productive[32];
        format_seconds(json_object_get(secs, "productive"), productive, sizeof(productive));
        fprintf(f, "%-12s%s (%s productive of %s allocated)\n", "goodput:", ratio, productive,
                allocated);
        fprintf(f, "%-12s", "badput:");
        bool any = false;
        for (size_t i = 0; i < ELEMENTSOF(badput); i++) {
                json_t *v = json_object_get(secs, badput[i]);
                if (json_number_value(v) < 0.0005)
                        continue;
                char s[32];
                format_seconds(v, s, sizeof(s));
                fprintf(f, "%s%s %s", any ? ", " : "", badput[i], s);
                any = true;
        }
        fputs(any ? "\n" : "-\n", f);
        json_t *adv = json_object_get(goodput, "checkpoint_advice");
        json_t *advised = json_object_get(adv, "advised_interval_s");
        if (!json_is_number(advised))
                return;
        char now_g[16], adv_g[16], every[32], advised_s[32];
        format_ratio(json_object_get(adv, "expected_goodput_current"), now_g, sizeof(now_g));
        format_ratio(json_object_get(adv, "expected_goodput_advised"), adv_g, sizeof(adv_g));
        json_t *interval = json_object_get(adv, "interval_s");
        if (json_is_number(interval))
                format_seconds(interval, every, sizeof(every));
        else
                snprintf(every, sizeof(every), "-");
        format_seconds(advised, advised_s, sizeof(advised_s));
        fprintf(f,
                "%-12scheckpoint every %s now (expected goodput %s); advised every %s "
                "(expected %s)\n",
                "advice:", every, now_g, advised_s, adv_g);
}

/* A row: the leading cells, then ratio, allocated and each bucket of totals. */
static void add_totals_row(CliTable *t, const char *const *lead, size_t n_lead, json_t *totals) {
        char cells[3 + ELEMENTSOF(badput)][32];
        const char *row[16];
        for (size_t i = 0; i < n_lead; i++)
                row[i] = lead[i];
        json_t *secs = json_object_get(totals, "seconds");
        format_ratio(json_object_get(totals, "ratio"), cells[0], sizeof(cells[0]));
        format_seconds(json_object_get(totals, "allocated_s"), cells[1], sizeof(cells[1]));
        format_seconds(json_object_get(secs, "productive"), cells[2], sizeof(cells[2]));
        for (size_t i = 0; i < ELEMENTSOF(badput); i++)
                format_seconds(json_object_get(secs, badput[i]), cells[3 + i], sizeof(cells[0]));
        for (size_t i = 0; i < ELEMENTSOF(cells); i++)
                row[n_lead + i] = cells[i];
        cli_table_add_row(t, row);
}

static void print_report(FILE *f, json_t *doc) {
        static const char *const project_headers[] = {
                "PROJECT",    "JOBS",     "GOODPUT",   "ALLOCATED", "PRODUCTIVE",
                "CHECKPOINT", "QUEUEING", "STARTUP",   "LOST-WORK", "DETECTION",
                "RESTART",    "HANG",     "PREEMPTION"};
        _cleanup_table_ CliTable *pt = cli_table_new(ELEMENTSOF(project_headers), project_headers);
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(doc, "projects"), i, p) {
                _cleanup_free_ char *name = cli_json_cell(json_object_get(p, "project"));
                _cleanup_free_ char *jobs = cli_json_cell(json_object_get(p, "jobs"));
                const char *lead[] = {name, jobs};
                add_totals_row(pt, lead, 2, p);
        }
        const char *all[] = {"(all)", ""};
        add_totals_row(pt, all, 2, json_object_get(doc, "fleet"));
        cli_table_print(pt, f);

        static const char *const job_headers[] = {
                "JOB",       "NAME",       "PROJECT",    "STATE",    "GOODPUT",
                "ALLOCATED", "PRODUCTIVE", "CHECKPOINT", "QUEUEING", "STARTUP",
                "LOST-WORK", "DETECTION",  "RESTART",    "HANG",     "PREEMPTION"};
        _cleanup_table_ CliTable *jt = cli_table_new(ELEMENTSOF(job_headers), job_headers);
        json_t *j;
        json_array_foreach(json_object_get(doc, "jobs"), i, j) {
                _cleanup_free_ char *id = cli_json_cell(json_object_get(j, "id"));
                _cleanup_free_ char *name = cli_json_cell(json_object_get(j, "name"));
                _cleanup_free_ char *project = cli_json_cell(json_object_get(j, "project"));
                _cleanup_free_ char *state = cli_json_cell(json_object_get(j, "state"));
                const char *lead[] = {id, name, project, state};
                add_totals_row(jt, lead, 4, j);
        }
        fputc('\n', f);
        cli_table_print(jt, f);
        if (json_is_true(json_object_get(doc, "jobs_truncated")))
                fputs("(more jobs than listed: the sums above count them all)\n", f);
}

enum {
        OPT_PROJECT = 1,
        OPT_SINCE
};

int cli_cmd_goodput(CliContext *ctx, int argc, char **argv) {
        static const CliOption options[] = {
                {"project", 0, true, OPT_PROJECT},
                {"since", 0, true, OPT_SINCE},
                {},
        };
        const char *project = NULL, *since = NULL;
        CliArgs a;
        cli_args_init(&a, ctx, "goodput", goodput_help, options, argc, argv);
        for (;;) {
                const char *value;
                int opt = cli_args_next_own(&a, &value);
                if (opt == CLI_ARG_END)
                        break;
                if (opt == CLI_ARG_EXIT)
                        return a.exit;
                if (opt == CLI_ARG_POSITIONAL)
                        return cli_args_unexpected(ctx, "goodput", value);
                if (opt == OPT_PROJECT)
                        project = value;
                else if (opt == OPT_SINCE)
                        since = value;
        }
        _cleanup_free_ char *p = project ? url_escape(project) : NULL;
        _cleanup_free_ char *s = since ? url_escape(since) : NULL;
        _cleanup_free_ char *path = p && s ? xasprintf("/v1/goodput?project=%s&since=%s", p, s)
                                    : p    ? xasprintf("/v1/goodput?project=%s", p)
                                    : s    ? xasprintf("/v1/goodput?since=%s", s)
                                           : xstrdup("/v1/goodput");
        _cleanup_json_ json_t *doc = NULL;
        int r = cli_api_call(ctx, "GET", path, NULL, NULL, &doc);
        if (r != CLI_EXIT_OK)
                return r;
        if (ctx->json)
                cli_json_print(ctx->out, doc);
        else
                print_report(ctx->out, doc);
        return CLI_EXIT_OK;
}
