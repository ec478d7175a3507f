/* SPDX-License-Identifier: MIT */
/* State transitions of jobs, attempts, ranks and nodes, and the turn they belong to;
 * see transition.h. */
#include "transition.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define BIT(s) (1u << (s))

/* Job states that may follow each state (DESIGN.md §4). Terminal states have none. */
static const unsigned job_next[_JOB_STATE_MAX] = {
        [JOB_PENDING] = BIT(JOB_STARTING) | BIT(JOB_CANCELLED),
        [JOB_STARTING] = BIT(JOB_RUNNING) | BIT(JOB_RESTARTING) | BIT(JOB_PREEMPTED) |
                         BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_CANCELLED),
        [JOB_RUNNING] = BIT(JOB_RESTARTING) | BIT(JOB_PREEMPTED) | BIT(JOB_SUCCEEDED) |
                        BIT(JOB_FAILED) | BIT(JOB_CANCELLED),
        [JOB_RESTARTING] = BIT(JOB_STARTING) | BIT(JOB_CANCELLED),
        [JOB_PREEMPTED] = BIT(JOB_STARTING) | BIT(JOB_CANCELLED),
};

/* Rank states: a rank of an attempt never comes back once it left the desired states. */
static const unsigned rank_next[_RANK_STATE_MAX] = {
        [RANK_ASSIGNED] = BIT(RANK_RUNNING) | BIT(RANK_SUCCEEDED) | BIT(RANK_FAILED) |
                          BIT(RANK_KILLED) | BIT(RANK_LOST),
        [RANK_RUNNING] = BIT(RANK_SUCCEEDED) | BIT(RANK_FAILED) | BIT(RANK_KILLED) | BIT(RANK_LOST),
};

/*
 * Node states. Only an operator's undrain takes a node out of quarantine: a node's own
 * health report cannot (quarantined is not followed by unhealthy, whose recovery would
 * be ready). Any node may go down when it stops syncing.
 */
static const unsigned node_next[_NODE_STATE_MAX] = {
        [NODE_READY] =
                BIT(NODE_DRAINING) | BIT(NODE_DOWN) | BIT(NODE_QUARANTINED) | BIT(NODE_UNHEALTHY),
        [NODE_DRAINING] = BIT(NODE_DRAINED) | BIT(NODE_READY) | BIT(NODE_DOWN),
        [NODE_DRAINED] = BIT(NODE_READY) | BIT(NODE_DOWN),
        [NODE_DOWN] = BIT(NODE_READY) | BIT(NODE_DRAINING),
        [NODE_QUARANTINED] = BIT(NODE_READY) | BIT(NODE_DRAINING) | BIT(NODE_DOWN),
        [NODE_UNHEALTHY] =
                BIT(NODE_READY) | BIT(NODE_QUARANTINED) | BIT(NODE_DRAINING) | BIT(NODE_DOWN),
};

static bool allowed(const unsigned *next, int n, int from, int to) {
        if (from < 0 || from >= n || to < 0 || to >= n)
                return false;
        return from == to || (next[from] & BIT(to)) != 0;
}

bool tr_job_allowed(JobState from, JobState to) {
        return allowed(job_next, _JOB_STATE_MAX, from, to);
}

bool tr_rank_allowed(RankState from, RankState to) {
        return allowed(rank_next, _RANK_STATE_MAX, from, to);
}

bool tr_node_allowed(NodeState from, NodeState to) {
        return allowed(node_next, _NODE_STATE_MAX, from, to);
}

static bool refuse(Turn *t, const char *what, const char *from, const char *to) {
        t->n_illegal++;
        log_error("bug: illegal transition of %s: %s -> %s (refused)", what, from, to);
        if (t->strict)
                abort();
        return false;
}

void turn_init(Turn *t, Store *store, Model *model) {
        *t = (Turn){.store = store, .model = model};
}

void turn_clear(Turn *t) {
        free(t->dirty_jobs);
        free(t->dirty_nodes);
        free(t->changed_nodes);
        t->dirty_jobs = NULL;
        t->dirty_nodes = NULL;
        t->changed_nodes = NULL;
        t->n_changed_nodes = t->cap_changed_nodes = 0;
        t->n_dirty_jobs = t->cap_dirty_jobs = t->n_dirty_nodes = t->cap_dirty_nodes = 0;
}

void turn_fail(Turn *t, int r, const char *fmt, ...) {
        if (t->failed)
                return;
        t->failed = r < 0 ? r : -EIO;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->failure, sizeof(t->failure), fmt, ap);
        va_end(ap);
        log_error("the state database failed: %s", t->failure);
}

bool turn_write(Turn *t) {
        if (t->failed)
                return false;
        if (t->tx_open)
                return true;
        int r = store_begin(t->store);
        if (r < 0) {
                turn_fail(t, r, "cannot begin a transaction: %s", store_last_error(t->store));
                return false;
        }
        t->tx_open = true;
        return true;
}

void turn_job_dirty(Turn *t, Job *job) {
        turn_write(t);
        if (job->dirty)
                return;
        job->dirty = true;
        GROW(t->dirty_jobs, t->n_dirty_jobs, t->cap_dirty_jobs);
        t->dirty_jobs[t->n_dirty_jobs++] = job;
}

void turn_rank_dirty(Turn *t, Job *job, Rank *r) {
        r->dirty = true;
        turn_job_dirty(t, job);
}

void turn_node_dirty(Turn *t, Node *node) {
        turn_write(t);
        if (node->dirty)
                return;
        node->dirty = true;
        GROW(t->dirty_nodes, t->n_dirty_nodes, t->cap_dirty_nodes);
        t->dirty_nodes[t->n_dirty_nodes++] = node;
}

void turn_event(Turn *t, int64_t job, const char *node, const char *kind, const char *fmt, ...) {
        char detail[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        if (!turn_write(t))
                return;
        StoreEvent e = {.time_ms = util_wall_ms(),
                        .job = job,
                        .node = node,
                        .kind = kind,
                        .detail = detail};
        int r = store_event_append(t->store, &e);
        if (r < 0) {
                turn_fail(t, r, "cannot record an event: %s", store_last_error(t->store));
                return;
        }
        /* Under systemd these carry JOB_ID and NODE, so journalctl can select them. */
        if (job > 0)
                log_job(LOG_LEVEL_INFO, job, node, 0, "job %lld: %s: %s", (long long) job, kind,
                        detail);
        else
                log_job(LOG_LEVEL_INFO, 0, node, 0, "node %s: %s: %s", node ? node : "-", kind,
                        detail);
}

unsigned turn_take_effects(Turn *t, unsigned mask) {
        unsigned e = t->effects & mask;
        t->effects &= ~mask;
        return e;
}

/* Replaces *slot with a copy of text (which may be *slot itself). */
static void set_text(char **slot, const char *text) {
        char *copy = xstrdup(text);
        free(*slot);
        *slot = copy;
}

void tr_job_created(Turn *t, Job *job) {
        job->state = JOB_PENDING;
        turn_job_dirty(t, job);
        t->effects |= TURN_SCHEDULE;
}

void tr_node_created(Turn *t, Node *node) {
        node->state = NODE_READY;
        turn_node_dirty(t, node);
        t->effects |= TURN_SCHEDULE | TURN_SCHEDULE_FULL;
}

void tr_job_restore(Job *job, const char *stored) {
        job->state = job_state_from_string(stored);
        if (job->state == _JOB_STATE_INVALID)
                job->state = JOB_FAILED;
}

void tr_rank_restore(Rank *r, const char *stored, bool alive) {
        r->alive = alive;
        r->state = rank_state_from_string(stored);
        if (r->state == _RANK_STATE_INVALID)
                r->state = RANK_LOST;
}

void tr_node_restore(Node *node, const char *stored) {
        node->state = node_state_from_string(stored);
        if (node->state == _NODE_STATE_INVALID)
                node->state = NODE_DOWN;
}

bool tr_node_stored_keeps_lease(const char *stored) {
        NodeState s = node_state_from_string(stored);
        return s != NODE_DOWN && s != _NODE_STATE_INVALID;
}

void tr_attempt_restore(Attempt *a, const char *stored_end_reason) {
        a->end_reason =
                stored_end_reason ? end_reason_from_string(stored_end_reason) : _END_REASON_INVALID;
}

bool tr_job(Turn *t, Job *job, JobState to, const char *reason) {
        if (!tr_job_allowed(job->state, to)) {
                char what[48];
                snprintf(what, sizeof(what), "job %lld", (long long) job->id);
                return refuse(t, what, job_state_to_string(job->state), job_state_to_string(to));
        }
        JobState from = job->state;
        if (reason)
                set_text(&job->reason, reason);
        if (job->state != to) {
                turn_event(t, job->id, NULL, "job_state", "%s -> %s%s%s",
                           job_state_to_string(job->state), job_state_to_string(to),
                           *job->reason ? ": " : "", job->reason);
                job->state = to;
                model_running_stale(t->model, job); /* stopping or not, for passes */
                model_starting_update(t->model, job);
        }
        Attempt *a = job_current_attempt(job);
        if (to == JOB_RUNNING && a && a->running_ms == 0) {
                a->running_ms = util_wall_ms(); /* for goodput: start-up ends here at the latest */
                a->dirty = true;
        }
        if (job_state_is_terminal(to)) {
                if (!job_state_is_terminal(from))
                        model_user_job_ended(t->model, job);
                if (job->finished_ms == 0)
                        job->finished_ms = util_wall_ms();
                /* No rank of it is desired any more: an ended job kept for its retention
                 * time keeps no host list. */
                job_gang_clear(&job->gang);
                model_active_recheck(t->model, job);
                t->effects |= TURN_SWEEP;
        }
        turn_job_dirty(t, job);
        /* Starting or running takes capacity, which cannot help anyone waiting; ending,
         * restarting or going back to the queue can, but a job leaving the queue (a
         * cancelled pending job) frees only what the scheduler held for it. */
        t->effects |= TURN_SCHEDULE;
        bool held = job->wait == SCHED_WAIT_RESERVED || job->wait == SCHED_WAIT_PREEMPTING;
        if (to != JOB_STARTING && to != JOB_RUNNING && (from != JOB_PENDING || held))
                t->effects |= TURN_SCHEDULE_FULL;
        return true;
}

void tr_rank_gone(Turn *t, Job *job, Rank *r) {
        if (!r->alive)
                return;
        r->alive = false;
        model_rank_held_set(t->model, job, r);
        Node *node = model_rank_node(t->model, r);
        if (node)
                model_node_hold(t->model, node, job, r, -1);
        model_active_recheck(t->model, job);
        turn_rank_dirty(t, job, r);
        t->effects |= TURN_SWEEP | TURN_SCHEDULE | TURN_SCHEDULE_FULL;
}

bool tr_rank(Turn *t, Job *job, Rank *r, RankState to) {
        if (!tr_rank_allowed(r->state, to)) {
                char what[64];
                snprintf(what, sizeof(what), "job %lld rank %d", (long long) job->id, r->rank);
                return refuse(t, what, rank_state_to_string(r->state), rank_state_to_string(to));
        }
        bool leaves = rank_desired(r) && to != RANK_ASSIGNED && to != RANK_RUNNING;
        r->state = to;
        turn_rank_dirty(t, job, r);
        if (!leaves)
                return true;
        /* The node's desired set changed, so its version grows: an agent that applied
         * the old one must not be told it is unchanged (api/, docs/PROTOCOL.md). */
        Node *node = model_rank_node(t->model, r);
        if (node)
                tr_node_bump(t, node);
        /* A rank known dead needs no kill, so no confirmation. */
        if (!r->alive)
                return true;
        if (node)
                r->stop_version = node->version;
        else
                tr_rank_gone(t, job, r); /* nothing left to confirm it */
        return true;
}

void tr_job_stop_ranks(Turn *t, Job *job) {
        for (int i = 0; i < job->n_ranks; i++)
                if (rank_desired(&job->ranks[i]))
                        tr_rank(t, job, &job->ranks[i], RANK_KILLED);
        turn_job_dirty(t, job);
}

bool tr_node(Turn *t, Node *node, NodeState to, const char *reason) {
        if (!tr_node_allowed(node->state, to)) {
                char what[300];
                snprintf(what, sizeof(what), "node %s", node->name);
                return refuse(t, what, node_state_to_string(node->state), node_state_to_string(to));
        }
        if (reason)
                set_text(&node->reason, reason);
        if (node->state != to) {
                turn_event(t, 0, node->name, "node_state", "%s -> %s%s%s",
                           node_state_to_string(node->state), node_state_to_string(to),
                           *node->reason ? ": " : "", node->reason);
                t->model->n_draining += (to == NODE_DRAINING) - (node->state == NODE_DRAINING);
                node->state = to;
                model_node_capacity_changed(t->model, node);
        }
        turn_node_dirty(t, node);
        t->effects |= TURN_SCHEDULE | TURN_SCHEDULE_FULL;
        return true;
}

void tr_node_version_above(Turn *t, Node *node, uint64_t version) {
        if (version <= node->version)
                return;
        node->version = version;
        tr_node_bump(t, node);
}

void tr_node_bump(Turn *t, Node *node) {
        /* Until its agent synced with this controller, the agent may have applied
         * versions that are stored no more (a database restored from a backup, a
         * PostgreSQL failover that lost commits): a change then leaps past any such
         * version, to the clock's (versions grow by one per change, far slower) or a
         * million changes on, so that no version an agent saw comes again for another
         * set and is answered "unchanged". */
        if (!node->connected) {
                uint64_t from_clock = (uint64_t) util_wall_ms() * 1000;
                node->version += NODE_VERSION_LEAP;
                if (node->version < from_clock)
                        node->version = from_clock;
        } else
                node->version++;
        turn_write(t); /* the version is stored (persist_dirty): a restart goes on from it */
        if (node->changed)
                return;
        node->changed = true;
        if (t->n_changed_nodes == t->cap_changed_nodes) {
                t->cap_changed_nodes = t->cap_changed_nodes ? t->cap_changed_nodes * 2 : 64;
                t->changed_nodes =
                        xrealloc(t->changed_nodes, (size_t) t->cap_changed_nodes * sizeof(Node *));
        }
        t->changed_nodes[t->n_changed_nodes++] = node;
}

Node **turn_take_changed_nodes(Turn *t, int *ret_n) {
        *ret_n = t->n_changed_nodes;
        for (int i = 0; i < t->n_changed_nodes; i++)
                t->changed_nodes[i]->changed = false;
        t->n_changed_nodes = 0;
        return t->changed_nodes;
}

bool tr_attempt_start(Turn *t, Job *job, const SchedPlacement *pl, Node **node_of) {
        if (!tr_job_allowed(job->state, JOB_STARTING) || job->state == JOB_STARTING) {
                char what[48];
                snprintf(what, sizeof(what), "job %lld", (long long) job->id);
                return refuse(t, what, job_state_to_string(job->state), "starting");
        }
        Model *m = t->model;
        model_job_ranks_new(job, pl->n_ranks);
        job->attempt++;
        job->attempts = xrealloc(job->attempts, (size_t) (job->n_attempts + 1) * sizeof(Attempt));
        Attempt *a = &job->attempts[job->n_attempts++];
        *a = (Attempt){.attempt = job->attempt,
                       .resume_step = job->ckpt_step > 0 ? job->ckpt_step : 0,
                       .resume_path = job->ckpt_step > 0 ? xstrdup(job->ckpt_path) : NULL,
                       .started_ms = util_wall_ms(),
                       .end_reason = _END_REASON_INVALID,
                       .dirty = true};
        model_rate_count(&m->rate, job, a, 1);
        /* Node ranks in order of first appearance; local ranks count up per node. */
        int *node_rank_of = xcalloc((size_t) m->n_nodes + 1, sizeof(int));
        int *local_count = xcalloc((size_t) m->n_nodes + 1, sizeof(int));
        for (int i = 0; i < m->n_nodes; i++)
                node_rank_of[i] = -1;
        int n_nodes_used = 0;
        char nodes_text[256] = "";
        for (int r = 0; r < pl->n_ranks; r++) {
                int ni = pl->rank_node[r];
                if (node_rank_of[ni] < 0) {
                        node_rank_of[ni] = n_nodes_used++;
                        tr_node_bump(t, node_of[ni]);
                        size_t len = strlen(nodes_text);
                        snprintf(nodes_text + len, sizeof(nodes_text) - len, "%s%s", len ? "," : "",
                                 node_of[ni]->name);
                }
                Rank *rk = &job->ranks[r];
                int apr = pl->accelerators_per_rank;
                *rk = (Rank){.rank = r,
                             .attempt = job->attempt,
                             .node_name = xstrdup(node_of[ni]->name),
                             .node_index = node_of[ni]->index,
                             .n_devices = apr,
                             .devices = xcalloc((size_t) apr + 1, sizeof(int)),
                             .state = RANK_ASSIGNED,
                             .alive = true,
                             .exit_code = -1,
                             .step = -1,
                             .local_rank = local_count[ni]++,
                             .node_rank = node_rank_of[ni],
                             .assign_version = node_of[ni]->version,
                             .dirty = true};
                if (apr > 0)
                        memcpy(rk->devices, pl->rank_devices + (size_t) r * (size_t) apr,
                               (size_t) apr * sizeof(int));
                model_node_hold(m, node_of[ni], job, rk, 1);
                model_rank_held_set(m, job, rk);
        }
        free(node_rank_of);
        free(local_count);
        job->wait = SCHED_WAIT_NONE;
        turn_event(t, job->id, NULL, "attempt_started", "attempt %d on %s, resuming from step %lld",
                   job->attempt, nodes_text, (long long) a->resume_step);
        return tr_job(t, job, JOB_STARTING, "");
}

bool tr_attempt_end(Turn *t, Job *job, EndReason reason, const char *blamed, const char *detail) {
        Attempt *a = job_current_attempt(job);
        if (!a || a->end_reason != _END_REASON_INVALID)
                return false;
        model_rate_count(&t->model->rate, job, a, -1);
        a->end_reason = reason;
        a->ended_ms = util_wall_ms();
        model_rate_count(&t->model->rate, job, a, 1);
        a->blamed_node = blamed ? xstrdup(blamed) : NULL;
        a->detail = detail ? xstrdup(detail) : NULL;
        a->dirty = true;
        turn_job_dirty(t, job);
        turn_event(t, job->id, blamed, "attempt_ended", "attempt %d ended: %s%s%s%s%s", a->attempt,
                   end_reason_to_string(reason), blamed ? ", blamed node " : "",
                   blamed ? blamed : "", detail ? ": " : "", detail ? detail : "");
        return true;
}
