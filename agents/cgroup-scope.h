/* SPDX-License-Identifier: MIT */
/*
 * Rank cgroups that systemd makes: a transient scope per rank, asked for over the bus
 * (StartTransientUnit), for a cgroup v2 host under systemd where the agent has no
 * delegated subtree that can limit ranks (cgroup.h says when). systemd creates the
 * scope's cgroup in a slice of ours, moves the rank's first process into it and applies
 * the job's cpus and memory_mb as CPUQuota= and MemoryMax=; the agent then kills and
 * watches that cgroup as it does its own (cgroup.c).
 *
 * Private to cgroup.c. Nothing here logs; errors are negative errno values.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>

/* The slice every agent of a host puts its rank scopes in. */
#define CGROUP_SCOPE_SLICE "axagent.slice"

/* Connects to systemd: its private socket as root, else the system bus. 0 or -errno. */
int cgroup_scope_connect(sd_bus **ret);

/*
 * Starts the slice (a no-op when it runs) and returns its cgroup path as systemd names
 * it, e.g. "/axagent.slice" (malloc'd). 0 or -errno.
 */
int cgroup_scope_slice_start(sd_bus *bus, const char *slice, char **ret_path);

/*
 * Escapes name for use in a unit name: letters, digits, '_', '.' and '-' stay (a leading
 * '.' does not), anything else becomes \xNN, so the result holds no ':' (malloc'd).
 */
char *cgroup_scope_escape(const char *name);

/*
 * Starts the transient scope unit in slice around pid (which must not run what it is
 * for until this returns) with Delegate=yes, and cpus (CPUQuota) and memory_mb
 * (MemoryMax, no swap) where not 0, and waits for systemd to have done it. 0, -EEXIST
 * when the unit exists already, -ETIMEDOUT, or another -errno.
 */
int cgroup_scope_start(sd_bus *bus, const char *unit, const char *slice, pid_t pid, int cpus,
                       int64_t memory_mb);
