/* SPDX-License-Identifier: MIT */
/*
 * The Controller struct, shared by the files of the controller core. Nothing outside
 * daemon/ includes this. Who calls whom, with no cycle: controller.c (the turn) calls
 * nodes.c, jobs.c, schedule.c and persist.c; nodes.c calls jobs.c; jobs.c calls
 * schedule.c's feasibility check; all of them change states only through transition.c
 * and ask health/ for verdicts.
 */
#pragma once

#include "controller.h"
#include "metrics.h"
#include "schedule.h"
#include "tokencache.h"
#include "transition.h"

struct Controller {
        CtlConfig cfg;
        Store *store;
        Model model;
        Turn turn;
        Scheduling sched;
        char failure[320]; /* set when a turn failed: the controller stops */
        FailRules failure_rules; /* the operator's (--failure-rules) */
        uint64_t rules_epoch; /* grows with each reload of them (ReportMark) */
        int64_t next_file_check_ms; /* when an idle controller looks at its database file */
        int64_t sched_interval_ms; /* least time between scheduling passes (controller.c) */
        int64_t next_retire_ms; /* when jobs over for the retention time next leave memory */
        int cache_nodes; /* the nodes the store's page cache was last sized for */
        /* After a restart, the stored nodes whose agents have not synced yet, and until
         * when scheduling waits for them: the reconnecting fleet is answered first. */
        int reconnecting;
        int64_t reconnect_until_ms;
        /* After a start, the jobs that ended within the retention time: read from the
         * store (as retired ones are) until the fleet is back, then loaded a batch a turn
         * (ctl_load_ended_jobs). Listed at the first batch; NULL once all are in. */
        int64_t *ended_ids;
        int n_ended_ids, cap_ended_ids, next_ended_id;
        int64_t next_ended_ms; /* the next batch not before */
        bool ended_pending;
        TokenCache *tokens; /* identities read lately (tokencache.h) */
        uint64_t token_lookups[2]; /* bearer tokens found in the cache [0], in the store [1] */
        Job **borrowed; /* jobs read from the store for this turn's requests (jobs.c) */
        int n_borrowed, cap_borrowed;
        /* For /metrics. */
        uint64_t restarts_by_reason[_END_REASON_MAX];
        Histogram recovery; /* failure detected -> every rank of the next attempt running */
        Histogram sched_pass;
        Histogram db_commit;
        Histogram loop_turn; /* turns that wrote: requests, pass, commit, answers */
};

/* The node's agent registered or synced: it counts as reconnected after a restart. */
void ctl_node_connected(Controller *ctl, Node *node);

void ctl_error_set(CtlError *err, CtlErrorCode code, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
