/* SPDX-License-Identifier: MIT */
/*
 * Agent protocol encoding and decoding; see protocol.h. Field names and the meaning of
 * null follow docs/PROTOCOL.md exactly: an exited rank carries exactly one of exit_code
 * and signal, an unknown pid or step is null.
 */
#include "protocol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

json_t *agent_proto_register_body(const char *node, const char *hostname, const char *address,
                                  const AgentIdentity *id, json_t *labels,
                                  const AgentInventory *inv) {
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:o}", "node", node, "hostname",
                         hostname, "address", address, "boot_id", id->boot_id, "agent_id",
                         id->agent_id, "labels", labels, "inventory",
                         agent_inventory_to_json(inv));
}

int agent_proto_parse_register(json_t *json, int64_t *lease_ms, int64_t *sync_period_ms) {
        if (!json_is_object(json))
                return -EBADMSG;
        json_t *v = json_object_get(json, "lease_ms");
        if (json_is_integer(v) && json_integer_value(v) > 0)
                *lease_ms = json_integer_value(v);
        v = json_object_get(json, "sync_period_ms");
        if (json_is_integer(v) && json_integer_value(v) > 0)
                *sync_period_ms = json_integer_value(v);
        return 0;
}

static json_t *proto_rank_report(Rank *r, uint64_t request_id) {
        json_t *o = json_pack("{s:I, s:I, s:I, s:s}", "job", (json_int_t) r->key.job, "attempt",
                              (json_int_t) r->key.attempt, "rank", (json_int_t) r->key.rank,
                              "state", r->state == AGENT_RANK_RUNNING ? "running" : "exited");
        json_object_set_new(o, "pid", r->rank_pid > 0 ? json_integer(r->rank_pid) : json_null());
        bool exited = r->state == AGENT_RANK_EXITED;
        json_object_set_new(o, "exit_code",
                            exited && !r->exit.signaled ? json_integer(r->exit.code)
                                                        : json_null());
        json_object_set_new(o, "signal",
                            exited && r->exit.signaled ? json_integer(r->exit.code) : json_null());
        json_object_set_new(o, "step",
                            r->progress.has_step ? json_integer(r->progress.step) : json_null());
        if (!exited && r->hung)
                json_object_set_new(o, "hung", json_true());
        if (exited && r->exit.start_failed)
                json_object_set_new(o, "start_failed", json_true());
        if (exited && r->exit_reported_in == 0)
                r->exit_reported_in = request_id;
        return o;
}

json_t *agent_proto_sync_body(const char *node, const AgentIdentity *id, RankTable *t,
                              const AgentCheckpoint *ckpts, size_t n_ckpts,
                              const AgentHealth *health, uint64_t request_id) {
        json_t *ranks = json_array();
        for (size_t i = 0; i < rank_table_count(t); i++)
                json_array_append_new(ranks, proto_rank_report(rank_table_at(t, i), request_id));

        json_t *cps = json_array();
        for (size_t i = 0; i < n_ckpts; i++)
                json_array_append_new(cps, json_pack("{s:I, s:I, s:I, s:s}", "job",
                                                     (json_int_t) ckpts[i].job, "attempt",
                                                     (json_int_t) ckpts[i].attempt, "step",
                                                     (json_int_t) ckpts[i].step, "path",
                                                     ckpts[i].path));

        json_t *h = json_pack("{s:b, s:s}", "healthy", health->healthy, "reason",
                              health->reason ? health->reason : "");
        return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "node", node, "boot_id",
                         id->boot_id, "agent_id", id->agent_id, "ranks", ranks, "checkpoints",
                         cps, "health", h);
}

_printf_(2, 3) static void proto_error(char **error, const char *fmt, ...) {
        if (*error)
                return; /* the first problem is the one worth reading */
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(error, fmt, ap) < 0)
                *error = NULL;
        va_end(ap);
        if (!*error)
                *error = xstrdup("invalid desired rank");
}

/* A JSON string without NUL bytes (jansson allows them) of at most max bytes. */
static bool proto_string_ok(json_t *v, size_t max) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        return s && n <= max && strlen(s) == n;
}

static const char *proto_opt_string(json_t *o, const char *key, size_t max, char **error) {
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return NULL;
        if (!json_is_string(v)) {
                proto_error(error, "%s is not a string", key);
                return NULL;
        }
        if (!proto_string_ok(v, max)) {
                proto_error(error, "%s is longer than %zu bytes or contains a NUL byte", key,
                            max);
                return NULL;
        }
        return json_string_value(v);
}

/* An optional path that must be absolute when given (a relative one would be relative
 * to wherever the agent happens to run). */
static const char *proto_opt_path(json_t *o, const char *key, char **error) {
        const char *p = proto_opt_string(o, key, AGENT_MAX_PATH, error);
        if (p && *p && *p != '/') {
                proto_error(error, "%s must be an absolute path", key);
                return NULL;
        }
        return p;
}

/* Checks argv: 1..AGENT_MAX_ARGS strings; adds their size to *bytes. */
static void proto_check_argv(json_t *argv, size_t *bytes, char **error) {
        if (!json_is_array(argv) || json_array_size(argv) == 0) {
                proto_error(error, "argv must be a non-empty list of strings");
                return;
        }
        if (json_array_size(argv) > AGENT_MAX_ARGS) {
                proto_error(error, "argv has more than %d entries", AGENT_MAX_ARGS);
                return;
        }
        size_t i;
        json_t *v;
        json_array_foreach(argv, i, v) {
                if (!json_is_string(v)) {
                        proto_error(error, "argv must be a non-empty list of strings");
                        return;
                }
                if (!proto_string_ok(v, AGENT_MAX_STRING)) {
                        proto_error(error, "argv[%zu] is longer than %d bytes or contains a "
                                    "NUL byte", i, AGENT_MAX_STRING);
                        return;
                }
                *bytes += json_string_length(v) + 1;
        }
}

/* Checks env: an object of at most AGENT_MAX_ENV strings with valid names. */
static void proto_check_env(json_t *env, size_t *bytes, char **error) {
        if (!env)
                return;
        if (!json_is_object(env)) {
                proto_error(error, "env is not an object");
                return;
        }
        if (json_object_size(env) > AGENT_MAX_ENV) {
                proto_error(error, "env has more than %d variables", AGENT_MAX_ENV);
                return;
        }
        const char *key;
        json_t *v;
        json_object_foreach(env, key, v) {
                size_t klen = strlen(key);
                /* jansson keys may hold NUL bytes too: such a key reads shorter. */
                if (klen == 0 || klen > AGENT_MAX_NAME || strchr(key, '=')) {
                        proto_error(error, "env has an invalid variable name");
                        return;
                }
                if (!json_is_string(v) || !proto_string_ok(v, AGENT_MAX_STRING)) {
                        proto_error(error, "env variable %s is not a string of at most %d "
                                    "bytes without NUL", key, AGENT_MAX_STRING);
                        return;
                }
                *bytes += klen + json_string_length(v) + 2;
        }
}

/* Fills d from o. Returns -EBADMSG when not even the key can be read. */
static int proto_parse_desired(json_t *o, DesiredRank *d) {
        *d = (DesiredRank){ 0 };
        json_t *job = json_object_get(o, "job"), *attempt = json_object_get(o, "attempt"),
               *rank = json_object_get(o, "rank");
        if (!json_is_integer(job) || !json_is_integer(attempt) || !json_is_integer(rank))
                return -EBADMSG;
        d->key = (RankKey){ json_integer_value(job), json_integer_value(attempt),
                            json_integer_value(rank) };
        /* Keys name directories and log files: negative numbers have no business there. */
        if (d->key.job < 0 || d->key.attempt < 0 || d->key.rank < 0)
                return -EBADMSG;

        size_t bytes = 0;
        d->argv = json_object_get(o, "argv");
        proto_check_argv(d->argv, &bytes, &d->error);

        d->env = json_object_get(o, "env");
        if (json_is_null(d->env))
                d->env = NULL;
        proto_check_env(d->env, &bytes, &d->error);
        if (bytes > AGENT_MAX_EXEC_BYTES)
                proto_error(&d->error, "argv and env together are larger than %d bytes",
                            AGENT_MAX_EXEC_BYTES);

        d->devices = json_object_get(o, "devices");
        if (json_is_null(d->devices))
                d->devices = NULL;
        if (d->devices && (!json_is_array(d->devices) ||
                           json_array_size(d->devices) > AGENT_MAX_DEVICES))
                proto_error(&d->error, "devices must be a list of at most %d indices",
                            AGENT_MAX_DEVICES);
        d->workdir = proto_opt_path(o, "workdir", &d->error);
        d->user = proto_opt_string(o, "user", AGENT_MAX_NAME, &d->error);
        d->accelerator = proto_opt_string(o, "accelerator", AGENT_MAX_NAME, &d->error);
        d->checkpoint_dir = proto_opt_path(o, "checkpoint_dir", &d->error);
        json_t *hang = json_object_get(o, "hang_timeout_s");
        d->hang_timeout_s = json_is_integer(hang) ? json_integer_value(hang) : 0;
        if (d->hang_timeout_s < 0)
                d->hang_timeout_s = 0;
        if (d->hang_timeout_s > AGENT_MAX_HANG_TIMEOUT_S)
                d->hang_timeout_s = AGENT_MAX_HANG_TIMEOUT_S;
        return 0;
}

int agent_proto_parse_sync(json_t *json, SyncAnswer *ret) {
        json_t *ranks = json_object_get(json, "ranks");
        json_t *version = json_object_get(json, "version");
        if (!json_is_object(json) || !json_is_array(ranks) || !json_is_integer(version) ||
            json_array_size(ranks) > AGENT_MAX_DESIRED_RANKS) {
                json_decref(json);
                return -EBADMSG;
        }
        SyncAnswer a = {
                .json = json,
                .version = json_integer_value(version),
                .ranks = xcalloc(json_array_size(ranks) + 1, sizeof(DesiredRank)),
        };
        json_t *lease = json_object_get(json, "lease_ms");
        if (json_is_integer(lease) && json_integer_value(lease) > 0)
                a.lease_ms = json_integer_value(lease);
        size_t i;
        json_t *o;
        json_array_foreach(ranks, i, o) {
                /* An entry without a key cannot be matched to anything: skip it. */
                if (proto_parse_desired(o, &a.ranks[a.n_ranks]) == 0)
                        a.n_ranks++;
        }
        *ret = a;
        return 0;
}

void agent_sync_answer_clear(SyncAnswer *a) {
        for (size_t i = 0; i < a->n_ranks; i++)
                free(a->ranks[i].error);
        free(a->ranks);
        json_decref(a->json);
        *a = (SyncAnswer){ 0 };
}

const DesiredRank *agent_sync_answer_find(const SyncAnswer *a, RankKey key) {
        for (size_t i = 0; i < a->n_ranks; i++) {
                RankKey k = a->ranks[i].key;
                if (k.job == key.job && k.attempt == key.attempt && k.rank == key.rank)
                        return &a->ranks[i];
        }
        return NULL;
}

const char *agent_proto_error_code(json_t *json) {
        return json_string_value(json_object_get(json_object_get(json, "error"), "code"));
}
