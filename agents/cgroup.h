/* SPDX-License-Identifier: MIT */
/*
 * A cgroup per rank (DESIGN.md §4b): everything a rank starts, whatever session or
 * process group it moves to and even after its supervisor is gone, stays in the rank's
 * cgroup, is killed with it in one step and counts against the job's `cpus` and
 * `memory_mb`.
 *
 * The agent finds the hierarchies it sits in at start (cgroup_layout_read: mountinfo
 * and /proc/self/cgroup) and makes its own cgroup, <its cgroup>/<name>, in each it can
 * use (cgroup_set_open): the cgroup v2 hierarchy, and the v1 freezer, pids, memory and
 * cpu hierarchies where the machine mounts those. Every rank gets <name>/<rank name>
 * in each of them (CgroupRank). A cgroup v2 subtree gets memory and cpu controllers
 * only where the kernel lets the agent enable them: in a cgroup without processes, such
 * as the delegated unit cgroup the agent sits beside under systemd's Delegate=yes with
 * DelegateSubgroup=; elsewhere v2 still kills, and v1 limits where mounted. On a cgroup
 * v2 host under systemd, unless the agent is in such a subgroup, each rank's cgroup is
 * instead a transient scope that systemd makes, with the limits, in axagent.slice
 * (cgroup-scope.h): <slice>/<agent's name>:<rank name>.scope, created around the rank's
 * process by cgroup_rank_attach while it waits to run. Where no hierarchy can be used
 * the agent has no CgroupSet and its shims, child subreapers, stop rank trees by
 * themselves (proctree.h).
 *
 * Library code: nothing here logs. Every function that takes a CgroupRank is safe in a
 * forked child of a multi-threaded process after cgroup_rank_new (no allocation).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The controllers the agent uses, as bits. */
typedef enum CgroupController {
        CGROUP_FREEZER = 1 << 0,
        CGROUP_PIDS = 1 << 1,
        CGROUP_MEMORY = 1 << 2,
        CGROUP_CPU = 1 << 3,
} CgroupController;

/* One hierarchy the agent is in. */
typedef struct CgroupHierarchy {
        char *dir; /* the agent's own cgroup in it: mount point + the agent's path */
        char *mount_point, *mount_root; /* where it is mounted, and the cgroup shown there */
        bool v2;
        unsigned controllers; /* v1: what the hierarchy carries of CgroupController */
} CgroupHierarchy;

typedef struct CgroupLayout {
        CgroupHierarchy *hierarchies;
        size_t n;
} CgroupLayout;

/*
 * Finds the hierarchies of interest from the text of /proc/self/mountinfo and
 * /proc/self/cgroup: the v2 one, and the v1 ones carrying one of CgroupController. A
 * hierarchy whose mount does not show the agent's own cgroup is left out. 0 with *ret
 * (possibly empty; free with cgroup_layout_done), -EINVAL on unreadable text.
 */
int cgroup_layout_parse(const char *mountinfo, const char *self_cgroup, CgroupLayout *ret);
/* The same for this process, read from /proc. */
int cgroup_layout_read(CgroupLayout *ret);
void cgroup_layout_done(CgroupLayout *l);

/* The agent's cgroups: <hierarchy dir>/<name> in every hierarchy it can use. */
typedef struct CgroupSet CgroupSet;

/*
 * Creates (or reuses) the agent's cgroup name in every hierarchy of l it can write,
 * enabling the v2 controllers it may; in v2, beside the agent's own cgroup when that
 * is a subgroup of a delegated one. Returns 0 with *ret, -ENOENT when l has no
 * hierarchy and another -errno when none could be used.
 */
int cgroup_set_open(const CgroupLayout *l, const char *name, CgroupSet **ret);
/* Frees s and removes the agent's cgroups when no rank is left in them; running ranks
 * keep theirs. Returns NULL. */
CgroupSet *cgroup_set_free(CgroupSet *s);
/* "cgroup-v2", "cgroup-v2-scope" (systemd's scopes), "cgroup-v1" or "cgroup-v1+v2": how
 * ranks are contained here. */
const char *cgroup_set_kind(const CgroupSet *s);
/* One line for the log: the cgroups, how ranks are killed and which limits apply
 * (malloc'd). */
char *cgroup_set_describe(const CgroupSet *s);
/* The controllers that limit ranks here (CGROUP_MEMORY, CGROUP_CPU). */
unsigned cgroup_set_limits(const CgroupSet *s);

/*
 * Kills and removes every rank cgroup below the agent's that keep() does not claim
 * (the ranks of an agent that lost its state). Returns the number removed or -errno.
 */
int cgroup_set_sweep(CgroupSet *s, bool (*keep)(const char *name, void *userdata), void *userdata);

typedef struct CgroupLimits {
        int cpus; /* 0: no limit */
        int64_t memory_mb; /* 0: no limit */
} CgroupLimits;

/* One rank's cgroups, with every path formatted in advance. */
typedef struct CgroupRank CgroupRank;

/* The rank cgroup name (a directory name: no '/') in every hierarchy of s. */
CgroupRank *cgroup_rank_new(const CgroupSet *s, const char *name);
CgroupRank *cgroup_rank_free(CgroupRank *cg);
/*
 * Creates the rank's cgroups and applies lim where the controllers exist. A cgroup
 * left from an earlier run of the same name is emptied first. 0 or -errno (nothing is
 * left behind then).
 */
int cgroup_rank_create(const CgroupRank *cg, const CgroupLimits *lim);
/*
 * True when systemd makes the rank's cgroup around its process: the process must wait
 * before it runs until cgroup_rank_attach has returned.
 */
bool cgroup_rank_needs_attach(const CgroupRank *cg);
/* Has systemd make the rank's scope around pid with lim (0 where the rank needs no
 * attach). 0 or -errno: the rank then has no cgroup. */
int cgroup_rank_attach(const CgroupRank *cg, pid_t pid, const CgroupLimits *lim);
/* Moves the calling process into the rank's cgroups (nothing to do for a scope, which
 * systemd moved it into). 0 or -errno. */
int cgroup_rank_enter(const CgroupRank *cg);
/*
 * Kills every process in the rank's cgroups at once (cgroup.kill, else freeze, SIGKILL
 * all, thaw) and repeats until they are empty or max_rounds 2 ms apart have passed (0:
 * one pass, no waiting). Returns the number of processes found the first time, or
 * -errno.
 */
int cgroup_rank_kill(const CgroupRank *cg, int max_rounds);
/*
 * Sends sig once to every process in the rank's cgroups (a graceful stop reaches what
 * left the rank's process group and session too). Returns the number signalled, or
 * -errno when no cgroup of the rank could be read.
 */
int cgroup_rank_signal(const CgroupRank *cg, int sig);
/* True when the kernel's OOM killer killed a process of the rank (memory_mb hit). */
bool cgroup_rank_oom_killed(const CgroupRank *cg);
/* Removes the (empty) rank cgroups. 0, or -EBUSY while a process is left. */
int cgroup_rank_remove(const CgroupRank *cg);
