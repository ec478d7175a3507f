/* SPDX-License-Identifier: MIT */
/*
 * Nodes: the controller's side of the agent protocol (DESIGN.md §5: register, sync with
 * rank and checkpoint reports), drain, and the node lease. What the agents report is
 * handed to health/'s detectors; their findings end attempts (jobs.c) and move nodes.
 * Reports for any attempt but a job's current one are ignored (fencing), and a node
 * speaks only for itself (§4b).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accounting.h"
#include "checkpoint.h"
#include "jobs.h"
#include "log.h"
#include "nodes.h"
#include "util.h"

Node *ctl_node_find(Controller *ctl, const char *name) {
        return model_node_find(&ctl->model, name);
}

Node **ctl_take_changed_nodes(Controller *ctl, int *ret_n) {
        return turn_take_changed_nodes(&ctl->turn, ret_n);
}

Node **ctl_nodes(Controller *ctl, int *ret_n) {
        *ret_n = ctl->model.n_nodes;
        return ctl->model.nodes;
}

/*
 * Applies a finding about a whole node: its new state, then every live attempt with a
 * rank there ends (with its ranks counted gone when the finding says they are dead).
 */
static void node_finding(Controller *ctl, Node *node, const HealthFinding *f) {
        Turn *t = &ctl->turn;
        bool held = node->state == NODE_DRAINING || node->state == NODE_DRAINED ||
                    node->state == NODE_QUARANTINED;
        if (f->node_state != _NODE_STATE_INVALID) {
                if (node->state == f->node_state)
                        return; /* known already */
                if (f->node_state == NODE_DOWN && held)
                        /* An operator's drain and a quarantine outlive the node's absence,
                         * as Slurm's drain outlives a reboot: it comes back as it was. */
                        turn_event(t, 0, node->name, "node_lost", "%s, %s", f->detail,
                                   node_state_to_string(node->state));
                else if (tr_node_allowed(node->state, f->node_state))
                        tr_node(t, node, f->node_state, f->detail);
                else if (node->state != NODE_QUARANTINED)
                        return; /* draining or drained: nothing new goes there anyway */
                /* A node held stays so until an operator says otherwise, but what runs
                 * there still ends. */
        }
        /* Every rank that may still run there is alive, so the node's jobs hold them. */
        int n_jobs;
        Job **jobs = model_node_jobs(node, &n_jobs);
        for (int j = 0; j < n_jobs; j++) {
                Job *job = jobs[j];
                bool hit = false;
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *r = &job->ranks[k];
                        if (!r->alive || strcmp(r->node_name, node->name) != 0)
                                continue;
                        hit |= rank_desired(r);
                        if (!f->ranks_gone)
                                continue;
                        tr_rank_gone(t, job, r);
                        if (rank_desired(r))
                                tr_rank(t, job, r, RANK_LOST);
                }
                if (hit)
                        jobs_attempt_failed(ctl, job, node, f);
        }
        free(jobs);
        t->effects |= TURN_SCHEDULE | TURN_SCHEDULE_FULL;
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
        ctl_error_set(err, CTL_ERR_NODE_CLAIMED, "node",
                      "node %s is held by another agent until its lease runs out", node->name);
        return -EBUSY;
}

int ctl_node_register(Controller *ctl, const WireRegister *msg, Node **ret_node, CtlError *err) {
        Turn *t = &ctl->turn;
        Node *node = ctl_node_find(ctl, msg->node);
        if (node && node_claim_check(ctl, node, msg->agent_id, err) < 0)
                return -EBUSY;
        bool fresh = !node;
        if (fresh) {
                node = xcalloc(1, sizeof(Node));
                node->name = xstrdup(msg->node);
                node->reason = xstrdup("");
                node->labels = json_object();
                node->version = (uint64_t) util_wall_ms() * 1000;
                tr_node_created(t, node);
                model_node_add(&ctl->model, node);
        }
        HealthSeen seen = {.kind = HEALTH_SEEN_REGISTER,
                           .node = node->name,
                           .boot_changed = !fresh && node->boot_id && msg->boot_id &&
                                           strcmp(node->boot_id, msg->boot_id) != 0,
                           .agent_replaced = !fresh && node->agent_id &&
                                             !util_streq_ptr(node->agent_id, msg->agent_id)};
        HealthFinding f;
        if (health_detect(&seen, &f))
                node_finding(ctl, node, &f);
        const char *hostname = msg->hostname ? msg->hostname : msg->node;
        /* The host lists of gangs name it (rankenv.c): built again only when it moved, so
         * that an agent registering in a loop costs the gangs nothing. */
        if (!util_streq_ptr(node->hostname, hostname) ||
            !util_streq_ptr(node->address, msg->address))
                ctl->model.addresses_changed++;
        free(node->hostname);
        node->hostname = xstrdup(hostname);
        free(node->address);
        node->address = msg->address ? xstrdup(msg->address) : NULL;
        free(node->boot_id);
        node->boot_id = msg->boot_id ? xstrdup(msg->boot_id) : NULL;
        free(node->agent_id);
        node->agent_id = msg->agent_id ? xstrdup(msg->agent_id) : NULL;
        json_decref(node->labels);
        node->labels = msg->labels ? json_deep_copy(msg->labels) : json_object();
        model_node_set_inventory(node, msg->inventory);
        schedule_fleet_changed(&ctl->sched);
        model_node_recount(&ctl->model, node);
        model_node_touch(&ctl->model, node, util_now_ms());
        node->last_seen_ms = util_wall_ms();
        ctl_node_connected(ctl, node);
        tr_node_bump(t, node);
        turn_event(t, 0, node->name, "node_registered", "%d cpus, %d accelerators at %s",
                   node->cpus, node->n_devices, node->address ? node->address : "-");
        if (node->state == NODE_DOWN)
                tr_node(t, node, NODE_READY, "registered again");
        turn_node_dirty(t, node);
        t->effects |= TURN_SCHEDULE | TURN_SCHEDULE_FULL;
        *ret_node = node;
        return 0;
}

static Rank *job_rank(Job *job, int attempt, int rank) {
        if (attempt != job->attempt || rank < 0 || rank >= job->n_ranks)
                return NULL;
        return &job->ranks[rank];
}

/* A rank reported running: once every rank runs, so does the job. */
static void rank_running(Controller *ctl, Job *job, Rank *r) {
        tr_rank(&ctl->turn, job, r, RANK_RUNNING);
        for (int i = 0; i < job->n_ranks; i++)
                if (job->ranks[i].state == RANK_ASSIGNED)
                        return;
        if (job->state != JOB_STARTING)
                return;
        if (job->started_ms == 0)
                job->started_ms = util_wall_ms();
        if (job->failed_at_ms > 0) {
                histogram_observe(&ctl->recovery,
                                  (double) (util_now_ms() - job->failed_at_ms) / 1000.0);
                job->failed_at_ms = 0;
        }
        tr_job(&ctl->turn, job, JOB_RUNNING, "");
}

static void rank_report(Controller *ctl, Node *node, const WireRankReport *rr) {
        Turn *t = &ctl->turn;
        Job *job = ctl_job_find(ctl, rr->job);
        if (!job)
                return;
        Rank *r = job_rank(job, rr->attempt, rr->rank);
        if (!r || strcmp(r->node_name, node->name) != 0)
                return; /* a stale attempt or a confused agent: fencing ignores it */
        if (rr->pid > 0 && r->pid != rr->pid) {
                r->pid = rr->pid;
                turn_rank_dirty(t, job, r);
        }
        if (rr->step >= 0) {
                r->step = rr->step; /* progress is liveness: kept in memory, saved on transitions */
                ctl_goodput_progress(t, job, r, util_wall_ms());
        }
        HealthSeen seen = {.kind = HEALTH_SEEN_RANK,
                           .node = node->name,
                           .rank = r->rank,
                           .exited = rr->exited,
                           .start_failed = rr->start_failed,
                           .node_fault = rr->node_fault,
                           .oom_killed = rr->oom_killed,
                           .hung = rr->hung,
                           .log_tail = rr->log_tail,
                           .operator_rules = &ctl->failure_rules,
                           .job_rules = &job->spec->failure_rules,
                           .exit_code = rr->exit_code,
                           .signal = rr->signal,
                           .step = r->step,
                           .hang_timeout_s = job->spec->hang_timeout_s};
        HealthFinding f;
        if (!rr->exited) {
                if (r->state == RANK_ASSIGNED)
                        rank_running(ctl, job, r);
                if (rank_desired(r) && job_attempt_live(job) && health_detect(&seen, &f))
                        jobs_attempt_failed(ctl, job, node, &f);
                return;
        }
        if (!r->alive)
                return;
        tr_rank_gone(t, job, r);
        r->exit_code = rr->exit_code;
        r->signal = rr->signal;
        if (!rank_desired(r))
                return; /* we stopped it: this is the confirmation */
        if (!health_detect(&seen, &f)) {
                tr_rank(t, job, r, RANK_SUCCEEDED);
                for (int i = 0; i < job->n_ranks; i++)
                        if (job->ranks[i].state != RANK_SUCCEEDED)
                                return;
                if (job_attempt_live(job))
                        jobs_succeeded(ctl, job);
                return;
        }
        tr_rank(t, job, r, RANK_FAILED);
        turn_event(t, job->id, node->name, "rank_exit", "%s", f.detail);
        jobs_attempt_failed(ctl, job, node, &f);
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
        Turn *t = &ctl->turn;
        Job *job = ctl_job_find(ctl, c->job);
        if (!job || c->step <= job->ckpt_step || !checkpoint_acceptable(job, node, c))
                return;
        job->ckpt_step = c->step;
        free(job->ckpt_path);
        job->ckpt_path = xstrdup(c->path);
        turn_job_dirty(t, job);
        StoreCheckpoint sc = {.job = job->id,
                              .step = c->step,
                              .path = c->path,
                              .committed_ms = util_wall_ms(),
                              .attempt = c->attempt};
        int r = turn_write(t) ? store_checkpoint_put(t->store, &sc) : 0;
        if (r < 0)
                turn_fail(t, r, "cannot record a checkpoint: %s", store_last_error(t->store));
        ctl_goodput_checkpoint(t, job, sc.committed_ms);
        turn_event(t, job->id, NULL, "checkpoint", "step %lld committed at %s (attempt %d)",
                   (long long) c->step, c->path, c->attempt);
}

/*
 * Ranks the agent no longer has, although it had applied the state that stopped them
 * (or that started them): they are gone.
 */
static void ranks_missing(Controller *ctl, Node *node, const WireSync *msg,
                          uint64_t applied_version) {
        Turn *t = &ctl->turn;
        int n_node_jobs;
        Job **node_jobs = model_node_jobs(node, &n_node_jobs);
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
                        if (!rank_desired(r) && r->stop_version &&
                            applied_version >= r->stop_version) {
                                tr_rank_gone(t, job, r);
                                continue;
                        }
                        if (r->state != RANK_RUNNING || applied_version <= r->assign_version ||
                            !job_attempt_live(job))
                                continue;
                        /* It ran, and the agent lost it without an exit status. */
                        tr_rank_gone(t, job, r);
                        tr_rank(t, job, r, RANK_FAILED);
                        HealthSeen seen = {.kind = HEALTH_SEEN_RANK_MISSING,
                                           .node = node->name,
                                           .rank = r->rank,
                                           .exit_code = -1};
                        HealthFinding f;
                        if (health_detect(&seen, &f))
                                jobs_attempt_failed(ctl, job, node, &f);
                }
        }
        free(node_jobs);
}

void ctl_node_connected(Controller *ctl, Node *node) {
        node->connected = true;
        if (!node->awaited)
                return;
        node->awaited = false;
        if (--ctl->reconnecting == 0)
                log_info("every stored node's agent synced again since the restart");
}

/*
 * Whether a sync to a restarted controller comes from the very agent the database
 * names for the node, on the same boot: its inventory and address are then the stored
 * ones (an agent registers whenever it starts), and it may go on without registering.
 */
static bool node_resumes(const Node *node, const WireSync *msg) {
        return node->agent_id && msg->agent_id && strcmp(node->agent_id, msg->agent_id) == 0 &&
               node->boot_id && msg->boot_id && strcmp(node->boot_id, msg->boot_id) == 0;
}

static uint64_t digest_mix(uint64_t h, uint64_t v) {
        return (h ^ v) * 0x100000001b3ULL;
}

static uint64_t job_digest(uint64_t h, const Job *job) {
        h = digest_mix(h, (uint64_t) job->id);
        h = digest_mix(h, (uint64_t) job->state);
        h = digest_mix(h, (uint64_t) job->attempt);
        h = digest_mix(h, (uint64_t) job->n_attempts);
        for (int i = 0; i < job->n_ranks; i++) {
                const Rank *r = &job->ranks[i];
                h = digest_mix(h, (uint64_t) r->state);
                h = digest_mix(h, (uint64_t) r->alive);
                h = digest_mix(h, (uint64_t) r->pid);
                h = digest_mix(h, (uint64_t) r->step);
                h = digest_mix(h, (uint64_t) r->exit_code);
                h = digest_mix(h, (uint64_t) r->signal);
        }
        return h;
}

/* What a node's rank reports can change: its version and the jobs of its ranks and of
 * the ranks reported, with the turn's writes. */
static uint64_t reports_digest(Controller *ctl, Node *node, const WireSync *msg) {
        uint64_t h = digest_mix(0xcbf29ce484222325ULL, node->version);
        h = digest_mix(h, (uint64_t) ctl->turn.n_dirty_jobs);
        h = digest_mix(h, (uint64_t) ctl->turn.effects);
        int n_jobs;
        Job **jobs = model_node_jobs(node, &n_jobs);
        for (int j = 0; j < n_jobs; j++)
                h = job_digest(h, jobs[j]);
        free(jobs);
        for (int i = 0; i < msg->n_ranks; i++) {
                Job *job = ctl_job_find(ctl, msg->ranks[i].job);
                if (job)
                        h = job_digest(h, job);
        }
        return h;
}

/* The reports of ranks, and the ranks the agent no longer has. */
static void ranks_report(Controller *ctl, Node *node, const WireSync *msg,
                         uint64_t applied_version) {
        for (int i = 0; i < msg->n_ranks; i++)
                rank_report(ctl, node, &msg->ranks[i]);
        ranks_missing(ctl, node, msg, applied_version);
}

int ctl_node_sync(Controller *ctl, const WireSync *msg, uint64_t applied_version, ReportMark *mark,
                  Node **ret_node, CtlError *err) {
        Turn *t = &ctl->turn;
        ReportMark unkept = {0};
        if (!mark)
                mark = &unkept;
        ReportMark before = *mark;
        mark->set = false;
        Node *node = ctl_node_find(ctl, msg->node);
        bool resumed = node && !node->connected && node_resumes(node, msg);
        if (resumed) {
                /* Known from the database and the agent it had: carry on without a
                 * registration, so a restarted controller sees no storm of them. */
                ctl_node_connected(ctl, node);
                log_debug("node %s: agent %s synced again after the controller restarted",
                          node->name, node->agent_id);
        }
        if (!node || !node->connected) {
                /* Unknown, or known only from the database with another agent: it must
                 * register so we learn its inventory and address from itself. */
                ctl_error_set(err, CTL_ERR_UNKNOWN_NODE, NULL, "node %s is not registered",
                              msg->node);
                return -ENOENT;
        }
        if (node_claim_check(ctl, node, msg->agent_id, err) < 0)
                return -EBUSY;
        if (node->agent_id && !util_streq_ptr(node->agent_id, msg->agent_id)) {
                /* The holder's lease ran out: another agent takes the node over only by
                 * registering, which ends the holder's attempts there (agent_replaced)
                 * and makes it the holder. */
                ctl_error_set(err, CTL_ERR_UNKNOWN_NODE, NULL,
                              "node %s is registered to another agent: register to take it over",
                              msg->node);
                return -ENOENT;
        }
        if (node->boot_id && msg->boot_id && strcmp(node->boot_id, msg->boot_id) != 0) {
                /* The host rebooted since it registered: it must register again, which
                 * declares every rank of the earlier boot lost before any starts. */
                ctl_error_set(err, CTL_ERR_BOOT_MISMATCH, "boot_id",
                              "node %s registered with another boot id: register again",
                              node->name);
                return -ESTALE;
        }
        model_node_touch(&ctl->model, node, util_now_ms());
        node->last_seen_ms = util_wall_ms();
        if (node->state == NODE_DOWN)
                tr_node(t, node, NODE_READY, "syncing again");
        HealthSeen seen = {.kind = HEALTH_SEEN_NODE,
                           .node = node->name,
                           .healthy = msg->healthy,
                           .health_reason = msg->health_reason};
        HealthFinding f;
        if (health_detect(&seen, &f))
                node_finding(ctl, node, &f);
        else if (node->state == NODE_UNHEALTHY)
                tr_node(t, node, NODE_READY, "healthy again");
        /* Checkpoints first: one committed just before a rank died is where the restart
         * that its exit report causes must resume. */
        for (int i = 0; i < msg->n_checkpoints; i++)
                checkpoint_report(ctl, node, &msg->checkpoints[i]);
        /* A repeat of the report applied at *mark, with no other report of the node
         * between: what its ranks' effects depend on besides their own states (which
         * the first application left) moves the node's version (a rank stopped,
         * assigned, its attempt ended) or the rules' epoch; health's detectors read no
         * clock, and a step counts only when it grows. */
        bool repeated = before.set && before.applied_version == applied_version &&
                        before.node_version == node->version &&
                        before.node_syncs == node->syncs_applied &&
                        before.rules_epoch == ctl->rules_epoch;
        node->syncs_applied++;
        if (!repeated) {
                ranks_report(ctl, node, msg, applied_version);
        } else if (t->strict) {
                /* The tests check that a repeated report indeed changes nothing. */
                uint64_t digest = reports_digest(ctl, node, msg);
                ranks_report(ctl, node, msg, applied_version);
                if (reports_digest(ctl, node, msg) != digest) {
                        log_error("bug: a repeated report of node %s changed its ranks",
                                  node->name);
                        abort();
                }
        }
        /* A version above the node's came from another controller: one that led before a
         * failover, with its clock ahead of ours (versions restart from the clock). Ours
         * move past it, so that equal versions keep meaning one desired state: an agent
         * told "unchanged" must really have it. */
        if (applied_version > node->version && applied_version <= NODE_VERSION_MAX)
                tr_node_version_above(t, node, applied_version);
        *mark = (ReportMark){.set = true,
                             .applied_version = applied_version,
                             .node_version = node->version,
                             .node_syncs = node->syncs_applied,
                             .rules_epoch = ctl->rules_epoch};
        *ret_node = node;
        return resumed;
}

int ctl_node_drain(Controller *ctl, const char *name, bool now, Node **ret_node, CtlError *err) {
        Node *node = ctl_node_find(ctl, name);
        if (!node) {
                ctl_error_set(err, CTL_ERR_NOT_FOUND, NULL, "node %s does not exist", name);
                return -ENOENT;
        }
        if (node->state != NODE_DRAINED)
                tr_node(&ctl->turn, node, NODE_DRAINING,
                        now ? "drained by request, jobs moved" : "drained by request");
        if (now) {
                HealthFinding f = {.reason = END_DRAINED,
                                   .cls = FAILURE_PREEMPTED,
                                   .scope = HEALTH_SCOPE_NODE,
                                   .node_state = _NODE_STATE_INVALID,
                                   .exit_code = -1,
                                   .rule = _FAILRULE_ACTION_INVALID,
                                   .detail = "node drained"};
                node_finding(ctl, node, &f);
        }
        ctl->turn.effects |= TURN_SWEEP; /* drained at once if nothing runs there */
        *ret_node = node;
        return 0;
}

int ctl_node_undrain(Controller *ctl, const char *name, Node **ret_node, CtlError *err) {
        Node *node = ctl_node_find(ctl, name);
        if (!node) {
                ctl_error_set(err, CTL_ERR_NOT_FOUND, NULL, "node %s does not exist", name);
                return -ENOENT;
        }
        if (node->state == NODE_DRAINING || node->state == NODE_DRAINED ||
            node->state == NODE_QUARANTINED) {
                node->n_blame = 0;
                tr_node(&ctl->turn, node, NODE_READY, "returned to service by request");
        }
        *ret_node = node;
        return 0;
}

void ctl_node_desired_foreach(Controller *ctl, Node *node, CtlDesiredFn fn, void *userdata) {
        /* Desired ranks are alive, so the node's job list holds all of them; in id order
         * for stable answers. */
        int n_jobs;
        Job **jobs = model_node_jobs(node, &n_jobs);
        for (int j = 0; j < n_jobs; j++) {
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

void nodes_tick(Controller *ctl, int64_t now_ms) {
        /* Oldest contact first: the first node whose lease still runs ends the walk. */
        for (Node *n;
             (n = model_lease_oldest(&ctl->model)) &&
             health_node_lost(n->last_sync_mono, now_ms, ctl->cfg.lease_ms, ctl->cfg.grace_ms);) {
                model_node_lease_drop(&ctl->model, n);
                if (n->state == NODE_DOWN)
                        continue;
                HealthSeen seen = {.kind = HEALTH_SEEN_SILENCE,
                                   .node = n->name,
                                   .silent_ms = now_ms - n->last_sync_mono,
                                   .lease_ms = ctl->cfg.lease_ms,
                                   .grace_ms = ctl->cfg.grace_ms};
                HealthFinding f;
                if (health_detect(&seen, &f))
                        node_finding(ctl, n, &f);
        }
}

void nodes_finish_drains(Controller *ctl) {
        /* Most sweeps have no drain to finish: they walk no node. */
        for (int i = 0; ctl->model.n_draining > 0 && i < ctl->model.n_nodes; i++) {
                Node *n = ctl->model.nodes[i];
                if (n->state == NODE_DRAINING && n->alive_ranks == 0)
                        tr_node(&ctl->turn, n, NODE_DRAINED, NULL);
        }
}
