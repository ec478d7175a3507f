/* SPDX-License-Identifier: MIT */
/*
 * The agent's table of ranks and their state on disk. Each rank has a directory
 * <state>/ranks/<job>-<attempt>-<rank>/ holding desired.json (what a later agent needs to
 * know about it), reserve (space for its exit record, reserve.h), shim.pid, rank.pid,
 * progress (AXCTL_PROGRESS_FILE) and, once it has ended, status. Logs live apart, in <state>/logs/<job>/<attempt>/rank-<rank>.log, and
 * stay after the rank's directory is removed. Because the directory is the truth, a new
 * agent rebuilds the table from disk and carries on without restarting anything.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "progress.h"
#include "shim.h"
#include "wire.h"

/* A rank is named as the controller names it in the protocol. */
typedef WireRankKey RankKey;

typedef enum AgentRankState {
        AGENT_RANK_RUNNING,
        AGENT_RANK_EXITED,
        _AGENT_RANK_STATE_MAX,
        _AGENT_RANK_STATE_INVALID = -1,
} AgentRankState;

typedef struct Rank {
        RankKey key;
        char *dir;
        char *checkpoint_dir; /* NULL when the job has none */
        /* The account the rank runs as (do_switch false: the agent's own); the agent
         * looks into checkpoint_dir as this account, never with its own rights. */
        RankUser run_as;
        int64_t hang_timeout_s;
        int hang_signal; /* sent once a hang is seen, before it is reported; 0: none */
        int64_t hang_signal_grace_s;
        int64_t hang_signalled_ms; /* CLOCK_BOOTTIME of that signal; 0: not sent */
        int64_t started_wall_ms;
        int64_t started_boot_ms; /* the same moment on CLOCK_BOOTTIME: the hang clock's */
        pid_t shim_pid;
        pid_t rank_pid; /* also the process group of the rank; -1 when unknown */
        int pidfd; /* readable when the watched process ends; -1 when not watching */
        pid_t watched_pid; /* the shim, or the rank itself when its shim is gone */
        AgentRankState state;
        RankExit exit; /* valid when state is AGENT_RANK_EXITED */
        CgroupRank *cgroup; /* its cgroups; NULL when the agent has none */
        ProgressTracker progress;
        bool hung;
        bool stopping; /* SIGTERM sent */
        int64_t kill_deadline_ms; /* monotonic time for SIGKILL after SIGTERM; 0: none */
        uint64_t exit_reported_in; /* sync request that first carried the exit; 0: none */
        int node_error; /* its start failed for want of the node's state dir: -errno; 0 */
        char *log_tail; /* a failed rank's last log bytes, for failure rules; NULL: none */
} Rank;

typedef struct RankTable RankTable;

/*
 * What to start. error != NULL records a launch failure with that message and exit code
 * error_exit (0: SHIM_EXIT_LAUNCH_FAILED).
 */
typedef struct RankLaunch {
        RankKey key;
        char *const *argv;
        char *const *envp; /* sorted KEY=VALUE, written at the head of the log */
        const char *workdir;
        const char *user; /* the job's user, as the controller named it (recorded) */
        const RankUser *run_as; /* the account to run as; NULL: the agent's, no switch */
        const char *checkpoint_dir;
        int64_t hang_timeout_s;
        int hang_signal;
        int64_t hang_signal_grace_s;
        int cpus; /* limits, where the agent has the cgroup controllers; 0: none */
        int64_t memory_mb;
        const char *error;
        int error_exit;
} RankLaunch;

/* Creates <state_dir>/ranks and <state_dir>/logs and opens the node lease
 * <state_dir>/lease. boot_id fences pids of earlier boots. */
int rank_table_new(const char *state_dir, const char *boot_id, RankTable **ret);
/*
 * Gives the table the agent's cgroups (borrowed; NULL: none), before rank_table_adopt:
 * every rank then runs in a cgroup of its own below them, named after its key.
 */
void rank_table_use_cgroups(RankTable *t, CgroupSet *cgroups);
/*
 * Kills and removes the rank cgroups below the agent's that belong to no running rank
 * of the table: those of an agent of this node that lost its state. Returns the number
 * removed, or -errno.
 */
int rank_table_sweep_cgroups(RankTable *t);
/*
 * Records the node lease's new deadline (CLOCK_BOOTTIME ms): every rank of the node,
 * re-adopted ones included, is killed by its shim once it passes (lease.h).
 */
void rank_table_renew_lease(RankTable *t, int64_t deadline_boot_ms);
/* The cap and rotation of the logs of ranks started from now on (default: logpump.h's). */
void rank_table_set_log_limits(RankTable *t, LogPumpLimits limits);
/* Frees the table; ranks keep running. Returns NULL. */
RankTable *rank_table_free(RankTable *t);

/*
 * Re-adopts the ranks found on disk: running when the rank process lives and has no
 * status, exited when its status is recorded. Returns the number adopted or -errno.
 */
int rank_table_adopt(RankTable *t);

size_t rank_table_count(const RankTable *t);
Rank *rank_table_at(const RankTable *t, size_t i);
Rank *rank_table_find(const RankTable *t, RankKey key);

/* Paths of one rank's files (malloc'd): its progress file and its log. */
char *rank_table_progress_path(const RankTable *t, RankKey key);
char *rank_table_log_path(const RankTable *t, RankKey key);
/* The log path for a key given as the log server receives it. */
char *rank_log_path(const char *state_dir, RankKey key);
/* True when the rank of key has ended or is unknown to this node (for log following). */
bool rank_finished_on_disk(const char *state_dir, RankKey key);

/*
 * Starts a rank (or records its launch failure) and adds it to the table. Returns 0
 * with *ret (owned by the table), or -EEXIST when the key is in the table already. A
 * rank whose state directory or log cannot be written is recorded as exited (in memory
 * only, with node_error set): the node's fault, reported like any start failure.
 */
int rank_table_start(RankTable *t, const RankLaunch *l, Rank **ret);

/*
 * Asks a running rank to stop: SIGTERM now to every process of it (its cgroup's, else
 * every descendant of its shim, double-forked ones in sessions of their own included),
 * SIGKILL to all of them once grace_ms have passed (see rank_table_tick). Repeated calls
 * do not restart the grace period.
 */
void rank_kill(Rank *r, int64_t now_ms, int64_t grace_ms);

/* Sends sig to the rank's process group, and to the rank itself if it left the group
 * (the hang signal: meant for the rank's own processes, not what it detached). */
void rank_signal(const Rank *r, int sig);

/* The last FAILRULES_LOG_TAIL bytes of the rank's log as valid UTF-8 (malloc'd), NULL
 * when there is none. */
char *rank_table_log_tail(const RankTable *t, RankKey key);

/* Sends the SIGKILLs that are due, to the rank's whole cgroup where it has one. */
void rank_table_tick(RankTable *t, int64_t now_ms);

/*
 * Checks whether a running rank has ended (call when its pidfd is readable, or to poll).
 * Returns true when it moved to AGENT_RANK_EXITED just now.
 */
bool rank_check_exit(Rank *r);

/* Forgets an exited rank: removes its state directory (not its log) and its cgroups,
 * killing what a vanished shim left there, and frees it. */
void rank_table_remove(RankTable *t, Rank *r);

/* Earliest pending SIGKILL deadline, or INT64_MAX. */
int64_t rank_table_next_deadline(const RankTable *t);
