/* SPDX-License-Identifier: MIT */
/*
 * Goodput records of each attempt (when it ran, progressed, failed and checkpointed),
 * kept as the agents report, and their use: timelines, the fleet's failure rate, the
 * checkpoint advice and the metrics; see accounting.h. Progress is liveness: the last
 * advance is saved with the attempt's other changes, not on every report.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accounting.h"
#include "controller-internal.h"
#include "metrics.h"
#include "util.h"

void ctl_goodput_progress(Turn *t, Job *job, const Rank *r, int64_t now_ms) {
        Attempt *a = job_current_attempt(job);
        /* Rank 0's step alone: the gang moves together, rank 0 writes the checkpoints,
         * and one node's syncs come at a steady pace, so the gaps between its advances
         * are regular and a stall around a commit stands out. Other nodes' reports, at
         * other phases, would make the gaps ragged. */
        if (r->rank != 0 || !a || a->end_reason != _END_REASON_INVALID || !job_attempt_live(job))
                return;
        int64_t step = r->step;
        JobProgress *p = &job->progress;
        if (p->attempt != a->attempt)
                *p = (JobProgress){.attempt = a->attempt, .step = -1};
        if (step <= p->step)
                return;
        if (a->first_progress_ms == 0) {
                /* The first step done ends start-up; a step at or below the one resumed
                 * from (that many trainers write first) only says where they start. */
                if (step > a->resume_step || p->step >= 0) {
                        a->first_progress_ms = now_ms; /* saved at once */
                        a->dirty = true;
                        turn_job_dirty(t, job);
                }
                p->prev_step = -1;
        } else if (p->ckpt_pending) {
                /*
                 * The steps stood still while a checkpoint was written: the time since the
                 * advance before the last (the last may already have caught the stall's
                 * start) beyond the steps' pace is its cost. Steps are seen at syncs, so
                 * a sample is off by up to a sync period either way: samples are summed
                 * as they are, not cut at zero, which would bias the sum upwards.
                 */
                if (p->prev_step >= 0 && p->steady_steps > 0) {
                        double pace = (double) p->steady_ms / (double) p->steady_steps;
                        a->ckpt_stall_ms += now_ms - p->prev_ms -
                                            (int64_t) (pace * (double) (step - p->prev_step));
                        a->n_ckpt_stalls++;
                }
                p->prev_step = -1; /* the stall's intervals do not tell the pace */
        } else {
                /* The interval before the last is clean now: a stall in it would have
                 * brought its checkpoint before this advance. */
                if (p->prev_step >= 0) {
                        p->steady_ms += p->advanced_ms - p->prev_ms;
                        p->steady_steps += p->step - p->prev_step;
                }
                p->prev_step = p->step;
                p->prev_ms = p->advanced_ms;
        }
        p->ckpt_pending = false;
        p->step = step;
        p->advanced_ms = now_ms;
        a->last_progress_ms = now_ms;
}

void ctl_goodput_checkpoint(Turn *t, Job *job, int64_t now_ms) {
        Attempt *a = job_current_attempt(job);
        if (!a || a->end_reason != _END_REASON_INVALID)
                return;
        if (a->n_ckpts++ == 0)
                a->first_ckpt_ms = now_ms;
        a->last_ckpt_ms = now_ms;
        a->dirty = true;
        turn_job_dirty(t, job);
        /* A stall is measured only between two advances of this attempt. */
        job->progress.ckpt_pending = job->progress.attempt == a->attempt && job->progress.step >= 0;
}

void ctl_goodput_failing(Job *job, const Node *node, EndReason reason) {
        Attempt *a = job_current_attempt(job);
        if (!a || a->end_reason != _END_REASON_INVALID)
                return;
        /* A lost node died some time after its last sync, which is as close as the
         * controller can know; other failures are reported as they happen. */
        if (reason == END_NODE_LOST && node && node->last_seen_ms > 0)
                a->failed_ms = node->last_seen_ms;
}

GoodputSegment *ctl_goodput_timeline(const Job *job, int64_t now_ms, int *ret_n) {
        GoodputAttempt *ga = xcalloc((size_t) job->n_attempts + 1, sizeof(GoodputAttempt));
        for (int i = 0; i < job->n_attempts; i++) {
                const Attempt *a = &job->attempts[i];
                ga[i] = (GoodputAttempt){.attempt = a->attempt,
                                         .started_ms = a->started_ms,
                                         .running_ms = a->running_ms,
                                         .first_progress_ms = a->first_progress_ms,
                                         .last_progress_ms = a->last_progress_ms,
                                         .last_ckpt_ms = a->last_ckpt_ms,
                                         .ckpt_stall_ms = a->ckpt_stall_ms,
                                         .failed_ms = a->failed_ms,
                                         .ended_ms = a->ended_ms,
                                         .ended_for = a->end_reason};
        }
        GoodputJob gj = {.created_ms = job->created_ms,
                         .finished_ms = job_state_is_terminal(job->state) ? job->finished_ms : 0,
                         .attempts = ga,
                         .n_attempts = job->n_attempts};
        GoodputSegment *s = goodput_timeline(&gj, now_ms, ret_n);
        free(ga);
        return s;
}

int64_t ctl_goodput_weight(const Job *job) {
        int per_rank = job->spec->accelerators_per_rank > 0 ? job->spec->accelerators_per_rank : 1;
        return (int64_t) job->spec->ranks * per_rank;
}

static bool is_interruption(EndReason r) {
        FailureClass c = health_classify(r);
        return c == FAILURE_JOB || c == FAILURE_NODE;
}

/* The job's interruptions and the rank-seconds its attempts ran. */
static void job_rate(const Job *job, int64_t now_ms, CtlFailureRate *rate) {
        for (int i = 0; i < job->n_attempts; i++) {
                const Attempt *a = &job->attempts[i];
                int64_t end = a->end_reason == _END_REASON_INVALID ? now_ms : a->ended_ms;
                if (end > a->started_ms)
                        rate->rank_seconds +=
                                (double) (end - a->started_ms) / 1000.0 * job->spec->ranks;
                if (a->end_reason != _END_REASON_INVALID && is_interruption(a->end_reason))
                        rate->interruptions++;
        }
}

void ctl_goodput_fleet_rate(Controller *ctl, int64_t now_ms, CtlFailureRate *ret) {
        *ret = (CtlFailureRate){0};
        for (int i = 0; i < ctl->model.n_jobs; i++)
                job_rate(ctl->model.jobs[i], now_ms, ret);
}

/* A job's own rate is trusted from this many interruptions on; before, the fleet's. */
#define ADVICE_OWN_INTERRUPTIONS 3

void ctl_goodput_advice(const Job *job, const CtlFailureRate *fleet, int64_t now_ms,
                        CtlCheckpointAdvice *ret) {
        *ret = (CtlCheckpointAdvice){0};
        int64_t span_ms = 0, n_intervals = 0, stall_ms = 0, n_stalls = 0;
        for (int i = 0; i < job->n_attempts; i++) {
                const Attempt *a = &job->attempts[i];
                if (a->n_ckpts >= 2) {
                        span_ms += a->last_ckpt_ms - a->first_ckpt_ms;
                        n_intervals += a->n_ckpts - 1;
                }
                stall_ms += a->ckpt_stall_ms;
                n_stalls += a->n_ckpt_stalls;
        }
        GoodputAdviceInput *in = &ret->in;
        in->interval_s = n_intervals > 0 ? (double) span_ms / 1000.0 / (double) n_intervals : 0;
        /* A sum at or below zero says the commits cost nothing measurable. */
        in->cost_s =
                n_stalls > 0 && stall_ms > 0 ? (double) stall_ms / 1000.0 / (double) n_stalls : 0;
        CtlFailureRate own = {0};
        job_rate(job, now_ms, &own);
        if (own.interruptions >= ADVICE_OWN_INTERRUPTIONS) {
                in->mtbf_s = own.rank_seconds / job->spec->ranks / (double) own.interruptions;
                ret->mtbf_from_job = true;
        } else if (fleet->interruptions > 0)
                in->mtbf_s = fleet->rank_seconds / (double) fleet->interruptions / job->spec->ranks;
        /* What an interruption costs besides lost work: its detection, hang and restart,
         * and the start-up of the attempt after it. */
        int n;
        GoodputSegment *s = ctl_goodput_timeline(job, now_ms, &n);
        GoodputTotals t = {0};
        goodput_totals_add(&t, s, n, 0, INT64_MAX, 1);
        free(s);
        int64_t per_failure = t.ms[GOODPUT_DETECTION] + t.ms[GOODPUT_HANG] + t.ms[GOODPUT_RESTART];
        double startup = job->n_attempts > 0 ? (double) t.ms[GOODPUT_STARTUP] / job->n_attempts : 0;
        in->recovery_s =
                (startup +
                 (own.interruptions > 0 ? (double) per_failure / (double) own.interruptions : 0)) /
                1000.0;
        ret->advised = goodput_advise(in, &ret->advice);
}

typedef struct ProjectTotals {
        const char *project;
        GoodputTotals t;
} ProjectTotals;

void ctl_goodput_metrics_write(Controller *ctl, FILE *f) {
        ProjectTotals *p = NULL;
        int n_p = 0, cap = 0;
        int64_t now = util_wall_ms();
        for (int i = 0; i < ctl->model.n_jobs; i++) {
                const Job *job = ctl->model.jobs[i];
                int k = 0;
                while (k < n_p && strcmp(p[k].project, job->spec->project) != 0)
                        k++;
                if (k == n_p) {
                        GROW(p, n_p, cap);
                        p[n_p++] = (ProjectTotals){.project = job->spec->project};
                }
                int n;
                GoodputSegment *s = ctl_goodput_timeline(job, now, &n);
                goodput_totals_add(&p[k].t, s, n, 0, INT64_MAX, ctl_goodput_weight(job));
                free(s);
        }
        metrics_write_header(f, "axctl_goodput_accelerator_seconds", "gauge",
                             "Accelerator-seconds of the jobs the controller holds, by project "
                             "and bucket: productive, or badput by cause.");
        for (int k = 0; k < n_p; k++)
                for (int b = 0; b < _GOODPUT_BUCKET_MAX; b++)
                        fprintf(f,
                                "axctl_goodput_accelerator_seconds{project=\"%s\",bucket=\"%s\"} "
                                "%.3f\n",
                                p[k].project, goodput_bucket_to_string((GoodputBucket) b),
                                (double) p[k].t.ms[b] / 1000.0);
        metrics_write_header(f, "axctl_goodput_ratio", "gauge",
                             "Productive over allocated accelerator time, by project.");
        for (int k = 0; k < n_p; k++) {
                double g = goodput_ratio(&p[k].t);
                if (g >= 0)
                        fprintf(f, "axctl_goodput_ratio{project=\"%s\"} %.6f\n", p[k].project, g);
        }
        free(p);
}
