/* SPDX-License-Identifier: MIT */
/*
 * The cost of a gang's sync answers: a controller (a real one on SQLite, in this
 * process) with N nodes places one gang of 8 ranks on each, then renders every node's
 * whole answer, as a restart or the gang's start does, once as to agents that accept
 * shared environments and once as to older ones. Prints one JSON line per way.
 *
 *     build/bench/bench_answers [NODES]        # default 3000
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "controller-internal.h"
#include "log.h"
#include "util.h"
#include "views.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void must(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "bench_answers: %s\n", what);
                exit(1);
        }
}

int main(int argc, char **argv) {
        int nodes = argc > 1 ? atoi(argv[1]) : 3000;
        must(nodes > 0 && nodes <= SPEC_MAX_RANKS / 8, "NODES must be 1..8192");
        log_setup("bench_answers", LOG_LEVEL_WARNING);
        /* mkdtemp's template: a fresh directory under $TMPDIR for the database. */
        char *dir = xasprintf("%s/bench-answers.XXXXXX", getenv("TMPDIR") ?: "/tmp");
        must(mkdtemp(dir) != NULL, "cannot create a directory for the database");
        char *db = xasprintf("%s/state.db", dir);
        CtlConfig cfg = {.db_path = db,
                         .lease_ms = 5000,
                         .grace_ms = 1000,
                         .sync_period_ms = 1000,
                         .quarantine_after = 3,
                         .quarantine_window_ms = 600000,
                         .job_retention_ms = 300000};
        Controller *ctl = NULL;
        must(ctl_new(&cfg, &ctl) == 0 && ctl_end_turn(ctl) == 0, "controller");
        json_t *inv = json_pack("{s:i,s:i,s:[]}", "cpus", 96, "memory_mb", 1 << 20, "accelerators");
        for (int i = 0; i < nodes; i++) {
                /* Names and addresses as a fleet's: the list is what they add up to. */
                char name[64], address[32];
                snprintf(name, sizeof(name), "gpu-node-%05d.cluster.example", i);
                snprintf(address, sizeof(address), "10.%d.%d.%d:9", i >> 16 & 255, i >> 8 & 255,
                         i & 255);
                WireRegister msg = {.node = name,
                                    .hostname = name,
                                    .address = address,
                                    .boot_id = "boot",
                                    .agent_id = "agent",
                                    .inventory = inv};
                Node *node = NULL;
                CtlError err = {0};
                must(ctl_node_register(ctl, &msg, &node, &err) == 0, "register");
        }
        json_decref(inv);
        must(ctl_end_turn(ctl) == 0, "commit the nodes");
        json_t *spec = json_pack("{s:s,s:s,s:s,s:[s,s],s:i,s:i,s:s}", "name", "gang", "project",
                                 "p", "user", "u", "command", "python3", "train.py", "ranks",
                                 8 * nodes, "ranks_per_node", 8, "framework", "torch");
        Job *job = NULL;
        bool created = false;
        CtlError err = {0};
        must(ctl_job_submit(ctl, spec, NULL, &job, &created, &err) == 0, "submit");
        json_decref(spec);
        for (int i = 0; i < 1000 && job->state == JOB_PENDING; i++) {
                usleep(2000);
                must(ctl_end_turn(ctl) == 0, "turn");
        }
        must(job->state == JOB_STARTING, "the gang was not placed");

        int n_nodes;
        Node **all = ctl_nodes(ctl, &n_nodes);
        for (int shared = 1; shared >= 0; shared--) {
                /* The first answer builds the gang's list: it is counted, as at a start. */
                job_gang_clear(&job->gang);
                double start = now_s();
                size_t bytes = 0, largest = 0;
                for (int i = 0; i < n_nodes; i++) {
                        char *text = view_desired(ctl, all[i], false, shared);
                        size_t len = strlen(text);
                        bytes += len;
                        largest = len > largest ? len : largest;
                        free(text);
                }
                double took = now_s() - start;
                printf("{\"nodes\":%d,\"ranks\":%d,\"shared_env\":%s,\"render_s\":%.3f,"
                       "\"answers_mb\":%.1f,\"largest_answer_kb\":%.1f}\n",
                       nodes, job->n_ranks, shared ? "true" : "false", took, (double) bytes / 1e6,
                       (double) largest / 1e3);
        }
        ctl_free(ctl);
        must(util_rm_rf(dir) == 0, "cannot remove the database's directory");
        free(dir);
        free(db);
        return 0;
}
