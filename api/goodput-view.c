/* SPDX-License-Identifier: MIT */
/*
 * Goodput as JSON: a job's share of each bucket, its timeline and checkpoint advice (in
 * the job view), and the report of GET /v1/goodput per job, project and fleet. Field
 * names are part of the API (docs/PROTOCOL.md, docs/GOODPUT.md).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting.h"
#include "util.h"
#include "views.h"

/* An RFC 3339 time, as view_time() writes one (which this file cannot call: views.c
 * calls this file, and files call each other in one direction only). */
static json_t *timestamp(int64_t wall_ms) {
        char buf[40];
        return json_string(util_format_time(wall_ms, buf, sizeof(buf)));
}

/* Seconds with millisecond precision, as JSON reals. */
static json_t *seconds(int64_t ms) {
        return json_real((double) ms / 1000.0);
}

static json_t *ratio_or_null(double r) {
        return r >= 0 ? json_real(r) : json_null();
}

/* ratio, elapsed, allocated and each bucket of t (ms, or weighted ms). */
static json_t *view_totals(const GoodputTotals *t) {
        json_t *buckets = json_object();
        for (int b = 0; b < _GOODPUT_BUCKET_MAX; b++)
                json_object_set_new(buckets, goodput_bucket_to_string((GoodputBucket) b),
                                    seconds(t->ms[b]));
        return json_pack("{s:o,s:o,s:o,s:o}", "ratio", ratio_or_null(goodput_ratio(t)), "elapsed_s",
                         seconds(t->elapsed_ms), "allocated_s", seconds(goodput_allocated_ms(t)),
                         "seconds", buckets);
}

static json_t *view_timeline(const GoodputSegment *s, int n) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++) {
                json_t *seg = json_pack(
                        "{s:s,s:i,s:o,s:o,s:o}", "bucket", goodput_bucket_to_string(s[i].bucket),
                        "attempt", s[i].attempt, "start", timestamp(s[i].from_ms), "end",
                        timestamp(s[i].to_ms), "seconds", seconds(s[i].to_ms - s[i].from_ms));
                if (s[i].ckpt_ms > 0)
                        json_object_set_new(seg, "checkpoint_s", seconds(s[i].ckpt_ms));
                json_array_append_new(a, seg);
        }
        return a;
}

static json_t *positive_or_null(double v) {
        return v > 0 ? json_real(v) : json_null();
}

static json_t *view_advice(Controller *ctl, const Job *job, int64_t now) {
        CtlFailureRate fleet;
        ctl_goodput_fleet_rate(ctl, now, &fleet);
        CtlCheckpointAdvice a;
        ctl_goodput_advice(job, &fleet, now, &a);
        json_t *j = json_pack(
                "{s:o,s:o,s:o,s:s,s:o}", "interval_s", positive_or_null(a.in.interval_s), "cost_s",
                positive_or_null(a.in.cost_s), "mtbf_s", positive_or_null(a.in.mtbf_s),
                "mtbf_source", a.mtbf_from_job ? "job" : "fleet", "recovery_s",
                json_real(a.in.recovery_s));
        json_object_set_new(j, "advised_interval_s",
                            a.advised ? json_real(a.advice.advised_interval_s) : json_null());
        json_object_set_new(j, "expected_goodput_current",
                            a.advised ? ratio_or_null(a.advice.expected_current) : json_null());
        json_object_set_new(j, "expected_goodput_advised",
                            a.advised ? ratio_or_null(a.advice.expected_advised) : json_null());
        return j;
}

json_t *view_job_goodput(Controller *ctl, Job *job, bool with_details) {
        int64_t now = util_wall_ms();
        int n;
        GoodputSegment *s = ctl_goodput_timeline(job, now, &n);
        GoodputTotals t = {0};
        goodput_totals_add(&t, s, n, 0, INT64_MAX, 1);
        json_t *j = view_totals(&t);
        if (with_details) {
                json_object_set_new(j, "timeline", view_timeline(s, n));
                json_object_set_new(j, "checkpoint_advice", view_advice(ctl, job, now));
        }
        free(s);
        return j;
}

int view_parse_since(const char *s, int64_t now_ms, int64_t *ret_ms) {
        size_t len = strlen(s);
        /* A duration back from now: 90s, 30m, 24h, 7d. */
        if (len >= 2 && len <= 12 && strchr("smhd", s[len - 1])) {
                int64_t v = 0;
                for (size_t i = 0; i + 1 < len; i++) {
                        if (!isdigit((unsigned char) s[i]))
                                return -EINVAL;
                        v = v * 10 + (s[i] - '0');
                }
                int64_t unit = s[len - 1] == 's'   ? 1000
                               : s[len - 1] == 'm' ? 60000
                               : s[len - 1] == 'h' ? 3600000
                                                   : 86400000;
                *ret_ms = now_ms - v * unit;
                return 0;
        }
        /* An RFC 3339 time in UTC, as the API writes them. */
        struct tm tm = {0};
        const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end)
                return -EINVAL;
        int64_t ms = 0;
        if (*end == '.') {
                int digits = 0;
                for (end++; isdigit((unsigned char) *end); end++, digits++)
                        if (digits < 3)
                                ms = ms * 10 + (*end - '0');
                if (digits == 0)
                        return -EINVAL;
                for (; digits < 3; digits++)
                        ms *= 10;
        }
        if (strcmp(end, "Z") != 0)
                return -EINVAL;
        *ret_ms = (int64_t) timegm(&tm) * 1000 + ms;
        return 0;
}

#define REPORT_MAX_JOBS 1000

typedef struct ReportCtx {
        ViewProjectFilter visible;
        void *userdata;
        int64_t since, now;
        bool timelines;
        json_t *jobs;
        bool truncated;
} ReportCtx;

/* A job's own figures in the window, for the report's list. */
static bool report_job(void *userdata, Job *job) {
        ReportCtx *c = userdata;
        if (!c->visible(c->userdata, job->spec->project))
                return true;
        int n;
        GoodputSegment *s = ctl_goodput_timeline(job, c->now, &n);
        GoodputTotals own = {0};
        goodput_totals_add(&own, s, n, c->since, c->now + 1, 1);
        if (own.elapsed_ms > 0 && json_array_size(c->jobs) >= REPORT_MAX_JOBS) {
                c->truncated = true;
                free(s);
                return false;
        }
        if (own.elapsed_ms > 0) { /* else nothing of it lies in the window */
                json_t *j = view_totals(&own);
                json_object_set_new(j, "id", json_integer(job->id));
                json_object_set_new(j, "name", json_string(job->spec->name));
                json_object_set_new(j, "project", json_string(job->spec->project));
                json_object_set_new(j, "user", json_string(job->spec->user));
                json_object_set_new(j, "state", json_string(job_state_to_string(job->state)));
                json_object_set_new(j, "attempt", json_integer(job->attempt));
                json_object_set_new(j, "accelerators", json_integer(ctl_goodput_weight(job)));
                if (c->timelines)
                        json_object_set_new(j, "timeline", view_timeline(s, n));
                json_array_append_new(c->jobs, j);
        }
        free(s);
        return true;
}

json_t *view_goodput(Controller *ctl, const char *project, int64_t since_ms, bool timelines,
                     ViewProjectFilter visible, void *userdata) {
        int64_t now = util_wall_ms();
        /* The sums cover every job; the list, the newest REPORT_MAX_JOBS. */
        CtlGoodputSums sums;
        ctl_goodput_sums(ctl,
                         &(CtlGoodputQuery){.project = project,
                                            .since_ms = since_ms,
                                            .now_ms = now,
                                            .visible = visible,
                                            .userdata = userdata,
                                            .lookup = ctl_job_lookup},
                         &sums);
        ReportCtx c = {.visible = visible,
                       .userdata = userdata,
                       .since = since_ms,
                       .now = now,
                       .timelines = timelines,
                       .jobs = json_array()};
        ctl_jobs_foreach(ctl, 0, _JOB_STATE_INVALID, project, report_job, &c);
        json_t *projects = json_array();
        for (int k = 0; k < sums.n_projects; k++) {
                if (sums.projects[k].jobs == 0)
                        continue; /* only ended jobs outside the window */
                json_t *p = view_totals(&sums.projects[k].t);
                json_object_set_new(p, "project", json_string(sums.projects[k].project));
                json_object_set_new(p, "jobs", json_integer(sums.projects[k].jobs));
                json_array_append_new(projects, p);
        }
        CtlFailureRate rate;
        ctl_goodput_fleet_rate(ctl, now, &rate);
        json_t *fleet = view_totals(&sums.fleet);
        ctl_goodput_sums_clear(&sums);
        double rank_hours = (double) rate.rank_ms / 3600000.0;
        json_object_set_new(fleet, "interruptions", json_integer(rate.interruptions));
        json_object_set_new(fleet, "rank_hours", json_real(rank_hours));
        json_object_set_new(fleet, "mtbf_rank_hours",
                            rate.interruptions > 0 ? json_real(rank_hours / rate.interruptions)
                                                   : json_null());
        return json_pack("{s:o,s:o,s:s,s:o,s:o,s:o,s:b}", "since",
                         since_ms > 0 ? timestamp(since_ms) : json_null(), "until", timestamp(now),
                         "unit", "accelerator_seconds", "fleet", fleet, "projects", projects,
                         "jobs", c.jobs, "jobs_truncated", c.truncated);
}
