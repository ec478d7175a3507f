/* SPDX-License-Identifier: MIT */
/* Job spec validation and normalisation; see spec.h for the contract. */
#include "spec.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "util.h"

static const char *const framework_names[_FRAMEWORK_MAX] = {
        [FRAMEWORK_NONE] = "none",
        [FRAMEWORK_TORCH] = "torch",
        [FRAMEWORK_JAX] = "jax",
};

const char *framework_to_string(Framework f) {
        return f >= 0 && f < _FRAMEWORK_MAX ? framework_names[f] : NULL;
}

Framework framework_from_string(const char *s) {
        if (s && strcmp(s, "axlearn") == 0)
                return FRAMEWORK_JAX; /* AXLearn runs on JAX's distributed runtime */
        for (int i = 0; i < _FRAMEWORK_MAX; i++)
                if (s && strcmp(s, framework_names[i]) == 0)
                        return (Framework) i;
        return _FRAMEWORK_INVALID;
}

/* Signals a program can catch to dump its stacks (Python's faulthandler, a trainer's
 * own handler): not the ones that stop or kill it outright. */
static const struct {
        const char *name;
        int sig;
} hang_signals[] = {
        {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT}, {"SIGABRT", SIGABRT},
        {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
};

int spec_hang_signal_from_name(const char *name) {
        if (!name)
                return 0;
        const char *bare = strncmp(name, "SIG", 3) == 0 ? name + 3 : name;
        for (size_t i = 0; i < ELEMENTSOF(hang_signals); i++)
                if (strcmp(hang_signals[i].name + 3, bare) == 0)
                        return hang_signals[i].sig;
        return 0;
}

const char *spec_hang_signal_name(int sig) {
        for (size_t i = 0; i < ELEMENTSOF(hang_signals); i++)
                if (hang_signals[i].sig == sig)
                        return hang_signals[i].name;
        return NULL;
}

bool spec_exit_code_in(const int *codes, int n, int code) {
        for (int i = 0; i < n; i++)
                if (codes[i] == code)
                        return true;
        return false;
}

JobSpec *spec_free(JobSpec *spec) {
        if (!spec)
                return NULL;
        free(spec->name);
        free(spec->project);
        free(spec->user);
        if (spec->command)
                for (int i = 0; i < spec->n_command; i++)
                        free(spec->command[i]);
        free(spec->command);
        json_decref(spec->env);
        free(spec->workdir);
        free(spec->accelerator);
        free(spec->checkpoint_dir);
        json_decref(spec->labels);
        free(spec->same_label);
        json_decref(spec->node_selector);
        free(spec->restart.retry_exit_codes);
        free(spec->restart.fatal_exit_codes);
        failrules_clear(&spec->failure_rules);
        free(spec);
        return NULL;
}

/* Names: letters, digits and "-_.", so they are safe in paths, labels and tables. */
static bool name_valid(const char *s) {
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                        return false;
        /* Not empty and not over the limit: a name derived from the command (the
         * program's basename) must be as valid as one given, or the stored spec would
         * not parse back when the controller restarts. */
        return s[0] != '.' && s[0] != '\0' && strlen(s) <= SPEC_MAX_NAME;
}

static int get_name(json_t *obj, const char *key, const char *field, const char *def, char **ret,
                    JsonError *err) {
        const char *s = NULL;
        int r = json_get_string(obj, key, field, false, SPEC_MAX_NAME, &s, err);
        if (r < 0)
                return r;
        if (s && !name_valid(s))
                return json_error_set(err, field,
                                      "may only contain letters, digits, '-', '_' and '.'");
        *ret = s || def ? xstrdup(s ? s : def) : NULL;
        return 0;
}

static int get_path(json_t *obj, const char *key, const char *field, char **ret, JsonError *err) {
        const char *s = NULL;
        int r = json_get_string(obj, key, field, false, SPEC_MAX_PATH, &s, err);
        if (r < 0)
                return r;
        if (s && s[0] != '/')
                return json_error_set(err, field, "must be an absolute path");
        *ret = s ? xstrdup(s) : NULL;
        return 0;
}

/* A copy of a parsed map that holds something (its strings shared), else NULL: an empty
 * jansson object costs about 200 bytes, in every queued job's spec. */
static json_t *object_or_null(json_t *map) {
        return json_object_size(map) > 0 ? json_copy(map) : NULL;
}

/* The map as a new reference, {} for NULL. */
static json_t *object_or_empty(json_t *map) {
        return map ? json_incref(map) : json_object();
}

static int get_exit_codes(json_t *obj, const char *key, const char *field, int **codes, int *n,
                          JsonError *err) {
        json_t *v = json_object_get(obj, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v))
                return json_error_set(err, field, "must be a list of exit codes");
        if (json_array_size(v) > SPEC_MAX_EXIT_CODES)
                return json_error_set(err, field, "must have at most %d entries",
                                      SPEC_MAX_EXIT_CODES);
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
                if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > 255)
                        return json_error_set(err, field,
                                              "entries must be integers between 1 and 255");
                if (!*codes)
                        *codes = xcalloc(json_array_size(v), sizeof(int));
                (*codes)[(*n)++] = (int) json_integer_value(e);
        }
        return 0;
}

static int parse_command(json_t *json, JobSpec *spec, JsonError *err) {
        json_t *cmd = json_object_get(json, "command");
        if (!cmd || json_is_null(cmd))
                return json_error_set(err, "command", "is required");
        if (!json_is_array(cmd) || json_array_size(cmd) == 0)
                return json_error_set(err, "command", "must be a non-empty list of strings");
        if (json_array_size(cmd) > SPEC_MAX_ARGS)
                return json_error_set(err, "command", "must have at most %d arguments",
                                      SPEC_MAX_ARGS);
        spec->command = xcalloc(json_array_size(cmd) + 1, sizeof(char *));
        size_t i;
        json_t *a;
        json_array_foreach(cmd, i, a) {
                if (!json_is_string(a))
                        return json_error_set(err, "command", "must be a list of strings");
                if (json_string_length(a) > SPEC_MAX_ARG_LEN ||
                    strlen(json_string_value(a)) != json_string_length(a))
                        return json_error_set(err, "command",
                                              "arguments must be at most %d bytes without NUL",
                                              SPEC_MAX_ARG_LEN);
                spec->command[spec->n_command++] = xstrdup(json_string_value(a));
        }
        if (spec->command[0][0] == '\0')
                return json_error_set(err, "command", "the program must not be empty");
        return 0;
}

static int parse_resources(json_t *json, JobSpec *spec, JsonError *err) {
        static const char *const keys[] = {"accelerator", "accelerators_per_rank", "cpus",
                                           "memory_mb", NULL};
        json_t *res = json_object_get(json, "resources");
        int64_t v;
        spec->cpus = 1;
        if (!res || json_is_null(res))
                return 0;
        if (!json_is_object(res))
                return json_error_set(err, "resources", "must be an object");
        int r = json_check_keys(res, "resources.", keys, err);
        if (r < 0)
                return r;
        const char *accel = NULL;
        r = json_get_string(res, "accelerator", "resources.accelerator", false, 64, &accel, err);
        if (r < 0)
                return r;
        if (accel && !name_valid(accel))
                return json_error_set(err, "resources.accelerator",
                                      "must be a device kind such as nvidia-h100 or tpu-v5p");
        spec->accelerator = accel ? xstrdup(accel) : NULL;
        v = accel ? 1 : 0;
        r = json_get_int(res, "accelerators_per_rank", "resources.accelerators_per_rank", false, 0,
                         1024, &v, err);
        if (r < 0)
                return r;
        if (v > 0 && !accel)
                return json_error_set(err, "resources.accelerators_per_rank",
                                      "needs resources.accelerator");
        if (v == 0 && accel)
                return json_error_set(err, "resources.accelerators_per_rank",
                                      "must be at least 1 when an accelerator is requested");
        spec->accelerators_per_rank = (int) v;
        v = 1;
        r = json_get_int(res, "cpus", "resources.cpus", false, 0, 4096, &v, err);
        if (r < 0)
                return r;
        spec->cpus = (int) v;
        v = 0;
        r = json_get_int(res, "memory_mb", "resources.memory_mb", false, 0, INT64_C(1) << 40, &v,
                         err);
        if (r < 0)
                return r;
        spec->memory_mb = v;
        return 0;
}

static int parse_restart(json_t *json, JobSpec *spec, JsonError *err) {
        static const char *const keys[] = {"max_restarts",
                                           "backoff_initial_s",
                                           "backoff_max_s",
                                           "retry_exit_codes",
                                           "fatal_exit_codes",
                                           "max_failures_without_progress",
                                           NULL};
        RestartPolicy *p = &spec->restart;
        p->max_restarts = 3;
        p->backoff_initial_s = 0;
        p->backoff_max_s = 300;
        p->max_failures_without_progress = SPEC_DEFAULT_MAX_FAILURES_WITHOUT_PROGRESS;
        json_t *res = json_object_get(json, "restart");
        if (!res || json_is_null(res))
                return 0;
        if (!json_is_object(res))
                return json_error_set(err, "restart", "must be an object");
        int r = json_check_keys(res, "restart.", keys, err);
        if (r < 0)
                return r;
        int64_t v = p->max_restarts;
        if ((r = json_get_int(res, "max_restarts", "restart.max_restarts", false, 0, 100000, &v,
                              err)) < 0)
                return r;
        p->max_restarts = (int) v;
        v = p->backoff_initial_s;
        if ((r = json_get_int(res, "backoff_initial_s", "restart.backoff_initial_s", false, 0,
                              86400, &v, err)) < 0)
                return r;
        p->backoff_initial_s = (int) v;
        v = p->backoff_max_s;
        if ((r = json_get_int(res, "backoff_max_s", "restart.backoff_max_s", false, 0, 86400, &v,
                              err)) < 0)
                return r;
        p->backoff_max_s = (int) v;
        v = p->max_failures_without_progress;
        /* At least 1: "no limit" would let one user's job crash-loop for ever. */
        if ((r = json_get_int(res, "max_failures_without_progress",
                              "restart.max_failures_without_progress", false, 1, 1000, &v, err)) <
            0)
                return r;
        p->max_failures_without_progress = (int) v;
        if (p->backoff_max_s < p->backoff_initial_s)
                return json_error_set(err, "restart.backoff_max_s",
                                      "must not be below restart.backoff_initial_s");
        if ((r = get_exit_codes(res, "retry_exit_codes", "restart.retry_exit_codes",
                                &p->retry_exit_codes, &p->n_retry_exit_codes, err)) < 0)
                return r;
        if ((r = get_exit_codes(res, "fatal_exit_codes", "restart.fatal_exit_codes",
                                &p->fatal_exit_codes, &p->n_fatal_exit_codes, err)) < 0)
                return r;
        for (int i = 0; i < p->n_retry_exit_codes; i++)
                if (spec_exit_code_in(p->fatal_exit_codes, p->n_fatal_exit_codes,
                                      p->retry_exit_codes[i]))
                        return json_error_set(err, "restart.retry_exit_codes",
                                              "exit code %d is also listed as fatal",
                                              p->retry_exit_codes[i]);
        return 0;
}

static int parse_constraints(json_t *json, JobSpec *spec, JsonError *err) {
        static const char *const keys[] = {"same_label", "node_selector", NULL};
        json_t *c = json_object_get(json, "constraints");
        if (!c || json_is_null(c))
                return 0;
        if (!json_is_object(c))
                return json_error_set(err, "constraints", "must be an object");
        int r = json_check_keys(c, "constraints.", keys, err);
        if (r < 0)
                return r;
        const char *s = NULL;
        if ((r = json_get_string(c, "same_label", "constraints.same_label", false, 256, &s, err)) <
            0)
                return r;
        spec->same_label = s ? xstrdup(s) : NULL;
        json_t *sel = NULL;
        if ((r = json_get_string_map(c, "node_selector", "constraints.node_selector", 64, 256, &sel,
                                     err)) < 0)
                return r;
        spec->node_selector = object_or_null(sel);
        return 0;
}

static int env_key_valid(const char *k) {
        for (const char *p = k; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
                      (p != k && *p >= '0' && *p <= '9')))
                        return 0;
        return 1;
}

static int parse_hang_signal(json_t *json, JobSpec *spec, JsonError *err) {
        const char *name = NULL;
        int r = json_get_string(json, "hang_signal", "hang_signal", false, 16, &name, err);
        if (r < 0)
                return r;
        if (name && !(spec->hang_signal = spec_hang_signal_from_name(name)))
                return json_error_set(err, "hang_signal",
                                      "must be one of SIGINT, SIGQUIT, SIGABRT, SIGUSR1, SIGUSR2");
        int64_t v = SPEC_DEFAULT_HANG_SIGNAL_GRACE_S;
        if ((r = json_get_int(json, "hang_signal_grace_s", "hang_signal_grace_s", false, 0,
                              SPEC_MAX_HANG_SIGNAL_GRACE_S, &v, err)) < 0)
                return r;
        spec->hang_signal_grace_s = (int) v;
        return 0;
}

static int spec_parse_into(json_t *json, JobSpec *spec, JsonError *err) {
        static const char *const keys[] = {"name",           "project",
                                           "user",           "priority",
                                           "command",        "env",
                                           "workdir",        "ranks",
                                           "ranks_per_node", "resources",
                                           "framework",      "checkpoint_dir",
                                           "restart",        "hang_timeout_s",
                                           "hang_signal",    "hang_signal_grace_s",
                                           "failure_rules",  "labels",
                                           "constraints",    NULL};
        int r;
        int64_t v;

        if (!json_is_object(json))
                return json_error_set(err, "", "the job spec must be a JSON object");
        if ((r = json_check_keys(json, "", keys, err)) < 0)
                return r;
        if ((r = parse_command(json, spec, err)) < 0)
                return r;
        const char *base = strrchr(spec->command[0], '/');
        base = base ? base + 1 : spec->command[0];
        if ((r = get_name(json, "name", "name", name_valid(base) ? base : "job", &spec->name,
                          err)) < 0)
                return r;
        if ((r = get_name(json, "project", "project", "default", &spec->project, err)) < 0)
                return r;
        if ((r = get_name(json, "user", "user", "unknown", &spec->user, err)) < 0)
                return r;
        v = 0;
        if ((r = json_get_int(json, "priority", "priority", false, 0, 1000, &v, err)) < 0)
                return r;
        spec->priority = (int) v;

        json_t *env = NULL;
        if ((r = json_get_string_map(json, "env", "env", SPEC_MAX_ENV, SPEC_MAX_ENV_VALUE, &env,
                                     err)) < 0)
                return r;
        if (env) {
                const char *k;
                json_t *val;
                json_object_foreach(env, k, val) {
                        if (!env_key_valid(k))
                                return json_error_set(err, "env",
                                                      "variable names must match "
                                                      "[A-Za-z_][A-Za-z0-9_]*");
                        if (strncmp(k, "AXCTL_", 6) == 0)
                                return json_error_set(err, "env",
                                                      "AXCTL_* variables are set by axctl");
                }
                spec->env = object_or_null(env);
        }
        if ((r = get_path(json, "workdir", "workdir", &spec->workdir, err)) < 0)
                return r;
        v = 0;
        if ((r = json_get_int(json, "ranks", "ranks", true, 1, SPEC_MAX_RANKS, &v, err)) < 0)
                return r;
        spec->ranks = (int) v;
        v = 0;
        if ((r = json_get_int(json, "ranks_per_node", "ranks_per_node", false, 0, 1024, &v, err)) <
            0)
                return r;
        spec->ranks_per_node = (int) v;
        if (spec->ranks_per_node > 0 && spec->ranks % spec->ranks_per_node != 0)
                return json_error_set(err, "ranks_per_node", "must divide ranks (%d)", spec->ranks);
        if ((r = parse_resources(json, spec, err)) < 0)
                return r;
        const char *fw = NULL;
        if ((r = json_get_string(json, "framework", "framework", false, 32, &fw, err)) < 0)
                return r;
        spec->framework = fw ? framework_from_string(fw) : FRAMEWORK_NONE;
        if (spec->framework == _FRAMEWORK_INVALID)
                return json_error_set(err, "framework", "must be one of none, torch, jax, axlearn");
        if ((r = get_path(json, "checkpoint_dir", "checkpoint_dir", &spec->checkpoint_dir, err)) <
            0)
                return r;
        if ((r = parse_restart(json, spec, err)) < 0)
                return r;
        v = 0;
        if ((r = json_get_int(json, "hang_timeout_s", "hang_timeout_s", false, 0, 7 * 86400, &v,
                              err)) < 0)
                return r;
        spec->hang_timeout_s = (int) v;
        if ((r = parse_hang_signal(json, spec, err)) < 0)
                return r;
        json_t *rules = json_object_get(json, "failure_rules");
        if (rules && (r = failrules_parse(rules, "failure_rules", FAILRULES_MAX_JOB,
                                          &spec->failure_rules, err)) < 0)
                return r;
        json_t *labels = NULL;
        if ((r = json_get_string_map(json, "labels", "labels", 64, 256, &labels, err)) < 0)
                return r;
        spec->labels = object_or_null(labels);
        return parse_constraints(json, spec, err);
}

int spec_parse(json_t *json, JobSpec **ret_spec, JsonError *err) {
        JobSpec *spec = xcalloc(1, sizeof(JobSpec));
        int r = spec_parse_into(json, spec, err);
        if (r < 0) {
                spec_free(spec);
                return r;
        }
        *ret_spec = spec;
        return 0;
}

static json_t *int_array(const int *v, int n) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++)
                json_array_append_new(a, json_integer(v[i]));
        return a;
}

json_t *spec_to_json(const JobSpec *spec) {
        json_t *cmd = json_array();
        for (int i = 0; i < spec->n_command; i++)
                json_array_append_new(cmd, json_string(spec->command[i]));
        json_t *res =
                json_pack("{s:i,s:i,s:I}", "accelerators_per_rank", spec->accelerators_per_rank,
                          "cpus", spec->cpus, "memory_mb", (json_int_t) spec->memory_mb);
        json_object_set_new(res, "accelerator",
                            spec->accelerator ? json_string(spec->accelerator) : json_null());
        json_t *restart = json_pack(
                "{s:i,s:i,s:i,s:i,s:o,s:o}", "max_restarts", spec->restart.max_restarts,
                "max_failures_without_progress", spec->restart.max_failures_without_progress,
                "backoff_initial_s", spec->restart.backoff_initial_s, "backoff_max_s",
                spec->restart.backoff_max_s, "retry_exit_codes",
                int_array(spec->restart.retry_exit_codes, spec->restart.n_retry_exit_codes),
                "fatal_exit_codes",
                int_array(spec->restart.fatal_exit_codes, spec->restart.n_fatal_exit_codes));
        json_t *constraints =
                json_pack("{s:o}", "node_selector", object_or_empty(spec->node_selector));
        json_object_set_new(constraints, "same_label",
                            spec->same_label ? json_string(spec->same_label) : json_null());
        json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:o,s:o,s:i,s:i,s:o,s:s,s:o,s:i,s:o,s:o}", "name",
                              spec->name, "project", spec->project, "user", spec->user, "priority",
                              spec->priority, "command", cmd, "env", object_or_empty(spec->env),
                              "ranks", spec->ranks, "ranks_per_node", spec->ranks_per_node,
                              "resources", res, "framework", framework_to_string(spec->framework),
                              "restart", restart, "hang_timeout_s", spec->hang_timeout_s, "labels",
                              object_or_empty(spec->labels), "constraints", constraints);
        json_object_set_new(j, "workdir", spec->workdir ? json_string(spec->workdir) : json_null());
        json_object_set_new(j, "checkpoint_dir",
                            spec->checkpoint_dir ? json_string(spec->checkpoint_dir) : json_null());
        const char *sig = spec_hang_signal_name(spec->hang_signal);
        json_object_set_new(j, "hang_signal", sig ? json_string(sig) : json_null());
        json_object_set_new(j, "hang_signal_grace_s", json_integer(spec->hang_signal_grace_s));
        json_object_set_new(j, "failure_rules", failrules_to_json(&spec->failure_rules));
        return j;
}

char *spec_to_text(const JobSpec *spec) {
        json_t *j = spec_to_json(spec);
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        return text;
}
