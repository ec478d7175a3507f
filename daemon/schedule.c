/* SPDX-License-Identifier: MIT */
/*
 * Glue between the controller's model and the pure scheduler; see schedule.h. Builds
 * the snapshot (nodes with what alive ranks hold, running jobs with their tier, waiting
 * jobs, the quota file), records why each job waits and the tiers, and hands the
 * placements and preemptions back. Also the quota file (reloaded on SIGHUP).
 */
#include <errno.h>
#include <string.h>

#include "controller-internal.h"
#include "log.h"
#include "util.h"

/* Job shapes whose feasibility is remembered (a hostile user cannot grow it without end). */
#define SCHED_VERDICTS_MAX 4096

typedef struct Snapshot {
        SchedSnapshot s;
        bool nodes_borrowed; /* s.nodes are Scheduling.pass_fleet's */
        SchedLabel *label_pool;
        SchedDevice *device_pool; /* behind s.nodes[].devices: one allocation per pass */
        SchedLabel *selector_pool;
        Job **job_of; /* parallel to s.jobs */
        Job **running_of; /* parallel to s.running; both are Scheduling.running's */
} Snapshot;

/*
 * Before a pass's snapshot: the copies then stay valid through the pass (it adds some,
 * never drops any). The names the first pass of a generation took are the ones in use;
 * the copies go when the rest (names no job has any more, a hostile user's many) come to
 * outnumber them, keeping at least SCHED_NAMES_MAX, so that a fleet with more names in
 * use than that does not copy them all again every pass.
 */
static void sched_names_begin(Scheduling *s) {
        size_t n = s->names ? strmap_size(s->names) : 0;
        if (s->names && s->names_in_use < 0)
                s->names_in_use = (int) n;
        size_t limit = s->names_in_use > SCHED_NAMES_MAX / 2 ? 2 * (size_t) s->names_in_use
                                                             : SCHED_NAMES_MAX;
        if (s->names && n < limit)
                return;
        strmap_free(s->names);
        s->names = strmap_new();
        s->names_gen++;
        s->names_in_use = -1;
}

static const char *sched_name(Scheduling *s, const char *name) {
        return name ? strmap_intern(s->names, name) : NULL;
}

static void job_names_take(Scheduling *s, Job *job) {
        if (job->sched_names_gen == s->names_gen)
                return;
        job->sched_project = sched_name(s, job->spec->project);
        job->sched_user = sched_name(s, job->spec->user);
        job->sched_accelerator = sched_name(s, job->spec->accelerator);
        job->sched_names_gen = s->names_gen;
}

static void node_names_take(Scheduling *s, Node *node) {
        if (node->sched_names_gen == s->names_gen)
                return;
        for (int d = 0; d < node->n_devices; d++)
                node->devices[d].sched_kind = sched_name(s, node->devices[d].kind);
        node->sched_names_gen = s->names_gen;
}

/* Fills a scheduler node from a Node; labels point into the node's JSON. */
static void sched_node_fill(Node *node, SchedNode *sn, SchedDevice *devices, SchedLabel *labels,
                            bool shared_names) {
        *sn = (SchedNode){.name = node->name,
                          .schedulable = node->state == NODE_READY,
                          .cpus_free = node->cpus,
                          .cpus_total = node->cpus,
                          .memory_free_mb = node->memory_mb > 0 ? node->memory_mb : -1,
                          .memory_total_mb = node->memory_mb > 0 ? node->memory_mb : 0,
                          .n_devices = node->n_devices,
                          .devices = devices,
                          .labels = labels};
        for (int d = 0; d < node->n_devices; d++)
                sn->devices[d] = (SchedDevice){.kind = shared_names ? node->devices[d].sched_kind
                                                                    : node->devices[d].kind,
                                               .numa_node = node->devices[d].numa_node,
                                               .pcie_switch = node->devices[d].pcie_switch,
                                               .free = true};
        const char *k;
        json_t *v;
        json_object_foreach(node->labels, k, v) {
                labels[sn->n_labels++] = (SchedLabel){k, json_string_value(v)};
        }
}

/* A job's names are the scheduler's copies (job_names_take), a spec's its own. */
static void sched_job_fill(const JobSpec *spec, const Job *job, SchedJob *sj,
                           SchedLabel *selector) {
        *sj = (SchedJob){.id = job ? job->id : 0,
                         .project = job ? job->sched_project : spec->project,
                         .user = job ? job->sched_user : spec->user,
                         .priority = spec->priority,
                         .created_ms = job ? job->created_ms : 0,
                         .submitted_ms = job ? job->queued_ms : 0,
                         .ranks = spec->ranks,
                         .ranks_per_node = spec->ranks_per_node,
                         .accelerator = job ? job->sched_accelerator : spec->accelerator,
                         .accelerators_per_rank = spec->accelerators_per_rank,
                         .cpus = spec->cpus,
                         .memory_mb = spec->memory_mb,
                         .avoid_node = job ? job->avoid_node : NULL,
                         .same_label = spec->same_label,
                         .node_selector = selector};
        const char *k;
        json_t *v;
        json_object_foreach(spec->node_selector, k, v) {
                selector[sj->n_node_selector++] = (SchedLabel){k, json_string_value(v)};
        }
}

/* What a pass reads of a node that alive ranks change: whether it takes ranks, and what
 * they leave free. */
static void sched_node_free_set(const Node *node, SchedNode *sn) {
        sn->schedulable = node->state == NODE_READY;
        sn->cpus_free = node->cpus - node->used_cpus;
        sn->memory_free_mb = node->memory_mb > 0 ? node->memory_mb - node->used_memory_mb : -1;
        for (int d = 0; d < node->n_devices; d++)
                sn->devices[d].free = node->device_used[d] == 0;
}

/* Nodes with their free capacity (after what alive ranks hold, when for_pass: then
 * with the scheduler's copies of kind names). */
static void snapshot_nodes(Controller *ctl, Snapshot *snap, bool for_pass) {
        size_t n_labels = 0, n_devices = 0;
        for (int i = 0; i < ctl->model.n_nodes; i++) {
                n_labels += json_object_size(ctl->model.nodes[i]->labels);
                n_devices += (size_t) ctl->model.nodes[i]->n_devices;
        }
        snap->label_pool = xcalloc(n_labels + 1, sizeof(SchedLabel));
        snap->device_pool = xmalloc((n_devices + 1) * sizeof(SchedDevice));
        snap->s.nodes = xcalloc((size_t) ctl->model.n_nodes + 1, sizeof(SchedNode));
        for (int i = 0, off = 0, dev = 0; i < ctl->model.n_nodes; i++) {
                Node *node = ctl->model.nodes[i];
                SchedNode *sn = &snap->s.nodes[i];
                if (for_pass)
                        node_names_take(&ctl->sched, node);
                sched_node_fill(node, sn, snap->device_pool + dev, snap->label_pool + off,
                                for_pass);
                off += sn->n_labels;
                dev += node->n_devices;
                if (for_pass)
                        sched_node_free_set(node, sn);
        }
        snap->s.n_nodes = ctl->model.n_nodes;
}

/* What a pass reads of a job with alive ranks: what it holds, for quota use and
 * preemption. */
static void sched_running_fill(Scheduling *s, Job *job, SchedRunning *sr) {
        job_names_take(s, job);
        Attempt *a = job_current_attempt(job);
        *sr = (SchedRunning){.id = job->id,
                             .project = job->sched_project,
                             .user = job->sched_user,
                             .priority = job->spec->priority,
                             .tier = job->tier,
                             .started_ms = a ? a->started_ms : job->created_ms,
                             .stopping = !job_attempt_live(job),
                             .accelerator = job->sched_accelerator,
                             .accelerators_per_rank = job->spec->accelerators_per_rank,
                             .cpus = job->spec->cpus,
                             .memory_mb = job->spec->memory_mb,
                             .n_ranks = job->n_ranks,
                             .rank_node = job->held_node,
                             .rank_devices = job->held_devices};
}

/* The kept running jobs brought up to date: the positions listed stale since the last
 * pass, or all of them when the names changed. The cost follows what changed, not the
 * running jobs, the queue or the fleet. */
static void pass_running_update(Controller *ctl) {
        Scheduling *s = &ctl->sched;
        Model *m = &ctl->model;
        /* Taken before the copy first grows: none kept yet, or kept under other names. */
        bool whole = !s->running || s->running_gen != s->names_gen;
        if (s->cap_running < m->n_running) {
                s->cap_running = m->cap_running;
                s->running = xrealloc(s->running, (size_t) s->cap_running * sizeof(SchedRunning));
                s->running_of = xrealloc(s->running_of, (size_t) s->cap_running * sizeof(Job *));
        }
        for (int i = 0; i < m->n_stale_slots; i++) {
                int slot = m->stale_slots[i];
                m->running_stale[slot] = false;
                if (!whole && slot < m->n_running) {
                        s->running_of[slot] = m->running[slot];
                        sched_running_fill(s, m->running[slot], &s->running[slot]);
                }
        }
        m->n_stale_slots = 0;
        for (int i = 0; whole && i < m->n_running; i++) {
                s->running_of[i] = m->running[i];
                sched_running_fill(s, m->running[i], &s->running[i]);
        }
        s->running_gen = s->names_gen;
}

static void snapshot_free(Snapshot *snap) {
        free(snap->device_pool);
        if (!snap->nodes_borrowed)
                free(snap->s.nodes);
        free(snap->s.jobs);
        free(snap->label_pool);
        free(snap->selector_pool);
        free(snap->job_of);
}

static void pass_fleet_drop(Scheduling *s) {
        if (!s->pass_fleet)
                return;
        snapshot_free(s->pass_fleet);
        free(s->pass_fleet);
        s->pass_fleet = NULL;
}

/*
 * Under AXCTLD_STRICT_TRANSITIONS (the tests): the kept copy of the fleet must equal a
 * fresh one, and the model's running jobs be those on the nodes' job lists, or a change
 * went unlisted and passes would place on what is not free.
 */
static void pass_input_verify(Controller *ctl) {
        const Snapshot *f = ctl->sched.pass_fleet;
        const Model *m = &ctl->model;
        int64_t on_nodes = 0, on_jobs = 0;
        for (int i = 0; i < m->n_running; i++)
                on_jobs += m->running[i]->held_ranks;
        for (int i = 0; i < m->n_nodes; i++) {
                on_nodes += m->nodes[i]->alive_ranks;
                for (int k = 0; k < m->nodes[i]->n_jobs; k++) {
                        const Job *job = m->nodes[i]->jobs[k].job;
                        if (job->running_slot < 1 || job->running_slot > m->n_running ||
                            m->running[job->running_slot - 1] != job) {
                                log_error("bug: job %lld holds node %s but is not running",
                                          (long long) job->id, m->nodes[i]->name);
                                abort();
                        }
                }
        }
        if (on_nodes != on_jobs) {
                log_error("bug: %lld alive ranks on nodes, %lld held by running jobs",
                          (long long) on_nodes, (long long) on_jobs);
                abort();
        }
        for (int i = 0; i < ctl->model.n_nodes; i++) {
                Node *node = ctl->model.nodes[i];
                const SchedNode *kept = &f->s.nodes[i];
                SchedNode fresh = *kept;
                fresh.devices = xmalloc(((size_t) node->n_devices + 1) * sizeof(SchedDevice));
                sched_node_free_set(node, &fresh);
                bool same = kept->schedulable == fresh.schedulable &&
                            kept->cpus_free == fresh.cpus_free &&
                            kept->memory_free_mb == fresh.memory_free_mb &&
                            kept->n_devices == node->n_devices;
                for (int d = 0; same && d < node->n_devices; d++)
                        same = kept->devices[d].free == fresh.devices[d].free;
                free(fresh.devices);
                if (!same) {
                        log_error("bug: the scheduler's copy of node %s is stale", node->name);
                        abort();
                }
        }
}

/* The kept copy of the fleet brought up to date: the nodes whose capacity changed since
 * the last pass, or all of them when the fleet or the names changed. */
static void pass_fleet_update(Controller *ctl) {
        Scheduling *s = &ctl->sched;
        Model *m = &ctl->model;
        bool whole = !s->pass_fleet || s->pass_fleet_gen != s->names_gen ||
                     s->pass_fleet->s.n_nodes != m->n_nodes;
        if (whole) {
                pass_fleet_drop(s);
                s->pass_fleet = xcalloc(1, sizeof(Snapshot));
                snapshot_nodes(ctl, s->pass_fleet, true);
                s->pass_fleet_gen = s->names_gen;
        }
        for (int i = 0; i < m->n_capacity_changed; i++) {
                Node *node = m->capacity_changed[i];
                node->capacity_changed = false;
                if (!whole)
                        sched_node_free_set(node, &s->pass_fleet->s.nodes[node->index]);
        }
        m->n_capacity_changed = 0;
}

/* Under AXCTLD_STRICT_TRANSITIONS: the kept running jobs must equal a fresh copy, or a
 * change went unlisted and a pass would judge quotas and preemption on stale jobs. */
static void pass_running_verify(Controller *ctl) {
        Scheduling *s = &ctl->sched;
        for (int i = 0; i < ctl->model.n_running; i++) {
                Job *job = ctl->model.running[i];
                const SchedRunning *kept = &s->running[i];
                SchedRunning fresh;
                sched_running_fill(s, job, &fresh);
                if (s->running_of[i] != job || kept->id != fresh.id ||
                    kept->project != fresh.project || kept->user != fresh.user ||
                    kept->priority != fresh.priority || kept->tier != fresh.tier ||
                    kept->started_ms != fresh.started_ms || kept->stopping != fresh.stopping ||
                    kept->accelerator != fresh.accelerator ||
                    kept->accelerators_per_rank != fresh.accelerators_per_rank ||
                    kept->cpus != fresh.cpus || kept->memory_mb != fresh.memory_mb ||
                    kept->n_ranks != fresh.n_ranks || kept->rank_node != fresh.rank_node ||
                    kept->rank_devices != fresh.rank_devices) {
                        log_error("bug: the scheduler's copy of running job %lld is stale",
                                  (long long) job->id);
                        abort();
                }
        }
}

/* What a pass reads: nodes with their free capacity and the running jobs. */
static void snapshot_for_pass(Controller *ctl, Snapshot *snap) {
        sched_names_begin(&ctl->sched);
        pass_fleet_update(ctl);
        pass_running_update(ctl);
        snap->s.nodes = ctl->sched.pass_fleet->s.nodes;
        snap->s.n_nodes = ctl->sched.pass_fleet->s.n_nodes;
        snap->nodes_borrowed = true;
        snap->s.running = ctl->sched.running;
        snap->s.n_running = ctl->model.n_running;
        snap->running_of = ctl->sched.running_of;
        if (ctl->turn.strict) {
                pass_input_verify(ctl);
                pass_running_verify(ctl);
        }
}

/* Whether job is in the queue now: pending, or restarting or preempted with its old
 * attempt confirmed gone (and, when restarting, its backoff over). */
static bool job_waiting(Job *job, int64_t now) {
        if (job->state == JOB_PENDING)
                return true;
        if (job->state == JOB_RESTARTING && now < job->restart_at_ms)
                return false;
        if (job->state != JOB_RESTARTING && job->state != JOB_PREEMPTED)
                return false;
        for (int i = 0; i < job->n_ranks; i++)
                if (job->ranks[i].alive)
                        return false; /* the old attempt is not confirmed gone yet */
        return true;
}

/*
 * Which waiting jobs an incremental pass must look at besides the new ones: those the
 * scheduler holds capacity for (reservations, preemptions under way) and those old
 * enough to get a reservation, since a new job could otherwise take their nodes.
 */
static bool job_needs_pass(Job *job, int64_t now_wall) {
        return job->wait == SCHED_WAIT_PREEMPTING || job->wait == SCHED_WAIT_RESERVED ||
               now_wall - job->queued_ms > SCHED_STARVATION_AFTER_MS_DEFAULT;
}

void schedule_init(Scheduling *s) {
        *s = (Scheduling){.next_restart_ms = INT64_MAX};
}

void schedule_fleet_changed(Scheduling *s) {
        pass_fleet_drop(s);
        s->verdicts = strmap_free(s->verdicts);
        s->feasibility = sched_feasibility_free(s->feasibility);
        if (!s->fleet)
                return;
        snapshot_free(s->fleet);
        free(s->fleet);
        s->fleet = NULL;
}

void schedule_clear(Scheduling *s) {
        schedule_fleet_changed(s);
        strmap_free(s->names);
        sched_quota_free(s->quota);
        free(s->running);
        free(s->running_of);
        free(s->fresh);
        *s = (Scheduling){0};
}

void schedule_job_added(Scheduling *s, Job *job) {
        GROW(s->fresh, s->n_fresh, s->cap_fresh);
        s->fresh[s->n_fresh++] = job;
}

void schedule_restart_at(Scheduling *s, int64_t restart_at_ms) {
        if (restart_at_ms < s->next_restart_ms)
                s->next_restart_ms = restart_at_ms;
}

/*
 * When nothing but submits happened since the last pass (full false), the jobs that
 * waited then still cannot fit the same free capacity: a pass over the new jobs (and
 * those the scheduler holds capacity for) decides the same, at a cost that does not
 * grow with the queue.
 */
bool schedule_pass(Controller *ctl, bool full, SchedResult *ret) {
        int64_t now = util_now_ms(), now_wall = util_wall_ms();
        Snapshot snap = {0};
        ctl->sched.last_pass_ms = now;
        if (full)
                ctl->sched.next_restart_ms = INT64_MAX;
        /* An incremental pass scans the queue only when some job there may need it. */
        bool scan = full || ctl->sched.n_held > 0 ||
                    now_wall - ctl->sched.oldest_waiting_ms > SCHED_STARVATION_AFTER_MS_DEFAULT;
        Job **cand = xmalloc(
                ((size_t) ctl->sched.n_fresh + (scan ? (size_t) ctl->model.n_active : 0) + 1) *
                sizeof(Job *));
        int n_cand = 0;
        for (int j = 0; j < ctl->sched.n_fresh; j++) {
                Job *job = ctl->sched.fresh[j];
                if (job_waiting(job, now) && !job->in_pass) {
                        job->in_pass = true;
                        cand[n_cand++] = job;
                }
        }
        ctl->sched.n_fresh = 0;
        if (full)
                ctl->sched.oldest_waiting_ms = now_wall;
        for (int j = 0; scan && j < ctl->model.n_active; j++) {
                Job *job = ctl->model.active[j];
                if (full && job->state == JOB_RESTARTING && job->restart_at_ms > now &&
                    job->restart_at_ms < ctl->sched.next_restart_ms)
                        ctl->sched.next_restart_ms = job->restart_at_ms;
                if (!job->in_pass && job_waiting(job, now) &&
                    (full || job_needs_pass(job, now_wall))) {
                        job->in_pass = true;
                        cand[n_cand++] = job;
                        if (full && job->queued_ms < ctl->sched.oldest_waiting_ms)
                                ctl->sched.oldest_waiting_ms = job->queued_ms;
                }
        }
        for (int j = 0; j < n_cand; j++)
                cand[j]->in_pass = false;
        if (n_cand == 0) {
                free(cand);
                return false;
        }
        snapshot_for_pass(ctl, &snap);
        snap.s.quota = ctl->sched.quota;
        snap.s.now_ms = now_wall;
        snap.s.jobs = xcalloc((size_t) n_cand + 1, sizeof(SchedJob));
        snap.job_of = cand;
        size_t n_sel = 0;
        for (int j = 0; j < n_cand; j++)
                n_sel += json_object_size(cand[j]->spec->node_selector);
        snap.selector_pool = xcalloc(n_sel + 1, sizeof(SchedLabel));
        for (int j = 0, off = 0; j < n_cand; j++) {
                job_names_take(&ctl->sched, cand[j]);
                SchedJob *sj = &snap.s.jobs[snap.s.n_jobs++];
                sched_job_fill(cand[j]->spec, cand[j], sj, snap.selector_pool + off);
                off += sj->n_node_selector;
        }
        SchedResult res;
        if (sched_pass(&snap.s, &res) < 0) {
                snapshot_free(&snap);
                return false;
        }
        /* Every held job was a candidate (see job_needs_pass): count them afresh. */
        ctl->sched.n_held = 0;
        for (int i = 0; i < snap.s.n_jobs; i++) {
                snap.job_of[i]->wait = res.wait[i];
                if (res.wait[i] == SCHED_WAIT_PREEMPTING || res.wait[i] == SCHED_WAIT_RESERVED)
                        ctl->sched.n_held++;
        }
        /* Read from the kept copy, which equals the jobs': only a promoted or demoted job
         * is touched. */
        for (int i = 0; i < snap.s.n_running; i++) {
                if (res.running_tier[i] != ctl->sched.running[i].tier) {
                        Job *job = snap.running_of[i];
                        job->tier = ctl->sched.running[i].tier = res.running_tier[i];
                        turn_job_dirty(&ctl->turn, job);
                }
        }
        snapshot_free(&snap);
        *ret = res;
        return true;
}

/* What feasibility depends on; jobs of one shape get the same verdict on one fleet. */
static char *job_shape(const JobSpec *spec) {
        _cleanup_free_ char *selector =
                json_dumps(spec->node_selector, JSON_COMPACT | JSON_SORT_KEYS);
        return xasprintf("%d %d %d %d %lld %s|%s|%s", spec->ranks, spec->ranks_per_node, spec->cpus,
                         spec->accelerators_per_rank, (long long) spec->memory_mb,
                         spec->accelerator ? spec->accelerator : "",
                         spec->same_label ? spec->same_label : "", selector ? selector : "");
}

SchedWait schedule_feasible(Controller *ctl, const JobSpec *spec) {
        /* A submit costs O(1), not a walk over the fleet, for a shape seen before. */
        _cleanup_free_ char *shape = job_shape(spec);
        if (!ctl->sched.verdicts)
                ctl->sched.verdicts = strmap_new();
        intptr_t seen = (intptr_t) strmap_get(ctl->sched.verdicts, shape);
        if (seen > 0)
                return (SchedWait) (seen - 1);
        Snapshot *fleet = ctl->sched.fleet;
        if (!fleet) {
                fleet = ctl->sched.fleet = xcalloc(1, sizeof(Snapshot));
                snapshot_nodes(ctl, fleet, false);
                /* Any node may come back: judge against every node the fleet has. */
                for (int i = 0; i < fleet->s.n_nodes; i++)
                        fleet->s.nodes[i].schedulable = true;
                ctl->sched.feasibility = sched_feasibility_new(fleet->s.nodes, fleet->s.n_nodes);
        }
        SchedLabel *sel = xcalloc(json_object_size(spec->node_selector) + 1, sizeof(SchedLabel));
        SchedJob sj;
        sched_job_fill(spec, NULL, &sj, sel);
        SchedWait w = sched_feasibility_check(ctl->sched.feasibility, &sj);
        free(sel);
        if (strmap_size(ctl->sched.verdicts) < SCHED_VERDICTS_MAX)
                strmap_put(ctl->sched.verdicts, shape, (void *) (intptr_t) (w + 1));
        return w;
}

/* Reads and parses the quota file at path. 0, or -errno with *ret_error. */
static int quota_file_load(const char *path, SchedQuota **ret, char **ret_error) {
        char *text = NULL;
        int r = util_read_file(path, &text, NULL);
        if (r < 0) {
                *ret_error = xasprintf("%s: %s", path, strerror(-r));
                return r;
        }
        char *err = NULL;
        r = sched_quota_parse(text, ret, &err);
        free(text);
        if (r < 0) {
                *ret_error = xasprintf("%s: %s", path, err ? err : "invalid");
                free(err);
        }
        return r;
}

int schedule_quota_check(const char *path, char **ret_error) {
        SchedQuota *q = NULL;
        int r = path ? quota_file_load(path, &q, ret_error) : 0;
        sched_quota_free(q);
        return r;
}

int ctl_quota_reload(Controller *ctl, char **ret_error) {
        if (!ctl->cfg.quota_path) {
                ctl->sched.quota = sched_quota_free(ctl->sched.quota);
                return 0;
        }
        SchedQuota *q = NULL;
        int r = quota_file_load(ctl->cfg.quota_path, &q, ret_error);
        if (r < 0)
                return r;
        sched_quota_free(ctl->sched.quota);
        ctl->sched.quota = q;
        ctl->turn.effects |= TURN_SCHEDULE | TURN_SCHEDULE_FULL;
        return 0;
}

int ctl_quota_usage(Controller *ctl, SchedResult *ret) {
        Snapshot snap = {0};
        snapshot_for_pass(ctl, &snap);
        snap.s.quota = ctl->sched.quota;
        snap.s.now_ms = util_wall_ms();
        int r = sched_pass(&snap.s, ret);
        snapshot_free(&snap);
        return r;
}
