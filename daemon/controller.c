/* SPDX-License-Identifier: MIT */
/*
 * The job/attempt state machine (DESIGN.md §4) and the node side of the agent protocol
 * (§5). Fencing rule: attempt numbers only grow, reports for any attempt but a job's
 * current one are ignored, and a new attempt is placed only once no rank of the old one
 * may still be alive (its agent confirmed the exit, or its node was declared lost after
 * lease + grace, by which time the agent has killed its ranks itself). So two attempts
 * of one job never run at once, whatever crashes or partitions happen.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "controller-internal.h"
#include "checkpoint.h"
#include "health.h"
#include "log.h"
#include "scheduler.h"
#include "util.h"

/*
 * Under a burst of submits every loop turn would run a pass over all pending jobs; at
 * most one pass per this interval keeps the cost per submit constant.
 */
#define SCHED_MIN_INTERVAL_MS 5

static void err_set(CtlError *err, int status, const char *code, const char *field,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void err_set(CtlError *err, int status, const char *code, const char *field,
                    const char *fmt, ...) {
        err->status = status;
        err->code = code;
        snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
}

void ctl_tx(Controller *ctl) {
        if (ctl->in_turn_tx)
                return;
        int r = store_begin(ctl->store);
        if (r < 0) {
                log_error("cannot begin a database transaction: %s", store_last_error(ctl->store));
                exit(EXIT_FAILURE); /* systemd restarts us; the database is consistent */
        }
        ctl->in_turn_tx = true;
}

void ctl_job_dirty(Controller *ctl, Job *job) {
        ctl_tx(ctl);
        if (job->dirty)
                return;
        job->dirty = true;
        GROW(ctl->dirty_jobs, ctl->n_dirty_jobs, ctl->cap_dirty_jobs);
        ctl->dirty_jobs[ctl->n_dirty_jobs++] = job;
}

void ctl_node_dirty(Controller *ctl, Node *node) {
        ctl_tx(ctl);
        if (node->dirty)
                return;
        node->dirty = true;
        GROW(ctl->dirty_nodes, ctl->n_dirty_nodes, ctl->cap_dirty_nodes);
        ctl->dirty_nodes[ctl->n_dirty_nodes++] = node;
}

void ctl_event(Controller *ctl, int64_t job, const char *node, const char *kind, const char *fmt,
               ...) {
        char detail[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        ctl_tx(ctl);
        StoreEvent e = {.time_ms = util_wall_ms(), .job = job, .node = node, .kind = kind,
                        .detail = detail};
        if (store_event_append(ctl->store, &e) < 0) {
                log_error("cannot record event: %s", store_last_error(ctl->store));
                exit(EXIT_FAILURE);
        }
        /* Under systemd these carry JOB_ID and NODE, so journalctl can select them. */
        if (job > 0)
                log_job(LOG_LEVEL_INFO, job, node, 0, "job %lld: %s: %s", (long long) job, kind,
                        detail);
        else
                log_job(LOG_LEVEL_INFO, 0, node, 0, "node %s: %s: %s", node ? node : "-", kind,
                        detail);
}

int ctl_new(const CtlConfig *config, Controller **ret) {
        Controller *ctl = xcalloc(1, sizeof(Controller));
        ctl->cfg = *config;
        ctl->idempotency = strmap_new();
        ctl->node_index = strmap_new();
        ctl->next_job_id = 1;
        ctl->next_restart_ms = INT64_MAX;
        histogram_init_latency(&ctl->recovery);
        histogram_init_latency(&ctl->sched_pass);
        histogram_init_latency(&ctl->db_commit);
        int r = store_open(config->db_path, &ctl->store);
        if (r < 0) {
                ctl_free(ctl);
                return r;
        }
        r = ctl_load(ctl);
        if (r < 0) {
                ctl_free(ctl);
                return r;
        }
        ctl->sched_needed = ctl->sched_full = true;
        ctl->sweep_needed = true;
        ctl->next_restart_ms = util_now_ms();
        *ret = ctl;
        return 0;
}

Controller *ctl_free(Controller *ctl) {
        if (!ctl)
                return NULL;
        for (int i = 0; i < ctl->n_jobs; i++)
                job_free(ctl->jobs[i]);
        for (int i = 0; i < ctl->n_nodes; i++)
                node_free(ctl->nodes[i]);
        free(ctl->jobs);
        free(ctl->active);
        free(ctl->nodes);
        free(ctl->dirty_jobs);
        free(ctl->dirty_nodes);
        free(ctl->fresh);
        strmap_free(ctl->idempotency);
        strmap_free(ctl->node_index);
        store_close(ctl->store);
        free(ctl);
        return NULL;
}

const CtlConfig *ctl_config(Controller *ctl) {
        return &ctl->cfg;
}

Job *ctl_job_find(Controller *ctl, int64_t id) {
        int lo = 0, hi = ctl->n_jobs - 1;
        while (lo <= hi) {
                int mid = lo + (hi - lo) / 2;
                if (ctl->jobs[mid]->id == id)
                        return ctl->jobs[mid];
                if (ctl->jobs[mid]->id < id)
                        lo = mid + 1;
                else
                        hi = mid - 1;
        }
        return NULL;
}

Node *ctl_node_find(Controller *ctl, const char *name) {
        return strmap_get(ctl->node_index, name);
}

Node **ctl_nodes(Controller *ctl, int *ret_n) {
        *ret_n = ctl->n_nodes;
        return ctl->nodes;
}

static void node_bump(Node *node) {
        node->version++;
}

static void job_set_state(Controller *ctl, Job *job, JobState state, const char *reason) {
        if (reason) {
                char *copy = xstrdup(reason); /* reason may be job->reason itself */
                free(job->reason);
                job->reason = copy;
        }
        if (job->state != state) {
                ctl_event(ctl, job->id, NULL, "job_state", "%s -> %s%s%s",
                          job_state_to_string(job->state), job_state_to_string(state),
                          job->reason && *job->reason ? ": " : "", job->reason ? job->reason : "");
                job->state = state;
        }
        if (job_state_is_terminal(state) && job->finished_ms == 0)
                job->finished_ms = util_wall_ms();
        if (job_state_is_terminal(state))
                ctl->sweep_needed = true;
        ctl_job_dirty(ctl, job);
        /* Starting or running takes capacity, which cannot help anyone waiting; ending,
         * restarting or going back to the queue can. */
        ctl->sched_needed = true;
        if (state != JOB_STARTING && state != JOB_RUNNING)
                ctl->sched_full = true;
}

static bool rank_desired(const Rank *r) {
        return r->state == RANK_ASSIGNED || r->state == RANK_RUNNING;
}

/* Adds (delta 1) or takes back (delta -1) what rank r of job holds on node. */
static void node_usage_apply(Node *node, Job *job, Rank *r, int delta) {
        int i = 0;
        while (i < node->n_jobs && node->jobs[i].job != job)
                i++;
        if (i == node->n_jobs) {
                GROW(node->jobs, node->n_jobs, node->cap_jobs);
                node->jobs[node->n_jobs++] = (NodeJob){.job = job};
        }
        node->jobs[i].alive_ranks += delta;
        if (node->jobs[i].alive_ranks <= 0)
                node->jobs[i] = node->jobs[--node->n_jobs];
        node->used_cpus += delta * job->spec->cpus;
        node->used_memory_mb += delta * job->spec->memory_mb;
        node->alive_ranks += delta;
        for (int d = 0; d < r->n_devices; d++)
                if (r->devices[d] >= 0 && r->devices[d] < node->n_devices)
                        node->device_used[r->devices[d]] += delta;
}

void ctl_node_recount(Controller *ctl, Node *node) {
        node->used_cpus = node->alive_ranks = 0;
        node->used_memory_mb = 0;
        node->n_jobs = 0;
        memset(node->device_used, 0, (size_t) node->n_devices * sizeof(int));
        for (int j = 0; j < ctl->n_active; j++) {
                Job *job = ctl->active[j];
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *r = &job->ranks[k];
                        if (r->alive && r->node_name && strcmp(r->node_name, node->name) == 0)
                                node_usage_apply(node, job, r, 1);
                }
        }
}

/* The rank's process is known to be gone: its node's resources are free again. */
static void rank_set_dead(Controller *ctl, Job *job, Rank *r) {
        if (!r->alive)
                return;
        r->alive = false;
        r->dirty = true;
        Node *node = ctl_node_find(ctl, r->node_name);
        if (node)
                node_usage_apply(node, job, r, -1);
        ctl_job_dirty(ctl, job);
        ctl->sweep_needed = true;
        ctl->sched_needed = ctl->sched_full = true;
}

/*
 * Stops every rank of the job's current attempt that is still wanted: it leaves its
 * node's desired set (the agent kills it) and stays `alive` until the agent confirms.
 */
static void job_stop_ranks(Controller *ctl, Job *job) {
        for (int i = 0; i < job->n_ranks; i++) {
                Rank *r = &job->ranks[i];
                if (!rank_desired(r))
                        continue;
                r->state = RANK_KILLED;
                r->dirty = true;
                Node *node = ctl_node_find(ctl, r->node_name);
                if (node) {
                        node_bump(node);
                        r->stop_version = node->version;
                } else
                        rank_set_dead(ctl, job, r);
        }
        ctl_job_dirty(ctl, job);
}

static void attempt_end(Controller *ctl, Job *job, EndReason reason, const char *blamed,
                        const char *detail) {
        Attempt *a = job_current_attempt(job);
        if (!a || a->end_reason != _END_REASON_INVALID)
                return;
        a->end_reason = reason;
        a->ended_ms = util_wall_ms();
        a->blamed_node = blamed ? xstrdup(blamed) : NULL;
        a->detail = detail ? xstrdup(detail) : NULL;
        a->dirty = true;
        ctl_event(ctl, job->id, blamed, "attempt_ended", "attempt %d ended: %s%s%s%s%s",
                  a->attempt, end_reason_to_string(reason), blamed ? ", blamed node " : "",
                  blamed ? blamed : "", detail ? ": " : "", detail ? detail : "");
}

static bool job_attempt_live(const Job *job) {
        return job->state == JOB_STARTING || job->state == JOB_RUNNING;
}

/* Records a blame on node and quarantines it when it has been blamed too often. */
static void node_blame(Controller *ctl, Node *node) {
        bool quarantine = health_blame_record(node->blame_times, &node->n_blame,
                                              NODE_BLAME_HISTORY, util_wall_ms(),
                                              ctl->cfg.quarantine_window_ms,
                                              ctl->cfg.quarantine_after);
        ctl_node_dirty(ctl, node);
        if (quarantine && (node->state == NODE_READY || node->state == NODE_UNHEALTHY)) {
                free(node->reason);
                node->reason = xasprintf("blamed for %d failures within %llds", node->n_blame,
                                         (long long) (ctl->cfg.quarantine_window_ms / 1000));
                ctl_event(ctl, 0, node->name, "node_state", "%s -> quarantined: %s",
                          node_state_to_string(node->state), node->reason);
                node->state = NODE_QUARANTINED;
        }
}

/* A hash naming who runs a job: its user. Not the project: a user bound to two projects
 * is still one user, and must not count as two witnesses against a node. */
static uint64_t job_owner(const Job *job) {
        return strmap_hash(job->spec->user ? job->spec->user : "");
}

/*
 * Whom a failure of class cls on node blames (DESIGN §4a): the node for a node fault;
 * for the job's own failure only once failures of different jobs of different owners
 * pile up there. NULL: nobody.
 */
static Node *failure_blame(Controller *ctl, Job *job, FailureClass cls, Node *node) {
        if (!node)
                return NULL;
        if (cls == FAILURE_NODE)
                return node;
        if (cls != FAILURE_JOB)
                return NULL;
        HealthSuspect f = {.job = job->id, .owner = job_owner(job), .at_ms = util_wall_ms()};
        if (!health_suspect_record(node->suspects, &node->n_suspects, NODE_SUSPECT_HISTORY, f,
                                   ctl->cfg.quarantine_window_ms, ctl->cfg.quarantine_after))
                return NULL;
        ctl_event(ctl, job->id, node->name, "node_suspect",
                  "failures of %d or more jobs of different owners within %llds",
                  ctl->cfg.quarantine_after, (long long) (ctl->cfg.quarantine_window_ms / 1000));
        return node;
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

/*
 * The current attempt failed: stop the gang, blame, and restart or fail per policy.
 * Does nothing when the attempt is already over (the first failure wins the blame).
 * node is where the failure was seen.
 */
static void job_attempt_failed(Controller *ctl, Job *job, EndReason reason, Node *node,
                               int exit_code, int signal, const char *detail) {
        if (!job_attempt_live(job))
                return;
        FailureClass cls = health_classify(reason);
        job_stop_ranks(ctl, job);
        Node *blamed = failure_blame(ctl, job, cls, node);
        attempt_end(ctl, job, reason, blamed ? blamed->name : NULL, detail);
        if (blamed)
                node_blame(ctl, blamed);
        Attempt *a = job_current_attempt(job);
        bool progressed = attempt_record_progress(job, a);
        /* Failures of the node are not the job's: they neither grow its backoff nor
         * count towards its limit of failures without progress. */
        if (cls == FAILURE_JOB || cls == FAILURE_START)
                job->quick_failures = progressed ? 0 : job->quick_failures + 1;
        HealthFailure f = {.reason = reason, .exit_code = exit_code, .signal = signal,
                           .consecutive = job->quick_failures > 0 ? job->quick_failures - 1 : 0,
                           .without_progress = job->quick_failures};
        HealthVerdict v = health_decide(&job->spec->restart, job->restarts, &f);
        char reason_text[400];
        snprintf(reason_text, sizeof(reason_text), "%s%s%s", v.why, detail ? ": " : "",
                 detail ? detail : "");
        /* A node fault moves the job; its own crash on a healthy node does not. */
        free(job->avoid_node);
        job->avoid_node = cls == FAILURE_NODE && node ? xstrdup(node->name) : NULL;
        if (v.action == HEALTH_FAIL) {
                job->exit_code = exit_code >= 0 ? exit_code : (signal > 0 ? 128 + signal : -1);
                job_set_state(ctl, job, JOB_FAILED, reason_text);
                return;
        }
        if (v.action == HEALTH_RESTART)
                job->restarts++;
        ctl->restarts_by_reason[reason]++;
        job->failed_at_ms = util_now_ms();
        job->restart_at_ms = util_now_ms() + v.backoff_ms;
        if (job->restart_at_ms < ctl->next_restart_ms)
                ctl->next_restart_ms = job->restart_at_ms;
        job_set_state(ctl, job, JOB_RESTARTING, reason_text);
}

static void job_succeeded(Controller *ctl, Job *job) {
        attempt_end(ctl, job, END_SUCCEEDED, NULL, NULL);
        job->exit_code = 0;
        job_set_state(ctl, job, JOB_SUCCEEDED, "");
}

void ctl_job_preempt(Controller *ctl, Job *job, const char *why) {
        if (!job_attempt_live(job))
                return;
        job_stop_ranks(ctl, job);
        attempt_end(ctl, job, END_PREEMPTED, NULL, why);
        ctl->restarts_by_reason[END_PREEMPTED]++;
        /* Back in the queue: aging counts from now, and no restart budget is spent. */
        job->queued_ms = util_wall_ms();
        job->failed_at_ms = 0;
        job_set_state(ctl, job, JOB_PREEMPTED, why);
}

bool ctl_job_attempt_live(const Job *job) {
        return job_attempt_live(job);
}

int ctl_job_cancel(Controller *ctl, int64_t id, Job **ret_job, CtlError *err) {
        Job *job = ctl_job_find(ctl, id);
        if (!job) {
                err_set(err, 404, "not_found", NULL, "job %lld does not exist", (long long) id);
                return -ENOENT;
        }
        if (job_state_is_terminal(job->state)) {
                err_set(err, 409, "conflict", NULL, "job %lld already ended (%s)", (long long) id,
                        job_state_to_string(job->state));
                return -EALREADY;
        }
        if (job_attempt_live(job)) {
                job_stop_ranks(ctl, job);
                attempt_end(ctl, job, END_CANCELLED, NULL, NULL);
        }
        job_set_state(ctl, job, JOB_CANCELLED, "cancelled by request");
        *ret_job = job;
        return 0;
}

bool ctl_node_device_free(Controller *ctl, Node *node, int device) {
        return device >= 0 && device < node->n_devices && node->device_used[device] == 0;
}

void ctl_node_free_capacity(Controller *ctl, Node *node, int *ret_cpus, int *ret_free_devices,
                            int *ret_ranks) {
        int used = 0;
        for (int d = 0; d < node->n_devices; d++)
                if (node->device_used[d])
                        used++;
        *ret_cpus = node->cpus - node->used_cpus;
        *ret_free_devices = node->n_devices - used;
        *ret_ranks = node->alive_ranks;
}

void ctl_job_start_attempt(Controller *ctl, Job *job, const SchedPlacement *pl,
                           Node **node_of) {
        for (int i = 0; i < job->n_ranks; i++)
                rank_clear(&job->ranks[i]);
        free(job->ranks);
        job->attempt++;
        job->attempts = xrealloc(job->attempts, (size_t) (job->n_attempts + 1) * sizeof(Attempt));
        Attempt *a = &job->attempts[job->n_attempts++];
        *a = (Attempt){.attempt = job->attempt,
                       .resume_step = job->ckpt_step > 0 ? job->ckpt_step : 0,
                       .resume_path = job->ckpt_step > 0 ? xstrdup(job->ckpt_path) : NULL,
                       .started_ms = util_wall_ms(),
                       .end_reason = _END_REASON_INVALID,
                       .dirty = true};
        job->n_ranks = pl->n_ranks;
        job->ranks = xcalloc((size_t) pl->n_ranks + 1, sizeof(Rank));
        /* Node ranks in order of first appearance; local ranks count up per node. */
        int *node_rank_of = xcalloc((size_t) ctl->n_nodes + 1, sizeof(int));
        int *local_count = xcalloc((size_t) ctl->n_nodes + 1, sizeof(int));
        for (int i = 0; i < ctl->n_nodes; i++)
                node_rank_of[i] = -1;
        int n_nodes_used = 0;
        char nodes_text[256] = "";
        for (int r = 0; r < pl->n_ranks; r++) {
                int ni = pl->rank_node[r];
                if (node_rank_of[ni] < 0) {
                        node_rank_of[ni] = n_nodes_used++;
                        node_bump(node_of[ni]);
                        size_t len = strlen(nodes_text);
                        snprintf(nodes_text + len, sizeof(nodes_text) - len, "%s%s",
                                 len ? "," : "", node_of[ni]->name);
                }
                Rank *rk = &job->ranks[r];
                *rk = (Rank){.rank = r, .attempt = job->attempt,
                             .node_name = xstrdup(node_of[ni]->name),
                             .n_devices = pl->accelerators_per_rank,
                             .devices = xcalloc((size_t) pl->accelerators_per_rank + 1, sizeof(int)),
                             .state = RANK_ASSIGNED, .alive = true, .exit_code = -1, .step = -1,
                             .local_rank = local_count[ni]++, .node_rank = node_rank_of[ni],
                             .assign_version = node_of[ni]->version, .dirty = true};
                memcpy(rk->devices, pl->rank_devices + (size_t) r * (size_t) pl->accelerators_per_rank,
                       (size_t) pl->accelerators_per_rank * sizeof(int));
                node_usage_apply(node_of[ni], job, rk, 1);
        }
        free(node_rank_of);
        free(local_count);
        job->wait = SCHED_WAIT_NONE;
        ctl_event(ctl, job->id, NULL, "attempt_started", "attempt %d on %s, resuming from step %lld",
                  job->attempt, nodes_text, (long long) a->resume_step);
        job_set_state(ctl, job, JOB_STARTING, "");
}

int ctl_job_submit(Controller *ctl, json_t *spec_json, const char *idempotency_key,
                   Job **ret_job, bool *ret_created, CtlError *err) {
        JsonError jerr = {0};
        JobSpec *spec = NULL;
        if (spec_parse(spec_json, &spec, &jerr) < 0) {
                if (jerr.field[0])
                        err_set(err, 400, "invalid_spec", jerr.field, "%s: %s", jerr.field,
                                jerr.message);
                else
                        err_set(err, 400, "invalid_spec", NULL, "%s", jerr.message);
                return -EINVAL;
        }
        json_t *norm = spec_to_json(spec);
        char *text = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(norm);
        if (idempotency_key) {
                Job *existing = strmap_get(ctl->idempotency, idempotency_key);
                if (existing) {
                        bool same = strcmp(existing->spec_text, text) == 0;
                        free(text);
                        spec_free(spec);
                        if (!same) {
                                err_set(err, 409, "conflict", NULL,
                                        "idempotency key %s was used for job %lld with another spec",
                                        idempotency_key, (long long) existing->id);
                                return -EEXIST;
                        }
                        *ret_job = existing;
                        *ret_created = false;
                        return 0;
                }
        }
        /* Reject what can never run, when there is a fleet to judge by. */
        if (ctl->n_nodes > 0 && ctl_job_feasible(ctl, spec) != SCHED_WAIT_NONE) {
                err_set(err, 422, "unschedulable", NULL,
                        "the job can never fit the fleet: %d ranks of %d cpus%s%s%s on %d nodes%s",
                        spec->ranks, spec->cpus, spec->accelerator ? " and " : "",
                        spec->accelerator ? spec->accelerator : "",
                        spec->accelerator ? " devices" : "", ctl->n_nodes,
                        spec->same_label || json_object_size(spec->node_selector)
                                ? " with its constraints"
                                : "");
                free(text);
                spec_free(spec);
                return -ENOSPC;
        }
        Job *job = xcalloc(1, sizeof(Job));
        job->id = ctl->next_job_id++;
        job->spec = spec;
        job->spec_text = text;
        job->state = JOB_PENDING;
        job->reason = xstrdup("");
        job->exit_code = -1;
        job->created_ms = util_wall_ms();
        job->queued_ms = job->created_ms;
        job->ckpt_step = -1;
        job->best_step = -1;
        job->idempotency_key = idempotency_key ? xstrdup(idempotency_key) : NULL;
        job->wait = SCHED_WAIT_CAPACITY;
        ctl_job_append(ctl, job);
        ctl_active_add(ctl, job);
        if (idempotency_key)
                strmap_put(ctl->idempotency, idempotency_key, job);
        ctl_job_dirty(ctl, job);
        ctl_event(ctl, job->id, NULL, "job_submitted", "%s by %s in %s: %d ranks", spec->name,
                  spec->user, spec->project, spec->ranks);
        GROW(ctl->fresh, ctl->n_fresh, ctl->cap_fresh);
        ctl->fresh[ctl->n_fresh++] = job;
        ctl->sched_needed = true;
        *ret_job = job;
        *ret_created = true;
        return 0;
}

void ctl_jobs_foreach(Controller *ctl, int64_t before, JobState state, const char *project,
                      CtlJobFn fn, void *userdata) {
        for (int i = ctl->n_jobs - 1; i >= 0; i--) {
                Job *job = ctl->jobs[i];
                if (before > 0 && job->id >= before)
                        continue;
                if (state != _JOB_STATE_INVALID && job->state != state)
                        continue;
                if (project && strcmp(job->spec->project, project) != 0)
                        continue;
                if (!fn(userdata, job))
                        return;
        }
}

int ctl_events_list(Controller *ctl, int64_t job, int64_t after, int limit, StoreEventFn fn,
                    void *userdata) {
        return store_events_list(ctl->store, job, after, limit, fn, userdata);
}

/* Marks every possibly-alive rank on node as gone (the node self-fenced or rebooted)
 * and fails the live attempts that had ranks there. */
static void node_ranks_gone(Controller *ctl, Node *node, EndReason reason, const char *detail) {
        for (int j = 0; j < ctl->n_active; j++) {
                Job *job = ctl->active[j];
                bool hit = false;
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *r = &job->ranks[k];
                        if (!r->alive || strcmp(r->node_name, node->name) != 0)
                                continue;
                        rank_set_dead(ctl, job, r);
                        if (rank_desired(r)) {
                                r->state = RANK_LOST;
                                hit = true;
                        }
                }
                if (hit)
                        job_attempt_failed(ctl, job, reason, node, -1, 0, detail);
        }
        ctl->sched_needed = ctl->sched_full = true;
}

static void node_set_state(Controller *ctl, Node *node, NodeState state, const char *reason) {
        /* reason may be node->reason itself: copy before freeing. */
        char *copy = xstrdup(reason ? reason : "");
        free(node->reason);
        node->reason = copy;
        reason = copy;
        if (node->state != state) {
                ctl_event(ctl, 0, node->name, "node_state", "%s -> %s%s%s",
                          node_state_to_string(node->state), node_state_to_string(state),
                          reason && *reason ? ": " : "", reason ? reason : "");
                node->state = state;
        }
        ctl_node_dirty(ctl, node);
        ctl->sched_needed = ctl->sched_full = true;
}

static void node_fail_live_attempts(Controller *ctl, Node *node, EndReason reason,
                                    const char *detail) {
        for (int j = 0; j < ctl->n_active; j++) {
                Job *job = ctl->active[j];
                if (!job_attempt_live(job))
                        continue;
                for (int k = 0; k < job->n_ranks; k++)
                        if (rank_desired(&job->ranks[k]) &&
                            strcmp(job->ranks[k].node_name, node->name) == 0) {
                                job_attempt_failed(ctl, job, reason,
                                                   reason == END_DRAINED ? NULL : node, -1, 0,
                                                   detail);
                                if (reason == END_DRAINED) {
                                        free(job->avoid_node);
                                        job->avoid_node = xstrdup(node->name);
                                }
                                break;
                        }
        }
}

/*
 * One node name, one agent (DESIGN §4b): while the node's lease is live, only the agent
 * holding it (same state directory, so same agent_id) may speak for the node. Another
 * one (a second axagent started with the same --node, or one that lost its state and
 * cannot know the ranks still running) waits until the lease runs out, by which time
 * the ranks of the node have fenced themselves. 0, or -EBUSY with err set.
 */
static int node_claim_check(Controller *ctl, const Node *node, const char *agent_id,
                            CtlError *err) {
        /* A restarted controller gives every stored node a fresh lease, and remembers its
         * agent: until that lease runs out, the agent it knew gets the node back. */
        if (!node->agent_id || util_streq_ptr(node->agent_id, agent_id) ||
            health_node_lost(node->last_sync_mono, util_now_ms(), ctl->cfg.lease_ms,
                             ctl->cfg.grace_ms))
                return 0;
        log_warning("node %s: refused an agent with another identity (%s) while the lease of "
                    "agent %s is live",
                    node->name, agent_id ? agent_id : "none", node->agent_id);
        err_set(err, 409, "node_claimed", "node",
                "node %s is held by another agent until its lease runs out", node->name);
        return -EBUSY;
}

int ctl_node_register(Controller *ctl, const WireRegister *msg, Node **ret_node, CtlError *err) {
        Node *node = ctl_node_find(ctl, msg->node);
        if (node && node_claim_check(ctl, node, msg->agent_id, err) < 0)
                return -EBUSY;
        bool fresh = !node;
        if (fresh) {
                node = xcalloc(1, sizeof(Node));
                node->name = xstrdup(msg->node);
                node->state = NODE_READY;
                node->reason = xstrdup("");
                node->labels = json_object();
                node->version = (uint64_t) util_wall_ms() * 1000;
                ctl_node_append(ctl, node);
        }
        if (!fresh && node->boot_id && msg->boot_id && strcmp(node->boot_id, msg->boot_id) != 0)
                /* The machine rebooted: nothing it ran survives. */
                node_ranks_gone(ctl, node, END_NODE_LOST, "node rebooted");
        free(node->hostname);
        node->hostname = xstrdup(msg->hostname ? msg->hostname : msg->node);
        free(node->address);
        node->address = msg->address ? xstrdup(msg->address) : NULL;
        free(node->boot_id);
        node->boot_id = msg->boot_id ? xstrdup(msg->boot_id) : NULL;
        free(node->agent_id);
        node->agent_id = msg->agent_id ? xstrdup(msg->agent_id) : NULL;
        json_decref(node->labels);
        node->labels = msg->labels ? json_deep_copy(msg->labels) : json_object();
        ctl_node_set_inventory(node, msg->inventory);
        ctl_node_recount(ctl, node);
        node->last_sync_mono = util_now_ms();
        node->last_seen_ms = util_wall_ms();
        node->connected = true;
        node_bump(node);
        ctl_event(ctl, 0, node->name, "node_registered", "%d cpus, %d accelerators at %s",
                  node->cpus, node->n_devices, node->address ? node->address : "-");
        if (node->state == NODE_DOWN)
                node_set_state(ctl, node, NODE_READY, "registered again");
        ctl_node_dirty(ctl, node);
        ctl->sched_needed = ctl->sched_full = true;
        *ret_node = node;
        return 0;
}

static Rank *job_rank(Job *job, int attempt, int rank) {
        if (attempt != job->attempt || rank < 0 || rank >= job->n_ranks)
                return NULL;
        return &job->ranks[rank];
}

static void rank_report(Controller *ctl, Node *node, const WireRankReport *rr) {
        Job *job = ctl_job_find(ctl, rr->job);
        if (!job)
                return;
        Rank *r = job_rank(job, rr->attempt, rr->rank);
        if (!r || strcmp(r->node_name, node->name) != 0)
                return; /* a stale attempt or a confused agent: fencing ignores it */
        if (rr->pid > 0 && r->pid != rr->pid) {
                r->pid = rr->pid;
                r->dirty = true;
                ctl_job_dirty(ctl, job);
        }
        if (rr->step >= 0 && rr->step != r->step) {
                r->step = rr->step; /* progress is liveness: kept in memory, saved on transitions */
        }
        if (!rr->exited) {
                if (r->state == RANK_ASSIGNED) {
                        r->state = RANK_RUNNING;
                        r->dirty = true;
                        ctl_job_dirty(ctl, job);
                        bool all = true;
                        for (int i = 0; i < job->n_ranks; i++)
                                if (job->ranks[i].state == RANK_ASSIGNED)
                                        all = false;
                        if (all && job->state == JOB_STARTING) {
                                if (job->started_ms == 0)
                                        job->started_ms = util_wall_ms();
                                if (job->failed_at_ms > 0) {
                                        histogram_observe(&ctl->recovery,
                                                          (double) (util_now_ms() - job->failed_at_ms) / 1000.0);
                                        job->failed_at_ms = 0;
                                }
                                job_set_state(ctl, job, JOB_RUNNING, "");
                        }
                }
                if (rr->hung && rank_desired(r) && job_attempt_live(job)) {
                        char detail[160];
                        snprintf(detail, sizeof(detail),
                                 "rank %d made no progress for %ds (last step %lld)", r->rank,
                                 job->spec->hang_timeout_s, (long long) r->step);
                        job_attempt_failed(ctl, job, END_HANG, node, -1, 0, detail);
                }
                return;
        }
        if (!r->alive)
                return;
        rank_set_dead(ctl, job, r);
        r->exit_code = rr->exit_code;
        r->signal = rr->signal;
        if (!rank_desired(r))
                return; /* we stopped it: this is the confirmation */
        node_bump(node);
        if (rr->exit_code == 0 && rr->signal == 0) {
                r->state = RANK_SUCCEEDED;
                bool all = true;
                for (int i = 0; i < job->n_ranks; i++)
                        if (job->ranks[i].state != RANK_SUCCEEDED)
                                all = false;
                if (all && job_attempt_live(job))
                        job_succeeded(ctl, job);
                return;
        }
        r->state = RANK_FAILED;
        char detail[160];
        if (rr->start_failed) {
                snprintf(detail, sizeof(detail),
                         "rank %d on %s could not start (exit code %d; its log says why)",
                         r->rank, node->name, rr->exit_code);
                ctl_event(ctl, job->id, node->name, "rank_exit", "%s", detail);
                job_attempt_failed(ctl, job, END_START_FAILED, node, rr->exit_code, 0, detail);
                return;
        }
        if (rr->signal > 0)
                snprintf(detail, sizeof(detail), "rank %d on %s killed by signal %d", r->rank,
                         node->name, rr->signal);
        else
                snprintf(detail, sizeof(detail), "rank %d on %s exited with code %d", r->rank,
                         node->name, rr->exit_code);
        ctl_event(ctl, job->id, node->name, "rank_exit", "%s", detail);
        job_attempt_failed(ctl, job, END_RANK_EXIT, node, rr->exit_code, rr->signal, detail);
}

/*
 * A node speaks only for itself (DESIGN §4b): a checkpoint counts when the reporting
 * node runs a rank of the job's current attempt and the path is a step directory of the
 * job's own checkpoint_dir. Anything else is a confused or hostile agent: logged, ignored.
 */
static bool checkpoint_acceptable(const Job *job, const Node *node, const WireCheckpoint *c) {
        bool holds_rank = false;
        for (int i = 0; i < job->n_ranks && !holds_rank; i++)
                holds_rank = job->ranks[i].attempt == job->attempt &&
                             strcmp(job->ranks[i].node_name, node->name) == 0;
        if (c->attempt != job->attempt || !holds_rank) {
                log_warning("node %s reported a checkpoint of job %lld attempt %d, where it "
                            "runs no rank of the current attempt: ignored",
                            node->name, (long long) job->id, c->attempt);
                return false;
        }
        if (!checkpoint_path_in_dir(job->spec->checkpoint_dir, c->path, c->step)) {
                log_warning("node %s reported checkpoint path %s for step %lld of job %lld, "
                            "not a step directory of its checkpoint_dir: ignored",
                            node->name, c->path, (long long) c->step, (long long) job->id);
                return false;
        }
        return true;
}

static void checkpoint_report(Controller *ctl, Node *node, const WireCheckpoint *c) {
        Job *job = ctl_job_find(ctl, c->job);
        if (!job || c->step <= job->ckpt_step || !checkpoint_acceptable(job, node, c))
                return;
        job->ckpt_step = c->step;
        free(job->ckpt_path);
        job->ckpt_path = xstrdup(c->path);
        ctl_job_dirty(ctl, job);
        StoreCheckpoint sc = {.job = job->id, .step = c->step, .path = c->path,
                              .committed_ms = util_wall_ms(), .attempt = c->attempt};
        if (store_checkpoint_put(ctl->store, &sc) < 0) {
                log_error("cannot record checkpoint: %s", store_last_error(ctl->store));
                exit(EXIT_FAILURE);
        }
        ctl_event(ctl, job->id, NULL, "checkpoint", "step %lld committed at %s (attempt %d)",
                  (long long) c->step, c->path, c->attempt);
}

int ctl_node_sync(Controller *ctl, const WireSync *msg, uint64_t applied_version,
                  Node **ret_node, CtlError *err) {
        Node *node = ctl_node_find(ctl, msg->node);
        if (!node || !node->connected) {
                /* Unknown, or known only from the database: the agent must register again
                 * so we learn its inventory and address from itself. */
                err_set(err, 404, "unknown_node", NULL, "node %s is not registered", msg->node);
                return -ENOENT;
        }
        if (node_claim_check(ctl, node, msg->agent_id, err) < 0)
                return -EBUSY;
        if (node->boot_id && msg->boot_id && strcmp(node->boot_id, msg->boot_id) != 0) {
                /* The host rebooted since it registered: it must register again, which
                 * declares every rank of the earlier boot lost before any starts. */
                err_set(err, 409, "boot_mismatch", "boot_id",
                        "node %s registered with another boot id: register again", node->name);
                return -ESTALE;
        }
        node->last_sync_mono = util_now_ms();
        node->last_seen_ms = util_wall_ms();
        if (node->state == NODE_DOWN)
                node_set_state(ctl, node, NODE_READY, "syncing again");
        if (!msg->healthy && node->state != NODE_UNHEALTHY && node->state != NODE_DRAINED &&
            node->state != NODE_DRAINING) {
                node_set_state(ctl, node, NODE_UNHEALTHY, msg->health_reason);
                node_fail_live_attempts(ctl, node, END_UNHEALTHY, msg->health_reason);
        } else if (msg->healthy && node->state == NODE_UNHEALTHY)
                node_set_state(ctl, node, NODE_READY, "healthy again");

        /* Checkpoints first: one committed just before a rank died is where the restart
         * that its exit report causes must resume. */
        for (int i = 0; i < msg->n_checkpoints; i++)
                checkpoint_report(ctl, node, &msg->checkpoints[i]);
        for (int i = 0; i < msg->n_ranks; i++)
                rank_report(ctl, node, &msg->ranks[i]);

        /* Ranks the agent no longer has, although it had applied the state that stopped
         * them (or that started them): they are gone. Iterate a copy of the node's job
         * list: marking ranks dead edits it. */
        int n_node_jobs = node->n_jobs;
        Job **node_jobs = xcalloc((size_t) n_node_jobs + 1, sizeof(Job *));
        for (int j = 0; j < n_node_jobs; j++)
                node_jobs[j] = node->jobs[j].job;
        for (int j = 0; j < n_node_jobs; j++) {
                Job *job = node_jobs[j];
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *r = &job->ranks[k];
                        if (!r->alive || strcmp(r->node_name, node->name) != 0)
                                continue;
                        bool reported = false;
                        for (int i = 0; i < msg->n_ranks && !reported; i++)
                                reported = msg->ranks[i].job == job->id &&
                                           msg->ranks[i].attempt == r->attempt &&
                                           msg->ranks[i].rank == r->rank;
                        if (reported)
                                continue;
                        if (!rank_desired(r) && r->stop_version && applied_version >= r->stop_version) {
                                rank_set_dead(ctl, job, r);
                        } else if (r->state == RANK_RUNNING && applied_version > r->assign_version &&
                                   job_attempt_live(job)) {
                                /* It ran, and the agent lost it without an exit status. */
                                rank_set_dead(ctl, job, r);
                                r->state = RANK_FAILED;
                                char detail[160];
                                snprintf(detail, sizeof(detail),
                                         "rank %d vanished from %s without an exit status",
                                         r->rank, node->name);
                                job_attempt_failed(ctl, job, END_RANK_EXIT, node, -1, 0, detail);
                        }
                }
        }
        free(node_jobs);
        *ret_node = node;
        return 0;
}

int ctl_node_drain(Controller *ctl, const char *name, bool now, Node **ret_node, CtlError *err) {
        Node *node = ctl_node_find(ctl, name);
        if (!node) {
                err_set(err, 404, "not_found", NULL, "node %s does not exist", name);
                return -ENOENT;
        }
        if (node->state != NODE_DRAINED)
                node_set_state(ctl, node, NODE_DRAINING,
                               now ? "drained by request, jobs moved" : "drained by request");
        if (now)
                node_fail_live_attempts(ctl, node, END_DRAINED, "node drained");
        ctl->sweep_needed = true; /* drained at once if nothing runs there */
        *ret_node = node;
        return 0;
}

int ctl_node_undrain(Controller *ctl, const char *name, Node **ret_node, CtlError *err) {
        Node *node = ctl_node_find(ctl, name);
        if (!node) {
                err_set(err, 404, "not_found", NULL, "node %s does not exist", name);
                return -ENOENT;
        }
        if (node->state == NODE_DRAINING || node->state == NODE_DRAINED ||
            node->state == NODE_QUARANTINED) {
                node->n_blame = 0;
                node_set_state(ctl, node, NODE_READY, "returned to service by request");
        }
        *ret_node = node;
        return 0;
}

static int job_id_cmp(const void *a, const void *b) {
        const Job *x = *(Job *const *) a, *y = *(Job *const *) b;
        return x->id < y->id ? -1 : x->id > y->id;
}

void ctl_node_desired_foreach(Controller *ctl, Node *node, CtlDesiredFn fn, void *userdata) {
        /* Desired ranks are alive, so the node's job list holds all of them. Ordered by
         * job id for stable answers. */
        Job **jobs = xcalloc((size_t) node->n_jobs + 1, sizeof(Job *));
        for (int j = 0; j < node->n_jobs; j++)
                jobs[j] = node->jobs[j].job;
        qsort(jobs, (size_t) node->n_jobs, sizeof(Job *), job_id_cmp);
        for (int j = 0; j < node->n_jobs; j++) {
                Job *job = jobs[j];
                if (!job_attempt_live(job))
                        continue;
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *r = &job->ranks[k];
                        if (rank_desired(r) && strcmp(r->node_name, node->name) == 0)
                                fn(userdata, job, r);
                }
        }
        free(jobs);
}

int64_t ctl_next_deadline_ms(Controller *ctl) {
        int64_t next = util_now_ms() + 1000;
        for (int i = 0; i < ctl->n_nodes; i++) {
                Node *n = ctl->nodes[i];
                if (n->state == NODE_DOWN)
                        continue;
                int64_t t = n->last_sync_mono + ctl->cfg.lease_ms + ctl->cfg.grace_ms + 1;
                if (t < next)
                        next = t;
        }
        if (ctl->next_restart_ms < next)
                next = ctl->next_restart_ms;
        if (ctl->sched_needed) {
                int64_t t = ctl->last_sched_ms + SCHED_MIN_INTERVAL_MS;
                if (t < next)
                        next = t;
        }
        return next;
}

void ctl_tick(Controller *ctl) {
        int64_t now = util_now_ms();
        for (int i = 0; i < ctl->n_nodes; i++) {
                Node *n = ctl->nodes[i];
                if (n->state == NODE_DOWN ||
                    !health_node_lost(n->last_sync_mono, now, ctl->cfg.lease_ms, ctl->cfg.grace_ms))
                        continue;
                char reason[96];
                snprintf(reason, sizeof(reason), "no sync for %lld ms",
                         (long long) (now - n->last_sync_mono));
                node_set_state(ctl, n, NODE_DOWN, reason);
                node_ranks_gone(ctl, n, END_NODE_LOST, reason);
        }
        if (ctl->next_restart_ms <= now)
                ctl->sched_needed = ctl->sched_full = true;
}

bool ctl_turn_has_writes(Controller *ctl) {
        return ctl->in_turn_tx;
}

/* Drops jobs that are over and hold nothing from the active list; finishes drains. */
static void ctl_sweep(Controller *ctl) {
        if (!ctl->sweep_needed)
                return;
        ctl->sweep_needed = false;
        int w = 0;
        for (int j = 0; j < ctl->n_active; j++) {
                Job *job = ctl->active[j];
                bool keep = !job_state_is_terminal(job->state);
                for (int k = 0; !keep && k < job->n_ranks; k++)
                        keep = job->ranks[k].alive;
                if (keep)
                        ctl->active[w++] = job;
                else
                        job->active = false;
        }
        ctl->n_active = w;
        for (int i = 0; i < ctl->n_nodes; i++) {
                Node *n = ctl->nodes[i];
                if (n->state != NODE_DRAINING)
                        continue;
                int cpus, devs, ranks;
                ctl_node_free_capacity(ctl, n, &cpus, &devs, &ranks);
                if (ranks == 0)
                        node_set_state(ctl, n, NODE_DRAINED, n->reason);
        }
}

int ctl_end_turn(Controller *ctl) {
        if (ctl->sched_needed && util_now_ms() - ctl->last_sched_ms >= SCHED_MIN_INTERVAL_MS) {
                ctl->sched_needed = false;
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                ctl_schedule(ctl);
                clock_gettime(CLOCK_MONOTONIC, &b);
                histogram_observe(&ctl->sched_pass, (double) (b.tv_sec - a.tv_sec) +
                                                            (double) (b.tv_nsec - a.tv_nsec) / 1e9);
        }
        ctl_sweep(ctl);
        if (!ctl->in_turn_tx)
                return 0;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int r = ctl_persist_dirty(ctl);
        if (r >= 0)
                r = store_commit(ctl->store);
        clock_gettime(CLOCK_MONOTONIC, &b);
        histogram_observe(&ctl->db_commit, (double) (b.tv_sec - a.tv_sec) +
                                                   (double) (b.tv_nsec - a.tv_nsec) / 1e9);
        if (r < 0) {
                log_error("cannot commit to the database: %s", store_last_error(ctl->store));
                return r;
        }
        ctl->in_turn_tx = false;
        return 0;
}

void ctl_counts(Controller *ctl, int *ret_jobs_active, int *ret_nodes_ready) {
        int ready = 0;
        for (int i = 0; i < ctl->n_nodes; i++)
                if (ctl->nodes[i]->state == NODE_READY)
                        ready++;
        *ret_jobs_active = ctl->n_active;
        *ret_nodes_ready = ready;
}

static int token_found(void *userdata, const StoreToken *t) {
        TokenIdentity *id = userdata;
        json_error_t jerr;
        id->role = token_role_from_string(t->role);
        id->name = xstrdup(t->name);
        id->projects = json_loads(t->projects ? t->projects : "[]", 0, &jerr);
        if (!json_is_array(id->projects)) {
                json_decref(id->projects);
                id->projects = json_array();
        }
        id->node = t->node ? xstrdup(t->node) : NULL;
        return 0;
}

int ctl_token_identify(Controller *ctl, const char *token, TokenIdentity *ret) {
        char hash[TOKEN_HASH_HEX];
        *ret = (TokenIdentity){.role = _TOKEN_ROLE_INVALID};
        int r = token_hash(token, hash);
        if (r < 0)
                return r;
        /* The table is the truth, so `axctld token revoke` takes effect at once. */
        r = store_token_find(ctl->store, hash, token_found, ret);
        if (r < 0)
                return r;
        if (ret->role == _TOKEN_ROLE_INVALID) {
                token_identity_clear(ret);
                return -EACCES;
        }
        return 0;
}

static int token_hash_copy(void *userdata, const StoreToken *t) {
        char *hash = userdata;
        snprintf(hash, TOKEN_HASH_HEX, "%s", t->hash);
        return 0;
}

char *ctl_log_url_query(Controller *ctl, const char *node, const char *path) {
        char hash[TOKEN_HASH_HEX] = "", sig[TOKEN_HASH_HEX];
        if (store_token_for_node(ctl->store, node, token_hash_copy, hash) < 0 || !hash[0])
                return xstrdup("");
        /* A minute to follow the redirect; a follow=1 stream keeps going once started. */
        int64_t expires = util_wall_ms() / 1000 + 60;
        if (token_sign_path(hash, path, expires, sig) < 0)
                return xstrdup("");
        return xasprintf("?expires=%lld&sig=%s", (long long) expires, sig);
}
