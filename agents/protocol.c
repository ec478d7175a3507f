/* SPDX-License-Identifier: MIT */
/* The agent's state as typed protocol messages; see protocol.h. */
#include "protocol.h"

#include "util.h"

json_t *agent_proto_register_body(const char *node, const char *hostname, const char *address,
                                  const AgentIdentity *id, json_t *labels,
                                  const AgentInventory *inv) {
        WireRegister r = {
                .node = node,
                .hostname = hostname,
                .address = address,
                .boot_id = id->boot_id,
                .agent_id = id->agent_id,
                .labels = labels,
                .cpus = (int) inv->cpus,
                .memory_mb = (int64_t) inv->memory_mb,
                .numa_nodes = (int) inv->numa_nodes,
                .accelerators = agent_inventory_accelerators(inv),
                .containment = inv->containment,
        };
        json_t *body = wire_register_encode(&r);
        json_decref(r.accelerators);
        return body;
}

/* An exited rank has exactly one of exit code and signal; unknown pid and step are
 * left unset. */
static WireRankReport proto_rank_report(Rank *r, uint64_t request_id) {
        bool exited = r->state == AGENT_RANK_EXITED;
        if (exited && r->exit_reported_in == 0)
                r->exit_reported_in = request_id;
        return (WireRankReport){
                .job = r->key.job,
                .attempt = (int) r->key.attempt,
                .rank = (int) r->key.rank,
                .exited = exited,
                .pid = r->rank_pid > 0 ? (int) r->rank_pid : 0,
                .exit_code = exited && !r->exit.signaled ? r->exit.code : -1,
                .signal = exited && r->exit.signaled ? r->exit.code : 0,
                .step = r->progress.has_step ? r->progress.step : -1,
                .hung = !exited && r->hung,
                .start_failed = exited && r->exit.start_failed,
                .node_fault = exited && r->exit.start_failed && r->node_error != 0,
                .log_tail = exited ? r->log_tail : NULL,
                .oom_killed = exited && r->exit.oom_killed,
        };
}

json_t *agent_proto_sync_body(const char *node, const AgentIdentity *id, RankTable *t,
                              const AgentCheckpoint *ckpts, size_t n_ckpts,
                              const AgentHealth *health, uint64_t request_id) {
        size_t n_ranks = rank_table_count(t);
        WireSync s = {
                .node = node,
                .boot_id = id->boot_id,
                .agent_id = id->agent_id,
                .ranks = xcalloc(n_ranks + 1, sizeof(WireRankReport)),
                .n_ranks = (int) n_ranks,
                .checkpoints = xcalloc(n_ckpts + 1, sizeof(WireCheckpoint)),
                .n_checkpoints = (int) n_ckpts,
                .healthy = health->healthy,
                .health_reason = health->reason,
        };
        for (size_t i = 0; i < n_ranks; i++)
                s.ranks[i] = proto_rank_report(rank_table_at(t, i), request_id);
        for (size_t i = 0; i < n_ckpts; i++)
                s.checkpoints[i] = (WireCheckpoint){.job = ckpts[i].job,
                                                    .attempt = (int) ckpts[i].attempt,
                                                    .step = ckpts[i].step,
                                                    .path = ckpts[i].path};
        json_t *body = wire_sync_encode(&s);
        wire_sync_clear(&s);
        return body;
}
