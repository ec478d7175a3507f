/* SPDX-License-Identifier: MIT */
/*
 * The sync answer: the controller's encoder of a node's desired ranks and the agent's
 * decoder, which checks every entry against the limits of wire.h; see wire.h.
 */
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"
#include "util.h"

static void env_write(JsonWriter *w, const WireEnvVar *vars, size_t n) {
        json_writer_object_begin(w);
        for (size_t i = 0; i < n; i++)
                json_writer_member_string(w, vars[i].key, vars[i].value);
        json_writer_object_end(w);
}

/* Absent optional members are null, as the decoder reads them; the order is the one
 * jansson kept when the answer was a tree. */
void wire_desired_rank_write(JsonWriter *w, const WireDesiredRankOut *d) {
        json_writer_object_begin(w);
        json_writer_member_int(w, "job", d->key.job);
        json_writer_member_int(w, "attempt", d->key.attempt);
        json_writer_member_int(w, "rank", d->key.rank);
        json_writer_key(w, "argv");
        json_writer_array_begin(w);
        for (size_t i = 0; i < d->n_argv; i++)
                json_writer_string(w, d->argv[i]);
        json_writer_array_end(w);
        json_writer_key(w, "env");
        if (d->env)
                env_write(w, d->env, d->n_env);
        else
                json_writer_null(w);
        json_writer_member_string(w, "user", d->user);
        json_writer_key(w, "devices");
        if (d->devices) {
                json_writer_array_begin(w);
                for (size_t i = 0; i < d->n_devices; i++)
                        json_writer_int(w, d->devices[i]);
                json_writer_array_end(w);
        } else {
                json_writer_null(w);
        }
        json_writer_member_int(w, "hang_timeout_s", d->hang_timeout_s);
        json_writer_member_string(w, "workdir", d->workdir);
        json_writer_member_string(w, "accelerator", d->accelerator);
        json_writer_member_string(w, "checkpoint_dir", d->checkpoint_dir);
        json_writer_member_int(w, "cpus", d->cpus);
        json_writer_member_int(w, "memory_mb", d->memory_mb);
        const char *sig = spec_hang_signal_name(d->hang_signal);
        if (sig) {
                json_writer_member_string(w, "hang_signal", sig);
                json_writer_member_int(w, "hang_signal_grace_s", d->hang_signal_grace_s);
        }
        if (d->shared_env)
                json_writer_member_string(w, "shared_env", d->shared_env);
        json_writer_object_end(w);
}

void wire_sync_answer_write_begin(JsonWriter *w, const WireSyncAnswer *a) {
        json_writer_object_begin(w);
        json_writer_member_int(w, "version", a->version);
        json_writer_member_int(w, "lease_ms", a->lease_ms);
        json_writer_member_int(w, "sync_period_ms", a->sync_period_ms);
        if (a->unchanged || a->lease_only) {
                json_writer_key(w, a->unchanged ? "unchanged" : "lease_only");
                json_writer_bool(w, true);
        } else {
                json_writer_key(w, "ranks");
                json_writer_array_begin(w);
        }
}

void wire_sync_answer_write_end(JsonWriter *w, const WireSyncAnswer *a,
                                const WireSharedEnvOut *shared, size_t n_shared) {
        if (!a->unchanged && !a->lease_only)
                json_writer_array_end(w);
        if (n_shared > 0) {
                json_writer_key(w, "shared_env");
                json_writer_object_begin(w);
                for (size_t i = 0; i < n_shared; i++) {
                        json_writer_key(w, shared[i].name);
                        env_write(w, shared[i].vars, shared[i].n_vars);
                }
                json_writer_object_end(w);
        }
        json_writer_object_end(w);
}

_printf_(2, 3) static void desired_error(char **error, const char *fmt, ...) {
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
static bool string_ok(json_t *v, size_t max) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        return s && n <= max && strlen(s) == n;
}

static const char *opt_string(json_t *o, const char *key, size_t max, char **error) {
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return NULL;
        if (!json_is_string(v)) {
                desired_error(error, "%s is not a string", key);
                return NULL;
        }
        if (!string_ok(v, max)) {
                desired_error(error, "%s is longer than %zu bytes or contains a NUL byte", key,
                              max);
                return NULL;
        }
        return json_string_value(v);
}

/* An optional path that must be absolute when given (a relative one would be relative
 * to wherever the agent happens to run). */
static const char *opt_path(json_t *o, const char *key, char **error) {
        const char *p = opt_string(o, key, WIRE_MAX_PATH, error);
        if (p && *p && *p != '/') {
                desired_error(error, "%s must be an absolute path", key);
                return NULL;
        }
        return p;
}

/* An optional limit: an integer from 0 to max; anything else is an error, as a limit
 * read as "none" would lift it. */
static int64_t opt_limit(json_t *o, const char *key, int64_t max, char **error) {
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
                desired_error(error, "%s must be an integer from 0 to %" PRId64, key, max);
                return 0;
        }
        return json_integer_value(v);
}

/* Checks argv: 1..WIRE_MAX_ARGS strings; adds their size to *bytes. */
static void check_argv(json_t *argv, size_t *bytes, char **error) {
        if (!json_is_array(argv) || json_array_size(argv) == 0) {
                desired_error(error, "argv must be a non-empty list of strings");
                return;
        }
        if (json_array_size(argv) > WIRE_MAX_ARGS) {
                desired_error(error, "argv has more than %d entries", WIRE_MAX_ARGS);
                return;
        }
        size_t i;
        json_t *v;
        json_array_foreach(argv, i, v) {
                if (!json_is_string(v)) {
                        desired_error(error, "argv must be a non-empty list of strings");
                        return;
                }
                if (!string_ok(v, WIRE_MAX_STRING)) {
                        desired_error(error,
                                      "argv[%zu] is longer than %d bytes or contains a "
                                      "NUL byte",
                                      i, WIRE_MAX_STRING);
                        return;
                }
                *bytes += json_string_length(v) + 1;
        }
}

/* Checks env: an object of at most WIRE_MAX_ENV strings with valid names. */
static void check_env(json_t *env, size_t *bytes, char **error) {
        if (!env)
                return;
        if (!json_is_object(env)) {
                desired_error(error, "env is not an object");
                return;
        }
        if (json_object_size(env) > WIRE_MAX_ENV) {
                desired_error(error, "env has more than %d variables", WIRE_MAX_ENV);
                return;
        }
        const char *key;
        json_t *v;
        json_object_foreach(env, key, v) {
                size_t klen = strlen(key);
                /* jansson keys may hold NUL bytes too: such a key reads shorter. */
                if (klen == 0 || klen > WIRE_MAX_NAME || strchr(key, '=')) {
                        desired_error(error, "env has an invalid variable name");
                        return;
                }
                if (!json_is_string(v) || !string_ok(v, WIRE_MAX_STRING)) {
                        desired_error(error,
                                      "env variable %s is not a string of at most %d "
                                      "bytes without NUL",
                                      key, WIRE_MAX_STRING);
                        return;
                }
                *bytes += klen + json_string_length(v) + 2;
        }
}

/* A shared environment of the answer, checked once for all the ranks that name it. */
typedef struct SharedCheck {
        json_t *vars;
        size_t bytes; /* as check_env counts them */
        char *error; /* why no rank may use it; NULL: none */
} SharedCheck;

typedef struct SharedChecks {
        json_t *shared; /* the answer's "shared_env" */
        SharedCheck *checks;
        size_t n;
} SharedChecks;

static void shared_checks_init(SharedChecks *sc, json_t *shared) {
        *sc = (SharedChecks){.shared = shared};
        if (!json_is_object(shared))
                return;
        sc->checks = xcalloc(json_object_size(shared) + 1, sizeof(SharedCheck));
        const char *name;
        json_t *vars;
        json_object_foreach(shared, name, vars) {
                SharedCheck *c = &sc->checks[sc->n++];
                c->vars = vars;
                check_env(vars, &c->bytes, &c->error);
                if (!c->error && c->bytes > WIRE_MAX_EXEC_BYTES)
                        desired_error(&c->error, "it is larger than %d bytes", WIRE_MAX_EXEC_BYTES);
        }
}

static void shared_checks_clear(SharedChecks *sc) {
        for (size_t i = 0; i < sc->n; i++)
                free(sc->checks[i].error);
        free(sc->checks);
}

/*
 * The shared environment that o names, for d (borrowed: nothing is copied per rank, so
 * an answer's size still bounds what decoding it costs); adds its size to *bytes.
 */
static void desired_shared_env(json_t *o, const SharedChecks *sc, WireDesiredRank *d,
                               size_t *bytes) {
        json_t *name = json_object_get(o, "shared_env");
        if (!name)
                return;
        json_t *vars =
                json_is_string(name) ? json_object_get(sc->shared, json_string_value(name)) : NULL;
        const SharedCheck *c = NULL;
        for (size_t i = 0; vars && i < sc->n && !c; i++)
                if (sc->checks[i].vars == vars)
                        c = &sc->checks[i];
        if (!c) {
                desired_error(&d->error, "shared_env names no shared environment of this answer");
                return;
        }
        if (c->error) {
                desired_error(&d->error, "shared_env %s: %s", json_string_value(name), c->error);
                return;
        }
        d->shared_env = vars;
        *bytes += c->bytes;
        if (json_object_size(d->env) + json_object_size(vars) > WIRE_MAX_ENV) {
                desired_error(&d->error, "env and shared_env have more than %d variables",
                              WIRE_MAX_ENV);
                return;
        }
        /* Which one would win is a guess: neither. */
        const char *key;
        json_t *v;
        json_object_foreach(d->env, key, v) {
                if (json_object_get(vars, key)) {
                        desired_error(&d->error, "env variable %s is both the rank's and shared",
                                      key);
                        return;
                }
        }
}

/* Fills d from o. Returns -EBADMSG when not even the key can be read. */
static int parse_desired(json_t *o, const SharedChecks *sc, WireDesiredRank *d) {
        *d = (WireDesiredRank){0};
        json_t *job = json_object_get(o, "job"), *attempt = json_object_get(o, "attempt"),
               *rank = json_object_get(o, "rank");
        if (!json_is_integer(job) || !json_is_integer(attempt) || !json_is_integer(rank))
                return -EBADMSG;
        d->key = (WireRankKey){json_integer_value(job), json_integer_value(attempt),
                               json_integer_value(rank)};
        /* Keys name directories and log files: negative numbers have no business there. */
        if (d->key.job < 0 || d->key.attempt < 0 || d->key.rank < 0)
                return -EBADMSG;

        size_t bytes = 0;
        d->argv = json_object_get(o, "argv");
        check_argv(d->argv, &bytes, &d->error);

        d->env = json_object_get(o, "env");
        if (json_is_null(d->env))
                d->env = NULL;
        check_env(d->env, &bytes, &d->error);
        if (!d->error)
                desired_shared_env(o, sc, d, &bytes);
        if (bytes > WIRE_MAX_EXEC_BYTES)
                desired_error(&d->error, "argv and env together are larger than %d bytes",
                              WIRE_MAX_EXEC_BYTES);

        d->devices = json_object_get(o, "devices");
        if (json_is_null(d->devices))
                d->devices = NULL;
        if (d->devices &&
            (!json_is_array(d->devices) || json_array_size(d->devices) > WIRE_MAX_DEVICES))
                desired_error(&d->error, "devices must be a list of at most %d indices",
                              WIRE_MAX_DEVICES);
        d->workdir = opt_path(o, "workdir", &d->error);
        d->user = opt_string(o, "user", WIRE_MAX_NAME, &d->error);
        d->accelerator = opt_string(o, "accelerator", WIRE_MAX_NAME, &d->error);
        d->checkpoint_dir = opt_path(o, "checkpoint_dir", &d->error);
        json_t *hang = json_object_get(o, "hang_timeout_s");
        d->hang_timeout_s = json_is_integer(hang) ? json_integer_value(hang) : 0;
        if (d->hang_timeout_s < 0)
                d->hang_timeout_s = 0;
        if (d->hang_timeout_s > WIRE_MAX_HANG_TIMEOUT_S)
                d->hang_timeout_s = WIRE_MAX_HANG_TIMEOUT_S;
        /* A signal this agent does not know is left out, not an error: the hang is
         * still reported, only without the dump. */
        d->hang_signal =
                spec_hang_signal_from_name(json_string_value(json_object_get(o, "hang_signal")));
        int64_t grace = json_int(o, "hang_signal_grace_s", SPEC_DEFAULT_HANG_SIGNAL_GRACE_S);
        d->hang_signal_grace_s = grace < 0 ? 0
                                 : grace > SPEC_MAX_HANG_SIGNAL_GRACE_S
                                         ? SPEC_MAX_HANG_SIGNAL_GRACE_S
                                         : grace;
        d->cpus = (int) opt_limit(o, "cpus", WIRE_MAX_CPUS, &d->error);
        d->memory_mb = opt_limit(o, "memory_mb", WIRE_MAX_MEMORY_MB, &d->error);
        return 0;
}

int wire_sync_answer_parse(json_t *json, WireSyncAnswer *ret) {
        json_t *ranks = json_object_get(json, "ranks");
        json_t *version = json_object_get(json, "version");
        /* Whole, short or the lease only, exactly one: an answer that lists ranks and says
         * they did not change is not to be trusted either way. */
        bool unchanged = json_is_true(json_object_get(json, "unchanged"));
        bool lease_only = json_is_true(json_object_get(json, "lease_only"));
        /* At most one shared environment per rank: each rank finds its own among them. */
        if (!json_is_object(json) || unchanged + lease_only + json_is_array(ranks) != 1 ||
            !json_is_integer(version) || json_array_size(ranks) > WIRE_MAX_RANKS ||
            json_object_size(json_object_get(json, "shared_env")) > WIRE_MAX_RANKS) {
                json_decref(json);
                return -EBADMSG;
        }
        WireSyncAnswer a = {
                .json = json,
                .version = json_integer_value(version),
                .unchanged = unchanged,
                .lease_only = lease_only,
                .ranks = xcalloc(json_array_size(ranks) + 1, sizeof(WireDesiredRank)),
        };
        int64_t lease = json_int(json, "lease_ms", 0), period = json_int(json, "sync_period_ms", 0);
        a.lease_ms = lease > 0 ? lease : 0;
        a.sync_period_ms = period > 0 ? period : 0;
        SharedChecks sc;
        shared_checks_init(&sc, json_object_get(json, "shared_env"));
        size_t i;
        json_t *o;
        json_array_foreach(ranks, i, o) {
                /* An entry without a key cannot be matched to anything: skip it. */
                if (parse_desired(o, &sc, &a.ranks[a.n_ranks]) == 0)
                        a.n_ranks++;
        }
        shared_checks_clear(&sc);
        *ret = a;
        return 0;
}

void wire_sync_answer_clear(WireSyncAnswer *a) {
        for (size_t i = 0; i < a->n_ranks; i++)
                free(a->ranks[i].error);
        free(a->ranks);
        json_decref(a->json);
        *a = (WireSyncAnswer){0};
}

const WireDesiredRank *wire_sync_answer_find(const WireSyncAnswer *a, WireRankKey key) {
        for (size_t i = 0; i < a->n_ranks; i++) {
                WireRankKey k = a->ranks[i].key;
                if (k.job == key.job && k.attempt == key.attempt && k.rank == key.rank)
                        return &a->ranks[i];
        }
        return NULL;
}
