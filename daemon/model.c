/* SPDX-License-Identifier: MIT */
/* The in-memory model's lifecycle and indexes; see model.h. */
#include "model.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "util.h"

void model_init(Model *m) {
        *m = (Model){.idempotency = strmap_new(),
                     .node_index = strmap_new(),
                     .user_jobs = strmap_new(),
                     .stored_goodput_index = strmap_new(),
                     .next_job_id = 1};
}

void model_clear(Model *m) {
        for (int i = 0; i < m->n_jobs; i++)
                job_free(m->jobs[i]);
        for (int i = 0; i < m->n_nodes; i++)
                node_free(m->nodes[i]);
        free(m->jobs);
        free(m->active);
        free(m->ending);
        free(m->starting);
        free(m->nodes);
        free(m->capacity_changed);
        free(m->running);
        free(m->stale_slots);
        free(m->running_stale);
        for (int i = 0; i < m->n_stored_goodput; i++) {
                free(m->stored_goodput[i]->project);
                free(m->stored_goodput[i]);
        }
        free(m->stored_goodput);
        strmap_free(m->stored_goodput_index);
        strmap_free(m->idempotency);
        strmap_free(m->node_index);
        strmap_free(m->user_jobs);
        *m = (Model){0};
}

Job *model_job_find(const Model *m, int64_t id) {
        int lo = 0, hi = m->n_jobs - 1;
        while (lo <= hi) {
                int mid = lo + (hi - lo) / 2;
                if (m->jobs[mid]->id == id)
                        return m->jobs[mid];
                if (m->jobs[mid]->id < id)
                        lo = mid + 1;
                else
                        hi = mid - 1;
        }
        return NULL;
}

Node *model_node_find(const Model *m, const char *name) {
        return strmap_get(m->node_index, name);
}

/*
 * Model.active, .starting and .running are lists in no order whose jobs know their
 * place: a field of the job (its slot) holds 1 + its index there, 0 while it is not
 * listed, and the last entry takes a removed one's place, so both are O(1).
 */
#define SLOT(field) offsetof(Job, field)

static int *slot_of(Job *job, size_t slot) {
        return (int *) ((char *) job + slot);
}

static void slots_add(Job ***list, int *n, int *cap, Job *job, size_t slot) {
        GROW(*list, *n, *cap);
        (*list)[(*n)++] = job;
        *slot_of(job, slot) = *n;
}

/* Returns the index job left, which now holds the last entry (or is *n: job was last). */
static int slots_remove(Job **list, int *n, Job *job, size_t slot) {
        int i = *slot_of(job, slot) - 1;
        Job *last = list[--*n];
        list[i] = last;
        *slot_of(last, slot) = i + 1;
        *slot_of(job, slot) = 0;
        return i;
}

void model_job_unlisted(Job *job) {
        job->active_slot = job->starting_slot = job->running_slot = 0;
        job->ending = false;
}

void model_active_add(Model *m, Job *job) {
        if (!job_active(job))
                slots_add(&m->active, &m->n_active, &m->cap_active, job, SLOT(active_slot));
}

void model_active_recheck(Model *m, Job *job) {
        if (!job_active(job) || job->ending)
                return;
        GROW(m->ending, m->n_ending, m->cap_ending);
        m->ending[m->n_ending++] = job;
        job->ending = true;
}

void model_starting_update(Model *m, Job *job) {
        bool starting = job->state == JOB_STARTING;
        if (starting == (job->starting_slot > 0))
                return;
        if (starting)
                slots_add(&m->starting, &m->n_starting, &m->cap_starting, job, SLOT(starting_slot));
        else
                slots_remove(m->starting, &m->n_starting, job, SLOT(starting_slot));
}

/* A project name has no '/' (spec.c), so "<project>/<key>" is unambiguous. */
static char *idempotency_scoped(const char *project, const char *key) {
        return xasprintf("%s/%s", project, key);
}

Job *model_job_by_key(const Model *m, const char *project, const char *key) {
        _cleanup_free_ char *scoped = idempotency_scoped(project, key);
        return strmap_get(m->idempotency, scoped);
}

static const char *job_user(const Job *job) {
        return job->spec->user ? job->spec->user : "";
}

int64_t model_user_jobs(const Model *m, const char *user) {
        return (intptr_t) strmap_get(m->user_jobs, user ? user : "");
}

/* Users with no job left leave the map, so it holds only the users with jobs. */
static void user_jobs_add(Model *m, const char *user, intptr_t delta) {
        intptr_t n = (intptr_t) strmap_get(m->user_jobs, user) + delta;
        if (n > 0)
                strmap_put(m->user_jobs, user, (void *) n);
        else
                strmap_remove(m->user_jobs, user);
}

void model_user_job_ended(Model *m, const Job *job) {
        user_jobs_add(m, job_user(job), -1);
}

/* What model_job_add and model_jobs_merge do for a job besides placing it in m->jobs. */
static void job_index(Model *m, Job *job) {
        if (job->id >= m->next_job_id)
                m->next_job_id = job->id + 1;
        if (job->idempotency_key) {
                _cleanup_free_ char *scoped =
                        idempotency_scoped(job->spec->project, job->idempotency_key);
                strmap_put(m->idempotency, scoped, job);
        }
        model_starting_update(m, job);
        if (!job_state_is_terminal(job->state)) {
                model_active_add(m, job);
                user_jobs_add(m, job_user(job), 1);
        }
}

void model_job_add(Model *m, Job *job) {
        GROW(m->jobs, m->n_jobs, m->cap_jobs);
        m->jobs[m->n_jobs++] = job;
        job_index(m, job);
}

void model_jobs_merge(Model *m, Job **jobs, int n) {
        GROW_TO(m->jobs, m->n_jobs + n, m->cap_jobs);
        /* From the back, so that each job moves once: O(jobs in memory) per batch. */
        int from = m->n_jobs - 1, to = m->n_jobs + n - 1;
        for (int k = n - 1; k >= 0; to--) {
                if (from >= 0 && m->jobs[from]->id > jobs[k]->id)
                        m->jobs[to] = m->jobs[from--];
                else
                        m->jobs[to] = jobs[k--];
        }
        m->n_jobs += n;
        for (int k = 0; k < n; k++)
                job_index(m, jobs[k]);
}

int model_jobs_retire(Model *m, int64_t before_ms) {
        int w = 0, retired = 0;
        for (int j = 0; j < m->n_jobs; j++) {
                Job *job = m->jobs[j];
                if (job_active(job) || !job_state_is_terminal(job->state) ||
                    job->finished_ms >= before_ms) {
                        m->jobs[w++] = job;
                        continue;
                }
                if (job->idempotency_key) {
                        _cleanup_free_ char *scoped =
                                idempotency_scoped(job->spec->project, job->idempotency_key);
                        strmap_remove(m->idempotency, scoped);
                }
                job_free(job);
                retired++;
        }
        m->n_jobs = w;
        return retired;
}

void model_active_prune(Model *m) {
        for (int j = 0; j < m->n_ending; j++) {
                Job *job = m->ending[j];
                job->ending = false;
                bool keep = !job_state_is_terminal(job->state);
                for (int k = 0; !keep && k < job->n_ranks; k++)
                        keep = job->ranks[k].alive;
                if (!keep)
                        slots_remove(m->active, &m->n_active, job, SLOT(active_slot));
        }
        m->n_ending = 0;
}

void model_node_lease_drop(Model *m, Node *node) {
        if (!node->in_lease)
                return;
        if (node->lease_prev)
                node->lease_prev->lease_next = node->lease_next;
        else
                m->lease_head = node->lease_next;
        if (node->lease_next)
                node->lease_next->lease_prev = node->lease_prev;
        else
                m->lease_tail = node->lease_prev;
        node->lease_prev = node->lease_next = NULL;
        node->in_lease = false;
}

void model_node_touch(Model *m, Node *node, int64_t now_ms) {
        /* The monotonic clock keeps the list in order: the newest contact is the tail. */
        model_node_lease_drop(m, node);
        node->last_sync_mono = now_ms;
        node->lease_prev = m->lease_tail;
        if (m->lease_tail)
                m->lease_tail->lease_next = node;
        else
                m->lease_head = node;
        m->lease_tail = node;
        node->in_lease = true;
}

void model_node_add(Model *m, Node *node) {
        GROW(m->nodes, m->n_nodes, m->cap_nodes);
        node->index = m->n_nodes;
        m->nodes[m->n_nodes++] = node;
        strmap_put(m->node_index, node->name, node);
        if (node->state == NODE_DRAINING)
                m->n_draining++;
}

void model_node_capacity_changed(Model *m, Node *node) {
        if (node->capacity_changed)
                return;
        node->capacity_changed = true;
        GROW(m->capacity_changed, m->n_capacity_changed, m->cap_capacity_changed);
        m->capacity_changed[m->n_capacity_changed++] = node;
}

static void running_slot_stale(Model *m, int slot) {
        if (m->running_stale[slot])
                return;
        m->running_stale[slot] = true;
        m->stale_slots[m->n_stale_slots++] = slot; /* each slot once: cap_running at most */
}

void model_running_stale(Model *m, const Job *job) {
        if (job->running_slot)
                running_slot_stale(m, job->running_slot - 1);
}

/* Counts delta more alive ranks of job on nodes: in Model.running while any. */
static void job_held_add(Model *m, Job *job, int delta) {
        job->held_ranks += delta;
        if (job->held_ranks > 0 && !job->running_slot) {
                int cap = m->cap_running;
                slots_add(&m->running, &m->n_running, &m->cap_running, job, SLOT(running_slot));
                if (m->cap_running > cap) {
                        m->running_stale =
                                xrealloc(m->running_stale, (size_t) m->cap_running * sizeof(bool));
                        memset(m->running_stale + cap, 0,
                               (size_t) (m->cap_running - cap) * sizeof(bool));
                        m->stale_slots =
                                xrealloc(m->stale_slots, (size_t) m->cap_running * sizeof(int));
                }
                running_slot_stale(m, m->n_running - 1);
        } else if (job->held_ranks <= 0 && job->running_slot) {
                int slot = slots_remove(m->running, &m->n_running, job, SLOT(running_slot));
                if (slot < m->n_running)
                        running_slot_stale(m, slot); /* another job moved there */
        }
}

void model_node_hold(Model *m, Node *node, Job *job, const Rank *r, int delta) {
        model_node_capacity_changed(m, node);
        job_held_add(m, job, delta);
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

static int job_id_cmp(const void *a, const void *b) {
        const Job *x = *(Job *const *) a, *y = *(Job *const *) b;
        return x->id < y->id ? -1 : x->id > y->id;
}

Job **model_node_jobs(const Node *node, int *ret_n) {
        Job **jobs = xcalloc((size_t) node->n_jobs + 1, sizeof(Job *));
        for (int j = 0; j < node->n_jobs; j++)
                jobs[j] = node->jobs[j].job;
        qsort(jobs, (size_t) node->n_jobs, sizeof(Job *), job_id_cmp);
        *ret_n = node->n_jobs;
        return jobs;
}

static void node_usage_reset(Model *m, Node *node) {
        model_node_capacity_changed(m, node);
        for (int k = 0; k < node->n_jobs; k++)
                job_held_add(m, node->jobs[k].job, -node->jobs[k].alive_ranks);
        node->used_cpus = node->alive_ranks = 0;
        node->used_memory_mb = 0;
        node->n_jobs = 0;
        memset(node->device_used, 0, (size_t) node->n_devices * sizeof(int));
}

void model_node_recount(Model *m, Node *node) {
        /* Its job list names every job with an alive rank here: only those count. */
        int n_jobs;
        Job **jobs = model_node_jobs(node, &n_jobs);
        node_usage_reset(m, node);
        for (int j = 0; j < n_jobs; j++)
                for (int k = 0; k < jobs[j]->n_ranks; k++) {
                        Rank *r = &jobs[j]->ranks[k];
                        if (r->alive && r->node_name && strcmp(r->node_name, node->name) == 0)
                                model_node_hold(m, node, jobs[j], r, 1);
                }
        free(jobs);
}

void model_nodes_recount_all(Model *m) {
        for (int i = 0; i < m->n_nodes; i++)
                node_usage_reset(m, m->nodes[i]);
        for (int j = 0; j < m->n_active; j++) {
                Job *job = m->active[j];
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *r = &job->ranks[k];
                        Node *node = r->alive ? model_rank_node(m, r) : NULL;
                        if (node)
                                model_node_hold(m, node, job, r, 1);
                }
        }
}

/* What the scheduler needs of an inventory (NULL: none): CPUs, memory and devices. */
static void node_capacity_set(Node *node, json_t *inventory) {
        for (int i = 0; i < node->n_devices; i++)
                free(node->devices[i].kind);
        free(node->devices);
        node->cpus = (int) json_int(inventory, "cpus", 0);
        node->memory_mb = json_int(inventory, "memory_mb", 0);
        json_t *acc = json_object_get(inventory, "accelerators");
        node->n_devices = (int) json_array_size(acc);
        node->devices = xcalloc((size_t) node->n_devices + 1, sizeof(NodeDevice));
        node->sched_names_gen = 0;
        free(node->device_used);
        node->device_used = xcalloc((size_t) node->n_devices + 1, sizeof(int));
        for (int i = 0; i < node->n_devices; i++) {
                json_t *a = json_array_get(acc, (size_t) i);
                const char *kind = json_str(a, "kind");
                node->devices[i] =
                        (NodeDevice){.kind = xstrdup(kind ? kind : "unknown"),
                                     .numa_node = (int) json_int(a, "numa_node", -1),
                                     .pcie_switch = (int) json_int(a, "pcie_switch", -1)};
        }
}

void model_node_set_inventory(Node *node, json_t *inventory) {
        free(node->inventory);
        node->inventory = inventory ? json_dumps(inventory, JSON_COMPACT) : xstrdup("{}");
        node_capacity_set(node, inventory);
}

void model_node_parse_inventory(Node *node) {
        json_error_t jerr;
        json_t *inventory = node->inventory ? json_loads(node->inventory, 0, &jerr) : NULL;
        if (!inventory) {
                free(node->inventory);
                node->inventory = xstrdup("{}");
        }
        node_capacity_set(node, inventory);
        json_decref(inventory);
}

void model_node_free_capacity(const Node *node, int *ret_cpus, int *ret_free_devices,
                              int *ret_ranks) {
        int used = 0;
        for (int d = 0; d < node->n_devices; d++)
                if (node->device_used[d])
                        used++;
        *ret_cpus = node->cpus - node->used_cpus;
        *ret_free_devices = node->n_devices - used;
        *ret_ranks = node->alive_ranks;
}

void rank_clear(Rank *rank) {
        free(rank->node_name);
        free(rank->devices);
        rank->node_name = NULL;
        rank->devices = NULL;
}

void job_gang_clear(JobGang *g) {
        free(g->local_world);
        free(g->hosts);
        free(g->first_host);
        free(g->coordinator);
        *g = (JobGang){0};
}

Job *job_free(Job *job) {
        if (!job)
                return NULL;
        spec_free(job->spec);
        free(job->reason);
        free(job->idempotency_key);
        free(job->ckpt_path);
        free(job->avoid_node);
        for (int i = 0; i < job->n_attempts; i++) {
                free(job->attempts[i].resume_path);
                free(job->attempts[i].blamed_node);
                free(job->attempts[i].detail);
        }
        free(job->attempts);
        for (int i = 0; i < job->n_ranks; i++)
                rank_clear(&job->ranks[i]);
        free(job->ranks);
        free(job->held_node);
        free(job->held_devices);
        job_gang_clear(&job->gang);
        free(job);
        return NULL;
}

void model_job_ranks_new(Job *job, int n) {
        for (int i = 0; i < job->n_ranks; i++)
                rank_clear(&job->ranks[i]);
        free(job->ranks);
        free(job->held_node);
        free(job->held_devices);
        size_t n_devices = (size_t) n * (size_t) job->spec->accelerators_per_rank;
        job->n_ranks = n;
        job->ranks = xcalloc((size_t) n + 1, sizeof(Rank));
        job->held_node = xmalloc(((size_t) n + 1) * sizeof(int));
        job->held_devices = xmalloc((n_devices + 1) * sizeof(int));
        for (int i = 0; i < n; i++)
                job->held_node[i] = -1;
        for (size_t i = 0; i < n_devices; i++)
                job->held_devices[i] = -1;
}

void model_rank_held_set(const Model *m, Job *job, const Rank *r) {
        int k = (int) (r - job->ranks), apr = job->spec->accelerators_per_rank;
        bool held = r->alive && model_rank_node(m, r);
        job->held_node[k] = held ? r->node_index : -1;
        for (int d = 0; d < apr; d++)
                job->held_devices[k * apr + d] = held && d < r->n_devices ? r->devices[d] : -1;
}

Node *node_free(Node *node) {
        if (!node)
                return NULL;
        free(node->name);
        free(node->hostname);
        free(node->address);
        free(node->boot_id);
        free(node->agent_id);
        free(node->reason);
        json_decref(node->labels);
        free(node->inventory);
        for (int i = 0; i < node->n_devices; i++)
                free(node->devices[i].kind);
        free(node->devices);
        free(node->device_used);
        free(node->jobs);
        free(node);
        return NULL;
}

void model_job_ran_fine(Job *job, const char *name) {
        uint64_t h = strmap_hash(name);
        int n = job->n_fine_nodes, w = 0;
        for (int i = 0; i < n; i++)
                if (job->fine_nodes[i] != h)
                        job->fine_nodes[w++] = job->fine_nodes[i];
        if (w == JOB_FINE_NODES) {
                memmove(job->fine_nodes, job->fine_nodes + 1, (JOB_FINE_NODES - 1) * sizeof(h));
                w--;
        }
        job->fine_nodes[w++] = h;
        job->n_fine_nodes = w;
}

bool model_job_fine_elsewhere(const Job *job, const char *name) {
        uint64_t h = strmap_hash(name);
        for (int i = 0; i < job->n_fine_nodes; i++)
                if (job->fine_nodes[i] != h)
                        return true;
        return false;
}

bool model_interruption(EndReason r) {
        FailureClass c = health_classify(r);
        return c == FAILURE_JOB || c == FAILURE_NODE;
}

void model_rate_count(FleetRate *rate, const Job *job, const Attempt *a, int sign) {
        int64_t ranks = job->spec->ranks;
        if (a->end_reason == _END_REASON_INVALID) {
                rate->live_ranks += sign * ranks;
                rate->live_start_ranks_ms += sign * a->started_ms * ranks;
                return;
        }
        if (a->ended_ms > a->started_ms) /* as accounting.c's job_rate counts it */
                rate->ended_rank_ms += sign * (a->ended_ms - a->started_ms) * ranks;
        if (model_interruption(a->end_reason))
                rate->interruptions += sign;
}
