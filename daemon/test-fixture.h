/* SPDX-License-Identifier: MIT */
/*
 * What the core's tests share: a controller on a real SQLite store in this run's scratch
 * directory, driven through the operations the API calls (register, submit, sync).
 */
#pragma once

#include "controller-internal.h"

extern char *tmpdir; /* this run's scratch directory, set by the test's main */

/* The path of name's database in tmpdir. */
#define DB_PATH_MAX 256
void db_path(char path[DB_PATH_MAX], const char *name);

/* Sleeps until the scheduler may run again: its interval grows with the last pass's
 * duration, which a sanitizer build stretches. */
void wait_for_scheduler(Controller *ctl);
/* The controller of name's database (created if new), before its first turn. */
Controller *controller_open(const char *name, int64_t start_timeout_ms, int64_t job_retention_ms);
/* The same after its first turn; controller() with no start timeout. */
Controller *controller_with(const char *name, int64_t start_timeout_ms);
Controller *controller(const char *name);
/* Runs sql on name's database outside the controller, as an operator or an older
 * axctld would. */
void sql_on(const char *name, const char *sql);
/* Registers node name: 8 CPUs, 1 GiB, no accelerators, from agent-1's agent. */
Node *node_register(Controller *ctl, const char *name);
/* The same from agent agent_id, which may be refused: ctl_node_register's result. */
int node_register_agent(Controller *ctl, const char *name, const char *agent_id, Node **ret,
                        CtlError *err);
/* A spec of one rank in project p, by user. */
json_t *one_rank_spec(const char *user);
/* Submits spec (taken over), which must be accepted as a new job. */
Job *submit_spec(Controller *ctl, json_t *spec);
/* A job of ranks ranks in project p by user, restarted up to 5 times. */
Job *submit(Controller *ctl, const char *user, int ranks);
/* node's agent reports ranks, converged to the node's version. */
void sync_ranks(Controller *ctl, Node *node, WireRankReport *ranks, int n);
