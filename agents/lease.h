/* SPDX-License-Identifier: MIT */
/*
 * The node's lease, shared between the agent and every rank supervisor (shim) of the
 * node. The controller grants the lease; the agent records its deadline here after each
 * answered request, as "send time of that request + lease" on CLOCK_BOOTTIME, and each
 * shim kills its whole rank once the deadline has passed. So a rank is fenced on time
 * whatever became of the agent: dead, stopped, hung or cut off (issue 18).
 *
 * The record is a small file, <state_dir>/lease, mapped shared: renewing is one atomic
 * store, reading one atomic load. Shims are forks of the agent and inherit the mapping,
 * so they watch the file's inode: a restarted agent that reopens the same file renews
 * the lease of the ranks it re-adopts, while one that lost its state directory writes a
 * new file, and the ranks it cannot know about are fenced when the old deadline passes.
 */
#pragma once

#include <stdint.h>

typedef struct NodeLease NodeLease;

/*
 * Opens <state_dir>/lease, creating it with an expired deadline, and maps it. An
 * existing deadline is kept: the ranks of an earlier agent run on under it until this
 * agent renews it or it passes. 0 or -errno.
 */
int node_lease_open(const char *state_dir, NodeLease **ret);
/* Unmaps; ranks keep running under the recorded deadline. Returns NULL. */
NodeLease *node_lease_close(NodeLease *l);

/* Records a new deadline (CLOCK_BOOTTIME milliseconds). */
void node_lease_renew(NodeLease *l, int64_t deadline_boot_ms);
/* The recorded deadline (CLOCK_BOOTTIME milliseconds); 0 when never renewed. */
int64_t node_lease_deadline(const NodeLease *l);
