/* SPDX-License-Identifier: MIT */
/* The sync request: encoder and strict decoder of rank reports, checkpoints and health;
 * see wire.h. */
#include "wire.h"

#include <string.h>

#include "util.h"

static json_t *int_or_null(int64_t v, int64_t none) {
        return v == none ? json_null() : json_integer(v);
}

/* Unknown values are null; hung, start_failed and oom_killed appear only when true. */
static json_t *encode_rank(const WireRankReport *r) {
        json_t *o = json_pack("{s:I, s:i, s:i, s:s, s:o, s:o, s:o, s:o}", "job",
                              (json_int_t) r->job, "attempt", r->attempt, "rank", r->rank, "state",
                              r->exited ? "exited" : "running", "pid", int_or_null(r->pid, 0),
                              "exit_code", int_or_null(r->exit_code, -1), "signal",
                              int_or_null(r->signal, 0), "step", int_or_null(r->step, -1));
        if (r->hung)
                json_object_set_new(o, "hung", json_true());
        if (r->start_failed)
                json_object_set_new(o, "start_failed", json_true());
        if (r->node_fault)
                json_object_set_new(o, "node_fault", json_true());
        if (r->log_tail)
                json_object_set_new(o, "log_tail", json_string(r->log_tail));
        if (r->oom_killed)
                json_object_set_new(o, "oom_killed", json_true());
        return o;
}

json_t *wire_sync_encode(const WireSync *s) {
        json_t *ranks = json_array(), *ckpts = json_array();
        for (int i = 0; i < s->n_ranks; i++)
                json_array_append_new(ranks, encode_rank(&s->ranks[i]));
        for (int i = 0; i < s->n_checkpoints; i++) {
                const WireCheckpoint *c = &s->checkpoints[i];
                json_array_append_new(ckpts,
                                      json_pack("{s:I, s:i, s:I, s:s}", "job", (json_int_t) c->job,
                                                "attempt", c->attempt, "step", (json_int_t) c->step,
                                                "path", c->path));
        }
        return json_pack("{s:s, s:s*, s:s*, s:o, s:o, s:{s:b, s:s}}", "node", s->node, "boot_id",
                         s->boot_id, "agent_id", s->agent_id, "ranks", ranks, "checkpoints", ckpts,
                         "health", "healthy", s->healthy, "reason",
                         s->health_reason ? s->health_reason : "");
}

static int parse_rank(json_t *o, WireRankReport *rr, JsonError *err) {
        static const char *const keys[] = {
                "job",  "attempt", "rank",         "state",      "pid",      "exit_code",  "signal",
                "step", "hung",    "start_failed", "node_fault", "log_tail", "oom_killed", NULL};
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
        if ((k = json_get_bool(o, "start_failed", "ranks[].start_failed", &rr->start_failed, err)) <
            0)
                return k;
        if ((k = json_get_bool(o, "hung", "ranks[].hung", &rr->hung, err)) < 0)
                return k;
        if ((k = json_get_bool(o, "node_fault", "ranks[].node_fault", &rr->node_fault, err)) < 0)
                return k;
        if ((k = json_get_string(o, "log_tail", "ranks[].log_tail", false, WIRE_MAX_LOG_TAIL,
                                 &rr->log_tail, err)) < 0)
                return k;
        if (rr->node_fault && !rr->start_failed)
                return json_error_set(err, "ranks[].node_fault", "only a start failure says it");
        if ((k = json_get_bool(o, "oom_killed", "ranks[].oom_killed", &rr->oom_killed, err)) < 0)
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
            (k = json_get_int(o, "job", "checkpoints[].job", true, 1, INT64_MAX, &c->job, err)) <
                    0 ||
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

bool wire_accepts(const char *list, const char *capability) {
        size_t n = strlen(capability);
        for (const char *p = list; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strncmp(p, capability, n) == 0)
                        return true;
                p += len;
                p += *p == ',';
        }
        return false;
}
