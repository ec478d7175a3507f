/* SPDX-License-Identifier: MIT */
/*
 * Mapping between the controller's model and the store; see persist.h. Liveness (last
 * sync, progress) is not stored; after a restart every node gets a fresh lease to
 * reconnect in, so running ranks are not disturbed, and goes on from its stored
 * desired-state version. Loaded states are set
 * through transition.c's restore functions, like every other state.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "persist.h"
#include "accounting.h"
#include "log.h"
#include "util.h"

static int64_t opt_ms(int64_t v) {
        return v > 0 ? v : STORE_NONE;
}

static int64_t from_opt(int64_t v, int64_t none) {
        return v == STORE_NONE ? none : v;
}

static char *devices_json(const Rank *r) {
        json_t *a = json_array();
        for (int i = 0; i < r->n_devices; i++)
                json_array_append_new(a, json_integer(r->devices[i]));
        char *s = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        return s;
}

static int persist_job(Store *store, Model *m, Job *job) {
        _cleanup_free_ char *spec = job->stored ? NULL : spec_to_text(job->spec);
        StoreJob sj = {
                .id = job->id,
                .name = job->spec->name,
                .project = job->spec->project,
                .user = job->spec->user,
                .priority = job->spec->priority,
                .spec = spec,
                .state = job_state_to_string(job->state),
                .attempt = job->attempt,
                .restarts = job->restarts,
                .reason = job->reason,
                .exit_code = job->exit_code >= 0 ? job->exit_code : STORE_NONE,
                .created_ms = job->created_ms,
                .started_ms = opt_ms(job->started_ms),
                .finished_ms = opt_ms(job->finished_ms),
                .idempotency_key = job->idempotency_key,
                .ckpt_step = job->ckpt_step >= 0 ? job->ckpt_step : STORE_NONE,
                .ckpt_path = job->ckpt_path,
                .avoid_node = job->avoid_node,
                .tier = job->tier,
                .queued_ms = opt_ms(job->queued_ms),
                .quick_failures = job->quick_failures,
                .best_step = job->best_step >= 0 ? job->best_step : STORE_NONE,
        };
        int r = store_job_put(store, &sj);
        job->stored |= r >= 0;
        for (int i = 0; r >= 0 && i < job->n_attempts; i++) {
                Attempt *a = &job->attempts[i];
                if (!a->dirty)
                        continue;
                StoreAttempt sa = {.job = job->id,
                                   .attempt = a->attempt,
                                   .resume_step = a->resume_step,
                                   .resume_path = a->resume_path,
                                   .started_ms = a->started_ms,
                                   .ended_ms = opt_ms(a->ended_ms),
                                   .end_reason = end_reason_to_string(a->end_reason),
                                   .blamed_node = a->blamed_node,
                                   .detail = a->detail,
                                   .running_ms = opt_ms(a->running_ms),
                                   .first_progress_ms = opt_ms(a->first_progress_ms),
                                   .last_progress_ms = opt_ms(a->last_progress_ms),
                                   .failed_ms = opt_ms(a->failed_ms),
                                   .first_ckpt_ms = opt_ms(a->first_ckpt_ms),
                                   .last_ckpt_ms = opt_ms(a->last_ckpt_ms),
                                   .n_ckpts = a->n_ckpts,
                                   .ckpt_stall_ms = a->ckpt_stall_ms,
                                   .n_ckpt_stalls = a->n_ckpt_stalls};
                r = store_attempt_put(store, &sa);
                a->dirty = false;
        }
        for (int i = 0; r >= 0 && i < job->n_ranks; i++) {
                Rank *rk = &job->ranks[i];
                if (!rk->dirty)
                        continue;
                char *devices = devices_json(rk);
                StoreRank sr = {.job = job->id,
                                .attempt = rk->attempt,
                                .rank = rk->rank,
                                .node = rk->node_name,
                                .devices = devices,
                                .state = rank_state_to_string(rk->state),
                                .alive = rk->alive,
                                .pid = rk->pid > 0 ? rk->pid : STORE_NONE,
                                .exit_code = rk->exit_code >= 0 ? rk->exit_code : STORE_NONE,
                                .signal = rk->signal > 0 ? rk->signal : STORE_NONE,
                                .step = rk->step >= 0 ? rk->step : STORE_NONE,
                                .local_rank = rk->local_rank,
                                .node_rank = rk->node_rank};
                r = store_rank_put(store, &sr);
                free(devices);
                rk->dirty = false;
        }
        /* An ended job's figures, written with its final state and added to the sums
         * kept per project: they count whether the job is in memory or not. */
        if (r >= 0 && job_state_is_terminal(job->state) && !job->goodput_saved) {
                StoreGoodput g;
                ctl_goodput_final(job, &g);
                if ((r = store_goodput_put(store, &g)) >= 0) {
                        job->goodput_saved = true;
                        ctl_goodput_stored_add(m, &g);
                }
        }
        job->dirty = false;
        return r;
}

static int persist_node(Store *store, Node *node) {
        char *labels = json_dumps(node->labels, JSON_COMPACT);
        json_t *blames = json_array();
        for (int i = 0; i < node->n_blame; i++)
                json_array_append_new(blames, json_integer(node->blame_times[i]));
        char *blame_text = json_dumps(blames, JSON_COMPACT);
        json_decref(blames);
        StoreNode sn = {.name = node->name,
                        .hostname = node->hostname,
                        .address = node->address,
                        .boot_id = node->boot_id,
                        .agent_id = node->agent_id,
                        .labels = labels,
                        .inventory = node->inventory,
                        .version = (int64_t) node->version,
                        .state = node_state_to_string(node->state),
                        .reason = node->reason,
                        .last_seen_ms = opt_ms(node->last_seen_ms),
                        .blame_times = blame_text};
        int r = store_node_put(store, &sn);
        free(labels);
        free(blame_text);
        node->dirty = false;
        return r;
}

int persist_job_before_attempt(Turn *t, Job *job) {
        if (!job->dirty)
                return 0;
        int r = persist_job(t->store, t->model, job);
        job->dirty = true; /* still in the turn's list */
        return r;
}

int persist_dirty(Turn *t) {
        int r = 0;
        for (int i = 0; r >= 0 && i < t->n_dirty_jobs; i++)
                r = persist_job(t->store, t->model, t->dirty_jobs[i]);
        /* A new version of a node whose row is not written anyway: that column alone. */
        for (int i = 0; r >= 0 && i < t->n_changed_nodes; i++) {
                Node *node = t->changed_nodes[i];
                if (!node->dirty)
                        r = store_node_version_put(t->store, node->name, (int64_t) node->version);
        }
        for (int i = 0; r >= 0 && i < t->n_dirty_nodes; i++)
                r = persist_node(t->store, t->dirty_nodes[i]);
        /* On failure the rest stay marked: the controller stops, nothing more is written. */
        t->n_dirty_jobs = t->n_dirty_nodes = 0;
        return r;
}

/* Parses a stored spec; NULL with a message in err when it does not parse. */
static JobSpec *stored_spec_parse(const char *text, JsonError *err) {
        json_error_t jerr;
        json_t *spec_json = json_loads(text, 0, &jerr);
        JobSpec *spec = NULL;
        if (!spec_json) {
                snprintf(err->message, sizeof(err->message), "%s", jerr.text);
                return NULL;
        }
        if (spec_parse(spec_json, &spec, err) < 0)
                spec = NULL;
        json_decref(spec_json);
        return spec;
}

/* A job as stored, without its spec. */
static Job *job_from_row(const StoreJob *sj) {
        Job *job = xcalloc(1, sizeof(Job));
        job->id = sj->id;
        tr_job_restore(job, sj->state);
        /* Every ended job's figures are stored: persist_goodput_backfill sees to those of
         * older databases before anything reads them. */
        job->stored = true;
        job->goodput_saved = job_state_is_terminal(job->state);
        job->attempt = sj->attempt;
        job->restarts = sj->restarts;
        job->reason = xstrdup(sj->reason ? sj->reason : "");
        job->exit_code = (int) from_opt(sj->exit_code, -1);
        job->created_ms = sj->created_ms;
        job->started_ms = from_opt(sj->started_ms, 0);
        job->finished_ms = from_opt(sj->finished_ms, 0);
        job->idempotency_key = sj->idempotency_key ? xstrdup(sj->idempotency_key) : NULL;
        job->ckpt_step = from_opt(sj->ckpt_step, -1);
        /* The crash-loop count survives a restart, or a restart would reset it. */
        job->quick_failures = sj->quick_failures;
        int64_t best = from_opt(sj->best_step, -1);
        job->best_step = best > job->ckpt_step ? best : job->ckpt_step;
        job->ckpt_path = sj->ckpt_path ? xstrdup(sj->ckpt_path) : NULL;
        job->avoid_node = sj->avoid_node ? xstrdup(sj->avoid_node) : NULL;
        job->wait = SCHED_WAIT_CAPACITY;
        job->tier = sj->tier;
        job->queued_ms = from_opt(sj->queued_ms, job->created_ms);
        /* A restart that was waiting out its backoff may go at once. */
        job->restart_at_ms = 0;
        return job;
}

static void log_bad_spec(int64_t id, const char *message) {
        log_error("job %lld: stored spec does not parse: %s", (long long) id, message);
}

/* One job (persist_load_job). */
static int load_job(void *ud, const StoreJob *sj) {
        Model *m = ud;
        JsonError err;
        JobSpec *spec = stored_spec_parse(sj->spec, &err);
        if (!spec) {
                log_bad_spec(sj->id, err.message);
                return -EBADMSG;
        }
        Job *job = job_from_row(sj);
        job->spec = spec;
        model_job_add(m, job);
        return 0;
}

/*
 * Parsing the stored specs was four fifths of loading many jobs (120,000 pending jobs
 * took 2 s). While the loop's thread reads the rows, workers parse the specs of those
 * already read, a batch at a time; when the rows end the loop's thread parses too. The
 * jobs join the model in store order once every spec is parsed.
 */
#define SPEC_WORKERS_MAX 3
#define SPEC_BATCH 64

typedef struct SpecBatch {
        struct SpecBatch *next;
        int n;
        Job *jobs[SPEC_BATCH];
        size_t at[SPEC_BATCH]; /* where each job's spec text starts in text */
        char *text; /* one allocation per batch: freed by its parser, not text by text */
        size_t len, cap;
} SpecBatch;

typedef struct SpecLoad {
        pthread_mutex_t lock;
        pthread_cond_t more;
        SpecBatch *head, *tail; /* read, not yet parsed */
        bool rows_done;
        bool bad; /* a spec did not parse: bad_id is the lowest such job */
        int64_t bad_id;
        char bad_message[256];
        /* The loop thread's own: the batch it fills, and every job in store order. */
        SpecBatch *filling;
        Job **jobs;
        int n_jobs, cap_jobs;
} SpecLoad;

static void spec_batch_parse(SpecLoad *sl, SpecBatch *b) {
        for (int i = 0; i < b->n; i++) {
                JsonError err;
                b->jobs[i]->spec = stored_spec_parse(b->text + b->at[i], &err);
                if (b->jobs[i]->spec)
                        continue;
                pthread_mutex_lock(&sl->lock);
                if (!sl->bad || b->jobs[i]->id < sl->bad_id) {
                        sl->bad = true;
                        sl->bad_id = b->jobs[i]->id;
                        snprintf(sl->bad_message, sizeof(sl->bad_message), "%s", err.message);
                }
                pthread_mutex_unlock(&sl->lock);
        }
        free(b->text);
        free(b);
}

static void *spec_parser(void *p) {
        SpecLoad *sl = p;
        for (;;) {
                pthread_mutex_lock(&sl->lock);
                while (!sl->head && !sl->rows_done)
                        pthread_cond_wait(&sl->more, &sl->lock);
                SpecBatch *b = sl->head;
                if (b && !(sl->head = b->next))
                        sl->tail = NULL;
                pthread_mutex_unlock(&sl->lock);
                if (!b)
                        return NULL; /* rows done and every batch taken */
                spec_batch_parse(sl, b);
        }
}

static void spec_batch_queue(SpecLoad *sl) {
        SpecBatch *b = sl->filling;
        sl->filling = NULL;
        if (!b)
                return;
        pthread_mutex_lock(&sl->lock);
        if (sl->tail)
                sl->tail->next = b;
        else
                sl->head = b;
        sl->tail = b;
        pthread_cond_signal(&sl->more);
        pthread_mutex_unlock(&sl->lock);
}

static int spec_load_row(void *ud, const StoreJob *sj) {
        SpecLoad *sl = ud;
        Job *job = job_from_row(sj);
        GROW(sl->jobs, sl->n_jobs, sl->cap_jobs);
        sl->jobs[sl->n_jobs++] = job;
        if (!sl->filling)
                sl->filling = xcalloc(1, sizeof(SpecBatch));
        SpecBatch *b = sl->filling;
        size_t len = strlen(sj->spec) + 1;
        GROW_TO(b->text, b->len + len, b->cap);
        memcpy(b->text + b->len, sj->spec, len);
        b->jobs[b->n] = job;
        b->at[b->n++] = b->len;
        b->len += len;
        if (b->n == SPEC_BATCH)
                spec_batch_queue(sl);
        return 0;
}

/* Workers beside the loop's thread: one fewer than the CPUs this process may run on. */
static int spec_workers(void) {
        cpu_set_t set;
        long cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                                 : sysconf(_SC_NPROCESSORS_ONLN);
        return cpus <= 1 ? 0 : cpus - 1 < SPEC_WORKERS_MAX ? (int) cpus - 1 : SPEC_WORKERS_MAX;
}

/* The store loads' cutoff at a start: every job that is over and holds nothing stays in the
 * store, to load later (persist_load_ended), so that a start does not grow with them. */
#define LEAVE_EVERY_ENDED_JOB INT64_MAX

/* The jobs to load, in the model; -EBADMSG (logged) when a stored spec does not parse. */
static int load_jobs(Store *store, Model *m) {
        int want = spec_workers();
        if (want == 0) /* one CPU: parse each row as it comes, nothing to queue */
                return store_jobs_load(store, LEAVE_EVERY_ENDED_JOB, load_job, m);
        SpecLoad sl = {.lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER};
        pthread_t workers[SPEC_WORKERS_MAX];
        int n_workers = 0;
        while (n_workers < want && pthread_create(&workers[n_workers], NULL, spec_parser, &sl) == 0)
                n_workers++;
        int r = store_jobs_load(store, LEAVE_EVERY_ENDED_JOB, spec_load_row, &sl);
        spec_batch_queue(&sl);
        pthread_mutex_lock(&sl.lock);
        sl.rows_done = true;
        pthread_cond_broadcast(&sl.more);
        pthread_mutex_unlock(&sl.lock);
        spec_parser(&sl);
        for (int i = 0; i < n_workers; i++)
                pthread_join(workers[i], NULL);
        if (r >= 0 && sl.bad) {
                log_bad_spec(sl.bad_id, sl.bad_message);
                r = -EBADMSG;
        }
        for (int i = 0; i < sl.n_jobs; i++) {
                if (r >= 0)
                        model_job_add(m, sl.jobs[i]);
                else
                        job_free(sl.jobs[i]);
        }
        free(sl.jobs);
        pthread_cond_destroy(&sl.more);
        pthread_mutex_destroy(&sl.lock);
        return r;
}

static int load_attempt(void *ud, const StoreAttempt *sa) {
        Model *m = ud;
        Job *job = model_job_find(m, sa->job);
        if (!job)
                return 0;
        job->attempts = xrealloc(job->attempts, (size_t) (job->n_attempts + 1) * sizeof(Attempt));
        job->attempts[job->n_attempts++] = (Attempt){
                .attempt = sa->attempt,
                .resume_step = sa->resume_step,
                .resume_path = sa->resume_path ? xstrdup(sa->resume_path) : NULL,
                .started_ms = sa->started_ms,
                .ended_ms = from_opt(sa->ended_ms, 0),
                .blamed_node = sa->blamed_node ? xstrdup(sa->blamed_node) : NULL,
                .detail = sa->detail ? xstrdup(sa->detail) : NULL,
                .running_ms = from_opt(sa->running_ms, 0),
                .first_progress_ms = from_opt(sa->first_progress_ms, 0),
                .last_progress_ms = from_opt(sa->last_progress_ms, 0),
                .failed_ms = from_opt(sa->failed_ms, 0),
                .first_ckpt_ms = from_opt(sa->first_ckpt_ms, 0),
                .last_ckpt_ms = from_opt(sa->last_ckpt_ms, 0),
                .n_ckpts = sa->n_ckpts,
                .ckpt_stall_ms = sa->ckpt_stall_ms,
                .n_ckpt_stalls = sa->n_ckpt_stalls,
        };
        tr_attempt_restore(&job->attempts[job->n_attempts - 1], sa->end_reason);
        return 0;
}

static int load_rank(void *ud, const StoreRank *sr) {
        Model *m = ud;
        Job *job = model_job_find(m, sr->job);
        if (!job || sr->rank < 0 || sr->rank >= job->spec->ranks)
                return 0;
        if (!job->ranks)
                model_job_ranks_new(job, job->spec->ranks);
        Rank *r = &job->ranks[sr->rank];
        rank_clear(r);
        json_error_t jerr;
        json_t *devs = json_loads(sr->devices ? sr->devices : "[]", 0, &jerr);
        Node *node = sr->node ? model_node_find(m, sr->node) : NULL;
        *r = (Rank){.rank = sr->rank,
                    .attempt = sr->attempt,
                    .node_name = xstrdup(sr->node),
                    .node_index = node ? node->index : -1,
                    .n_devices = (int) json_array_size(devs),
                    .pid = (int) from_opt(sr->pid, 0),
                    .exit_code = (int) from_opt(sr->exit_code, -1),
                    .signal = (int) from_opt(sr->signal, 0),
                    .step = from_opt(sr->step, -1),
                    .local_rank = sr->local_rank,
                    .node_rank = sr->node_rank};
        r->devices = xcalloc((size_t) r->n_devices + 1, sizeof(int));
        for (int i = 0; i < r->n_devices; i++)
                r->devices[i] = (int) json_integer_value(json_array_get(devs, (size_t) i));
        json_decref(devs);
        tr_rank_restore(r, sr->state, sr->alive);
        model_rank_held_set(m, job, r);
        if (r->alive)
                model_active_add(m, job);
        return 0;
}

static int load_node(void *ud, const StoreNode *sn) {
        Model *m = ud;
        json_error_t jerr;
        Node *node = xcalloc(1, sizeof(Node));
        node->name = xstrdup(sn->name);
        node->hostname = sn->hostname ? xstrdup(sn->hostname) : NULL;
        node->address = sn->address ? xstrdup(sn->address) : NULL;
        node->boot_id = sn->boot_id ? xstrdup(sn->boot_id) : NULL;
        node->agent_id = sn->agent_id ? xstrdup(sn->agent_id) : NULL;
        node->labels = json_loads(sn->labels, 0, &jerr);
        if (!json_is_object(node->labels)) {
                json_decref(node->labels);
                node->labels = json_object();
        }
        node->inventory = xstrdup(sn->inventory ? sn->inventory : "{}"); /* parsed later */
        tr_node_restore(node, sn->state);
        node->reason = xstrdup(sn->reason ? sn->reason : "");
        node->last_seen_ms = from_opt(sn->last_seen_ms, 0);
        json_t *blames = json_loads(sn->blame_times, 0, &jerr);
        for (size_t i = 0; i < json_array_size(blames) && node->n_blame < NODE_BLAME_HISTORY; i++)
                node->blame_times[node->n_blame++] = json_integer_value(json_array_get(blames, i));
        json_decref(blames);
        /* A fresh lease to reconnect in. The version goes on from the stored one, which
         * is at least any an agent saw (answers follow commits), so an agent that applied
         * it has this very set and gets the short answer; an older database's restart
         * above any version the agents saw. */
        node->version = sn->version > 0 ? (uint64_t) sn->version : (uint64_t) util_wall_ms() * 1000;
        model_node_add(m, node);
        if (node->state != NODE_DOWN)
                model_node_touch(m, node, util_now_ms());
        return 0;
}

typedef struct BackfillCtx {
        Store *store;
        Model *m;
        int n;
} BackfillCtx;

static int backfill_job(void *userdata, int64_t id) {
        BackfillCtx *c = userdata;
        Job *borrowed = NULL;
        Job *job = model_job_find(c->m, id);
        if (!job)
                job = borrowed = persist_load_job(c->store, id);
        if (!job)
                return -ENOENT;
        StoreGoodput g;
        ctl_goodput_final(job, &g);
        int r = store_goodput_put(c->store, &g);
        job_free(borrowed);
        c->n++;
        return r;
}

/* Figures for the ended jobs of a database older than migration 8: once, at the first
 * start after the upgrade, in one transaction. */
static int persist_goodput_backfill(Store *store, Model *m) {
        BackfillCtx c = {.store = store, .m = m};
        int r = store_begin(store);
        if (r >= 0)
                r = store_goodput_missing(store, backfill_job, &c);
        if (r >= 0)
                r = store_commit(store);
        if (r < 0) {
                log_error("storing the goodput of ended jobs: %s", store_last_error(store));
                store_rollback(store);
        } else if (c.n > 0)
                log_info("stored the goodput figures of %d ended jobs", c.n);
        return r;
}

/*
 * Parsing every node's inventory for what the scheduler needs was a third of a
 * restart's load at 10,000 nodes: a thread does it while the jobs load, which touch
 * neither those fields nor the node list.
 */
typedef struct InventoryParse {
        Node **nodes;
        int n_nodes;
        pthread_t thread;
        bool threaded;
} InventoryParse;

static void *parse_inventories(void *p) {
        InventoryParse *ip = p;
        for (int i = 0; i < ip->n_nodes; i++)
                model_node_parse_inventory(ip->nodes[i]);
        return NULL;
}

static void inventories_parse_start(InventoryParse *ip, Model *m) {
        *ip = (InventoryParse){.nodes = m->nodes, .n_nodes = m->n_nodes};
        ip->threaded = pthread_create(&ip->thread, NULL, parse_inventories, ip) == 0;
        if (!ip->threaded)
                parse_inventories(ip);
}

static void inventories_parse_finish(InventoryParse *ip) {
        if (ip->threaded)
                pthread_join(ip->thread, NULL);
}

/* Everything but the nodes: what may load while their inventories are parsed. */
static int load_jobs_and_figures(Store *store, Model *m, int64_t *next_id) {
        int r;
        if ((r = load_jobs(store, m)) < 0 ||
            (r = store_attempts_load(store, LEAVE_EVERY_ENDED_JOB, load_attempt, m)) < 0 ||
            (r = store_ranks_load(store, LEAVE_EVERY_ENDED_JOB, load_rank, m)) < 0 ||
            (r = store_job_next_id(store, next_id)) < 0 ||
            (r = persist_goodput_backfill(store, m)) < 0 ||
            (r = ctl_goodput_stored_load(store, m)) < 0)
                return r;
        return 0;
}

int persist_load(Store *store, Model *m) {
        int64_t next_id = 1;
        int r = store_nodes_load(store, load_node, m);
        if (r < 0)
                return r;
        InventoryParse parse;
        inventories_parse_start(&parse, m);
        r = load_jobs_and_figures(store, m, &next_id);
        inventories_parse_finish(&parse);
        if (r < 0)
                return r;
        /* Ids are never reused, also those of jobs that stayed in the store. */
        if (next_id > m->next_job_id)
                m->next_job_id = next_id;
        model_nodes_recount_all(m);
        /* Stop and start confirmations count from the node's version now. */
        for (int j = 0; j < m->n_active; j++) {
                Job *job = m->active[j];
                for (int k = 0; k < job->n_ranks; k++) {
                        Rank *rk = &job->ranks[k];
                        Node *node = model_rank_node(m, rk);
                        uint64_t v = node ? node->version : 1;
                        /* The start timeout of a rank still starting counts from now. */
                        rk->assigned_mono = util_now_ms();
                        if (rank_desired(rk))
                                rk->assign_version = v;
                        else
                                rk->stop_version = v;
                }
        }
        return 0;
}

Job *persist_load_job(Store *store, int64_t id) {
        Model tmp;
        model_init(&tmp);
        Job *job = NULL;
        if (store_jobs_read(store, id, id, load_job, load_attempt, load_rank, &tmp) >= 0 &&
            tmp.n_jobs == 1) {
                job = tmp.jobs[0];
                tmp.n_jobs = 0; /* the caller's now */
        }
        model_clear(&tmp);
        if (job)
                model_job_unlisted(job); /* in none of the controller's lists */
        return job;
}

typedef struct EndedLoad {
        Model read; /* the jobs taken: only they get attempts and ranks */
        const Model *m;
        int64_t since_ms;
} EndedLoad;

static int ended_job(void *ud, const StoreJob *sj) {
        EndedLoad *l = ud;
        if (sj->finished_ms < l->since_ms || model_job_find(l->m, sj->id))
                return 0;
        Job *job = job_from_row(sj);
        JsonError err;
        if (!job_state_is_terminal(job->state)) {
                job_free(job); /* none: every job not over is in memory since the start */
                return 0;
        }
        if (!(job->spec = stored_spec_parse(sj->spec, &err))) {
                /* It stays in the store, found no more than a retired job with it. */
                log_bad_spec(sj->id, err.message);
                job_free(job);
                return 0;
        }
        model_job_add(&l->read, job);
        return 0;
}

static int ended_attempt(void *ud, const StoreAttempt *sa) {
        return load_attempt(&((EndedLoad *) ud)->read, sa);
}

static int ended_rank(void *ud, const StoreRank *sr) {
        return load_rank(&((EndedLoad *) ud)->read, sr);
}

int persist_load_ended(Store *store, Model *m, int64_t first_id, int64_t last_id,
                       int64_t since_ms) {
        EndedLoad l = {.m = m, .since_ms = since_ms};
        model_init(&l.read);
        int r = store_jobs_read(store, first_id, last_id, ended_job, ended_attempt, ended_rank, &l);
        if (r >= 0) {
                for (int i = 0; i < l.read.n_jobs; i++) {
                        Job *job = l.read.jobs[i];
                        model_job_unlisted(job); /* over, holding nothing */
                        for (int k = 0; k < job->n_ranks; k++) {
                                Rank *rk = &job->ranks[k];
                                Node *node =
                                        rk->node_name ? model_node_find(m, rk->node_name) : NULL;
                                rk->node_index = node ? node->index : -1;
                                model_rank_held_set(m, job, rk);
                        }
                }
                model_jobs_merge(m, l.read.jobs, l.read.n_jobs);
                r = l.read.n_jobs;
                l.read.n_jobs = 0; /* m's now */
        }
        model_clear(&l.read);
        return r;
}
