/* SPDX-License-Identifier: MIT */
/*
 * Rendering of jobs, nodes, events and desired rank sets as JSON. Field names are part
 * of the API (docs/PROTOCOL.md); the CLI and scripts depend on them.
 */
#include "views.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "health.h"
#include "scheduler.h"
#include "util.h"
#include "wire.h"

json_t *view_time(int64_t wall_ms) {
        char buf[40];
        return wall_ms > 0 ? json_string(util_format_time(wall_ms, buf, sizeof(buf))) : json_null();
}

static json_t *int_or_null(int64_t v, int64_t none) {
        return v == none ? json_null() : json_integer(v);
}

static json_t *view_rank(const Rank *r) {
        json_t *devices = json_array();
        for (int i = 0; i < r->n_devices; i++)
                json_array_append_new(devices, json_integer(r->devices[i]));
        json_t *j =
                json_pack("{s:i,s:i,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:i,s:i}", "rank", r->rank,
                          "attempt", r->attempt, "node", r->node_name ? r->node_name : "", "state",
                          rank_state_to_string(r->state), "pid", int_or_null(r->pid, 0),
                          "exit_code", int_or_null(r->exit_code, -1), "signal",
                          int_or_null(r->signal, 0), "step", int_or_null(r->step, -1), "devices",
                          devices, "local_rank", r->local_rank, "node_rank", r->node_rank);
        return j;
}

static json_t *view_attempt(const Attempt *a) {
        json_t *j = json_pack("{s:i,s:s,s:I,s:o,s:o}", "attempt", a->attempt, "state",
                              a->end_reason == _END_REASON_INVALID ? "running" : "ended",
                              "resume_step", (json_int_t) a->resume_step, "started_at",
                              view_time(a->started_ms), "ended_at", view_time(a->ended_ms));
        const char *reason = end_reason_to_string(a->end_reason);
        json_object_set_new(j, "end_reason", reason ? json_string(reason) : json_null());
        json_object_set_new(
                j, "failure_class",
                reason ? json_string(failure_class_to_string(health_classify(a->end_reason)))
                       : json_null());
        json_object_set_new(j, "blamed_node",
                            a->blamed_node ? json_string(a->blamed_node) : json_null());
        json_object_set_new(j, "detail", a->detail ? json_string(a->detail) : json_null());
        return j;
}

json_t *view_job(Controller *ctl, Job *job, bool with_details) {
        const char *reason = job->reason ? job->reason : "";
        if (!*reason && (job->state == JOB_PENDING || job->state == JOB_PREEMPTED))
                reason = sched_wait_to_string(job->wait);
        json_t *j = json_pack(
                "{s:I,s:s,s:s,s:s,s:i,s:s,s:i,s:i,s:s,s:o,s:o,s:o,s:o,s:i}", "id",
                (json_int_t) job->id, "name", job->spec->name, "project", job->spec->project,
                "user", job->spec->user, "priority", job->spec->priority, "state",
                job_state_to_string(job->state), "attempt", job->attempt, "restarts", job->restarts,
                "reason", reason, "exit_code", int_or_null(job->exit_code, -1), "created_at",
                view_time(job->created_ms), "started_at", view_time(job->started_ms), "finished_at",
                view_time(job->finished_ms), "world_size", job->spec->ranks);
        json_object_set_new(j, "tier", json_integer(job->tier));
        json_object_set_new(j, "last_checkpoint",
                            job->ckpt_step >= 0
                                    ? json_pack("{s:I,s:s}", "step", (json_int_t) job->ckpt_step,
                                                "path", job->ckpt_path ? job->ckpt_path : "")
                                    : json_null());
        json_object_set_new(j, "goodput", view_job_goodput(ctl, job, with_details));
        if (!with_details)
                return j;
        json_t *ranks = json_array();
        for (int i = 0; i < job->n_ranks; i++)
                json_array_append_new(ranks, view_rank(&job->ranks[i]));
        json_object_set_new(j, "ranks", ranks);
        json_t *attempts = json_array();
        for (int i = 0; i < job->n_attempts; i++)
                json_array_append_new(attempts, view_attempt(&job->attempts[i]));
        json_object_set_new(j, "attempts", attempts);
        json_object_set_new(j, "spec", spec_to_json(job->spec));
        (void) ctl;
        return j;
}

json_t *view_node_status(Controller *ctl, Node *node) {
        int cpus_free, devs_free, ranks;
        model_node_free_capacity(node, &cpus_free, &devs_free, &ranks);
        /* Free devices per kind. */
        json_t *free_acc = json_object();
        for (int d = 0; d < node->n_devices; d++) {
                const char *kind = node->devices[d].kind;
                json_int_t have = json_integer_value(json_object_get(free_acc, kind));
                bool is_free = node->device_used[d] == 0;
                json_object_set_new(free_acc, kind, json_integer(have + (is_free ? 1 : 0)));
        }
        json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:O,s:o,s:{s:i,s:o},s:i}", "name", node->name,
                              "hostname", node->hostname ? node->hostname : "", "state",
                              node_state_to_string(node->state), "reason",
                              node->reason ? node->reason : "", "labels", node->labels, "last_seen",
                              view_time(node->last_seen_ms), "free", "cpus", cpus_free,
                              "accelerators", free_acc, "ranks", ranks);
        json_object_set_new(j, "address", node->address ? json_string(node->address) : json_null());
        return j;
}

json_t *view_node(Controller *ctl, Node *node) {
        json_t *j = view_node_status(ctl, node);
        json_error_t jerr;
        json_t *inventory = json_loads(node->inventory, 0, &jerr);
        json_object_set_new(j, "inventory", inventory ? inventory : json_object());
        return j;
}

json_t *view_event(const StoreEvent *e) {
        json_t *j = json_pack("{s:I,s:o,s:s,s:s}", "seq", (json_int_t) e->seq, "time",
                              view_time(e->time_ms), "kind", e->kind, "detail",
                              e->detail ? e->detail : "");
        json_object_set_new(j, "job", e->job > 0 ? json_integer(e->job) : json_null());
        json_object_set_new(j, "node", e->node ? json_string(e->node) : json_null());
        return j;
}

/* A job's variables that its ranks in an answer share (RANK_ENV_SHARED). */
typedef struct SharedEnv {
        const Job *job;
        char name[24];
        WireEnvVar vars[RANK_ENV_SHARED];
} SharedEnv;

typedef struct DesiredCtx {
        Controller *ctl;
        JsonWriter w;
        RankEnv env; /* one for all ranks: each overwrites the last's */
        bool share; /* the agent accepts shared environments */
        SharedEnv *shared; /* one per job with ranks in the answer */
        size_t n_shared, cap_shared;
} DesiredCtx;

/* The shared environment of job's ranks, added at its first rank (a node has ranks of
 * a few jobs: a scan is enough). */
static const char *shared_env_name(DesiredCtx *c, const Job *job) {
        for (size_t i = 0; i < c->n_shared; i++)
                if (c->shared[i].job == job)
                        return c->shared[i].name;
        GROW(c->shared, c->n_shared, c->cap_shared);
        SharedEnv *e = &c->shared[c->n_shared++];
        e->job = job;
        snprintf(e->name, sizeof(e->name), "%" PRId64, job->id);
        memcpy(e->vars, c->env.vars, sizeof(e->vars));
        return e->name;
}

static void add_desired(void *userdata, Job *job, Rank *rank) {
        static const int no_devices[1];
        DesiredCtx *c = userdata;
        JobSpec *spec = job->spec;
        ctl_rank_env(c->ctl, job, rank, &c->env);
        size_t own = c->share ? RANK_ENV_SHARED : 0;
        wire_desired_rank_write(&c->w,
                                &(WireDesiredRankOut){
                                        .key = {job->id, rank->attempt, rank->rank},
                                        .argv = (const char *const *) spec->command,
                                        .n_argv = (size_t) spec->n_command,
                                        .env = c->env.vars + own,
                                        .n_env = c->env.n_vars - own,
                                        .shared_env = c->share ? shared_env_name(c, job) : NULL,
                                        /* [] for none: null would mean unset */
                                        .devices = rank->devices ? rank->devices : no_devices,
                                        .n_devices = (size_t) rank->n_devices,
                                        .workdir = spec->workdir,
                                        .user = spec->user,
                                        .accelerator = spec->accelerator,
                                        .checkpoint_dir = spec->checkpoint_dir,
                                        .hang_timeout_s = spec->hang_timeout_s,
                                        .hang_signal = spec->hang_signal,
                                        .hang_signal_grace_s = spec->hang_signal_grace_s,
                                        .cpus = spec->cpus,
                                        .memory_mb = spec->memory_mb,
                                });
}

char *view_desired(Controller *ctl, Node *node, bool unchanged, bool shared_env) {
        WireSyncAnswer answer = {.version = (int64_t) node->version,
                                 .lease_ms = ctl_config(ctl)->lease_ms,
                                 .sync_period_ms = ctl_config(ctl)->sync_period_ms,
                                 .unchanged = unchanged};
        DesiredCtx c = {.ctl = ctl, .share = shared_env};
        wire_sync_answer_write_begin(&c.w, &answer);
        if (!unchanged)
                ctl_node_desired_foreach(ctl, node, add_desired, &c);
        WireSharedEnvOut *out = xcalloc(c.n_shared + 1, sizeof(WireSharedEnvOut));
        for (size_t i = 0; i < c.n_shared; i++)
                out[i] = (WireSharedEnvOut){c.shared[i].name, c.shared[i].vars, RANK_ENV_SHARED};
        wire_sync_answer_write_end(&c.w, &answer, out, c.n_shared);
        free(out);
        free(c.shared);
        ctl_rank_env_clear(&c.env);
        return json_writer_take(&c.w);
}

json_t *view_quotas(Controller *ctl) {
        SchedResult res;
        json_t *projects = json_array(), *kinds = json_array();
        if (ctl_quota_usage(ctl, &res) >= 0) {
                for (int k = 0; k < res.n_kinds; k++)
                        json_array_append_new(kinds, json_string(res.kinds[k]));
                for (int p = 0; p < res.n_projects; p++) {
                        SchedProjectQuota *pq = &res.projects[p];
                        json_t *quota = json_object(), *used = json_object();
                        for (int k = 0; k < res.n_kinds; k++) {
                                json_object_set_new(quota, res.kinds[k], json_real(pq->quota[k]));
                                json_object_set_new(used, res.kinds[k], json_integer(pq->used[k]));
                        }
                        json_array_append_new(projects,
                                              json_pack("{s:s,s:b,s:o,s:o}", "project", pq->project,
                                                        "configured", pq->configured, "quota",
                                                        quota, "used", used));
                }
                sched_result_clear(&res);
        }
        const char *path = ctl_config(ctl)->quota_path;
        return json_pack("{s:o,s:o,s:o}", "kinds", kinds, "projects", projects, "quota_file",
                         path ? json_string(path) : json_null());
}
