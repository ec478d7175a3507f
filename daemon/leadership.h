/* SPDX-License-Identifier: MIT */
/*
 * Controller failover (docs/OPERATIONS.md, "Controller failover"): controllers that share
 * one database elect a leader through the store's lease row (store_lead). A follower
 * serves redirects (api/follower.h) and asks for the lease every quarter lease; the
 * leader renews it as often and stops, at once, when it cannot keep it: its lease then
 * ran out by its own clock, or a commit found it fenced (-ESTALE). It exits rather than
 * steps down: its memory holds what it may no longer act on.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

typedef struct Leadership {
        Store *store; /* borrowed */
        const char *holder; /* this controller's instance id */
        const char *url; /* where it serves, for the followers' redirects */
        int64_t lease_ms;
        int64_t valid_until_ms; /* monotonic: the last renewal's start + the lease */
        int64_t next_renew_ms; /* monotonic */
} Leadership;

/*
 * Follows until this controller leads, serving redirects on listen_fd (TLS when both
 * PEMs are set) meanwhile. 1: it leads (the listening socket is free again for the API);
 * 0: SIGTERM or SIGINT on signal_fd asked it to stop; -errno: the database failed.
 */
int leadership_await(Leadership *l, int listen_fd, int signal_fd, const char *tls_cert_pem,
                     const char *tls_key_pem);
/* Renews the lease when due; false when the leadership is lost (the caller stops). */
bool leadership_keep(Leadership *l);
/* Monotonic ms by which leadership_keep must run again. */
int64_t leadership_deadline_ms(const Leadership *l);
/* Gives the lease up so that a follower takes over at once (a clean shutdown). */
void leadership_resign(Leadership *l);

/*
 * Renews l's lease on a connection and a thread of their own while l's store is busy for
 * longer than the lease lasts (the load of the state and the first turn after it, seconds
 * at 100,000 jobs): else a follower takes the lead meanwhile, the load's writes are
 * fenced, and the two can take it from each other in turn. It renews for max_ms at most,
 * so that a load stuck for good hands the lead over. l must not be renewed elsewhere until
 * leadership_renewer_stop, which returns false when the leadership was lost meanwhile
 * (as leadership_renewer_lost tells at any time). 0 or -errno.
 */
typedef struct LeadershipRenewer LeadershipRenewer;
int leadership_renewer_start(Leadership *l, const char *db_target, int64_t max_ms,
                             LeadershipRenewer **ret);
bool leadership_renewer_lost(LeadershipRenewer *r);
/* Monotonic ms at which the lease as last renewed ends; 0 once it was lost. Any thread. */
int64_t leadership_renewer_valid_until_ms(LeadershipRenewer *r);
bool leadership_renewer_stop(LeadershipRenewer *r);
