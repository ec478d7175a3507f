/* SPDX-License-Identifier: MIT */
/*
 * The only code that changes the state of a job, attempt, rank or node (DESIGN.md §4).
 * Each transition is checked against a table of allowed ones: an illegal one is a bug,
 * refused and logged (and aborts under Turn.strict, which the tests set). A legal one
 * appends its event, marks what must be persisted, and records the side effects the
 * end of the turn acts on (a scheduling pass, a sweep of the active list).
 *
 * Everything a loop turn writes goes into one store transaction. The first durable
 * write that fails fails the turn: later writes are skipped, the turn does not commit,
 * and the controller stops (controller.c), so nothing acknowledged is lost.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "scheduler.h"
#include "store.h"

typedef enum TurnEffect {
        TURN_SCHEDULE = 1u << 0, /* new jobs may be placed */
        TURN_SCHEDULE_FULL = 1u << 1, /* capacity or eligibility changed: every waiting job */
        TURN_SWEEP = 1u << 2, /* a job ended or a rank died: prune the active list, drains */
} TurnEffect;

typedef struct Turn {
        Store *store;
        Model *model;
        bool tx_open;
        int failed; /* -errno of the first failed durable write; 0: none */
        char failure[256]; /* what failed, for the log and /healthz */
        unsigned effects; /* TurnEffect bits not yet acted on */
        Job **dirty_jobs;
        int n_dirty_jobs, cap_dirty_jobs;
        Node **dirty_nodes;
        int n_dirty_nodes, cap_dirty_nodes;
        /* Nodes whose desired state changed since the API last took them: only their
         * long-polls are answered early (Node.changed marks members). */
        Node **changed_nodes;
        int n_changed_nodes, cap_changed_nodes;
        bool strict; /* an illegal transition aborts */
        uint64_t n_illegal; /* illegal transitions refused */
} Turn;

void turn_init(Turn *t, Store *store, Model *model);
void turn_clear(Turn *t);
/* Opens the turn's transaction on its first write; false once the turn has failed. */
bool turn_write(Turn *t);
/* Fails the turn with -errno r (the first failure is kept). */
void turn_fail(Turn *t, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void turn_job_dirty(Turn *t, Job *job);
void turn_rank_dirty(Turn *t, Job *job, Rank *r);
void turn_node_dirty(Turn *t, Node *node);
void turn_event(Turn *t, int64_t job, const char *node, const char *kind, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* Returns the effects among mask and clears them. */
unsigned turn_take_effects(Turn *t, unsigned mask);
/* The nodes whose version grew since the last call (valid until the next bump). */
Node **turn_take_changed_nodes(Turn *t, int *ret_n);

/* A job enters the model pending, a node ready: their first states, marked dirty. */
void tr_job_created(Turn *t, Job *job);
void tr_node_created(Turn *t, Node *node);
/*
 * The states read back from the store at start-up (they were checked when they were
 * made). A name this version does not know reads as the safe state: a job failed, a
 * rank lost, a node down, an attempt still open. A rank's liveness comes back with its
 * state.
 */
void tr_job_restore(Job *job, const char *stored);
void tr_rank_restore(Rank *r, const char *stored, bool alive);
void tr_node_restore(Node *node, const char *stored);
/* Whether a node stored in that state keeps a lease when the state loads: all but one
 * down (which an unknown state is taken for, as tr_node_restore does). */
bool tr_node_stored_keeps_lease(const char *stored);
void tr_attempt_restore(Attempt *a, const char *stored_end_reason);

/* The tables: whether a state may follow another (the same state always may). */
bool tr_job_allowed(JobState from, JobState to);
bool tr_rank_allowed(RankState from, RankState to);
bool tr_node_allowed(NodeState from, NodeState to);

/* Moves job to state `to`; reason (NULL: keep) becomes its reason. False if illegal. */
bool tr_job(Turn *t, Job *job, JobState to, const char *reason);
/*
 * Moves a rank of job's current attempt. A rank that leaves the desired states
 * (assigned, running) leaves its node's desired set, so the node's version grows (equal
 * versions mean equal desired sets); an alive one stays alive until its agent confirms
 * it gone.
 */
bool tr_rank(Turn *t, Job *job, Rank *r, RankState to);
/* The rank's process is known to be gone: its node's capacity is free again. */
void tr_rank_gone(Turn *t, Job *job, Rank *r);
/* Every desired rank of job's current attempt is killed (tr_rank to RANK_KILLED). */
void tr_job_stop_ranks(Turn *t, Job *job);
/* Moves node to state `to` with reason (NULL: keep). False if illegal. */
bool tr_node(Turn *t, Node *node, NodeState to, const char *reason);
/* Moves node's version past version (one an agent holds from another controller, that
 * led before a failover with its clock ahead), and marks the node changed. */
void tr_node_version_above(Turn *t, Node *node, uint64_t version);
/* A node's desired set changed without a rank leaving it (registration). */
void tr_node_bump(Turn *t, Node *node);
/*
 * Starts job's next attempt on the placement: a new attempt resuming from the job's
 * checkpoint, its ranks assigned (node_of maps the placement's node indexes), the job
 * starting. False (nothing changed) if the job may not start now.
 */
bool tr_attempt_start(Turn *t, Job *job, const SchedPlacement *pl, Node **node_of);
/* Ends job's current attempt; false when it already ended. */
bool tr_attempt_end(Turn *t, Job *job, EndReason reason, const char *blamed, const char *detail);
