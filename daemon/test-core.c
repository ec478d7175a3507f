/* SPDX-License-Identifier: MIT */
/*
 * Tests of the controller core on a real SQLite store: the transition tables, a turn's
 * events, dirty set and side effects, and whole turns driven through the controller's
 * own operations (register, submit, sync) as the API calls them.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/unit/check.h"
#include "accounting.h"
#include "controller-internal.h"
#include "persist.h"
#include "test-fixture.h"
#include "util.h"

static void test_tables(void) {
        /* The lifecycle of DESIGN.md §4. */
        CHECK(tr_job_allowed(JOB_PENDING, JOB_STARTING));
        CHECK(tr_job_allowed(JOB_STARTING, JOB_RUNNING));
        CHECK(tr_job_allowed(JOB_RUNNING, JOB_RESTARTING));
        CHECK(tr_job_allowed(JOB_RESTARTING, JOB_STARTING));
        CHECK(tr_job_allowed(JOB_RUNNING, JOB_PREEMPTED));
        CHECK(tr_job_allowed(JOB_PREEMPTED, JOB_STARTING));
        CHECK(tr_job_allowed(JOB_PENDING, JOB_CANCELLED));
        CHECK(tr_job_allowed(JOB_RUNNING, JOB_RUNNING)); /* a new reason only */
        /* What must never happen. */
        for (int s = 0; s < _JOB_STATE_MAX; s++) {
                CHECK(!tr_job_allowed(JOB_SUCCEEDED, (JobState) s) || s == JOB_SUCCEEDED);
                CHECK(!tr_job_allowed(JOB_FAILED, (JobState) s) || s == JOB_FAILED);
                CHECK(!tr_job_allowed(JOB_CANCELLED, (JobState) s) || s == JOB_CANCELLED);
        }
        CHECK(!tr_job_allowed(JOB_PENDING, JOB_RUNNING)); /* not without an attempt */
        CHECK(!tr_job_allowed(JOB_RESTARTING, JOB_RUNNING));
        CHECK(!tr_job_allowed(JOB_RESTARTING, JOB_FAILED));
        CHECK(!tr_job_allowed(_JOB_STATE_INVALID, JOB_PENDING));
        CHECK(!tr_job_allowed(JOB_PENDING, _JOB_STATE_MAX));

        CHECK(tr_rank_allowed(RANK_ASSIGNED, RANK_RUNNING));
        CHECK(tr_rank_allowed(RANK_RUNNING, RANK_LOST));
        CHECK(!tr_rank_allowed(RANK_KILLED, RANK_RUNNING)); /* a stopped rank stays stopped */
        CHECK(!tr_rank_allowed(RANK_SUCCEEDED, RANK_FAILED));
        CHECK(!tr_rank_allowed(RANK_RUNNING, RANK_ASSIGNED));

        CHECK(tr_node_allowed(NODE_READY, NODE_QUARANTINED));
        CHECK(tr_node_allowed(NODE_QUARANTINED, NODE_READY)); /* an operator's undrain */
        CHECK(!tr_node_allowed(NODE_QUARANTINED, NODE_UNHEALTHY)); /* no way out by itself */
        CHECK(!tr_node_allowed(NODE_DRAINED, NODE_DRAINING));
        for (int s = 0; s < _NODE_STATE_MAX; s++)
                CHECK(tr_node_allowed((NodeState) s, NODE_DOWN)); /* any node may go silent */
}

static int count_event(void *userdata, const StoreEvent *e) {
        int *n = userdata;
        (*n)++;
        return 0;
}

static int events(Store *store, int64_t job) {
        int n = 0;
        CHECK(store_events_list(store, job, 0, 1000, count_event, &n) >= 0);
        return n;
}

static Job *job_new(Model *m, int ranks) {
        json_t *spec_json = json_pack("{s:s,s:s,s:s,s:[s],s:i}", "name", "t", "project", "p",
                                      "user", "u", "command", "/bin/true", "ranks", ranks);
        JobSpec *spec = NULL;
        JsonError err;
        CHECK(spec_parse(spec_json, &spec, &err) == 0);
        json_decref(spec_json);
        Job *job = xcalloc(1, sizeof(Job));
        *job = (Job){.id = m->next_job_id,
                     .spec = spec,
                     .state = JOB_PENDING,
                     .reason = xstrdup(""),
                     .exit_code = -1,
                     .ckpt_step = -1,
                     .best_step = -1};
        model_job_add(m, job);
        return job;
}

static Node *node_new(Model *m, const char *name) {
        Node *node = xcalloc(1, sizeof(Node));
        node->name = xstrdup(name);
        node->reason = xstrdup("");
        node->labels = json_object();
        json_t *inv = json_pack("{s:i,s:i,s:[]}", "cpus", 8, "memory_mb", 1024, "accelerators");
        model_node_set_inventory(node, inv);
        json_decref(inv);
        model_node_add(m, node);
        return node;
}

/* What a scheduling pass reads of job's ranks is what the ranks hold: the node of each
 * rank that may be alive (want_node, per rank; -1: none) and its devices. */
static void check_held(const Model *m, const Job *job, const int *want_node) {
        int apr = job->spec->accelerators_per_rank;
        for (int k = 0; k < job->n_ranks; k++) {
                const Rank *r = &job->ranks[k];
                CHECK_INT(job->held_node[k], want_node[k]);
                CHECK_INT(job->held_node[k],
                          r->alive && model_rank_node(m, r) ? r->node_index : -1);
                for (int d = 0; d < apr; d++)
                        CHECK_INT(job->held_devices[k * apr + d],
                                  want_node[k] >= 0 && d < r->n_devices ? r->devices[d] : -1);
        }
}

/* A store of its own, for a test that drives the model and the turn directly. */
static Store *store_of_test(const char *name) {
        char path[DB_PATH_MAX];
        db_path(path, name);
        Store *store = NULL;
        CHECK(store_open(path, &store) == 0);
        return store;
}

/* The turn: what each transition records, on a store of its own. */
static void test_turn(void) {
        Store *store = store_of_test("turn");
        Model m;
        model_init(&m);
        Turn t;
        turn_init(&t, store, &m);
        Node *n1 = node_new(&m, "n1");
        Job *job = job_new(&m, 2);

        /* Two ranks on n1: the attempt starts, n1's desired set changes. */
        int rank_node[2] = {0, 0};
        SchedPlacement pl = {.job = job->id, .n_ranks = 2, .rank_node = rank_node};
        uint64_t v0 = n1->version;
        CHECK(tr_attempt_start(&t, job, &pl, m.nodes));
        CHECK_INT(job->state, JOB_STARTING);
        CHECK_INT(job->attempt, 1);
        CHECK(n1->version > v0);
        CHECK_INT(n1->alive_ranks, 2);
        CHECK_INT(n1->used_cpus, 2 * job->spec->cpus);
        check_held(&m, job, (int[]){0, 0});
        CHECK(t.tx_open);
        CHECK_INT(t.n_dirty_jobs, 1);
        CHECK(t.dirty_jobs[0] == job);
        /* Starting takes capacity: only new jobs need a look. */
        CHECK_INT(turn_take_effects(&t, ~0u), TURN_SCHEDULE);

        /* A rank leaves the desired set: the node's version grows, it stays alive until
         * its agent confirms; then its capacity comes back. */
        Rank *r0 = &job->ranks[0];
        uint64_t v1 = n1->version;
        CHECK(tr_rank(&t, job, r0, RANK_KILLED));
        CHECK(n1->version > v1);
        CHECK_INT(r0->stop_version, n1->version);
        CHECK(r0->alive);
        check_held(&m, job, (int[]){0, 0});
        tr_rank_gone(&t, job, r0);
        CHECK(!r0->alive);
        CHECK_INT(n1->alive_ranks, 1);
        check_held(&m, job, (int[]){-1, 0});
        CHECK(turn_take_effects(&t, TURN_SWEEP) == TURN_SWEEP);

        /* One known dead (its node was lost) leaves it too: no kill to confirm, but the
         * version grows all the same, as an agent told its version is unchanged keeps
         * what that version listed. */
        Rank *r1 = &job->ranks[1];
        tr_rank_gone(&t, job, r1);
        uint64_t v2 = n1->version;
        CHECK(tr_rank(&t, job, r1, RANK_LOST));
        CHECK(n1->version > v2);
        CHECK_INT(r1->stop_version, 0);
        CHECK_INT(n1->alive_ranks, 0);
        check_held(&m, job, (int[]){-1, -1});

        /* Illegal: refused, counted, nothing changes and nothing is written. */
        int before = events(store, job->id);
        CHECK(!tr_rank(&t, job, r0, RANK_RUNNING));
        CHECK(!tr_job(&t, job, JOB_PENDING, "back"));
        CHECK_INT(t.n_illegal, 2);
        CHECK_INT(job->state, JOB_STARTING);
        CHECK_INT(r0->state, RANK_KILLED);
        CHECK_INT(events(store, job->id), before);

        /* Ending: the attempt records why, the job's end time is set, a sweep is due. */
        CHECK(tr_attempt_end(&t, job, END_CANCELLED, NULL, NULL));
        CHECK(!tr_attempt_end(&t, job, END_CANCELLED, NULL, NULL)); /* once */
        CHECK(tr_job(&t, job, JOB_CANCELLED, "by test"));
        CHECK(job->finished_ms > 0);
        CHECK_STR(job->reason, "by test");
        CHECK(turn_take_effects(&t, ~0u) == (TURN_SWEEP | TURN_SCHEDULE | TURN_SCHEDULE_FULL));
        CHECK_INT(events(store, job->id), before + 2);

        /* Nodes: quarantine has no way out but an operator's. */
        CHECK(tr_node(&t, n1, NODE_QUARANTINED, "blamed"));
        CHECK(!tr_node(&t, n1, NODE_UNHEALTHY, "sick"));
        CHECK_INT(n1->state, NODE_QUARANTINED);
        CHECK_STR(n1->reason, "blamed");
        CHECK_INT(t.n_dirty_nodes, 1);

        /* A failed durable write fails the turn: later writes are skipped. */
        CHECK(store_commit(store) == 0);
        t.tx_open = false;
        turn_fail(&t, -ENOSPC, "disk full (test)");
        CHECK(!turn_write(&t));
        int n_before = events(store, 0);
        turn_event(&t, 0, "n1", "test", "not written");
        CHECK_INT(events(store, 0), n_before);
        CHECK_INT(t.failed, -ENOSPC);

        turn_clear(&t);
        model_clear(&m);
        store_close(store);
}

/* The active list is what it says: each member knows its place, and no job is lost. */
static void check_active(const Model *m, int want) {
        CHECK_INT(m->n_active, want);
        for (int i = 0; i < m->n_active; i++)
                CHECK(m->active[i]->active_slot == i + 1);
        for (int i = 0; i < m->n_jobs; i++) {
                const Job *job = m->jobs[i];
                bool holds = false;
                for (int k = 0; k < job->n_ranks; k++)
                        holds |= job->ranks[k].alive;
                /* Over and holding nothing, it must be out; otherwise it must be in. */
                CHECK(job_active(job) == (!job_state_is_terminal(job->state) || holds));
        }
}

/*
 * Jobs leave the active list when they are over and hold nothing, and a prune looks only
 * at the jobs that ended or lost a rank since the last one, not at the whole list.
 */
static void test_active_list(void) {
        Store *store = store_of_test("active");
        Model m;
        model_init(&m);
        Turn t;
        turn_init(&t, store, &m);
        node_new(&m, "n1");
        Job *placed = job_new(&m, 2);
        int rank_node[2] = {0, 0};
        SchedPlacement pl = {.job = placed->id, .n_ranks = 2, .rank_node = rank_node};
        CHECK(tr_attempt_start(&t, placed, &pl, m.nodes));
        enum {
                WAITING = 1000
        };
        Job *waiting[WAITING];
        for (int i = 0; i < WAITING; i++)
                waiting[i] = job_new(&m, 1);
        model_active_prune(&m);
        check_active(&m, WAITING + 1);

        /* Three of the waiting jobs are cancelled, the first one twice over: the prune
         * looks at those three and takes them out, wherever they were. */
        CHECK(tr_job(&t, waiting[0], JOB_CANCELLED, "by test"));
        CHECK(tr_job(&t, waiting[0], JOB_CANCELLED, "again"));
        CHECK(tr_job(&t, waiting[500], JOB_CANCELLED, "by test"));
        CHECK(tr_job(&t, waiting[WAITING - 1], JOB_CANCELLED, "by test"));
        CHECK_INT(m.n_ending, 3);
        model_active_prune(&m);
        CHECK_INT(m.n_ending, 0);
        check_active(&m, WAITING - 2);

        /* A job that failed keeps its place while a rank may still be alive. */
        tr_job_stop_ranks(&t, placed);
        CHECK(tr_attempt_end(&t, placed, END_CANCELLED, NULL, NULL));
        CHECK(tr_job(&t, placed, JOB_CANCELLED, "by test"));
        model_active_prune(&m);
        check_active(&m, WAITING - 2);
        CHECK(job_active(placed));
        tr_rank_gone(&t, placed, &placed->ranks[0]);
        model_active_prune(&m);
        CHECK(job_active(placed));
        check_active(&m, WAITING - 2);
        /* Its last rank confirmed gone: out. */
        tr_rank_gone(&t, placed, &placed->ranks[1]);
        CHECK_INT(m.n_ending, 1);
        model_active_prune(&m);
        check_active(&m, WAITING - 3);
        /* An empty prune does nothing. */
        model_active_prune(&m);
        check_active(&m, WAITING - 3);

        turn_clear(&t);
        model_clear(&m);
        store_close(store);
}

/* Whole turns through the operations the API calls. */
static void test_controller_turns(void) {
        Controller *ctl = controller("turns");
        Node *n1 = node_register(ctl, "n1");
        CHECK(ctl_turn_has_writes(ctl));
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK(!ctl_turn_has_writes(ctl));

        /* Submit: pending, an event; the end of the turn places it. */
        Job *job = submit(ctl, "alice", 2);
        CHECK_INT(job->state, JOB_PENDING);
        CHECK(ctl->turn.effects & TURN_SCHEDULE);
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->state, JOB_STARTING);
        CHECK_INT(job->n_ranks, 2);
        CHECK_INT(ctl->turn.n_dirty_jobs, 0); /* written */

        /* Both ranks run: the job runs. */
        WireRankReport rr[2] = {
                {.job = job->id, .attempt = 1, .rank = 0, .pid = 10, .exit_code = -1, .step = -1},
                {.job = job->id, .attempt = 1, .rank = 1, .pid = 11, .exit_code = -1, .step = -1}};
        sync_ranks(ctl, n1, rr, 2);
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK(ctl_end_turn(ctl) == 0);

        /* Rank 1 crashes: the gang stops, the job restarts, the node is not blamed. */
        rr[1].exited = true;
        rr[1].exit_code = 3;
        uint64_t before_crash = n1->version;
        sync_ranks(ctl, n1, rr, 2);
        /* One bump for the rank that left, one for the rank stopped with the gang. */
        CHECK_INT(n1->version, before_crash + 2);
        CHECK_INT(job->state, JOB_RESTARTING);
        CHECK_INT(job->restarts, 1);
        CHECK_INT(job->ranks[0].state, RANK_KILLED);
        CHECK(job->ranks[0].alive); /* until its agent confirms */
        CHECK_INT(job->ranks[1].state, RANK_FAILED);
        Attempt *a = job_current_attempt(job);
        CHECK_INT(a->end_reason, END_RANK_EXIT);
        CHECK(a->blamed_node == NULL);
        CHECK_INT(n1->n_blame, 0);
        CHECK(ctl->turn.effects & TURN_SCHEDULE_FULL);
        CHECK(ctl_end_turn(ctl) == 0);

        /* The agent confirms rank 0 gone: only then may the next attempt start. */
        CHECK(job->ranks[0].alive);
        rr[0].exited = true;
        rr[0].signal = 9;
        sync_ranks(ctl, n1, rr, 1);
        CHECK(!job->ranks[0].alive);
        wait_for_scheduler(ctl);
        ctl_tick(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->state, JOB_STARTING);
        CHECK_INT(job->attempt, 2);

        /* Reports for the old attempt are ignored (fencing). */
        WireRankReport stale = {.job = job->id,
                                .attempt = 1,
                                .rank = 0,
                                .exited = true,
                                .exit_code = 1,
                                .step = -1};
        sync_ranks(ctl, n1, &stale, 1);
        CHECK_INT(job->state, JOB_STARTING);

        /* The node reports itself unhealthy: it is blamed, the job moves off it. */
        WireSync sick = {.node = "n1",
                         .boot_id = "boot-1",
                         .agent_id = "agent-1",
                         .healthy = false,
                         .health_reason = "gpu 0 lost"};
        Node *ret = NULL;
        CtlError err = {0};
        CHECK(ctl_node_sync(ctl, &sick, n1->version, NULL, &ret, &err) == 0);
        CHECK_INT(n1->state, NODE_UNHEALTHY);
        CHECK_INT(job->state, JOB_RESTARTING);
        CHECK_STR(job->avoid_node, "n1");
        CHECK_STR(job_current_attempt(job)->blamed_node, "n1");
        CHECK_INT(n1->n_blame, 1);
        CHECK(ctl_end_turn(ctl) == 0);

        /* Errors are the core's own codes, not HTTP statuses. */
        Job *none = NULL;
        CHECK(ctl_job_cancel(ctl, 999, &none, &err) < 0);
        CHECK_INT(err.code, CTL_ERR_NOT_FOUND);
        WireSync other = {.node = "n1",
                          .boot_id = "boot-1",
                          .agent_id = "agent-2",
                          .healthy = true,
                          .health_reason = ""};
        CHECK(ctl_node_sync(ctl, &other, 0, NULL, &ret, &err) < 0);
        CHECK_INT(err.code, CTL_ERR_NODE_CLAIMED);
        CHECK(ctl_failure(ctl) == NULL);
        CHECK_INT(ctl->turn.n_illegal, 0);
        ctl_free(ctl);

        /* What was committed is what a restarted controller loads. */
        ctl = controller("turns");
        Job *again = ctl_job_find(ctl, 1);
        CHECK(again != NULL);
        CHECK_INT(again->attempt, 2);
        CHECK_INT(again->restarts, 2);
        CHECK_INT(ctl_node_find(ctl, "n1")->state, NODE_UNHEALTHY);
        ctl_free(ctl);
}

/*
 * A rank its node never reports running ends the attempt after the start timeout, as
 * the node's fault; and a job's failures in a row without progress survive a restart of
 * the controller, so restarting it cannot reset the crash-loop limit.
 */
/* When to read the fleet's rate so that a job's live attempt adds nothing: its start. */
static int64_t rate_time(Job *job) {
        const Attempt *a = job_current_attempt(job);
        return a && a->end_reason == _END_REASON_INVALID ? a->started_ms : util_wall_ms();
}

static void test_start_timeout_and_restart(void) {
        Controller *ctl = controller_with("start", 50);
        Node *n1 = node_register(ctl, "n1");
        node_register(ctl, "n2");
        Job *job = submit(ctl, "erin", 1);
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->state, JOB_STARTING);
        CHECK(ctl->model.n_starting == 1 && ctl->model.starting[0] == job); /* what ticks read */
        char *placed = xstrdup(job->ranks[0].node_name);
        ctl_tick(ctl);
        CHECK_INT(job->state, JOB_STARTING); /* not yet */
        usleep(60000);
        ctl_tick(ctl);
        CHECK_INT(job->state, JOB_RESTARTING);
        CHECK_INT(ctl->model.n_starting, 0);
        Attempt *a = job_current_attempt(job);
        CHECK_INT(a->end_reason, END_START_TIMEOUT);
        CHECK_STR(a->blamed_node, placed);
        CHECK_STR(job->avoid_node, placed);
        CHECK_INT(job->quick_failures, 0); /* the node's failure, not the job's */
        CHECK(ctl_end_turn(ctl) == 0);

        /* The node confirms the rank gone; the next attempt runs elsewhere and crashes
         * without progress: one failure in a row, kept across a restart. */
        Node *first = ctl_node_find(ctl, placed);
        WireRankReport gone = {.job = job->id,
                               .attempt = 1,
                               .rank = 0,
                               .exited = true,
                               .exit_code = 1,
                               .step = -1};
        sync_ranks(ctl, first, &gone, 1);
        wait_for_scheduler(ctl);
        ctl_tick(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->attempt, 2);
        CHECK(strcmp(job->ranks[0].node_name, placed) != 0);
        Node *second = ctl_node_find(ctl, job->ranks[0].node_name);
        WireRankReport crash = {
                .job = job->id, .attempt = 2, .rank = 0, .pid = 5, .exit_code = -1, .step = -1};
        sync_ranks(ctl, second, &crash, 1);
        crash.exited = true;
        crash.exit_code = 3;
        sync_ranks(ctl, second, &crash, 1);
        CHECK_INT(job->quick_failures, 1);
        CHECK(ctl_end_turn(ctl) == 0);
        /* The fleet's failure rate counts both attempts, ended; it is the same after a
         * restart (read from the job's attempts) and once the job left memory (from the
         * store's figures). Read at the start of a third attempt, if a slow run placed
         * one already, which then adds nothing. */
        int64_t now = rate_time(job);
        CtlFailureRate rate, again;
        ctl_goodput_fleet_rate(ctl, now, &rate);
        CHECK_INT(rate.interruptions, 2);
        int64_t rank_ms = 0;
        for (int i = 0; i < 2; i++)
                rank_ms += job->attempts[i].ended_ms - job->attempts[i].started_ms;
        CHECK(rate.rank_ms == rank_ms && rank_ms >= 50);
        int64_t id = job->id;
        ctl_free(ctl);
        ctl = controller_with("start", 50);
        job = ctl_job_find(ctl, id);
        CHECK_INT(job->quick_failures, 1);
        /* Placed again (at once, if not before): its live attempt 3 adds nothing at
         * its start. */
        CHECK(job->n_attempts == 3 && job_current_attempt(job)->end_reason == _END_REASON_INVALID);
        /* Loaded while starting, it is listed for the start timeout as a placed one is. */
        CHECK(ctl->model.n_starting == (job->state == JOB_STARTING));
        CHECK(job->state != JOB_STARTING || ctl->model.starting[0] == job);
        now = rate_time(job);
        ctl_goodput_fleet_rate(ctl, now, &again);
        CHECK(again.interruptions == rate.interruptions && again.rank_ms == rate.rank_ms);
        ctl_goodput_fleet_rate(ctl, now + 1000, &again);
        CHECK(again.rank_ms == rate.rank_ms + 1000);
        CtlError err = {0};
        Node *third_node = ctl_node_find(ctl, job->ranks[0].node_name);
        check_held(&ctl->model, job, (int[]){third_node->index}); /* as loaded */
        CHECK(ctl_job_cancel(ctl, id, &job, &err) == 0);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(ctl->model.n_starting, 0);
        check_held(&ctl->model, job, (int[]){third_node->index}); /* until confirmed */
        WireRankReport stopped = {
                .job = id, .attempt = 3, .rank = 0, .exited = true, .signal = 15, .step = -1};
        sync_ranks(ctl, third_node, &stopped, 1);
        CHECK(ctl_end_turn(ctl) == 0);
        check_held(&ctl->model, job, (int[]){-1});
        Job *stored = persist_load_job(ctl->store, id);
        CHECK(stored && stored->n_attempts == 3);
        ctl->cfg.job_retention_ms = 0;
        ctl->next_retire_ms = 0;
        usleep(2000);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK(ctl_job_find(ctl, id) == NULL);
        const Attempt *third = &stored->attempts[2]; /* cancelled: not an interruption */
        rank_ms = rate.rank_ms + third->ended_ms - third->started_ms;
        ctl_goodput_fleet_rate(ctl, now, &again);
        CHECK(again.interruptions == rate.interruptions && again.rank_ms == rank_ms);
        ctl_free(ctl);
        ctl = controller_with("start", 50);
        ctl_goodput_fleet_rate(ctl, now, &again);
        CHECK(again.interruptions == rate.interruptions && again.rank_ms == rank_ms);
        job_free(stored);
        CHECK(n1 != NULL);
        free(placed);
        ctl_free(ctl);
}

/* A failed turn is rolled back and every later one refused; nothing half-written. */
static void test_failed_turn(void) {
        Controller *ctl = controller("failed");
        node_register(ctl, "n1");
        CHECK(ctl_end_turn(ctl) == 0);
        Job *job = submit(ctl, "bob", 1);
        turn_fail(&ctl->turn, -ENOSPC, "disk full (test)");
        CHECK(ctl_turn_has_writes(ctl)); /* its requests must wait, then get 503 */
        CHECK(ctl_end_turn(ctl) == -ENOSPC);
        CHECK(ctl_failure(ctl) != NULL);
        CHECK(strstr(ctl_failure(ctl), "disk full (test)") != NULL);
        CHECK(ctl_end_turn(ctl) < 0);
        (void) job;
        ctl_free(ctl);
        ctl = controller("failed");
        CHECK(ctl_job_find(ctl, 1) == NULL); /* the failed turn's submit is not on disk */
        CHECK(ctl_node_find(ctl, "n1") != NULL);
        ctl_free(ctl);
}

/*
 * A compromised node with its own agent token speaks only for itself: reports about
 * another node's ranks, other attempts, ranks that do not exist, checkpoints of jobs it
 * runs nothing of, repeated or contradictory exits change nothing they must not, and
 * drive no illegal transition (strict: one would abort this test). A quarantined node
 * cannot report its way out.
 */
static void test_hostile_node(void) {
        Controller *ctl = controller("hostile");
        Node *n1 = node_register(ctl, "n1");
        Node *n2 = node_register(ctl, "n2");
        CHECK(ctl_end_turn(ctl) == 0);
        Job *job = submit(ctl, "carol", 1);
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->state, JOB_STARTING);
        Node *home = model_node_find(&ctl->model, job->ranks[0].node_name);
        Node *other = home == n1 ? n2 : n1;
        WireRankReport run = {
                .job = job->id, .attempt = 1, .rank = 0, .pid = 7, .exit_code = -1, .step = -1};
        sync_ranks(ctl, home, &run, 1);
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK(ctl_end_turn(ctl) == 0);

        /* The other node claims the rank exited, hung, or that other ranks exist. */
        WireRankReport lies[] = {
                {.job = job->id, .attempt = 1, .rank = 0, .exited = true, .exit_code = 1},
                {.job = job->id, .attempt = 1, .rank = 0, .hung = true, .exit_code = -1},
                {.job = job->id, .attempt = 1, .rank = 5, .exited = true, .exit_code = 1},
                {.job = job->id, .attempt = 1, .rank = -1, .exited = true, .exit_code = 1},
                {.job = job->id, .attempt = 9, .rank = 0, .exited = true, .exit_code = 1},
                {.job = 999, .attempt = 1, .rank = 0, .exited = true, .exit_code = 1},
        };
        WireCheckpoint ckpt = {.job = job->id, .attempt = 1, .step = 50, .path = "/evil/step_50"};
        WireSync msg = {.node = other->name,
                        .boot_id = "boot-1",
                        .agent_id = "agent-1",
                        .ranks = lies,
                        .n_ranks = 6,
                        .checkpoints = &ckpt,
                        .n_checkpoints = 1,
                        .healthy = true,
                        .health_reason = ""};
        Node *ret = NULL;
        CtlError err = {0};
        CHECK(ctl_node_sync(ctl, &msg, other->version, NULL, &ret, &err) == 0);
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK_INT(job->ranks[0].state, RANK_RUNNING);
        CHECK_INT(job->ckpt_step, -1);
        /* Its own node: ranks that do not exist and stale attempts are ignored too. */
        msg.node = home->name;
        msg.n_checkpoints = 0;
        WireRankReport own_lies[] = {run, lies[2], lies[3], lies[4], lies[5]};
        msg.ranks = own_lies;
        msg.n_ranks = 5;
        CHECK(ctl_node_sync(ctl, &msg, home->version, NULL, &ret, &err) == 0);
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK(ctl_end_turn(ctl) == 0);

        /* Its rank exits, then it says it exited again, and that it runs again. */
        WireRankReport exit1 = run;
        exit1.exited = true;
        exit1.exit_code = 4;
        sync_ranks(ctl, home, &exit1, 1);
        CHECK_INT(job->state, JOB_RESTARTING);
        int restarts = job->restarts;
        sync_ranks(ctl, home, &exit1, 1);
        sync_ranks(ctl, home, &run, 1);
        CHECK_INT(job->state, JOB_RESTARTING);
        CHECK_INT(job->restarts, restarts);
        CHECK_INT(job->ranks[0].state, RANK_FAILED);
        CHECK(ctl_end_turn(ctl) == 0);

        /* Quarantined, it reports itself sick, then well: it stays out until an
         * operator returns it. */
        tr_node(&ctl->turn, other, NODE_QUARANTINED, "blamed (test)");
        WireSync sick = {.node = other->name,
                         .boot_id = "boot-1",
                         .agent_id = "agent-1",
                         .healthy = false,
                         .health_reason = "sick"};
        CHECK(ctl_node_sync(ctl, &sick, other->version, NULL, &ret, &err) == 0);
        CHECK_INT(other->state, NODE_QUARANTINED);
        sick.healthy = true;
        sick.health_reason = "";
        CHECK(ctl_node_sync(ctl, &sick, other->version, NULL, &ret, &err) == 0);
        CHECK_INT(other->state, NODE_QUARANTINED);
        CHECK(ctl_node_undrain(ctl, other->name, &ret, &err) == 0);
        CHECK_INT(other->state, NODE_READY);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(ctl->turn.n_illegal, 0);
        ctl_free(ctl);
}

/* One node name, one agent (DESIGN §4b): another agent that takes the node over once the
 * lease has run out, before the tick has declared the node down, starts none of the old
 * agent's ranks again: they fenced themselves, and their attempt is over. */
static void test_takeover_ends_attempts(void) {
        Controller *ctl = controller("takeover");
        Node *n1 = node_register(ctl, "n1");
        Job *job = submit(ctl, "dave", 1);
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        WireRankReport run = {
                .job = job->id, .attempt = 1, .rank = 0, .pid = 7, .exit_code = -1, .step = -1};
        sync_ranks(ctl, n1, &run, 1);
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK(ctl_end_turn(ctl) == 0);
        /* The same agent again (restarted, its state directory kept) re-adopts them. */
        node_register(ctl, "n1");
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK(ctl_end_turn(ctl) == 0);

        Node *ret = NULL;
        CtlError err = {0};
        CHECK(node_register_agent(ctl, "n1", "agent-2", &ret, &err) == -EBUSY); /* lease live */
        CHECK_INT(job->state, JOB_RUNNING);
        n1->last_sync_mono -= ctl->cfg.lease_ms + ctl->cfg.grace_ms + 1; /* silent since */
        /* Not by a sync: it must register, which ends the holder's attempts there. */
        WireSync sync2 = {
                .node = "n1", .boot_id = "boot-1", .agent_id = "agent-2", .healthy = true};
        CHECK(ctl_node_sync(ctl, &sync2, 0, NULL, &ret, &err) == -ENOENT);
        CHECK_INT(err.code, CTL_ERR_UNKNOWN_NODE);
        CHECK_INT(job->state, JOB_RUNNING);
        CHECK(node_register_agent(ctl, "n1", "agent-2", &ret, &err) == 0);
        CHECK(!job->ranks[0].alive);
        CHECK_INT(job->state, JOB_RESTARTING);
        CHECK_INT(job_current_attempt(job)->end_reason, END_NODE_LOST);
        CHECK_INT(n1->state, NODE_READY); /* down, then registered again: not quarantined */
        CHECK(ctl_end_turn(ctl) == 0);
        /* The old agent, back, is refused while the new one's lease runs. */
        WireSync sync1 = {
                .node = "n1", .boot_id = "boot-1", .agent_id = "agent-1", .healthy = true};
        CHECK(ctl_node_sync(ctl, &sync1, 0, NULL, &ret, &err) == -EBUSY);
        CHECK_INT(ctl->turn.n_illegal, 0);
        ctl_free(ctl);
}

/* A drained node that goes silent, and a quarantined one taken over by another agent,
 * come back as they were: an operator's word outlives the node's absence. */
static void test_held_nodes_stay_held(void) {
        Controller *ctl = controller("held");
        Node *n1 = node_register(ctl, "n1");
        Node *ret = NULL;
        CtlError err = {0};
        CHECK(ctl_node_drain(ctl, "n1", false, &ret, &err) == 0);
        CHECK_INT(n1->state, NODE_DRAINING);
        n1->last_sync_mono -= ctl->cfg.lease_ms + ctl->cfg.grace_ms + 1;
        ctl_tick(ctl);
        CHECK_INT(n1->state, NODE_DRAINING);
        node_register(ctl, "n1");
        CHECK_INT(n1->state, NODE_DRAINING);
        CHECK(ctl_end_turn(ctl) == 0);

        CHECK(ctl_node_undrain(ctl, "n1", &ret, &err) == 0);
        tr_node(&ctl->turn, n1, NODE_QUARANTINED, "blamed (test)");
        n1->last_sync_mono -= ctl->cfg.lease_ms + ctl->cfg.grace_ms + 1;
        CHECK(node_register_agent(ctl, "n1", "agent-2", &ret, &err) == 0);
        CHECK_INT(n1->state, NODE_QUARANTINED);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(ctl->turn.n_illegal, 0);
        ctl_free(ctl);
}

/* A controller killed mid-turn (its transaction open, not committed) comes back with
 * what was committed before and nothing of the turn it was in. */
static void test_killed_mid_turn(void) {
        Controller *ctl = controller("killed");
        node_register(ctl, "n1");
        Job *kept = submit(ctl, "dave", 1);
        CHECK(ctl_end_turn(ctl) == 0);
        int64_t kept_id = kept->id;
        submit(ctl, "dave", 1);
        CHECK(ctl_turn_has_writes(ctl));
        ctl_free(ctl); /* no commit: as if killed here */
        ctl = controller("killed");
        CHECK(ctl_job_find(ctl, kept_id) != NULL);
        CHECK(ctl_job_find(ctl, kept_id + 1) == NULL);
        CHECK(ctl_node_find(ctl, "n1") != NULL);
        ctl_free(ctl);
}

/* A restarted controller: the agent its database names for a node goes on syncing
 * without registering (no storm of registrations), with a fresh lease; an agent with
 * another identity or on another boot must register. Lease deadlines follow contact. */
static void test_restart_keeps_nodes(void) {
        Controller *ctl = controller("resume");
        uint64_t registered_at = node_register(ctl, "n1")->version;
        node_register(ctl, "n2");
        json_t *gpus = json_pack("{s:i,s:i,s:[{s:s,s:i},{s:s,s:i,s:i}]}", "cpus", 96, "memory_mb",
                                 4096, "accelerators", "kind", "nvidia-h100", "numa_node", 0,
                                 "kind", "nvidia-h100", "numa_node", 1, "pcie_switch", 3);
        WireRegister msg = {.node = "n3", .boot_id = "boot-1", .inventory = gpus};
        Node *n3 = NULL;
        CtlError err = {0};
        CHECK(ctl_node_register(ctl, &msg, &n3, &err) == 0);
        json_decref(gpus);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        ctl = controller("resume");
        CHECK(model_lease_oldest(&ctl->model) != NULL); /* stored nodes got a lease */
        /* What the scheduler needs of the inventories, parsed again while jobs loaded. */
        n3 = ctl_node_find(ctl, "n3");
        CHECK(n3->cpus == 96 && n3->memory_mb == 4096 && n3->n_devices == 2);
        CHECK_STR(n3->devices[1].kind, "nvidia-h100");
        CHECK(n3->devices[0].numa_node == 0 && n3->devices[0].pcie_switch == -1);
        CHECK(n3->devices[1].numa_node == 1 && n3->devices[1].pcie_switch == 3);
        CHECK(ctl_node_find(ctl, "n2")->cpus == 8);
        Node *n1 = ctl_node_find(ctl, "n1"), *ret = NULL;
        /* Its version goes on from the stored one: an agent that applied it is told
         * nothing changed. */
        CHECK(n1->version == registered_at);
        /* Serving starts: scheduling waits for the stored nodes' agents, and a restart's
         * backoff falling due meanwhile does not make the loop spin. */
        ctl_serving_starts(ctl);
        CHECK_INT(ctl->reconnecting, 3);
        ctl->sched.next_restart_ms = util_now_ms();
        ctl_tick(ctl);
        CHECK(ctl_next_deadline_ms(ctl) > util_now_ms());
        WireSync same = {.node = "n1", .boot_id = "boot-1", .agent_id = "agent-1", .healthy = true};
        CHECK(ctl_node_sync(ctl, &same, 0, NULL, &ret, &err) == 1); /* resumed */
        CHECK(ret == n1 && n1->connected);
        CHECK_INT(ctl->reconnecting, 2);
        /* A version from a controller whose clock ran ahead: ours moves past it. */
        uint64_t ahead = n1->version + 5000000;
        CHECK(ctl_node_sync(ctl, &same, ahead, NULL, &ret, &err) == 0);
        CHECK(n1->version > ahead && n1->changed);
        uint64_t now_at = n1->version; /* an agent at our version moves nothing */
        CHECK(ctl_node_sync(ctl, &same, now_at, NULL, &ret, &err) == 0);
        CHECK(n1->version == now_at);
        /* A claim beyond what a version can be (a hostile or broken agent) moves nothing:
         * followed, it would be stored negative. */
        CHECK(ctl_node_sync(ctl, &same, NODE_VERSION_MAX + 1, NULL, &ret, &err) == 0);
        CHECK(n1->version == now_at);
        CHECK(ctl_node_sync(ctl, &same, UINT64_MAX, NULL, &ret, &err) == 0);
        CHECK(n1->version == now_at);
        CHECK(model_lease_oldest(&ctl->model) == ctl_node_find(ctl, "n2")); /* n1 touched */
        WireSync other = {
                .node = "n2", .boot_id = "boot-1", .agent_id = "agent-2", .healthy = true};
        CHECK(ctl_node_sync(ctl, &other, 0, NULL, &ret, &err) == -ENOENT);
        CHECK_INT(err.code, CTL_ERR_UNKNOWN_NODE);
        WireSync rebooted = {
                .node = "n2", .boot_id = "boot-2", .agent_id = "agent-1", .healthy = true};
        CHECK(ctl_node_sync(ctl, &rebooted, 0, NULL, &ret, &err) == -ENOENT);
        CHECK(!ctl_node_find(ctl, "n2")->connected);
        CHECK(ctl_end_turn(ctl) == 0);
        uint64_t moved = n1->version; /* moved past another controller's: stored too */
        ctl_free(ctl);
        ctl = controller("resume");
        CHECK(ctl_node_find(ctl, "n1")->version == moved);
        ctl_free(ctl);
        /* A database restored from a backup: n1's agent applied versions the store lost
         * (three changes after moved). Changes made before the agent syncs again must
         * not hand those versions out again for another set. */
        usleep(2000);
        ctl = controller("resume");
        n1 = ctl_node_find(ctl, "n1");
        for (int i = 0; i < 3; i++)
                tr_node_bump(&ctl->turn, n1);
        CHECK(n1->version > moved + 3);
        uint64_t jumped = n1->version;
        CHECK(ctl_node_sync(ctl, &same, moved + 3, NULL, &ret, &err) == 1);
        CHECK(n1->version == jumped); /* the agent's version is behind: a whole answer */
        tr_node_bump(&ctl->turn, n1); /* synced: versions grow by one again */
        CHECK(n1->version == jumped + 1);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        /* Killed between a leap and its commit: the leap is gone with the turn, and no
         * agent saw it (answers follow commits), so the agent at the stored version is
         * told nothing changed; a later change before it syncs leaps again (maybe to the
         * number lost, which names nothing any agent holds). */
        ctl = controller("resume");
        n1 = ctl_node_find(ctl, "n1");
        tr_node_bump(&ctl->turn, n1);
        CHECK(n1->version >= jumped + 1 + NODE_VERSION_LEAP);
        ctl_free(ctl); /* no commit */
        ctl = controller("resume");
        n1 = ctl_node_find(ctl, "n1");
        CHECK(n1->version == jumped + 1);
        CHECK(ctl_node_sync(ctl, &same, jumped + 1, NULL, &ret, &err) == 1);
        CHECK(n1->version == jumped + 1 && !n1->changed); /* nothing to send it */
        tr_node_bump(&ctl->turn, n1); /* synced: by one */
        CHECK(n1->version == jumped + 2);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        /* A stored inventory that does not parse counts as none. */
        sql_on("resume", "UPDATE node SET inventory = '{\"cpus\": 9' WHERE name = 'n3'");
        ctl = controller("resume");
        n3 = ctl_node_find(ctl, "n3");
        CHECK(n3->cpus == 0 && n3->n_devices == 0);
        CHECK_STR(n3->inventory, "{}");
        ctl_free(ctl);
}

/* What a pass reads of jobs and nodes: the devices a gang's ranks hold, placed or loaded;
 * one copy of each name, known by its address; a hostile user's many names make the
 * copies go and come again, not grow. */
static void test_pass_input(void) {
        Controller *ctl = controller("pass-input");
        json_t *gpus = json_pack("{s:i,s:i,s:[{s:s},{s:s}]}", "cpus", 96, "memory_mb", 4096,
                                 "accelerators", "kind", "nvidia-h100", "kind", "nvidia-h100");
        WireRegister msg = {.node = "g1", .boot_id = "boot-1", .inventory = gpus};
        Node *g1 = NULL;
        CtlError err = {0};
        CHECK(ctl_node_register(ctl, &msg, &g1, &err) == 0);
        json_decref(gpus);
        json_t *spec = json_pack("{s:s,s:s,s:[s],s:i,s:{s:s,s:i}}", "project", "p", "user", "ann",
                                 "command", "/bin/true", "ranks", 2, "resources", "accelerator",
                                 "nvidia-h100", "accelerators_per_rank", 1);
        Job *job = submit_spec(ctl, json_incref(spec)), *other = submit_spec(ctl, spec);
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        check_held(&ctl->model, job, (int[]){g1->index, g1->index}); /* placed */
        CHECK(job->held_devices[0] + job->held_devices[1] == 1); /* one GPU each */
        CHECK(job->sched_project == other->sched_project && job->sched_user == other->sched_user);
        CHECK(job->sched_accelerator == g1->devices[1].sched_kind);
        CHECK(job->sched_project != job->spec->project && strcmp(job->sched_user, "ann") == 0);
        uint64_t gen = ctl->sched.names_gen;
        for (int i = 0; i < SCHED_NAMES_MAX; i++) {
                char user[16];
                snprintf(user, sizeof(user), "u%d", i);
                submit(ctl, user, 1);
        }
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK(strmap_size(ctl->sched.names) > SCHED_NAMES_MAX); /* kept through a pass */
        submit(ctl, "ann", 1);
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK(ctl->sched.names_gen == gen + 1 && strmap_size(ctl->sched.names) <= SCHED_NAMES_MAX);
        CHECK(job->sched_names_gen == gen + 1 && strcmp(job->sched_project, "p") == 0);
        /* Full passes (a node joins) over the waiting jobs: the copies go once more, then
         * the names in use stay copied from pass to pass. */
        for (int i = 0; i < 3; i++) {
                node_register(ctl, (const char *[]){"n0", "n1", "n2"}[i]);
                wait_for_scheduler(ctl);
                CHECK(ctl_end_turn(ctl) == 0);
        }
        CHECK(ctl->sched.names_gen == gen + 2 && strmap_size(ctl->sched.names) > SCHED_NAMES_MAX);
        int64_t id = job->id, first_device = job->held_devices[0];
        ctl_free(ctl);
        ctl = controller("pass-input");
        job = ctl_job_find(ctl, id);
        g1 = ctl_node_find(ctl, "g1");
        check_held(&ctl->model, job, (int[]){g1->index, g1->index});
        CHECK_INT(job->held_devices[0], first_device);
        ctl_free(ctl);
}

/* A sweep finishes drains by looking at the draining nodes only when there are some:
 * the model counts them through every change of state, and at load. */
static void test_drains_are_counted(void) {
        Controller *ctl = controller("drains");
        node_register(ctl, "n1");
        node_register(ctl, "n2");
        Node *ret = NULL;
        CtlError err = {0};
        CHECK(ctl_node_drain(ctl, "n1", false, &ret, &err) == 0);
        CHECK_INT(ctl->model.n_draining, 1);
        CHECK(ctl_end_turn(ctl) == 0); /* nothing runs there: drained at the sweep */
        CHECK_INT(ctl_node_find(ctl, "n1")->state, NODE_DRAINED);
        CHECK_INT(ctl->model.n_draining, 0);
        CHECK(ctl_node_undrain(ctl, "n1", &ret, &err) == 0);
        CHECK_INT(ctl->model.n_draining, 0);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
}

static bool collect_id(void *userdata, Job *job) {
        int64_t *ids = userdata;
        for (int i = 0; i < 8; i++)
                if (ids[i] == 0) {
                        ids[i] = job->id;
                        break;
                }
        return true;
}

/* One user's jobs that have not ended are bounded (max_jobs_per_user): a submit beyond
 * is refused, another user's is not, a job that ends frees its place, a known
 * idempotency key still answers, and a restart counts the stored jobs again. */
static void test_jobs_per_user_bounded(void) {
        Controller *ctl = controller("per-user");
        ctl->cfg.max_jobs_per_user = 2;
        json_t *spec = one_rank_spec("ann");
        Job *keyed = NULL, *job = NULL;
        bool created = false;
        CtlError err = {0};
        CHECK(ctl_job_submit(ctl, spec, "key-1", &keyed, &created, &err) == 0 && created);
        int64_t keyed_id = keyed->id;
        int64_t second_id = submit(ctl, "ann", 1)->id;
        CHECK(ctl_job_submit(ctl, spec, NULL, &job, &created, &err) == -EUSERS);
        CHECK_INT(err.code, CTL_ERR_TOO_MANY_JOBS);
        CHECK(ctl_job_submit(ctl, spec, "key-1", &job, &created, &err) == 0);
        CHECK(!created && job->id == keyed_id);
        submit(ctl, "bob", 1);
        CHECK(ctl_job_cancel(ctl, second_id, &job, &err) == 0);
        CHECK(model_user_jobs(&ctl->model, "ann") == 1);
        submit(ctl, "ann", 1);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);

        ctl = controller("per-user");
        ctl->cfg.max_jobs_per_user = 2;
        CHECK(model_user_jobs(&ctl->model, "ann") == 2 && model_user_jobs(&ctl->model, "bob") == 1);
        err = (CtlError){0};
        CHECK(ctl_job_submit(ctl, spec, NULL, &job, &created, &err) == -EUSERS);
        CHECK_INT(err.code, CTL_ERR_TOO_MANY_JOBS);
        ctl->cfg.max_jobs_per_user = 0; /* no limit */
        CHECK(ctl_job_submit(ctl, spec, NULL, &job, &created, &err) == 0 && created);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        json_decref(spec);
}

static int collect_missing(void *ud, int64_t id) {
        int64_t *ids = ud;
        ids[ids[0]++ + 1] = id;
        return 0;
}

/* Jobs over for the retention time leave memory and stay served from the store: found,
 * listed in order with those in memory, deduplicated by their key, not cancellable; a
 * restart loads only what is still retained, and never reuses an id. */
static void test_retired_jobs_stay_in_the_store(void) {
        Controller *ctl = controller("retire");
        ctl->cfg.job_retention_ms = 0;
        json_t *spec = one_rank_spec("ann");
        Job *keyed = NULL, *again = NULL;
        bool created = false;
        CtlError err = {0};
        CHECK(ctl_job_submit(ctl, spec, "key-1", &keyed, &created, &err) == 0);
        int64_t keyed_id = keyed->id;
        Job *waiting = submit(ctl, "ann", 1);
        int64_t waiting_id = waiting->id;
        Job *gone = submit(ctl, "bob", 1);
        int64_t gone_id = gone->id;
        CHECK(ctl_job_cancel(ctl, keyed_id, &keyed, &err) == 0);
        CHECK(ctl_job_cancel(ctl, gone_id, &gone, &err) == 0);
        CHECK(ctl_end_turn(ctl) == 0);
        usleep(5000);
        ctl->next_retire_ms = 0;
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK(ctl_job_find(ctl, keyed_id) == NULL && ctl_job_find(ctl, gone_id) == NULL);
        CHECK(ctl_job_find(ctl, waiting_id) != NULL);
        Job *stored = ctl_job_lookup(ctl, gone_id);
        CHECK(stored && stored->state == JOB_CANCELLED && stored->n_attempts == 0);
        CHECK_STR(stored->spec->user, "bob");
        int64_t ids[8] = {0};
        ctl_jobs_foreach(ctl, 0, _JOB_STATE_INVALID, NULL, collect_id, ids);
        CHECK(ids[0] == gone_id && ids[1] == waiting_id && ids[2] == keyed_id && ids[3] == 0);
        int64_t cancelled[8] = {0};
        ctl_jobs_foreach(ctl, gone_id, JOB_CANCELLED, "p", collect_id, cancelled);
        CHECK(cancelled[0] == keyed_id && cancelled[1] == 0);
        CHECK(ctl_job_submit(ctl, spec, "key-1", &again, &created, &err) == 0);
        CHECK(!created && again->id == keyed_id);
        Job *none = NULL;
        CHECK(ctl_job_cancel(ctl, gone_id, &none, &err) < 0);
        CHECK_INT(err.code, CTL_ERR_CONFLICT);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);

        ctl = controller("retire"); /* retention 300 s: the two cancelled ones just ended */
        CHECK(ctl_job_find(ctl, gone_id) != NULL);
        ctl_free(ctl);
        ctl = controller_open("retire", 0, 0);
        CHECK(ctl_job_find(ctl, gone_id) == NULL && ctl_job_find(ctl, waiting_id) != NULL);
        int64_t missing[8] = {0};
        CHECK_INT(store_goodput_missing(ctl->store, collect_missing, missing), 0);
        CHECK_INT(missing[0], 0); /* both ended jobs' goodput was written as they ended */
        Job *next = submit(ctl, "ann", 1);
        CHECK(next->id == gone_id + 1);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);

        /* A database from before the goodput table had no figures: the first start
         * writes those of its ended jobs, in memory or not. */
        sql_on("retire", "DELETE FROM job_goodput; DELETE FROM goodput_total");
        ctl = controller_open("retire", 0, 0);
        CHECK(ctl_job_find(ctl, gone_id) == NULL);
        CHECK_INT(store_goodput_missing(ctl->store, collect_missing, missing), 0);
        CHECK_INT(missing[0], 0);
        ctl_free(ctl);
        json_decref(spec);
}

/* More jobs than one batch of the parallel spec parse: every job comes back, in id
 * order, with its own spec; one stored spec that does not parse stops the start. */
static void test_many_jobs_load(void) {
        Controller *ctl = controller("many");
        int64_t first = 0;
        for (int i = 0; i < 300; i++) {
                char user[16];
                snprintf(user, sizeof(user), "u%d", i);
                Job *job = submit(ctl, user, 1 + i % 4);
                if (i == 0)
                        first = job->id;
        }
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        ctl = controller("many");
        CHECK_INT(ctl->model.n_jobs, 300);
        for (int i = 0; i < 300; i++) {
                Job *job = ctl->model.jobs[i];
                char user[16];
                snprintf(user, sizeof(user), "u%d", i);
                CHECK(job->id == first + i && job->state == JOB_PENDING);
                CHECK_STR(job->spec->user, user);
                CHECK_INT(job->spec->ranks, 1 + i % 4);
        }
        ctl_free(ctl);

        char path[DB_PATH_MAX];
        db_path(path, "many");
        _cleanup_free_ char *bad = xasprintf(
                "UPDATE job SET spec = '{\"ranks\": 1' WHERE id = %lld", (long long) (first + 250));
        sql_on("many", bad);
        CtlConfig cfg = {.db_path = path,
                         .lease_ms = 10000,
                         .grace_ms = 2000,
                         .sync_period_ms = 1000,
                         .job_retention_ms = 300000};
        ctl = NULL;
        CHECK_INT(ctl_new(&cfg, &ctl), -EBADMSG);
        CHECK(ctl == NULL);
}

/* A start loads what is not over and serves; the jobs over within the retention time
 * follow, a batch a turn once the fleet is back, in id order among those in memory and
 * with their keys. Until then they are found, listed and deduplicated from the store,
 * and one that ends in between is not loaded twice. */
static void test_ended_jobs_load_after_the_start(void) {
        Controller *ctl = controller("ended");
        enum {
                N = 600
        }; /* more than two batches */
        int64_t ids[N];
        CtlError err = {0};
        bool created = false;
        json_t *spec = one_rank_spec("ann");
        for (int i = 0; i < N; i++) {
                char key[16];
                snprintf(key, sizeof(key), "k%d", i);
                Job *job = NULL;
                CHECK(ctl_job_submit(ctl, spec, i % 3 ? NULL : key, &job, &created, &err) == 0);
                ids[i] = job->id;
                if (i % 100 && ctl_job_cancel(ctl, job->id, &job, &err) < 0)
                        CHECK(!"cancel");
        }
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);

        ctl = controller_open("ended", 0, 300000);
        CHECK_INT(ctl->model.n_jobs, N / 100); /* the pending ones */
        CHECK(ctl_job_find(ctl, ids[1]) == NULL);
        Job *stored = ctl_job_lookup(ctl, ids[1]);
        CHECK(stored && stored->state == JOB_CANCELLED);
        int64_t listed[8] = {0};
        ctl_jobs_foreach(ctl, ids[3], _JOB_STATE_INVALID, NULL, collect_id, listed);
        CHECK(listed[0] == ids[2] && listed[1] == ids[1] && listed[2] == ids[0]);
        Job *again = NULL;
        CHECK(ctl_job_submit(ctl, spec, "k3", &again, &created, &err) == 0);
        CHECK(!created && again->id == ids[3]);
        /* While agents reconnect, nothing more loads; the loop wakes when they may have. */
        ctl->reconnect_until_ms = util_now_ms() + 60000;
        ctl->next_file_check_ms = ctl->reconnect_until_ms; /* only what is asked is due */
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(ctl->model.n_jobs, N / 100);
        CHECK(ctl_next_deadline_ms(ctl) > util_now_ms());
        Job *late = NULL;
        CHECK(ctl_job_cancel(ctl, ids[200], &late, &err) == 0);
        CHECK(ctl_end_turn(ctl) == 0);
        ctl->reconnect_until_ms = 0;
        CHECK(ctl_next_deadline_ms(ctl) <= util_now_ms());
        int batches = 0;
        while (ctl->ended_pending && batches < 100) {
                int before = ctl->model.n_jobs;
                CHECK(ctl_end_turn(ctl) == 0);
                batches++;
                int loaded = ctl->model.n_jobs;
                CHECK(loaded > before || !ctl->ended_pending);
                CHECK(ctl_end_turn(ctl) == 0); /* no second batch in the same period */
                CHECK_INT(ctl->model.n_jobs, loaded);
                while (ctl->ended_pending && util_now_ms() < ctl->next_ended_ms)
                        usleep(1000);
        }
        CHECK_INT(batches, 5); /* 128 a batch, one per period */
        CHECK_INT(ctl->model.n_jobs, N);
        for (int i = 0; i < N; i++) {
                CHECK(ctl->model.jobs[i]->id == ids[i]);
                CHECK(ctl_job_find(ctl, ids[i]) == ctl->model.jobs[i]);
                bool pending = i % 100 == 0 && i != 200;
                CHECK(ctl->model.jobs[i]->state == (pending ? JOB_PENDING : JOB_CANCELLED));
        }
        CHECK(model_job_by_key(&ctl->model, "p", "k3") == ctl_job_find(ctl, ids[3]));
        CHECK(ctl_next_deadline_ms(ctl) > util_now_ms());
        ctl_free(ctl);
        json_decref(spec);
}

/* A batch of jobs over spans few ids however sparse they are: the jobs between, retired
 * long ago, are read with it and passed over. */
static void test_ended_jobs_load_in_short_spans(void) {
        Controller *ctl = controller("sparse");
        enum {
                N = 600
        };
        int64_t ids[N];
        CtlError err = {0};
        for (int i = 0; i < N; i++) {
                Job *job = submit(ctl, "ann", 1);
                ids[i] = job->id;
                CHECK(ctl_job_cancel(ctl, ids[i], &job, &err) == 0);
        }
        CHECK(ctl_end_turn(ctl) == 0);
        ctl_free(ctl);
        _cleanup_free_ char *aged =
                xasprintf("UPDATE job SET finished_ms = 1 WHERE id BETWEEN %lld AND %lld",
                          (long long) ids[10], (long long) ids[N - 11]);
        sql_on("sparse", aged);

        ctl = controller_open("sparse", 0, 300000);
        CHECK_INT(ctl->model.n_jobs, 0);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(ctl->model.n_jobs, 10); /* the first ten: the last ten are 580 ids on */
        CHECK(ctl->ended_pending);
        while (util_now_ms() < ctl->next_ended_ms)
                usleep(1000);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(ctl->model.n_jobs, 20);
        CHECK(!ctl->ended_pending);
        CHECK(ctl->model.jobs[9]->id == ids[9] && ctl->model.jobs[10]->id == ids[N - 10]);
        ctl_free(ctl);
}

static int compare_kept_goodput(void *userdata, const StoreGoodput *sum) {
        Model *m = userdata;
        const ProjectGoodput *g = strmap_get(m->stored_goodput_index, sum->project);
        CHECK(g != NULL);
        CHECK(g->jobs == sum->jobs);
        for (int b = 0; b < STORE_GOODPUT_BUCKETS; b++)
                CHECK(g->t.ms[b] == sum->ms[b]);
        return 0;
}

/* The goodput the controller keeps per project is the store's sum of what it holds. */
static void check_kept_goodput(Controller *ctl, int n_projects, int64_t jobs) {
        CHECK_INT(ctl->model.n_stored_goodput, n_projects);
        CHECK_INT(store_goodput_sum(ctl->store, NULL, 0, compare_kept_goodput, &ctl->model), 0);
        CtlGoodputSums sums;
        ctl_goodput_sums(ctl, &(CtlGoodputQuery){.now_ms = util_wall_ms()}, &sums);
        int64_t counted = 0;
        for (int k = 0; k < sums.n_projects; k++)
                counted += sums.projects[k].jobs;
        CHECK(counted == jobs && sums.fleet.ms[GOODPUT_QUEUEING] > 0);
        ctl_goodput_sums_clear(&sums);
}

/* Goodput since the beginning is read from sums kept as figures are stored, not summed
 * in the store per report: they stay equal to the store's sum as jobs end, after a
 * restart, once jobs leave memory and after the figures of an old database are filled. */
static void test_goodput_sums_kept(void) {
        Controller *ctl = controller("kept");
        CtlError err = {0};
        int64_t ids[3];
        const char *projects[3] = {"p", "q", "p"};
        for (int i = 0; i < 3; i++) {
                json_t *spec = json_pack("{s:s,s:s,s:[s],s:i}", "project", projects[i], "user",
                                         "ann", "command", "/bin/true", "ranks", 1);
                Job *job = NULL;
                bool created = false;
                CHECK(ctl_job_submit(ctl, spec, NULL, &job, &created, &err) == 0);
                ids[i] = job->id;
                json_decref(spec);
        }
        CHECK(ctl_end_turn(ctl) == 0);
        usleep(3000); /* queued a while: figures that are not zero */
        for (int i = 0; i < 2; i++) {
                Job *job = NULL;
                CHECK(ctl_job_cancel(ctl, ids[i], &job, &err) == 0);
        }
        CHECK(ctl_end_turn(ctl) == 0);
        check_kept_goodput(ctl, 2, 3); /* the queued third from its timeline */
        ctl_free(ctl);
        ctl = controller("kept");
        check_kept_goodput(ctl, 2, 3);
        ctl->cfg.job_retention_ms = 0;
        ctl->next_retire_ms = 0;
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK(ctl_job_find(ctl, ids[0]) == NULL);
        check_kept_goodput(ctl, 2, 3);
        ctl_free(ctl);
        sql_on("kept", "DELETE FROM job_goodput; DELETE FROM goodput_total");
        ctl = controller("kept");
        check_kept_goodput(ctl, 2, 3);
        ctl_free(ctl);
}

/* A valid token's row, as `axctld token create` writes one. */
static void token_row_insert(Store *store, const char *name, const char *hash, int64_t created_ms) {
        CHECK_INT(store_token_insert(store, &(StoreToken){.name = name,
                                                          .hash = hash,
                                                          .role = "admin",
                                                          .created_ms = created_ms,
                                                          .revoked_ms = STORE_NONE}),
                  0);
}

/* The token cache: a copy until the table changes or TOKEN_CACHE_TTL_MS pass; bounded. */
static void test_token_cache(void) {
        TokenCache *c = token_cache_new();
        TokenIdentity id = {.role = TOKEN_ROLE_AGENT,
                            .name = xstrdup("n1-agent"),
                            .node = xstrdup("n1")},
                      got;
        CHECK(!token_cache_get(c, "h1", 1000, &got));
        token_cache_put(c, "h1", &id, 1000);
        token_identity_clear(&id); /* the cache keeps its own copy */
        CHECK(token_cache_get(c, "h1", 1000 + TOKEN_CACHE_TTL_MS / 2 - 1, &got));
        CHECK_INT(got.role, TOKEN_ROLE_AGENT);
        CHECK_STR(got.name, "n1-agent");
        CHECK_STR(got.node, "n1");
        token_identity_clear(&got);
        CHECK(!token_cache_get(c, "h1", 1000 + TOKEN_CACHE_TTL_MS, &got));
        CHECK(!token_cache_get(c, "h2", 1000, &got));
        /* Identities read together are not all read again together: at three quarters
         * of the time, about half of 1,000 are gone. */
        TokenIdentity id_of_agent = {.role = TOKEN_ROLE_AGENT, .name = "n1-agent"};
        char hash[TOKEN_HASH_HEX];
        int kept = 0;
        for (int i = 0; i < 1000; i++) {
                snprintf(hash, sizeof(hash), "%064x", i);
                token_cache_put(c, hash, &id_of_agent, 2000);
        }
        for (int i = 0; i < 1000; i++) {
                snprintf(hash, sizeof(hash), "%064x", i);
                CHECK(token_cache_get(c, hash, 2000 + TOKEN_CACHE_TTL_MS / 2 - 1, &got));
                token_identity_clear(&got);
                if (token_cache_get(c, hash, 2000 + 3 * TOKEN_CACHE_TTL_MS / 4, &got)) {
                        kept++;
                        token_identity_clear(&got);
                }
                CHECK(!token_cache_get(c, hash, 2000 + TOKEN_CACHE_TTL_MS, &got));
        }
        CHECK(kept > 350 && kept < 650);
        /* Full, it starts over rather than grow. */
        TokenIdentity admin = {.role = TOKEN_ROLE_ADMIN, .name = "root"};
        for (int i = 0; i < TOKEN_CACHE_MAX + 1; i++) {
                snprintf(hash, sizeof(hash), "h%d", i);
                token_cache_put(c, hash, &admin, 5000);
        }
        CHECK(!token_cache_get(c, "h0", 5000, &got));
        CHECK(token_cache_get(c, hash, 5000, &got));
        CHECK_STR(got.name, "root");
        token_identity_clear(&got);

        /* A change of the token table, seen at the next look, forgets the identities of
         * tokens no longer valid (h1 is not in the table), and only those. */
        Store *store = store_of_test("tokens");
        CHECK_INT(token_cache_revalidate(c, store, 10000), 0);
        token_cache_put(c, "h1", &admin, 10000);
        token_row_insert(store, "bob", "hb", 7);
        CHECK_INT(token_cache_revalidate(c, store, 10000 + TOKEN_CACHE_CHECK_MS - 1),
                  0); /* not yet */
        CHECK(token_cache_get(c, "h1", 10000 + TOKEN_CACHE_CHECK_MS - 1, &got));
        token_identity_clear(&got);
        CHECK_INT(token_cache_revalidate(c, store, 10000 + TOKEN_CACHE_CHECK_MS), 0);
        CHECK(!token_cache_get(c, "h1", 10000 + TOKEN_CACHE_CHECK_MS, &got));
        token_cache_put(c, "hb", &admin, 10100);
        CHECK_INT(token_cache_revalidate(c, store, 10200), 0); /* unchanged: kept */
        CHECK(token_cache_get(c, "hb", 10200, &got));
        token_identity_clear(&got);
        token_row_insert(store, "dave", "hd", 9);
        token_cache_put(c, "hd", &admin, 10250);
        CHECK_INT(store_token_revoke(store, "bob", 8), 0);
        CHECK_INT(token_cache_revalidate(c, store, 10300), 0);
        CHECK(!token_cache_get(c, "hb", 10300, &got));
        CHECK(token_cache_get(c, "hd", 10300, &got)); /* still valid: kept */
        token_identity_clear(&got);
        /* Revoked and its name given to a new token between two looks (the row is
         * gone): gone too. */
        CHECK_INT(store_token_revoke(store, "dave", 10), 0);
        token_row_insert(store, "dave", "hd2", 11);
        CHECK_INT(token_cache_revalidate(c, store, 10400), 0);
        CHECK(!token_cache_get(c, "hd", 10400, &got));
        store_close(store);
        token_cache_free(c);

        /* Through the controller: an unknown token is refused and never kept (a client
         * sending random ones cannot grow the cache); a known one is kept. */
        Controller *ctl = controller("token-cache");
        char *token = NULL, known[TOKEN_HASH_HEX], unknown[TOKEN_HASH_HEX];
        CHECK_INT(token_generate(&token), 0);
        CHECK_INT(token_hash(token, known), 0);
        CHECK_INT(token_hash("axt_not-a-token", unknown), 0);
        CHECK_INT(store_token_insert(ctl->store, &(StoreToken){.name = "carol",
                                                               .hash = known,
                                                               .role = "admin",
                                                               .created_ms = 1}),
                  0);
        CHECK_INT(ctl_token_identify(ctl, "axt_not-a-token", &got), -EACCES);
        CHECK(!token_cache_get(ctl->tokens, unknown, util_now_ms(), &got));
        CHECK_INT(ctl_token_identify(ctl, token, &got), 0);
        CHECK_STR(got.name, "carol");
        token_identity_clear(&got);
        CHECK(token_cache_get(ctl->tokens, known, util_now_ms(), &got));
        token_identity_clear(&got);
        CHECK_INT(ctl_token_identify(ctl, token, &got), 0);
        token_identity_clear(&got);
        /* /metrics counts where each was found: both of the first two in the store. */
        CHECK(ctl->token_lookups[0] == 1 && ctl->token_lookups[1] == 2);
        free(token);
        ctl_free(ctl);
}

/*
 * A rank's environment: a gang over 300 nodes lists every host, in node-rank order and
 * whole (it was cut at 4 KiB once), and the job's own variables beat the framework's
 * defaults without any key written twice.
 */
static void test_rank_env(void) {
        enum {
                NODES = 300
        };
        Controller *ctl = controller("rankenv");
        for (int i = 0; i < NODES; i++) {
                char name[64];
                snprintf(name, sizeof(name), "host-with-a-long-name-%03d", i);
                node_register(ctl, name);
        }
        CHECK(ctl_end_turn(ctl) == 0);
        Job *job = submit_spec(ctl, json_pack("{s:s,s:s,s:s,s:[s],s:i,s:i,s:s,s:{s:s,s:s}}", "name",
                                              "big", "project", "p", "user", "alice", "command",
                                              "/bin/true", "ranks", 2 * NODES, "ranks_per_node", 2,
                                              "framework", "torch", "env", "MASTER_PORT", "29500",
                                              "NOTE", "x"));
        wait_for_scheduler(ctl);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->state, JOB_STARTING);

        RankEnv env = {0};
        for (int pass = 0; pass < 2; pass++) { /* a second fill reuses the first's */
                Rank *rank = &job->ranks[pass ? 2 * NODES - 1 : 0];
                ctl_rank_env(ctl, job, rank, &env);
                json_t *seen = json_object();
                for (size_t i = 0; i < env.n_vars; i++) {
                        CHECK(!json_object_get(seen, env.vars[i].key)); /* each key once */
                        json_object_set_new(seen, env.vars[i].key, json_string(env.vars[i].value));
                }
                const char *hosts =
                        json_string_value(json_object_get(seen, "AXCTL_NODE_HOSTNAMES"));
                CHECK(hosts && strlen(hosts) > 4096);
                int n = 1;
                for (const char *c = hosts; *c; c++)
                        n += *c == ',';
                CHECK_INT(n, NODES);
                /* Node rank i's host is the i-th entry. */
                for (int i = 0; i < job->n_ranks; i++) {
                        Rank *r = &job->ranks[i];
                        const char *at = hosts;
                        for (int k = 0; k < r->node_rank; k++)
                                at = strchr(at, ',') + 1;
                        CHECK(strncmp(at, r->node_name, strlen(r->node_name)) == 0);
                }
                CHECK_STR(json_string_value(json_object_get(seen, "AXCTL_NUM_NODES")), "300");
                CHECK_STR(json_string_value(json_object_get(seen, "AXCTL_LOCAL_WORLD_SIZE")), "2");
                char want[16];
                snprintf(want, sizeof(want), "%d", rank->rank);
                CHECK_STR(json_string_value(json_object_get(seen, "RANK")), want);
                CHECK_STR(json_string_value(json_object_get(seen, "MASTER_PORT")), "29500");
                CHECK_STR(json_string_value(json_object_get(seen, "NOTE")), "x");
                CHECK(json_object_get(seen, "MASTER_ADDR"));
                /* The gang's part comes first: an answer may send it once (views.c). */
                CHECK_STR(env.vars[0].key, "AXCTL_NODE_HOSTNAMES");
                json_decref(seen);
        }
        /* Built once per attempt, but not kept past a change of address: node rank 0's
         * agent registers again from another address, and every rank's list and
         * coordinator name it. */
        Rank *first = NULL;
        for (int i = 0; i < job->n_ranks && !first; i++)
                if (job->ranks[i].node_rank == 0)
                        first = &job->ranks[i];
        json_t *inv = json_pack("{s:i,s:i,s:[]}", "cpus", 8, "memory_mb", 1024, "accelerators");
        WireRegister again = {.node = first->node_name,
                              .hostname = first->node_name,
                              .address = "10.9.9.9:7000",
                              .boot_id = "boot-1",
                              .agent_id = "agent-1",
                              .inventory = inv};
        Node *node = NULL;
        CtlError err = {0};
        int attempt = job->attempt;
        /* The same address again changes nothing: the list is not built again. */
        uint64_t moves = ctl->model.addresses_changed;
        WireRegister same = again;
        same.address = NULL;
        CHECK(ctl_node_register(ctl, &same, &node, &err) == 0);
        CHECK(ctl->model.addresses_changed == moves);
        CHECK(ctl_node_register(ctl, &again, &node, &err) == 0);
        json_decref(inv);
        CHECK(ctl_end_turn(ctl) == 0);
        CHECK_INT(job->attempt, attempt); /* the list follows the address, not a restart */
        ctl_rank_env(ctl, job, &job->ranks[job->n_ranks - 1], &env);
        CHECK(strncmp(env.vars[0].value, "10.9.9.9,", 9) == 0);
        for (size_t i = 0; i < env.n_vars; i++)
                if (strcmp(env.vars[i].key, "MASTER_ADDR") == 0)
                        CHECK_STR(env.vars[i].value, "10.9.9.9");
        ctl_rank_env_clear(&env);
        ctl_free(ctl);
}

int main(void) {
        tmpdir = check_tmpdir("axctl-test-core");
        test_tables();
        test_turn();
        test_active_list();
        test_controller_turns();
        test_failed_turn();
        test_hostile_node();
        test_takeover_ends_attempts();
        test_held_nodes_stay_held();
        test_killed_mid_turn();
        test_start_timeout_and_restart();
        test_restart_keeps_nodes();
        test_pass_input();
        test_drains_are_counted();
        test_retired_jobs_stay_in_the_store();
        test_jobs_per_user_bounded();
        test_many_jobs_load();
        test_ended_jobs_load_after_the_start();
        test_ended_jobs_load_in_short_spans();
        test_goodput_sums_kept();
        test_token_cache();
        test_rank_env();
        CHECK_INT(util_rm_rf(tmpdir), 0);
        free(tmpdir);
        printf("core: ok\n");
        return 0;
}
