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
#include "log.h"
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

/* The job's interruptions and the rank-time its attempts ran. */
static void job_rate(const Job *job, int64_t now_ms, CtlFailureRate *rate) {
        for (int i = 0; i < job->n_attempts; i++) {
                const Attempt *a = &job->attempts[i];
                int64_t end = a->end_reason == _END_REASON_INVALID ? now_ms : a->ended_ms;
                if (end > a->started_ms)
                        rate->rank_ms += (end - a->started_ms) * job->spec->ranks;
                if (a->end_reason != _END_REASON_INVALID && model_interruption(a->end_reason))
                        rate->interruptions++;
        }
}

_Static_assert(STORE_GOODPUT_BUCKETS == _GOODPUT_BUCKET_MAX, "the store keeps every bucket");

void ctl_goodput_final(const Job *job, StoreGoodput *ret) {
        int64_t end = job->finished_ms;
        int n;
        GoodputSegment *s = ctl_goodput_timeline(job, end, &n);
        GoodputTotals t = {0};
        goodput_totals_add(&t, s, n, 0, INT64_MAX, 1);
        free(s);
        CtlFailureRate rate = {0};
        job_rate(job, end, &rate);
        *ret = (StoreGoodput){.job = job->id,
                              .project = job->spec->project,
                              .created_ms = job->created_ms,
                              .finished_ms = end,
                              .accelerators = ctl_goodput_weight(job),
                              .interruptions = rate.interruptions,
                              .rank_ms = rate.rank_ms};
        memcpy(ret->ms, t.ms, sizeof(ret->ms));
}

static ProjectGoodput *sums_project(CtlGoodputSums *sums, const char *project) {
        for (int k = 0; k < sums->n_projects; k++)
                if (strcmp(sums->projects[k].project, project) == 0)
                        return &sums->projects[k];
        GROW(sums->projects, sums->n_projects, sums->cap_projects);
        sums->projects[sums->n_projects] = (ProjectGoodput){.project = xstrdup(project)};
        return &sums->projects[sums->n_projects++];
}

/* Adds the part of a job's timeline inside the window; false when none of it is. */
static bool sums_add_job(CtlGoodputSums *sums, const Job *job, int64_t weight, int64_t since_ms,
                         int64_t now_ms) {
        int n;
        GoodputSegment *s = ctl_goodput_timeline(job, now_ms, &n);
        GoodputTotals own = {0};
        goodput_totals_add(&own, s, n, since_ms, now_ms + 1, 1);
        if (own.elapsed_ms > 0) {
                ProjectGoodput *p = sums_project(sums, job->spec->project);
                p->jobs++;
                goodput_totals_add(&p->t, s, n, since_ms, now_ms + 1, weight);
                goodput_totals_add(&sums->fleet, s, n, since_ms, now_ms + 1, weight);
        }
        free(s);
        return own.elapsed_ms > 0;
}

typedef struct SumsCtx {
        Controller *ctl;
        CtlGoodputSums *sums;
        const CtlGoodputQuery *q;
} SumsCtx;

static void totals_add_ms(GoodputTotals *t, const int64_t ms[]) {
        for (int b = 0; b < _GOODPUT_BUCKET_MAX; b++) {
                t->ms[b] += ms[b];
                t->elapsed_ms += ms[b];
        }
}

/* Adds a project's stored sums (accelerator-ms) to the report. */
static void sums_add_stored(CtlGoodputSums *sums, const char *project, int64_t jobs,
                            const GoodputTotals *t) {
        ProjectGoodput *p = sums_project(sums, project);
        p->jobs += jobs;
        totals_add_ms(&p->t, t->ms);
        totals_add_ms(&sums->fleet, t->ms);
}

static int sums_stored(void *userdata, const StoreGoodput *g) {
        SumsCtx *c = userdata;
        if (c->q->visible && !c->q->visible(c->q->userdata, g->project))
                return 0;
        GoodputTotals t = {0};
        totals_add_ms(&t, g->ms);
        sums_add_stored(c->sums, g->project, g->jobs, &t);
        return 0;
}

static int sums_straddling(void *userdata, const StoreGoodput *g) {
        SumsCtx *c = userdata;
        if (c->q->visible && !c->q->visible(c->q->userdata, g->project))
                return 0;
        /* Ended, so its timeline no longer depends on the time it is read at. */
        const Job *job = c->q->lookup(c->ctl, g->job);
        if (job)
                sums_add_job(c->sums, job, g->accelerators, c->q->since_ms, c->q->now_ms);
        else
                log_warning("job %lld: goodput figures stored, the job is not", (long long) g->job);
        return 0;
}

static int project_by_name(const void *a, const void *b) {
        return strcmp(((const ProjectGoodput *) a)->project, ((const ProjectGoodput *) b)->project);
}

void ctl_goodput_sums(Controller *ctl, const CtlGoodputQuery *q, CtlGoodputSums *ret) {
        *ret = (CtlGoodputSums){0};
        /* Jobs whose figures are not stored yet, from their timelines... */
        for (int i = 0; i < ctl->model.n_jobs; i++) {
                const Job *job = ctl->model.jobs[i];
                if (job->goodput_saved || (q->project && strcmp(job->spec->project, q->project)) ||
                    (q->visible && !q->visible(q->userdata, job->spec->project)))
                        continue;
                sums_add_job(ret, job, ctl_goodput_weight(job), q->since_ms, q->now_ms);
        }
        /* ...and those of jobs that ended, in memory or not: since the beginning, the
         * sums kept as they were stored; over a window, summed in the store. */
        if (q->since_ms <= 0) {
                const Model *m = &ctl->model;
                for (int k = 0; k < m->n_stored_goodput; k++) {
                        const ProjectGoodput *g = m->stored_goodput[k];
                        if ((!q->project || strcmp(g->project, q->project) == 0) &&
                            (!q->visible || q->visible(q->userdata, g->project)))
                                sums_add_stored(ret, g->project, g->jobs, &g->t);
                }
        } else {
                SumsCtx c = {.ctl = ctl, .sums = ret, .q = q};
                int r = store_goodput_sum(ctl->store, q->project, q->since_ms, sums_stored, &c);
                if (r >= 0 && q->lookup)
                        r = store_goodput_straddling(ctl->store, q->project, q->since_ms,
                                                     sums_straddling, &c);
                if (r < 0)
                        log_warning("reading stored goodput: %s", store_last_error(ctl->store));
        }
        /* By name, however the sums came: a report reads the same before and after a
         * restart. (qsort's array may not be NULL, even for none.) */
        if (ret->n_projects > 1)
                qsort(ret->projects, (size_t) ret->n_projects, sizeof(ProjectGoodput),
                      project_by_name);
}

void ctl_goodput_sums_clear(CtlGoodputSums *sums) {
        for (int k = 0; k < sums->n_projects; k++)
                free(sums->projects[k].project);
        free(sums->projects);
        *sums = (CtlGoodputSums){0};
}

void ctl_goodput_fleet_rate(Controller *ctl, int64_t now_ms, CtlFailureRate *ret) {
        const FleetRate *f = &ctl->model.rate;
        *ret = (CtlFailureRate){.interruptions = f->interruptions,
                                .rank_ms = f->ended_rank_ms + now_ms * f->live_ranks -
                                           f->live_start_ranks_ms};
}

static ProjectGoodput *stored_project(Model *m, const char *project) {
        ProjectGoodput *g = strmap_get(m->stored_goodput_index, project);
        if (!g) {
                g = xcalloc(1, sizeof(ProjectGoodput));
                g->project = xstrdup(project);
                GROW(m->stored_goodput, m->n_stored_goodput, m->cap_stored_goodput);
                m->stored_goodput[m->n_stored_goodput++] = g;
                strmap_put(m->stored_goodput_index, g->project, g);
        }
        return g;
}

void ctl_goodput_stored_add(Model *m, const StoreGoodput *job) {
        ProjectGoodput *g = stored_project(m, job->project);
        if (job->finished_ms > job->created_ms) /* as the store's sum counts jobs */
                g->jobs++;
        int64_t weighted[_GOODPUT_BUCKET_MAX];
        for (int b = 0; b < _GOODPUT_BUCKET_MAX; b++)
                weighted[b] = job->ms[b] * job->accelerators;
        totals_add_ms(&g->t, weighted);
}

/* One project's row of the store's sum (accelerator-ms, jobs counted). */
static int stored_seed(void *userdata, const StoreGoodput *sum) {
        Model *m = userdata;
        ProjectGoodput *g = stored_project(m, sum->project);
        g->jobs += sum->jobs;
        totals_add_ms(&g->t, sum->ms);
        m->rate.interruptions += sum->interruptions;
        m->rate.ended_rank_ms += sum->rank_ms;
        return 0;
}

int ctl_goodput_stored_load(Store *store, Model *m) {
        m->rate = (FleetRate){0};
        for (int j = 0; j < m->n_jobs; j++) {
                const Job *job = m->jobs[j];
                for (int i = 0; !job->goodput_saved && i < job->n_attempts; i++)
                        model_rate_count(&m->rate, job, &job->attempts[i], 1);
        }
        return store_goodput_totals(store, stored_seed, m);
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
                in->mtbf_s = (double) own.rank_ms / 1000.0 / job->spec->ranks /
                             (double) own.interruptions;
                ret->mtbf_from_job = true;
        } else if (fleet->interruptions > 0)
                in->mtbf_s = (double) fleet->rank_ms / 1000.0 / (double) fleet->interruptions /
                             job->spec->ranks;
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

void ctl_goodput_metrics_write(Controller *ctl, FILE *f) {
        CtlGoodputSums sums;
        ctl_goodput_sums(ctl, &(CtlGoodputQuery){.now_ms = util_wall_ms()}, &sums);
        const ProjectGoodput *p = sums.projects;
        metrics_write_header(f, "axctl_goodput_accelerator_seconds", "gauge",
                             "Accelerator-seconds of every job the controller has run, by "
                             "project and bucket: productive, or badput by cause.");
        for (int k = 0; k < sums.n_projects; k++)
                for (int b = 0; b < _GOODPUT_BUCKET_MAX; b++)
                        fprintf(f,
                                "axctl_goodput_accelerator_seconds{project=\"%s\",bucket=\"%s\"} "
                                "%.3f\n",
                                p[k].project, goodput_bucket_to_string((GoodputBucket) b),
                                (double) p[k].t.ms[b] / 1000.0);
        metrics_write_header(f, "axctl_goodput_ratio", "gauge",
                             "Productive over allocated accelerator time, by project.");
        for (int k = 0; k < sums.n_projects; k++) {
                double g = goodput_ratio(&p[k].t);
                if (g >= 0)
                        fprintf(f, "axctl_goodput_ratio{project=\"%s\"} %.6f\n", p[k].project, g);
        }
        ctl_goodput_sums_clear(&sums);
}
