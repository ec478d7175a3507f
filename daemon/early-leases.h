/* SPDX-License-Identifier: MIT */
/*
 * A restarted controller's answer to each stored agent's first sync before the rest of
 * the state has loaded, which renews the agent's lease: the short answer that its
 * desired ranks did not change, or, to an agent whose version is not the stored one (it
 * missed the old controller's last answer), the answer that renews the lease only. At
 * 10,000 nodes the load and the first turn take two seconds or more, and an agent may
 * have spent half its lease before the old controller died; without this its ranks
 * would fence while the new controller reads the database.
 *
 * It is safe because the loaded controller gives every node it keeps a lease a fresh one
 * from when serving starts (ctl_serving_starts), later than any answer given here, and
 * answers here only what the database holds as committed: the node keeps a lease (it is
 * not down), the same agent and boot as stored, and for the short answer the stored
 * desired-state version, which the agent says it applied. The lease-only answer changes
 * no rank: the agent keeps what it runs and reports until the loaded controller answers
 * whole. Anything else waits for the loaded controller, and so does the next sync on a
 * connection answered here (api/loading.c), so that agents do not poll in a loop: one
 * that drops its held sync for news, on a new connection, is answered again.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "wire.h"

typedef struct EarlyLeases EarlyLeases;

/* Monotonic ms at which the answers stop, asked at each answer: a leader's lease, which
 * may be renewed or lost while the state loads. */
typedef int64_t (*EarlyLeasesUntil)(void *ctx);
/*
 * Reads the stored nodes and, when auth, the valid agent tokens. lease_ms and
 * sync_period_ms go into the answers. Answers stop at until(until_ctx) (NULL: never),
 * for a controller whose leadership may lapse while it loads. 0 or -errno.
 */
int early_leases_load(Store *store, bool auth, int64_t lease_ms, int64_t sync_period_ms,
                      EarlyLeasesUntil until, void *until_ctx, EarlyLeases **ret);
EarlyLeases *early_leases_free(EarlyLeases *el);
/* How many nodes keep a lease: the agents expected to reconnect. */
size_t early_leases_nodes(const EarlyLeases *el);
/* Whether a request with bearer token (NULL: none) may be answered here at all: always
 * without auth, else with a valid agent token. Cheap: checked before a body is parsed. */
bool early_leases_admits(const EarlyLeases *el, const char *token);
/* The answers beyond the whole one that an agent's sync accepts (wire.h's accept). */
typedef struct EarlyAccepts {
        bool unchanged, lease_only;
} EarlyAccepts;
/*
 * The answer text (malloc'd) to the sync msg of an agent that applied applied_version,
 * sent with bearer token (NULL without auth): unchanged where that is the stored version,
 * else lease_only; NULL when it must wait for the loaded controller (the agent accepts
 * neither that applies, or the stored node does not allow it). *ret_renewed: whether the
 * node's lease was renewed here, now or by an earlier answer.
 */
char *early_leases_answer(EarlyLeases *el, const char *token, const WireSync *msg,
                          uint64_t applied_version, const EarlyAccepts *accepts, bool *ret_renewed);
