/* SPDX-License-Identifier: MIT */
/* A controller on a real SQLite store and the operations the API calls, for the core's
 * tests; see test-fixture.h. */
#include "test-fixture.h"

#include <sqlite3.h>
#include <stdio.h>
#include <unistd.h>

#include "../tests/unit/check.h"
#include "util.h"

char *tmpdir;

void db_path(char path[DB_PATH_MAX], const char *name) {
        snprintf(path, DB_PATH_MAX, "%s/%s.db", tmpdir, name);
}

void wait_for_scheduler(Controller *ctl) {
        do
                usleep(1000);
        while (util_now_ms() - ctl->sched.last_pass_ms < ctl->sched_interval_ms);
}

Controller *controller_open(const char *name, int64_t start_timeout_ms, int64_t job_retention_ms) {
        char path[DB_PATH_MAX];
        db_path(path, name);
        CtlConfig cfg = {.db_path = path,
                         .lease_ms = 10000,
                         .grace_ms = 2000,
                         .sync_period_ms = 1000,
                         .quarantine_after = 3,
                         .quarantine_window_ms = 600000,
                         .start_timeout_ms = start_timeout_ms,
                         .job_retention_ms = job_retention_ms,
                         .strict_transitions = true};
        Controller *ctl = NULL;
        CHECK(ctl_new(&cfg, &ctl) == 0);
        return ctl;
}

Controller *controller_with(const char *name, int64_t start_timeout_ms) {
        Controller *ctl = controller_open(name, start_timeout_ms, 300000);
        CHECK(ctl_end_turn(ctl) == 0);
        return ctl;
}

Controller *controller(const char *name) {
        return controller_with(name, 0);
}

void sql_on(const char *name, const char *sql) {
        char path[DB_PATH_MAX];
        db_path(path, name);
        sqlite3 *db;
        CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
        CHECK_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
}

int node_register_agent(Controller *ctl, const char *name, const char *agent_id, Node **ret,
                        CtlError *err) {
        json_t *inv = json_pack("{s:i,s:i,s:[]}", "cpus", 8, "memory_mb", 1024, "accelerators");
        WireRegister msg = {.node = name,
                            .hostname = name,
                            .boot_id = "boot-1",
                            .agent_id = agent_id,
                            .inventory = inv};
        int r = ctl_node_register(ctl, &msg, ret, err);
        json_decref(inv);
        return r;
}

Node *node_register(Controller *ctl, const char *name) {
        Node *node = NULL;
        CtlError err = {0};
        CHECK(node_register_agent(ctl, name, "agent-1", &node, &err) == 0);
        return node;
}

json_t *one_rank_spec(const char *user) {
        return json_pack("{s:s,s:s,s:[s],s:i}", "project", "p", "user", user, "command",
                         "/bin/true", "ranks", 1);
}

Job *submit_spec(Controller *ctl, json_t *spec) {
        Job *job = NULL;
        bool created = false;
        CtlError err = {0};
        CHECK(ctl_job_submit(ctl, spec, NULL, &job, &created, &err) == 0);
        CHECK(created);
        json_decref(spec);
        return job;
}

Job *submit(Controller *ctl, const char *user, int ranks) {
        return submit_spec(ctl, json_pack("{s:s,s:s,s:s,s:[s],s:i,s:{s:i}}", "name", "j", "project",
                                          "p", "user", user, "command", "/bin/true", "ranks", ranks,
                                          "restart", "max_restarts", 5));
}

void sync_ranks(Controller *ctl, Node *node, WireRankReport *ranks, int n) {
        WireSync msg = {.node = node->name,
                        .boot_id = "boot-1",
                        .agent_id = "agent-1",
                        .ranks = ranks,
                        .n_ranks = n,
                        .healthy = true,
                        .health_reason = ""};
        Node *ret = NULL;
        CtlError err = {0};
        CHECK(ctl_node_sync(ctl, &msg, node->version, NULL, &ret, &err) >= 0); /* 1: resumed */
}
