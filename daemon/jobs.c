/* SPDX-License-Identifier: MIT */
/*
 * Jobs: submission, cancellation, listing, and what happens to an attempt when it
 * fails, is preempted, starts or succeeds (DESIGN.md §4). Fencing rule: attempt
 * numbers only grow, and a new attempt is placed only once no rank of the old one may
 * still be alive (schedule.c's job_waiting), so two attempts of one job never run at
 * once.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "accounting.h"
#include "jobs.h"
#include "log.h"
#include "persist.h"
#include "util.h"

void ctl_error_set(CtlError *err, CtlErrorCode code, const char *field, const char *fmt, ...) {
        err->code = code;
        snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
}

Job *ctl_job_find(Controller *ctl, int64_t id) {
        return model_job_find(&ctl->model, id);
}

/* A job that left memory, read from the store and kept until the turn ends. */
static Job *job_from_store(Controller *ctl, int64_t id) {
        for (int i = 0; i < ctl->n_borrowed; i++)
                if (ctl->borrowed[i]->id == id)
                        return ctl->borrowed[i];
        Job *job = persist_load_job(ctl->store, id);
        if (!job)
                return NULL;
        GROW(ctl->borrowed, ctl->n_borrowed, ctl->cap_borrowed);
        ctl->borrowed[ctl->n_borrowed++] = job;
        return job;
}

Job *ctl_job_lookup(Controller *ctl, int64_t id) {
        Job *job = model_job_find(&ctl->model, id);
        return job ? job : job_from_store(ctl, id);
}

void jobs_borrowed_release(Controller *ctl) {
        for (int i = 0; i < ctl->n_borrowed; i++)
                job_free(ctl->borrowed[i]);
        ctl->n_borrowed = 0;
}

typedef struct ListCtx {
        Controller *ctl;
        int i; /* next memory job to consider, walking down */
        int64_t before;
        JobState wanted; /* _JOB_STATE_INVALID: any */
        const char *project;
        CtlJobFn fn;
        void *userdata;
        bool stopped;
} ListCtx;

static bool list_matches(const ListCtx *c, const Job *job) {
        return (c->wanted == _JOB_STATE_INVALID || job->state == c->wanted) &&
               (!c->project || strcmp(job->spec->project, c->project) == 0);
}

/* Offers the memory jobs with ids above floor (all when floor is 0), newest first. */
static void list_memory_down_to(ListCtx *c, int64_t floor) {
        for (; !c->stopped && c->i >= 0 && c->ctl->model.jobs[c->i]->id > floor; c->i--) {
                Job *job = c->ctl->model.jobs[c->i];
                if ((c->before <= 0 || job->id < c->before) && list_matches(c, job))
                        c->stopped = !c->fn(c->userdata, job);
        }
}

static int list_stored(void *userdata, int64_t id) {
        ListCtx *c = userdata;
        list_memory_down_to(c, id);
        if (c->stopped)
                return 1;
        if (model_job_find(&c->ctl->model, id))
                return 0; /* memory is the truth for what it holds: offered above */
        Job *job = job_from_store(c->ctl, id);
        if (job && list_matches(c, job))
                c->stopped = !c->fn(c->userdata, job);
        return c->stopped ? 1 : 0;
}

void ctl_jobs_foreach(Controller *ctl, int64_t before, JobState state, const char *project,
                      CtlJobFn fn, void *userdata) {
        /* Memory and the store merged by id, newest first: jobs that left memory are
         * over, so their stored rows are final. */
        ListCtx c = {.ctl = ctl,
                     .i = ctl->model.n_jobs - 1,
                     .before = before,
                     .wanted = state,
                     .project = project,
                     .fn = fn,
                     .userdata = userdata};
        if (store_jobs_list(ctl->store, before,
                            state == _JOB_STATE_INVALID ? NULL : job_state_to_string(state),
                            project, list_stored, &c) < 0)
                log_warning("listing stored jobs: %s", store_last_error(ctl->store));
        list_memory_down_to(&c, 0);
}

/* A job's reason stays short enough for a status line; the attempt keeps the detail. */
#define JOB_REASON_MAX 399

/* A hash naming who runs a job: its user. Not the project: a user bound to two projects
 * is still one user, and must not count as two witnesses against a node. */
static uint64_t job_owner(const Job *job) {
        return strmap_hash(job->spec->user ? job->spec->user : "");
}

/* Whether attempt a made progress: a checkpoint newer than the one it resumed from, or a
 * higher step than any attempt reached before (recorded in job->best_step). */
static bool attempt_record_progress(Job *job, const Attempt *a) {
        int64_t top = -1;
        for (int i = 0; i < job->n_ranks; i++)
                if (job->ranks[i].attempt == job->attempt && job->ranks[i].step > top)
                        top = job->ranks[i].step;
        bool higher = top > job->best_step;
        if (higher)
                job->best_step = top;
        return (a && job->ckpt_step > a->resume_step) || higher;
}

/* The current attempt made progress and ended through no fault of the job: it ran fine
 * on each of its nodes but `except` (the node that failed it, if any). */
static void job_ran_fine(Job *job, const Node *except) {
        for (int i = 0; i < job->n_ranks; i++) {
                const Rank *r = &job->ranks[i];
                if (r->attempt == job->attempt && r->node_name &&
                    !(except && strcmp(r->node_name, except->name) == 0))
                        model_job_ran_fine(job, r->node_name);
        }
}

void jobs_attempt_failed(Controller *ctl, Job *job, Node *node, const HealthFinding *f) {
        if (!job_attempt_live(job))
                return;
        Turn *t = &ctl->turn;
        tr_job_stop_ranks(t, job);
        int64_t now_wall = util_wall_ms();
        HealthHistory history = {.blame_times = node ? node->blame_times : NULL,
                                 .n_blame = node ? &node->n_blame : NULL,
                                 .blame_cap = NODE_BLAME_HISTORY,
                                 .suspects = node ? node->suspects : NULL,
                                 .n_suspects = node ? &node->n_suspects : NULL,
                                 .suspect_cap = NODE_SUSPECT_HISTORY};
        HealthCase c = {
                .finding = f,
                .policy = &job->spec->restart,
                .restarts_used = job->restarts,
                .quick_failures = job->quick_failures,
                .progressed = attempt_record_progress(job, job_current_attempt(job)),
                .suspect = {.job = job->id,
                            .owner = job_owner(job),
                            .at_ms = now_wall,
                            .fine_elsewhere = node && model_job_fine_elsewhere(job, node->name)},
                .window_ms = ctl->cfg.quarantine_window_ms,
                .quarantine_after = ctl->cfg.quarantine_after};
        HealthJudgement j = health_judge(&c, node ? &history : NULL);
        /* A drain or another node's fault ended an attempt that made progress: it ran
         * fine on its nodes, but the failing one. */
        if (c.progressed && f->cls != FAILURE_JOB && f->cls != FAILURE_START && !f->claimed_by_job)
                job_ran_fine(job, f->cls == FAILURE_NODE ? node : NULL);
        if (j.by_suspicion)
                turn_event(t, job->id, node->name, "node_suspect",
                           "failures of %d or more jobs of different owners within %llds",
                           ctl->cfg.quarantine_after,
                           (long long) (ctl->cfg.quarantine_window_ms / 1000));
        ctl_goodput_failing(job, node, f->reason);
        tr_attempt_end(t, job, f->reason, j.blame ? node->name : NULL, f->detail);
        if (j.blame) {
                turn_node_dirty(t, node);
                if (j.quarantine && (node->state == NODE_READY || node->state == NODE_UNHEALTHY)) {
                        char reason[96];
                        snprintf(reason, sizeof(reason), "blamed for %d failures within %llds",
                                 node->n_blame, (long long) (ctl->cfg.quarantine_window_ms / 1000));
                        tr_node(t, node, NODE_QUARANTINED, reason);
                }
        }
        job->quick_failures = j.quick_failures;
        char *reason_text = xasprintf("%s: %s", j.verdict.why, f->detail);
        if (strlen(reason_text) > JOB_REASON_MAX)
                reason_text[JOB_REASON_MAX] = '\0';
        free(job->avoid_node);
        job->avoid_node = j.avoid ? xstrdup(node->name) : NULL;
        if (j.verdict.action == HEALTH_FAIL) {
                job->exit_code =
                        f->exit_code >= 0 ? f->exit_code : (f->signal > 0 ? 128 + f->signal : -1);
                tr_job(t, job, JOB_FAILED, reason_text);
                free(reason_text);
                return;
        }
        if (j.verdict.action == HEALTH_RESTART)
                job->restarts++;
        ctl->restarts_by_reason[f->reason]++;
        job->failed_at_ms = util_now_ms();
        job->restart_at_ms = job->failed_at_ms + j.verdict.backoff_ms;
        schedule_restart_at(&ctl->sched, job->restart_at_ms);
        tr_job(t, job, JOB_RESTARTING, reason_text);
        free(reason_text);
}

void jobs_succeeded(Controller *ctl, Job *job) {
        tr_attempt_end(&ctl->turn, job, END_SUCCEEDED, NULL, NULL);
        job->exit_code = 0;
        tr_job(&ctl->turn, job, JOB_SUCCEEDED, "");
}

void jobs_preempt(Controller *ctl, Job *job, const char *why) {
        if (!job_attempt_live(job))
                return;
        tr_job_stop_ranks(&ctl->turn, job);
        if (attempt_record_progress(job, job_current_attempt(job)))
                job_ran_fine(job, NULL);
        tr_attempt_end(&ctl->turn, job, END_PREEMPTED, NULL, why);
        ctl->restarts_by_reason[END_PREEMPTED]++;
        /* Back in the queue: aging counts from now, and no restart budget is spent. */
        job->queued_ms = util_wall_ms();
        job->failed_at_ms = 0;
        tr_job(&ctl->turn, job, JOB_PREEMPTED, why);
}

void jobs_start(Controller *ctl, Job *job, const SchedPlacement *pl) {
        job->tier = pl->tier;
        tr_attempt_start(&ctl->turn, job, pl, ctl->model.nodes);
        int64_t now = util_now_ms();
        for (int i = 0; i < job->n_ranks; i++)
                job->ranks[i].assigned_mono = now;
}

/* Under AXCTLD_STRICT_TRANSITIONS: Model.starting lists every starting job, once. */
static void starting_verify(const Model *m) {
        int starting = 0;
        for (int j = 0; j < m->n_active; j++)
                starting += m->active[j]->state == JOB_STARTING;
        for (int j = 0; j < m->n_starting; j++)
                if (m->starting[j]->state != JOB_STARTING || m->starting[j]->starting_slot != j + 1)
                        starting = -1;
        if (starting != m->n_starting) {
                log_error("bug: the list of starting jobs is stale");
                abort();
        }
}

void jobs_tick(Controller *ctl, int64_t now_ms) {
        if (ctl->turn.strict)
                starting_verify(&ctl->model);
        if (ctl->cfg.start_timeout_ms <= 0)
                return;
        /* From the last: a job that fails here leaves the list, and the last (already
         * seen) takes its place; a failure may end other jobs' attempts too. */
        Model *m = &ctl->model;
        for (int j = m->n_starting - 1; j >= 0; j--) {
                if (j >= m->n_starting)
                        continue;
                Job *job = m->starting[j];
                for (int i = 0; i < job->n_ranks; i++) {
                        Rank *r = &job->ranks[i];
                        if (r->state != RANK_ASSIGNED)
                                continue;
                        HealthSeen seen = {.kind = HEALTH_SEEN_RANK_WAITING,
                                           .node = r->node_name,
                                           .rank = r->rank,
                                           .waited_ms = now_ms - r->assigned_mono,
                                           .start_timeout_ms = ctl->cfg.start_timeout_ms};
                        HealthFinding f;
                        if (health_detect(&seen, &f)) {
                                turn_event(&ctl->turn, job->id, r->node_name, "start_timeout", "%s",
                                           f.detail);
                                jobs_attempt_failed(ctl, job, model_rank_node(m, r), &f);
                                break;
                        }
                }
        }
}

int ctl_job_cancel(Controller *ctl, int64_t id, Job **ret_job, CtlError *err) {
        Job *job = ctl_job_lookup(ctl, id);
        if (!job) {
                ctl_error_set(err, CTL_ERR_NOT_FOUND, NULL, "job %lld does not exist",
                              (long long) id);
                return -ENOENT;
        }
        if (job_state_is_terminal(job->state)) {
                ctl_error_set(err, CTL_ERR_CONFLICT, NULL, "job %lld already ended (%s)",
                              (long long) id, job_state_to_string(job->state));
                return -EALREADY;
        }
        if (job_attempt_live(job)) {
                tr_job_stop_ranks(&ctl->turn, job);
                tr_attempt_end(&ctl->turn, job, END_CANCELLED, NULL, NULL);
        }
        tr_job(&ctl->turn, job, JOB_CANCELLED, "cancelled by request");
        *ret_job = job;
        return 0;
}

/* The parsed spec, or an error. */
static int submit_parse(json_t *spec_json, JobSpec **ret_spec, CtlError *err) {
        JsonError jerr = {0};
        if (spec_parse(spec_json, ret_spec, &jerr) < 0) {
                if (jerr.field[0])
                        ctl_error_set(err, CTL_ERR_INVALID_SPEC, jerr.field, "%s: %s", jerr.field,
                                      jerr.message);
                else
                        ctl_error_set(err, CTL_ERR_INVALID_SPEC, NULL, "%s", jerr.message);
                return -EINVAL;
        }
        return 0;
}

/* The job submitted with key in project: in memory, or one that left it for the store. */
static Job *job_by_key(Controller *ctl, const char *project, const char *key) {
        Job *job = model_job_by_key(&ctl->model, project, key);
        int64_t id = 0;
        if (job || store_job_find_key(ctl->store, project, key, &id) < 0 || id <= 0)
                return job;
        return ctl_job_lookup(ctl, id);
}

int ctl_job_submit(Controller *ctl, json_t *spec_json, const char *idempotency_key, Job **ret_job,
                   bool *ret_created, CtlError *err) {
        JobSpec *spec = NULL;
        int r = submit_parse(spec_json, &spec, err);
        if (r < 0)
                return r;
        Job *existing = idempotency_key ? job_by_key(ctl, spec->project, idempotency_key) : NULL;
        if (existing) {
                /* The same job when their normalised forms are. */
                _cleanup_free_ char *text = spec_to_text(spec);
                _cleanup_free_ char *existing_text = spec_to_text(existing->spec);
                bool same = strcmp(existing_text, text) == 0;
                spec_free(spec);
                if (!same) {
                        ctl_error_set(err, CTL_ERR_CONFLICT, NULL,
                                      "idempotency key %s was used for job %lld with another spec",
                                      idempotency_key, (long long) existing->id);
                        return -EEXIST;
                }
                *ret_job = existing;
                *ret_created = false;
                return 0;
        }
        /* Reject what can never run, when there is a fleet to judge by. */
        if (ctl->model.n_nodes > 0 && schedule_feasible(ctl, spec) != SCHED_WAIT_NONE) {
                ctl_error_set(err, CTL_ERR_UNSCHEDULABLE, NULL,
                              "the job can never fit the fleet: %d ranks of %d cpus%s%s%s on %d "
                              "nodes%s",
                              spec->ranks, spec->cpus, spec->accelerator ? " and " : "",
                              spec->accelerator ? spec->accelerator : "",
                              spec->accelerator ? " devices" : "", ctl->model.n_nodes,
                              spec->same_label || json_object_size(spec->node_selector)
                                      ? " with its constraints"
                                      : "");
                spec_free(spec);
                return -ENOSPC;
        }
        /* One user's queue is bounded, as Slurm's MaxSubmitJobs: each pass and each
         * restart's load walk the jobs that have not ended. */
        int64_t max = ctl->cfg.max_jobs_per_user, has = model_user_jobs(&ctl->model, spec->user);
        if (max > 0 && has >= max) {
                ctl_error_set(err, CTL_ERR_TOO_MANY_JOBS, NULL,
                              "user %s has %lld jobs that have not ended, and max_jobs_per_user "
                              "allows %lld; wait for some to end or cancel some",
                              spec->user, (long long) has, (long long) max);
                spec_free(spec);
                return -EUSERS;
        }
        Job *job = xcalloc(1, sizeof(Job));
        *job = (Job){.id = ctl->model.next_job_id,
                     .spec = spec,
                     .reason = xstrdup(""),
                     .exit_code = -1,
                     .created_ms = util_wall_ms(),
                     .ckpt_step = -1,
                     .best_step = -1,
                     .idempotency_key = idempotency_key ? xstrdup(idempotency_key) : NULL,
                     .wait = SCHED_WAIT_CAPACITY};
        job->queued_ms = job->created_ms;
        tr_job_created(&ctl->turn, job);
        model_job_add(&ctl->model, job);
        turn_event(&ctl->turn, job->id, NULL, "job_submitted", "%s by %s in %s: %d ranks",
                   spec->name, spec->user, spec->project, spec->ranks);
        schedule_job_added(&ctl->sched, job);
        *ret_job = job;
        *ret_created = true;
        return 0;
}

int ctl_events_list(Controller *ctl, int64_t job, int64_t after, int limit, StoreEventFn fn,
                    void *userdata) {
        return store_events_list(ctl->store, job, after, limit, fn, userdata);
}
