/* SPDX-License-Identifier: MIT */
/*
 * The controller's turn (DESIGN.md §2a): what a loop turn does after the requests it
 * served, in order: declare silent nodes lost, run the scheduler and apply its
 * decisions, prune the active list, then write what the turn's transitions marked and
 * commit, one fsync for the whole turn. A failed durable write fails the turn: it is
 * rolled back and the controller stops accepting requests (ctl_failure), so that
 * nothing is acknowledged that is not on disk; main() then exits for systemd to
 * restart it from the database.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "controller-internal.h"
#include "jobs.h"
#include "log.h"
#include "nodes.h"
#include "persist.h"
#include "util.h"

/*
 * Under a burst of submits every loop turn would run a pass over all pending jobs; at
 * most one pass per this interval keeps the cost per submit constant. On a large fleet,
 * where a pass over the nodes and the queue takes milliseconds and every rank exit asks
 * for one, passes are also spaced by SCHED_PASS_SPACING times the last one's duration
 * (up to SCHED_MAX_INTERVAL_MS), counted from a pass's start: scheduling takes at most
 * about an eighth of the loop, and one pass places what many exits freed. Most of a
 * pass at 10,000 nodes is building its input, whatever it places, so passes half as
 * often (8 times, not 4) placed 10-15 % more ranks with less CPU. 16 times placed more
 * again but made the passes, and the turns that carry them, longer: the rank-exit p99
 * was worse in three runs of four (docs/PERFORMANCE.md, 2026-11-25).
 */
#define SCHED_MIN_INTERVAL_MS 5
#define SCHED_MAX_INTERVAL_MS 250
#define SCHED_PASS_SPACING 8
/* How often an idle controller checks that its database file is still in place. */
#define CTL_FILE_CHECK_MS 1000
#define CTL_RETIRE_PERIOD_MS 1000
/* Jobs over within the retention time loaded after a start: a batch of about 3 ms at
 * most every period, a tenth of the loop, and none while the restart's wave is answered. */
#define CTL_ENDED_BATCH 128
#define CTL_ENDED_SPAN 512 /* ids from a batch's first to its last */
#define CTL_ENDED_PERIOD_MS 25

int ctl_new(const CtlConfig *config, Controller **ret) {
        Store *store = NULL;
        int r = store_open(config->db_path, &store);
        return r < 0 ? r : ctl_new_on(config, store, ret);
}

int ctl_new_on(const CtlConfig *config, Store *store, Controller **ret) {
        Controller *ctl = xcalloc(1, sizeof(Controller));
        ctl->cfg = *config;
        model_init(&ctl->model);
        schedule_init(&ctl->sched);
        histogram_init_latency(&ctl->recovery);
        histogram_init_latency(&ctl->sched_pass);
        histogram_init_latency(&ctl->db_commit);
        histogram_init_latency(&ctl->loop_turn);
        ctl->tokens = token_cache_new();
        ctl->store = store;
        /* Serving first: the jobs that ended and hold nothing come after (ctl_end_turn). */
        int r = persist_load(ctl->store, &ctl->model);
        if (r < 0) {
                ctl_free(ctl);
                return r;
        }
        turn_init(&ctl->turn, ctl->store, &ctl->model);
        ctl->turn.strict = config->strict_transitions;
        ctl->turn.effects = TURN_SCHEDULE | TURN_SCHEDULE_FULL | TURN_SWEEP;
        ctl->sched.next_restart_ms = util_now_ms();
        ctl->sched_interval_ms = SCHED_MIN_INTERVAL_MS;
        ctl->ended_pending = true;
        *ret = ctl;
        return 0;
}

Controller *ctl_free(Controller *ctl) {
        if (!ctl)
                return NULL;
        jobs_borrowed_release(ctl);
        free(ctl->borrowed);
        free(ctl->ended_ids);
        token_cache_free(ctl->tokens);
        model_clear(&ctl->model);
        turn_clear(&ctl->turn);
        schedule_clear(&ctl->sched);
        failrules_clear(&ctl->failure_rules);
        store_close(ctl->store);
        free(ctl);
        return NULL;
}

/* Loads the failure rules at path into *rules. 0, or -errno with *ret_error. */
static int failure_rules_load(const char *path, FailRules *rules, char **ret_error) {
        JsonError err = {0};
        int r = failrules_load(path, rules, &err);
        if (r == -EINVAL)
                *ret_error = xasprintf("%s: %s%s%s", path, err.field, err.field[0] ? ": " : "",
                                       err.message);
        else if (r < 0)
                *ret_error = xasprintf("%s: %s", path, strerror(-r));
        return r;
}

int ctl_failure_rules_reload(Controller *ctl, char **ret_error) {
        if (!ctl->cfg.failure_rules_path)
                return 0;
        int r = failure_rules_load(ctl->cfg.failure_rules_path, &ctl->failure_rules, ret_error);
        ctl->rules_epoch += r >= 0; /* reports repeated since are read against the new */
        return r;
}

int ctl_files_check(const CtlConfig *cfg, char **ret_error) {
        int r = schedule_quota_check(cfg->quota_path, ret_error);
        if (r < 0 || !cfg->failure_rules_path)
                return r;
        FailRules rules = {0};
        r = failure_rules_load(cfg->failure_rules_path, &rules, ret_error);
        failrules_clear(&rules);
        return r;
}

const CtlConfig *ctl_config(Controller *ctl) {
        return &ctl->cfg;
}

const char *ctl_failure(Controller *ctl) {
        if (ctl->failure[0])
                return ctl->failure;
        return ctl->turn.failed ? ctl->turn.failure : NULL;
}

void ctl_turn_observe(Controller *ctl, double seconds) {
        histogram_observe(&ctl->loop_turn, seconds);
}

void ctl_serving_starts(Controller *ctl) {
        int64_t now = util_now_ms();
        for (int i = 0; i < ctl->model.n_nodes; i++) {
                Node *node = ctl->model.nodes[i];
                if (!node->in_lease)
                        continue;
                model_node_touch(&ctl->model, node, now);
                node->awaited = !node->connected;
                ctl->reconnecting += node->awaited;
        }
        ctl->reconnect_until_ms = now + ctl->cfg.lease_ms / 2;
}

/* When the next batch of jobs over may load: half a lease after serving starts, when
 * the reconnecting fleet has been answered, and a period after the last batch. */
static int64_t ended_due_ms(const Controller *ctl) {
        return ctl->reconnect_until_ms > ctl->next_ended_ms ? ctl->reconnect_until_ms
                                                            : ctl->next_ended_ms;
}

int64_t ctl_next_deadline_ms(Controller *ctl) {
        int64_t now = util_now_ms();
        int64_t next = now + 1000;
        if (ctl_failure(ctl))
                return next; /* stopping: nothing is due */
        if (ctl->ended_pending && ended_due_ms(ctl) < next)
                next = ended_due_ms(ctl);
        Node *oldest = model_lease_oldest(&ctl->model);
        if (oldest) {
                int64_t t = oldest->last_sync_mono + ctl->cfg.lease_ms + ctl->cfg.grace_ms + 1;
                if (t < next)
                        next = t;
        }
        if (ctl->next_file_check_ms < next)
                next = ctl->next_file_check_ms;
        /* A pass: when a restart's backoff ends, or the next spaced pass of a turn that
         * asked for one; after a restart, not before the fleet is back (ctl_schedule). */
        int64_t pass = ctl->sched.next_restart_ms;
        if (ctl->turn.effects & TURN_SCHEDULE &&
            ctl->sched.last_pass_ms + ctl->sched_interval_ms < pass)
                pass = ctl->sched.last_pass_ms + ctl->sched_interval_ms;
        if (ctl->reconnecting > 0 && pass < ctl->reconnect_until_ms)
                pass = ctl->reconnect_until_ms;
        return pass < next ? pass : next;
}

/*
 * Fails the turn when the database file was deleted or replaced: SQLite would go on
 * committing into a file that the next start never sees, so nothing more may be
 * acknowledged. False when it did.
 */
static bool ctl_database_file_ok(Controller *ctl) {
        int r = store_check_file(ctl->store);
        if (r == 0)
                return true;
        if (r == -ENOENT)
                turn_fail(&ctl->turn, r, "the database file %s was deleted or moved away",
                          ctl->cfg.db_path);
        else if (r == -ESTALE)
                turn_fail(&ctl->turn, r, "the database file %s was replaced by another file",
                          ctl->cfg.db_path);
        else
                turn_fail(&ctl->turn, r, "cannot check the database file %s: %s", ctl->cfg.db_path,
                          strerror(-r));
        return false;
}

void ctl_tick(Controller *ctl) {
        if (ctl_failure(ctl))
                return; /* stopping: nothing more is written */
        int64_t now = util_now_ms();
        /* Writes check before they commit; this is for /healthz while nothing is written. */
        if (now >= ctl->next_file_check_ms) {
                ctl->next_file_check_ms = now + CTL_FILE_CHECK_MS;
                if (!ctl_database_file_ok(ctl))
                        return;
        }
        nodes_tick(ctl, now);
        jobs_tick(ctl, now);
        if (ctl->sched.next_restart_ms <= now)
                ctl->turn.effects |= TURN_SCHEDULE | TURN_SCHEDULE_FULL;
}

bool ctl_turn_has_writes(Controller *ctl) {
        /* A turn that failed has writes too, until it ends: its requests must get 503. */
        return ctl->turn.tx_open || (ctl->turn.failed && !ctl->failure[0]);
}

static double seconds_since(const struct timespec *a) {
        struct timespec b;
        clock_gettime(CLOCK_MONOTONIC, &b);
        return (double) (b.tv_sec - a->tv_sec) + (double) (b.tv_nsec - a->tv_nsec) / 1e9;
}

/* A scheduling pass, if one is due, and its decisions applied. */
static void ctl_schedule(Controller *ctl) {
        Turn *t = &ctl->turn;
        int64_t now = util_now_ms();
        if (!(t->effects & TURN_SCHEDULE) || now - ctl->sched.last_pass_ms < ctl->sched_interval_ms)
                return;
        /* A restarted controller answers its reconnecting fleet before it schedules:
         * passes (an eighth of the loop) would delay agents towards their lease's end. */
        if (ctl->reconnecting > 0 && now < ctl->reconnect_until_ms)
                return;
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        bool full = turn_take_effects(t, TURN_SCHEDULE | TURN_SCHEDULE_FULL) & TURN_SCHEDULE_FULL;
        SchedResult res;
        if (schedule_pass(ctl, full, &res)) {
                for (int p = 0; p < res.n_preempt; p++) {
                        Job *victim = ctl_job_find(ctl, res.preempt[p]);
                        if (victim)
                                jobs_preempt(ctl, victim,
                                             "preempted: its project borrowed capacity that "
                                             "another project's quota needs back");
                }
                for (int p = 0; p < res.n_placements && !t->failed; p++) {
                        Job *job = ctl_job_find(ctl, res.placements[p].job);
                        if (!job)
                                continue;
                        /* A rank of its last attempt confirmed gone this turn (which let
                         * it be placed) is written before the new attempt replaces it. */
                        int r = persist_job_before_attempt(t, job);
                        if (r < 0)
                                turn_fail(t, r, "cannot write the turn: %s",
                                          store_last_error(ctl->store));
                        else
                                jobs_start(ctl, job, &res.placements[p]);
                }
                sched_result_clear(&res);
        }
        double took_s = seconds_since(&start);
        histogram_observe(&ctl->sched_pass, took_s);
        int64_t spacing = (int64_t) (took_s * 1000.0 * SCHED_PASS_SPACING);
        ctl->sched_interval_ms = spacing < SCHED_MIN_INTERVAL_MS   ? SCHED_MIN_INTERVAL_MS
                                 : spacing > SCHED_MAX_INTERVAL_MS ? SCHED_MAX_INTERVAL_MS
                                                                   : spacing;
}

/*
 * Jobs over for the retention time leave memory between turns (nothing of the turn
 * points at them then), at most once per CTL_RETIRE_PERIOD_MS: they stay in the store,
 * and ctl_job_lookup and the job list read them from there.
 */
static void ctl_retire_jobs(Controller *ctl) {
        int64_t now = util_now_ms();
        if (now < ctl->next_retire_ms || ctl->turn.tx_open || ctl->sched.n_fresh > 0)
                return;
        ctl->next_retire_ms = now + CTL_RETIRE_PERIOD_MS;
        int n = model_jobs_retire(&ctl->model, util_wall_ms() - ctl->cfg.job_retention_ms);
        if (n > 0)
                log_debug("%d jobs over for %lld s left memory", n,
                          (long long) (ctl->cfg.job_retention_ms / 1000));
}

static int collect_ended_id(void *userdata, int64_t id) {
        Controller *ctl = userdata;
        if (!model_job_find(&ctl->model, id)) { /* in memory: not over, or over since */
                GROW(ctl->ended_ids, ctl->n_ended_ids, ctl->cap_ended_ids);
                ctl->ended_ids[ctl->n_ended_ids++] = id;
        }
        return 0;
}

/*
 * A start loads what is not over, and serves; the jobs over within the retention time
 * (100,000 cancelled at once made a restart take a second more, and the fleet's agents
 * fence) follow between turns once the reconnecting fleet has been answered,
 * CTL_ENDED_BATCH every CTL_ENDED_PERIOD_MS.
 * Until then they are read from the store as retired ones are: found, listed,
 * deduplicated.
 */
static void ctl_load_ended_jobs(Controller *ctl) {
        int64_t now = util_now_ms();
        if (!ctl->ended_pending || ctl->turn.tx_open || ctl_failure(ctl) || now < ended_due_ms(ctl))
                return;
        int64_t since = util_wall_ms() - ctl->cfg.job_retention_ms;
        int r = 0;
        if (!ctl->ended_ids)
                r = store_jobs_finished_since(ctl->store, since, collect_ended_id, ctl);
        /* A batch reads every stored job between its first id and its last (and their
         * ranks), those in memory or retired long ago too: its span is bounded as well
         * as its count, so a sparse list costs more batches, never a longer one. */
        int first = ctl->next_ended_id, last = first;
        while (last + 1 < ctl->n_ended_ids && last + 1 - first < CTL_ENDED_BATCH &&
               ctl->ended_ids[last + 1] - ctl->ended_ids[first] < CTL_ENDED_SPAN)
                last++;
        if (r >= 0 && first < ctl->n_ended_ids)
                r = persist_load_ended(ctl->store, &ctl->model, ctl->ended_ids[first],
                                       ctl->ended_ids[last], since);
        if (r < 0) {
                /* They stay in the store, served from there as retired jobs are. */
                log_warning("loading the jobs over since %lld s: %s",
                            (long long) (ctl->cfg.job_retention_ms / 1000),
                            store_last_error(ctl->store));
                last = ctl->n_ended_ids - 1;
        }
        ctl->next_ended_id = last + 1;
        /* A period from the batch's end, however long it took (a slow store, a
         * sanitizer build): the loop's other work always comes between. */
        ctl->next_ended_ms = util_now_ms() + CTL_ENDED_PERIOD_MS;
        if (ctl->next_ended_id >= ctl->n_ended_ids) {
                free(ctl->ended_ids);
                ctl->ended_ids = NULL;
                ctl->n_ended_ids = ctl->next_ended_id = ctl->cap_ended_ids = 0;
                ctl->ended_pending = false;
        }
}

/*
 * The store's page cache holds what turns rewrite: the running fleet's node, job and rank
 * rows, which grow with the nodes and not with the stored jobs (turns leave queued and
 * ended ones alone). With SQLite's default 2,000 KiB, at 10,000 nodes the turns read back
 * ten thousand pages a second, each a pread on the loop (docs/PERFORMANCE.md,
 * 2026-11-30). Sized once the reconnecting fleet has been answered after the load (which
 * would fill it with pages no turn reads), so that a restart's first turns allocate
 * nothing more, and again whenever the fleet has grown by an eighth.
 */
#define CTL_CACHE_BYTES_PER_NODE 1600

static void ctl_store_cache_fit(Controller *ctl) {
        int n = ctl->model.n_nodes;
        if (n <= ctl->cache_nodes + ctl->cache_nodes / 8 || util_now_ms() < ctl->reconnect_until_ms)
                return;
        ctl->cache_nodes = n;
        int64_t r = store_cache_hint(ctl->store, (int64_t) n * CTL_CACHE_BYTES_PER_NODE / 1024);
        if (r < 0)
                log_warning("cannot size the store's page cache: %s", store_last_error(ctl->store));
}

/* Between turns, when nothing of a turn points at a job. */
static void ctl_between_turns(Controller *ctl) {
        ctl_retire_jobs(ctl);
        ctl_load_ended_jobs(ctl);
        ctl_store_cache_fit(ctl);
}

int ctl_end_turn(Controller *ctl) {
        Turn *t = &ctl->turn;
        jobs_borrowed_release(ctl);
        if (ctl->failure[0])
                return -EIO;
        ctl_schedule(ctl);
        if (turn_take_effects(t, TURN_SWEEP)) {
                model_active_prune(&ctl->model);
                nodes_finish_drains(ctl);
        }
        if (!t->tx_open && !t->failed) {
                ctl_between_turns(ctl);
                return 0;
        }
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int r = t->failed;
        if (r >= 0 && t->tx_open && !ctl_database_file_ok(ctl))
                r = t->failed;
        if (r >= 0 && (r = persist_dirty(t)) < 0)
                turn_fail(t, r, "cannot write the turn: %s", store_last_error(ctl->store));
        if (r >= 0 && (r = store_commit(ctl->store)) < 0)
                turn_fail(t, r, "cannot commit: %s", store_last_error(ctl->store));
        histogram_observe(&ctl->db_commit, seconds_since(&start));
        t->tx_open = false;
        if (r >= 0) {
                ctl_between_turns(ctl);
                return 0;
        }
        if (store_rollback(ctl->store) < 0)
                log_warning("rollback: %s", store_last_error(ctl->store));
        /* Memory now holds what the disk does not: accept nothing more. */
        snprintf(ctl->failure, sizeof(ctl->failure), "the state database failed: %s", t->failure);
        return r;
}

void ctl_counts(Controller *ctl, int *ret_jobs_active, int *ret_nodes_ready) {
        int ready = 0;
        for (int i = 0; i < ctl->model.n_nodes; i++)
                if (ctl->model.nodes[i]->state == NODE_READY)
                        ready++;
        *ret_jobs_active = ctl->model.n_active;
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
        /* The table is the truth: `axctld token revoke` takes effect once the cache has
         * seen the table change, within TOKEN_CACHE_CHECK_MS. */
        int64_t now = util_now_ms();
        r = token_cache_revalidate(ctl->tokens, ctl->store, now);
        if (r < 0)
                return r;
        if (token_cache_get(ctl->tokens, hash, now, ret)) {
                ctl->token_lookups[0]++;
                return 0;
        }
        ctl->token_lookups[1]++;
        r = store_token_find(ctl->store, hash, token_found, ret);
        if (r < 0)
                return r;
        if (ret->role == _TOKEN_ROLE_INVALID) {
                token_identity_clear(ret);
                return -EACCES;
        }
        token_cache_put(ctl->tokens, hash, ret, now);
        return 0;
}

int ctl_node_log_key(Controller *ctl, const char *node, char ret_key[TOKEN_HASH_HEX]) {
        if (!ctl->cfg.log_secret)
                return -ENOKEY;
        return token_node_log_key(ctl->cfg.log_secret, node, ret_key);
}

char *ctl_log_url_query(Controller *ctl, const char *node, const char *path) {
        char key[TOKEN_HASH_HEX], sig[TOKEN_HASH_HEX];
        if (ctl_node_log_key(ctl, node, key) < 0)
                return xstrdup("");
        /* A minute to follow the redirect; a follow=1 stream keeps going once started. */
        int64_t expires = util_wall_ms() / 1000 + 60;
        int r = token_sign_path(key, path, expires, sig);
        explicit_bzero(key, sizeof(key));
        if (r < 0)
                return xstrdup("");
        return xasprintf("?expires=%lld&sig=%s", (long long) expires, sig);
}
