/* SPDX-License-Identifier: MIT */
/*
 * The rank supervisor ("shim"). A rank must outlive the agent that started it, so the
 * agent does not parent it: it double-forks a shim that starts its own session, forks
 * the rank into its own process group, records both pids, waits for the rank and writes
 * its exit status atomically into the rank's state directory before exiting. Any later
 * agent reads that file; the agent that started the rank watches the shim with a pidfd
 * to learn of the exit at once.
 *
 * The shim is also the rank's fence and its container. It watches the node lease
 * (lease.h) and kills the rank once the lease runs out, so a rank never outlives its
 * lease even when the agent is dead or stopped. It is a child subreaper, so nothing the
 * rank starts can leave its tree, and when the rank ends (or is fenced) every process
 * left in that tree is killed too (proctree.h). Where the agent has cgroups the rank
 * runs in its own (cgroup.h), which the shim kills and removes the same way.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "cgroup.h"
#include "lease.h"
#include "logpump.h"
#include "userpolicy.h"

/* How a rank ended: an exit code, or the signal that killed it. */
typedef struct RankExit {
        bool signaled;
        int code; /* exit code, or signal number when signaled */
        bool start_failed; /* never ran: its account, workdir or command could not be used */
        bool oom_killed; /* the kernel's OOM killer killed a process of it (memory_mb hit) */
} RankExit;

typedef struct ShimLaunch {
        const char *rank_dir; /* receives shim.pid, rank.pid and status */
        const char *log_path; /* stdout and stderr of the rank, pumped in (logpump.h) */
        const LogPumpLimits *log_limits; /* the log's cap and rotation; NULL: no cap */
        const char *workdir; /* NULL or "": the agent's working directory */
        char *const *argv; /* argv[0] is looked up in the rank's PATH */
        char *const *envp; /* the complete environment of the rank */
        const RankUser *user; /* NULL, or do_switch false: run as the agent's account */
        const char *progress_path; /* handed to the user the rank runs as; may be NULL */
        const NodeLease *lease; /* the rank is killed, with all it started, once it runs out */
        const CgroupRank *cgroup; /* created; the rank runs in it. NULL: the subreaper alone */
        /*
         * NULL, or called in the agent with the rank's pid while the rank waits to run,
         * to make its cgroup around it (a systemd scope: cgroup_rank_attach). The rank
         * runs once it returned, in no cgroup when it returned < 0.
         */
        int (*attach)(void *userdata, pid_t rank_pid);
        void *attach_data;
} ShimLaunch;

/* Exit code of a rank that could not be started (bad workdir, exec failure). */
#define SHIM_EXIT_LAUNCH_FAILED 127
/* Exit code of a rank whose user the policy refuses or that could not become it. */
#define SHIM_EXIT_USER_REFUSED 126
/* The shim's nice value where it may raise its priority (as root): beside a fork storm
 * and two busy CPUs, a shim at the rank's priority fenced 2-190 ms (once 680 ms) after
 * its deadline; at -10, 1-2 ms. */
#define SHIM_NICE (-10)

/*
 * Registers a buffer holding a secret of the agent (its controller token): the shim
 * overwrites it in its own copy of the agent's memory right after forking, so neither
 * the shim nor the rank carries it. At most a few buffers; the last registration of a
 * slot wins. NULL clears.
 */
void agent_shim_forget_secret(int slot, char *secret);
#define SHIM_SECRET_SLOTS 4

/*
 * Starts l->argv under a new shim. The rank gets descriptors 0 (/dev/null), 1 and 2 (the
 * log) and no others, its user's uid, gid and groups when l->user says to switch, umask
 * 022, and exactly l->envp as its environment. Returns 0 with the shim's and the rank's pids (the
 * rank pid is also its process group; it is -1 when the shim could not fork it and
 * records a launch failure instead), or -errno when no shim could be started.
 */
int agent_shim_spawn(const ShimLaunch *l, pid_t *ret_shim_pid, pid_t *ret_rank_pid);

/*
 * Runs fn(arg, fd) in a short-lived child of the agent that has become u (groups, gid,
 * uid, as a rank does; the agent's secrets wiped, no descriptor of the agent's but fd),
 * so that it sees files with exactly the rank's permissions. What fn writes to fd comes
 * back in buf (at most size - 1 bytes, NUL-terminated; the rest is dropped). Returns 0
 * when fn returned >= 0, -EPERM when the child could not become u, -EIO when fn failed,
 * another -errno when no child could run.
 */
int agent_shim_run_as(const RankUser *u, int (*fn)(void *arg, int fd), void *arg, char *buf,
                      size_t size);

/* Writes <rank_dir>/status atomically ("exit N", "signal N" or, for a rank that could not
 * start, "start N"; " oom" follows when the OOM killer struck); 0 or -errno. */
int agent_shim_write_status(const char *rank_dir, RankExit status);
/* Reads <rank_dir>/status: 1 with *ret, 0 when absent (rank not finished), -errno. */
int agent_shim_read_status(const char *rank_dir, RankExit *ret);

/* Reads a pid file written by the shim: 0 with *ret_pid, or -errno. */
int agent_shim_read_pid(const char *path, pid_t *ret_pid);
