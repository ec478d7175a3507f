/* SPDX-License-Identifier: MIT */
/* Strict decoding of agent register and sync messages; see wire.h. */
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

int wire_register_parse(json_t *json, WireRegister *ret, JsonError *err) {
        static const char *const keys[] = {"node",   "hostname",  "address",  "boot_id",
                                           "agent_id", "labels", "inventory", NULL};
        static const char *const inv_keys[] = {"cpus", "memory_mb", "numa_nodes",
                                               "accelerators", NULL};
        WireRegister r = {0};
        int k;
        if (!json_is_object(json))
                return json_error_set(err, "", "must be a JSON object");
        if ((k = json_check_keys(json, "", keys, err)) < 0 ||
            (k = json_get_string(json, "node", "node", true, 128, &r.node, err)) < 0 ||
            (k = json_get_string(json, "hostname", "hostname", false, 256, &r.hostname, err)) < 0 ||
            (k = json_get_string(json, "address", "address", false, 300, &r.address, err)) < 0 ||
            (k = json_get_string(json, "boot_id", "boot_id", false, 128, &r.boot_id, err)) < 0 ||
            (k = json_get_string(json, "agent_id", "agent_id", false, 128, &r.agent_id, err)) < 0 ||
            (k = json_get_string_map(json, "labels", "labels", 64, 256, &r.labels, err)) < 0)
                return k;
        for (const char *p = r.node; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                        return json_error_set(err, "node",
                                              "may only contain letters, digits, '-', '_', '.'");
        json_t *inv = json_object_get(json, "inventory");
        if (!json_is_object(inv))
                return json_error_set(err, "inventory", "must be an object");
        if ((k = json_check_keys(inv, "inventory.", inv_keys, err)) < 0)
                return k;
        int64_t v = 0;
        if ((k = json_get_int(inv, "cpus", "inventory.cpus", true, 0, 1 << 20, &v, err)) < 0)
                return k;
        r.cpus = (int) v;
        v = 0;
        if ((k = json_get_int(inv, "memory_mb", "inventory.memory_mb", false, 0, INT64_C(1) << 40,
                              &v, err)) < 0)
                return k;
        r.memory_mb = v;
        v = 0;
        if ((k = json_get_int(inv, "numa_nodes", "inventory.numa_nodes", false, 0, 4096, &v,
                              err)) < 0)
                return k;
        r.numa_nodes = (int) v;
        json_t *acc = json_object_get(inv, "accelerators");
        if (acc && !json_is_array(acc))
                return json_error_set(err, "inventory.accelerators", "must be a list");
        if (acc && json_array_size(acc) > 1024)
                return json_error_set(err, "inventory.accelerators", "too many devices");
        size_t i;
        json_t *a;
        json_array_foreach(acc, i, a) {
                if (!json_is_object(a) || !json_is_string(json_object_get(a, "kind")))
                        return json_error_set(err, "inventory.accelerators",
                                              "entries must be objects with a kind");
        }
        r.inventory = inv;
        r.accelerators = acc;
        *ret = r;
        return 0;
}

static int parse_rank(json_t *o, WireRankReport *rr, JsonError *err) {
        static const char *const keys[] = {"job",       "attempt", "rank", "state", "pid",
                                           "exit_code", "signal",  "step", "hung", "start_failed", NULL};
        int k;
        int64_t v;
        if (!json_is_object(o))
                return json_error_set(err, "ranks", "entries must be objects");
        if ((k = json_check_keys(o, "ranks[].", keys, err)) < 0)
                return k;
        *rr = (WireRankReport){.exit_code = -1, .step = -1};
        if ((k = json_get_int(o, "job", "ranks[].job", true, 1, INT64_MAX, &rr->job, err)) < 0)
                return k;
        v = 0;
        if ((k = json_get_int(o, "attempt", "ranks[].attempt", true, 1, INT32_MAX, &v, err)) < 0)
                return k;
        rr->attempt = (int) v;
        if ((k = json_get_int(o, "rank", "ranks[].rank", true, 0, INT32_MAX, &v, err)) < 0)
                return k;
        rr->rank = (int) v;
        const char *state = NULL;
        if ((k = json_get_string(o, "state", "ranks[].state", true, 16, &state, err)) < 0)
                return k;
        if (strcmp(state, "exited") == 0)
                rr->exited = true;
        else if (strcmp(state, "running") != 0)
                return json_error_set(err, "ranks[].state", "must be running or exited");
        v = 0;
        if ((k = json_get_int(o, "pid", "ranks[].pid", false, 0, INT32_MAX, &v, err)) < 0)
                return k;
        rr->pid = (int) v;
        v = -1;
        if ((k = json_get_int(o, "exit_code", "ranks[].exit_code", false, 0, 255, &v, err)) < 0)
                return k;
        rr->exit_code = (int) v;
        v = 0;
        if ((k = json_get_int(o, "signal", "ranks[].signal", false, 0, 128, &v, err)) < 0)
                return k;
        rr->signal = (int) v;
        if ((k = json_get_int(o, "step", "ranks[].step", false, 0, INT64_MAX, &rr->step, err)) < 0)
                return k;
        if ((k = json_get_bool(o, "start_failed", "ranks[].start_failed", &rr->start_failed,
                               err)) < 0)
                return k;
        if ((k = json_get_bool(o, "hung", "ranks[].hung", &rr->hung, err)) < 0)
                return k;
        if (rr->exited && rr->exit_code < 0 && rr->signal == 0)
                return json_error_set(err, "ranks[].exit_code",
                                      "an exited rank needs exit_code or signal");
        if (rr->exit_code >= 0 && rr->signal > 0)
                return json_error_set(err, "ranks[].signal",
                                      "a rank ends with an exit code or a signal, not both");
        return 0;
}

static int parse_checkpoint(json_t *o, WireCheckpoint *c, JsonError *err) {
        static const char *const keys[] = {"job", "attempt", "step", "path", NULL};
        int k;
        int64_t v = 0;
        if (!json_is_object(o))
                return json_error_set(err, "checkpoints", "entries must be objects");
        if ((k = json_check_keys(o, "checkpoints[].", keys, err)) < 0 ||
            (k = json_get_int(o, "job", "checkpoints[].job", true, 1, INT64_MAX, &c->job, err)) < 0 ||
            (k = json_get_int(o, "attempt", "checkpoints[].attempt", true, 1, INT32_MAX, &v, err)) <
                    0 ||
            (k = json_get_int(o, "step", "checkpoints[].step", true, 0, INT64_MAX, &c->step, err)) <
                    0 ||
            (k = json_get_string(o, "path", "checkpoints[].path", true, 4096, &c->path, err)) < 0)
                return k;
        c->attempt = (int) v;
        return 0;
}

int wire_sync_parse(json_t *json, WireSync *ret, JsonError *err) {
        static const char *const keys[] = {"node",        "boot_id", "agent_id", "ranks",
                                           "checkpoints", "health",  NULL};
        WireSync s = {.healthy = true, .health_reason = ""};
        int k;
        if (!json_is_object(json))
                return json_error_set(err, "", "must be a JSON object");
        if ((k = json_check_keys(json, "", keys, err)) < 0 ||
            (k = json_get_string(json, "node", "node", true, 128, &s.node, err)) < 0 ||
            (k = json_get_string(json, "boot_id", "boot_id", false, 128, &s.boot_id, err)) < 0 ||
            (k = json_get_string(json, "agent_id", "agent_id", false, 128, &s.agent_id, err)) < 0)
                return k;
        json_t *ranks = json_object_get(json, "ranks");
        if (ranks && !json_is_array(ranks))
                return json_error_set(err, "ranks", "must be a list");
        if (json_array_size(ranks) > WIRE_MAX_RANKS)
                return json_error_set(err, "ranks", "too many ranks");
        json_t *ckpts = json_object_get(json, "checkpoints");
        if (ckpts && !json_is_array(ckpts))
                return json_error_set(err, "checkpoints", "must be a list");
        if (json_array_size(ckpts) > WIRE_MAX_CHECKPOINTS)
                return json_error_set(err, "checkpoints", "too many checkpoints");
        json_t *health = json_object_get(json, "health");
        if (health && !json_is_null(health)) {
                static const char *const hkeys[] = {"healthy", "reason", NULL};
                if (!json_is_object(health))
                        return json_error_set(err, "health", "must be an object");
                if ((k = json_check_keys(health, "health.", hkeys, err)) < 0 ||
                    (k = json_get_bool(health, "healthy", "health.healthy", &s.healthy, err)) < 0)
                        return k;
                json_t *reason = json_object_get(health, "reason");
                if (reason && !json_is_string(reason) && !json_is_null(reason))
                        return json_error_set(err, "health.reason", "must be a string");
                if (json_is_string(reason) && json_string_length(reason) > WIRE_MAX_REASON)
                        return json_error_set(err, "health.reason", "must be at most %d bytes",
                                              WIRE_MAX_REASON);
                if (json_is_string(reason))
                        s.health_reason = json_string_value(reason);
        }
        s.ranks = xcalloc(json_array_size(ranks) + 1, sizeof(WireRankReport));
        s.checkpoints = xcalloc(json_array_size(ckpts) + 1, sizeof(WireCheckpoint));
        size_t i;
        json_t *o;
        json_array_foreach(ranks, i, o) {
                if ((k = parse_rank(o, &s.ranks[s.n_ranks++], err)) < 0) {
                        wire_sync_clear(&s);
                        return k;
                }
        }
        json_array_foreach(ckpts, i, o) {
                if ((k = parse_checkpoint(o, &s.checkpoints[s.n_checkpoints++], err)) < 0) {
                        wire_sync_clear(&s);
                        return k;
                }
        }
        *ret = s;
        return 0;
}

void wire_sync_clear(WireSync *s) {
        free(s->ranks);
        free(s->checkpoints);
        s->ranks = NULL;
        s->checkpoints = NULL;
        s->n_ranks = s->n_checkpoints = 0;
}
