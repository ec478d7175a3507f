/* SPDX-License-Identifier: MIT */
/*
 * The controller's Prometheus metrics: gauges computed from the model when scraped
 * (jobs by state, ranks running, nodes by state) and the counters and histograms the
 * core keeps (restarts by reason, recovery latency, scheduler pass, database commit).
 */
#include "accounting.h"
#include "controller-internal.h"

void ctl_metrics_write(Controller *ctl, FILE *f) {
        int jobs[_JOB_STATE_MAX] = {0}, nodes[_NODE_STATE_MAX] = {0}, ranks = 0;
        for (int i = 0; i < ctl->model.n_jobs; i++)
                jobs[ctl->model.jobs[i]->state]++;
        for (int j = 0; j < ctl->model.n_active; j++) {
                Job *job = ctl->model.active[j];
                for (int k = 0; k < job->n_ranks; k++)
                        if (job->ranks[k].state == RANK_RUNNING)
                                ranks++;
        }
        for (int i = 0; i < ctl->model.n_nodes; i++)
                nodes[ctl->model.nodes[i]->state]++;

        metrics_write_header(f, "axctl_jobs", "gauge", "Jobs by state.");
        for (int s = 0; s < _JOB_STATE_MAX; s++)
                fprintf(f, "axctl_jobs{state=\"%s\"} %d\n", job_state_to_string((JobState) s),
                        jobs[s]);
        metrics_write_header(f, "axctl_ranks_running", "gauge", "Ranks reported running.");
        fprintf(f, "axctl_ranks_running %d\n", ranks);
        metrics_write_header(f, "axctl_nodes", "gauge", "Nodes by state.");
        for (int s = 0; s < _NODE_STATE_MAX; s++)
                fprintf(f, "axctl_nodes{state=\"%s\"} %d\n", node_state_to_string((NodeState) s),
                        nodes[s]);
        metrics_write_header(f, "axctl_restarts_total", "counter",
                             "Attempts ended by a failure, by reason.");
        for (int r = 0; r < _END_REASON_MAX; r++) {
                if (r == END_SUCCEEDED || r == END_CANCELLED)
                        continue;
                fprintf(f, "axctl_restarts_total{reason=\"%s\"} %llu\n",
                        end_reason_to_string((EndReason) r),
                        (unsigned long long) ctl->restarts_by_reason[r]);
        }
        metrics_write_header(f, "axctl_recovery_seconds", "histogram",
                             "From detecting a failure to every rank of the next attempt running.");
        metrics_write_histogram(f, "axctl_recovery_seconds", "", &ctl->recovery);
        metrics_write_header(f, "axctl_scheduler_pass_seconds", "histogram",
                             "Duration of one scheduling pass.");
        metrics_write_histogram(f, "axctl_scheduler_pass_seconds", "", &ctl->sched_pass);
        metrics_write_header(f, "axctl_db_commit_seconds", "histogram",
                             "Duration of writing and committing one loop turn's changes.");
        metrics_write_histogram(f, "axctl_db_commit_seconds", "", &ctl->db_commit);
        metrics_write_header(f, "axctl_loop_turn_seconds", "histogram",
                             "Duration of one loop turn that wrote: requests, scheduling, commit "
                             "and answers. An answer waits for its whole turn.");
        metrics_write_histogram(f, "axctl_loop_turn_seconds", "", &ctl->loop_turn);
        StoreWalStats wal;
        store_wal_stats(ctl->store, &wal);
        metrics_write_header(
                f, "axctl_db_checkpoints_total", "counter",
                "SQLite WAL checkpoints that copied pages, on the store's thread or in a commit.");
        fprintf(f, "axctl_db_checkpoints_total{on=\"thread\"} %llu\n",
                (unsigned long long) wal.checkpoints_on_thread);
        fprintf(f, "axctl_db_checkpoints_total{on=\"commit\"} %llu\n",
                (unsigned long long) wal.checkpoints_on_commit);
        metrics_write_header(f, "axctl_db_wal_pages_total", "counter",
                             "Database pages the commits wrote into SQLite's WAL (each changed "
                             "page whole); a checkpoint writes them again into the database.");
        fprintf(f, "axctl_db_wal_pages_total %llu\n", (unsigned long long) wal.pages_written);
        metrics_write_header(f, "axctl_token_lookups_total", "counter",
                             "Bearer-token lookups, answered from the cache of those read "
                             "lately or from the store (unknown and revoked tokens too).");
        fprintf(f, "axctl_token_lookups_total{from=\"cache\"} %llu\n",
                (unsigned long long) ctl->token_lookups[0]);
        fprintf(f, "axctl_token_lookups_total{from=\"store\"} %llu\n",
                (unsigned long long) ctl->token_lookups[1]);
        metrics_write_header(f, "axctl_illegal_transitions_total", "counter",
                             "State transitions refused as illegal: each one is a bug.");
        fprintf(f, "axctl_illegal_transitions_total %llu\n",
                (unsigned long long) ctl->turn.n_illegal);
        ctl_goodput_metrics_write(ctl, f);
}
