/* SPDX-License-Identifier: MIT */
/*
 * The controller's durable state behind typed operations, in SQLite (a file: WAL,
 * synchronous=FULL) or PostgreSQL (a postgresql:// URL), the backends of backend.h.
 * This is the only code that speaks SQL; the engines' result codes never leave it
 * (they become negative errno values). Writes are grouped by the caller into one
 * transaction per loop turn (store_begin/store_commit), so many acknowledged requests
 * share one fsync. Strings in records are borrowed: valid for the duration of a call or,
 * when loading, of the callback.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct Store Store;

#define STORE_NONE INT64_MIN /* a NULL integer column */

typedef struct StoreJob {
        int64_t id;
        const char *name, *project, *user;
        int priority;
        /* Normalised spec JSON. NULL: the job's row exists, and only the columns that
         * change after a submit are written (-ENOENT when there is no such row). */
        const char *spec;
        const char *state;
        int attempt;
        int restarts;
        const char *reason;
        int64_t exit_code; /* STORE_NONE: none */
        int64_t created_ms, started_ms, finished_ms; /* STORE_NONE: not yet */
        const char *idempotency_key; /* NULL: none */
        int64_t ckpt_step; /* STORE_NONE: no checkpoint */
        const char *ckpt_path;
        const char *avoid_node; /* the node blamed last, avoided by the next placement */
        int tier; /* 0: within its project's quota; 1: on borrowed capacity */
        int64_t queued_ms; /* when it last entered the queue; STORE_NONE: at creation */
        int quick_failures; /* failures in a row without progress */
        int64_t best_step; /* highest step an ended attempt reached; STORE_NONE: none */
} StoreJob;

typedef struct StoreAttempt {
        int64_t job;
        int attempt;
        int64_t resume_step;
        const char *resume_path;
        int64_t started_ms, ended_ms;
        const char *end_reason; /* NULL while running */
        const char *blamed_node;
        const char *detail;
        /* Goodput's records (STORE_NONE: not seen): see daemon/model.h's Attempt. */
        int64_t running_ms, first_progress_ms, last_progress_ms, failed_ms;
        int64_t first_ckpt_ms, last_ckpt_ms;
        int n_ckpts;
        int64_t ckpt_stall_ms;
        int n_ckpt_stalls;
} StoreAttempt;

typedef struct StoreRank {
        int64_t job;
        int attempt;
        int rank;
        const char *node;
        const char *devices; /* JSON array of inventory indices */
        const char *state;
        bool alive; /* may still have a process on its node */
        int64_t pid, exit_code, signal, step; /* STORE_NONE: unknown */
        int local_rank, node_rank;
} StoreRank;

typedef struct StoreNode {
        const char *name, *hostname, *address, *boot_id;
        const char *labels, *inventory; /* JSON */
        const char *state, *reason;
        int64_t last_seen_ms;
        const char *blame_times; /* JSON array of wall ms */
        const char *agent_id; /* the agent that last registered it; NULL: none yet */
        int64_t version; /* of its desired state; 0: not known (an older database) */
} StoreNode;

typedef struct StoreCheckpoint {
        int64_t job;
        int64_t step;
        const char *path;
        int64_t committed_ms;
        int attempt;
} StoreCheckpoint;

typedef struct StoreToken {
        const char *name;
        const char *hash; /* hex SHA-256 of the token; the token itself is never stored */
        const char *role; /* "admin", "user", "agent" */
        const char *projects; /* JSON array of project names (users) */
        const char *node; /* the node an agent token is bound to */
        int64_t created_ms, revoked_ms; /* revoked_ms STORE_NONE: valid */
} StoreToken;

typedef struct StoreEvent {
        int64_t seq; /* set by the store */
        int64_t time_ms;
        int64_t job; /* 0: none */
        const char *node; /* NULL: none */
        const char *kind;
        const char *detail;
} StoreEvent;

/* An ended job's goodput figures (docs/GOODPUT.md), written once with its final state. */
#define STORE_GOODPUT_BUCKETS 9 /* health/goodput.h's buckets, in its order */
typedef struct StoreGoodput {
        int64_t job;
        const char *project;
        int64_t created_ms, finished_ms;
        int64_t accelerators; /* what one second of the job weighs */
        int64_t ms[STORE_GOODPUT_BUCKETS]; /* its life per bucket, unweighted */
        int64_t interruptions; /* attempts ended by a failure of the job or of a node */
        int64_t rank_ms; /* its attempts' run time × its ranks */
        int64_t jobs; /* sums: how many jobs had time in the window */
} StoreGoodput;

/* Opens (creating if needed) and migrates the database: target is a PostgreSQL URL
 * (postgresql://, postgres://) or keyword string (host=..., dbname=...), anything else
 * a SQLite file's path. 0 or -errno; store_last_error(NULL) then says why. */
int store_open(const char *target, Store **ret_store);
/* Whether target names a PostgreSQL database rather than a file. */
bool store_target_is_url(const char *target);
/* Target as logs may show it: a URL's password replaced by ***. Malloc'd. */
char *store_target_display(const char *target);
Store *store_close(Store *store);
/*
 * Checks that the database file is still the one opened: -ENOENT when it was deleted
 * (or moved away: its path names nothing), -ESTALE when the path now names another
 * file, another -errno when that cannot be told; 0 when it is. Commits to a file that
 * is gone are lost at the next start. Costs two stat calls.
 */
int store_check_file(Store *store);
/* Creates path as an older axctld left it, with only the first `version` migrations
 * applied, and closes it: for the tests of upgrades. 0 or -errno. */
int store_create_at_version(const char *target, int version);
/* Human-readable text of the last failure of store, for logs: the engine's or server's
 * message, never a password; once fenced (-ESTALE), that another controller leads. store
 * NULL: why the last store_open failed ("" if it did not). */
const char *store_last_error(Store *store);

/* What the WAL took so far: checkpoints run off the writing thread and in its commits
 * (where that one fell behind), and the pages the commits wrote into it (each changed page
 * whole, however little of it changed: the write volume); zeros for a database that
 * keeps its log out of our sight (PostgreSQL). */
typedef struct StoreWalStats {
        uint64_t checkpoints_on_thread, checkpoints_on_commit;
        uint64_t pages_written;
} StoreWalStats;
void store_wal_stats(Store *store, StoreWalStats *ret);
/* The pages worth keeping in memory, in KiB: SQLite's page cache (never below its default
 * of 2,000 KiB); nothing for PostgreSQL, whose server caches. Returns the KiB the cache
 * now holds at most (0: none here), or -errno. */
int64_t store_cache_hint(Store *store, int64_t kib);

int store_begin(Store *store);
int store_commit(Store *store);
int store_rollback(Store *store);
bool store_in_transaction(Store *store);

int store_job_put(Store *store, const StoreJob *job);
int store_attempt_put(Store *store, const StoreAttempt *attempt);
int store_rank_put(Store *store, const StoreRank *rank);
int store_node_put(Store *store, const StoreNode *node);
/* A stored node's desired-state version alone (its rank placements changed). */
int store_node_version_put(Store *store, const char *name, int64_t version);
int store_checkpoint_put(Store *store, const StoreCheckpoint *ckpt);
int store_event_append(Store *store, StoreEvent *event);

typedef int (*StoreJobFn)(void *userdata, const StoreJob *job);
typedef int (*StoreAttemptFn)(void *userdata, const StoreAttempt *attempt);
typedef int (*StoreRankFn)(void *userdata, const StoreRank *rank);
typedef int (*StoreNodeFn)(void *userdata, const StoreNode *node);
typedef int (*StoreEventFn)(void *userdata, const StoreEvent *event);
typedef int (*StoreTokenFn)(void *userdata, const StoreToken *token);

/* Tokens. insert: -EEXIST when the name is taken; revoke: -ENOENT when none is valid. */
int store_token_insert(Store *store, const StoreToken *token);
int store_token_revoke(Store *store, const char *name, int64_t now_ms);
/* Calls fn for the valid token with this hash, if there is one. */
int store_token_find(Store *store, const char *hash, StoreTokenFn fn, void *userdata);
/* Changes whenever a token is created, revoked or deleted: whoever keeps identities read
 * from the table (daemon/tokencache.h) compares it to know when they may be stale. */
typedef struct StoreTokenStamp {
        int64_t tokens, revoked, created_ms_sum, revoked_ms_sum;
} StoreTokenStamp;
int store_token_stamp(Store *store, StoreTokenStamp *ret);
int store_tokens_list(Store *store, StoreTokenFn fn, void *userdata);

/* Loaders call fn for each row in key order; a negative return from fn stops and is returned. */
/* Every job but those over before retire_before_ms (wall) with no rank that may still run:
 * those stay in the store only (axctld --job-retention-s). */
int store_jobs_load(Store *store, int64_t retire_before_ms, StoreJobFn fn, void *userdata);
/* The jobs first_id..last_id (those stored), then their attempts, then the ranks of
 * their latest attempts; ids ascending in each. */
int store_jobs_read(Store *store, int64_t first_id, int64_t last_id, StoreJobFn job_fn,
                    StoreAttemptFn attempt_fn, StoreRankFn rank_fn, void *userdata);
/* The id after the highest stored. */
int store_job_next_id(Store *store, int64_t *ret_id);
/* The job of project submitted with idempotency key, *ret_id 0 when none. */
int store_job_find_key(Store *store, const char *project, const char *key, int64_t *ret_id);
/* Job ids below before (0: all), newest first, of that state and project (NULL: any);
 * fn returns 0 to go on, > 0 to stop, -errno to fail. */
typedef int (*StoreIdFn)(void *userdata, int64_t id);
int store_jobs_list(Store *store, int64_t before, const char *state, const char *project,
                    StoreIdFn fn, void *userdata);
/* The jobs with a finish time at or after since_ms, ids ascending. */
int store_jobs_finished_since(Store *store, int64_t since_ms, StoreIdFn fn, void *userdata);
/* The attempts of the jobs store_jobs_load loads for the same cutoff, and no others. */
int store_attempts_load(Store *store, int64_t retire_before_ms, StoreAttemptFn fn, void *userdata);

/* Goodput of ended jobs; project NULL: any. store_goodput_sum calls fn once per project
 * with the sums over the jobs created at or after since_ms (ms[] weighted by each job's
 * accelerators, accelerators 1, job 0); store_goodput_straddling once per job created
 * before since_ms and ended after it, whose share of the window only its timeline
 * tells. */
typedef int (*StoreGoodputFn)(void *userdata, const StoreGoodput *g);
/* A job's figures are final: a second put of the same job changes nothing. */
int store_goodput_put(Store *store, const StoreGoodput *g);
int store_goodput_sum(Store *store, const char *project, int64_t since_ms, StoreGoodputFn fn,
                      void *userdata);
int store_goodput_straddling(Store *store, const char *project, int64_t since_ms, StoreGoodputFn fn,
                             void *userdata);
/* Each project's sums over every ended job's figures (store_goodput_sum's since 0),
 * kept as figures are written rather than summed. */
int store_goodput_totals(Store *store, StoreGoodputFn fn, void *userdata);
/* Ended jobs without goodput figures: those a database before migration 8 holds. */
int store_goodput_missing(Store *store, StoreIdFn fn, void *userdata);
/* The ranks of those jobs' latest attempts (store_attempts_load). */
int store_ranks_load(Store *store, int64_t retire_before_ms, StoreRankFn fn, void *userdata);
int store_nodes_load(Store *store, StoreNodeFn fn, void *userdata);
/* Events after seq `after` (of one job when job > 0), oldest first, at most limit. */
int store_events_list(Store *store, int64_t job, int64_t after, int limit, StoreEventFn fn,
                      void *userdata);

/* Leadership among controllers sharing one database (migration 9's one-row table). The
 * database's own clock times the lease, so the controllers' clocks need not agree. */
typedef struct StoreLeader {
        char holder[128]; /* the leading controller's instance id; "" when none ever led */
        char url[512]; /* where the leader serves its API */
        int64_t token; /* fencing token: grows with every new leadership */
        int64_t expires_in_ms; /* what is left of its lease by the database's clock; <= 0: expired */
} StoreLeader;

/* Takes or renews leadership for holder, serving at url, for lease_ms. Outside a
 * transaction only (-EBUSY otherwise); one short transaction of its own. Renews when
 * this Store already leads with the row's token. Takes it, with token + 1, when the
 * lease expired, when nobody ever led, or when the row's holder is this holder but this
 * Store does not lead yet (a restarted controller of the same instance id takes over at
 * once; the bumped token fences its previous incarnation). Fills *ret (may be NULL) with
 * the row as it is afterwards. 1: this Store leads, and from then on every store_commit
 * first checks, inside its transaction and holding the row's lock, that the row still has
 * this Store's token and holder, and else rolls back and returns -ESTALE (fenced); the
 * Store then stays fenced. 0: another leads. -errno on failure. */
int store_lead(Store *store, const char *holder, const char *url, int64_t lease_ms,
               StoreLeader *ret);
/* Makes other, a second Store on the same database, hold the leadership leading holds
 * (its token and holder): store_lead on other then renews it, for a controller whose
 * leading Store is busy for longer than the lease (the load of its state). -EINVAL when
 * leading does not lead or other already took part in an election. */
int store_lead_share(const Store *leading, Store *other);
/* Reads the row (all zero/empty when none ever led). */
int store_leader_get(Store *store, StoreLeader *ret);
/* Ends this Store's lease now (expires now) if it leads, so a follower takes over at
 * once: for a clean shutdown. */
int store_resign(Store *store);
