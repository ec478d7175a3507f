/* SPDX-License-Identifier: MIT */
/*
 * Rank environment assembly; see rankenv.h. The order of the layers is the precedence:
 * the job's own variables first, then what the agent owns (the progress file), then
 * device visibility, then the launch profile and the agent's environment, which both
 * only fill keys still missing. Device visibility overrides the job's env on purpose: a
 * rank must see exactly the devices it was given, or two ranks could share one.
 */
#include "rankenv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/*
 * Variables a program needs to run at all, taken from the agent when the job has none.
 * Deliberately short: the rest of the agent's environment is the agent's business.
 */
static const char *const inherited_vars[] = {"PATH", "LANG", "TZ", NULL};

static bool env_key_valid(const char *key) {
        return *key && !strchr(key, '=');
}

/* Copies desired's variables into env, checking every value is a string; -EINVAL with
 * *ret_error else. */
static int env_copy_desired(json_t *env, json_t *desired, char **ret_error) {
        if (!desired)
                return 0;
        if (!json_is_object(desired)) {
                *ret_error = xstrdup("env is not an object");
                return -EINVAL;
        }
        const char *key;
        json_t *value;
        json_object_foreach(desired, key, value) {
                if (!env_key_valid(key) || !json_is_string(value)) {
                        *ret_error = xasprintf("env variable \"%s\" is not a valid string", key);
                        return -EINVAL;
                }
                json_object_set(env, key, value);
        }
        return 0;
}

/* True when the node has at least one device of backend. */
static bool env_backend_present(const AgentInventory *inv, const AccelBackend *backend) {
        for (size_t i = 0; i < inv->n_devs; i++)
                if (inv->devs[i].backend == backend)
                        return true;
        return false;
}

/*
 * Adds every backend's visibility variables for the devices of the rank. A backend
 * present on the node is asked even when the rank holds none of its devices, so that it
 * hides them all: a rank must never see devices given to another.
 */
static int env_add_devices(json_t *env, json_t *devices, const AgentInventory *inv,
                           char **ret_error) {
        if (devices && !json_is_array(devices)) {
                *ret_error = xstrdup("devices is not an array");
                return -EINVAL;
        }
        size_t n_req = json_array_size(devices);
        _cleanup_free_ const AccelDevice **group = xcalloc(n_req + 1, sizeof(*group));

        for (size_t i = 0; i < n_req; i++) {
                json_t *v = json_array_get(devices, i);
                const AccelDevice *d = json_is_integer(v)
                                               ? agent_inventory_device(inv, json_integer_value(v))
                                               : NULL;
                if (!d) {
                        _cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY);
                        *ret_error =
                                xasprintf("device %s is not in this node's inventory", s ? s : "?");
                        return -ENODEV;
                }
        }

        /* One call per backend, with its devices in the order the controller gave. */
        for (size_t b = 0; accel_backends[b]; b++) {
                const AccelBackend *backend = accel_backends[b];
                if (!env_backend_present(inv, backend))
                        continue;
                size_t n = 0;
                for (size_t i = 0; i < n_req; i++) {
                        const AccelDevice *d = agent_inventory_device(
                                inv, json_integer_value(json_array_get(devices, i)));
                        if (d->backend == backend)
                                group[n++] = d;
                }
                int r = backend->devices_env(group, n, env);
                if (r < 0) {
                        *ret_error = xasprintf("backend %s cannot set device visibility: %s",
                                               backend->name, strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* Orders "KEY=VALUE" strings by key: '=' sorts before every character of a key. */
static int env_compare(const void *a, const void *b) {
        const unsigned char *x = *(const unsigned char *const *) a;
        const unsigned char *y = *(const unsigned char *const *) b;
        for (;; x++, y++) {
                int cx = *x == '=' ? 0 : *x, cy = *y == '=' ? 0 : *y;
                if (cx != cy || cx == 0)
                        return cx - cy;
        }
}

/* Adds the layers after the job's own env to env. Returns 0 or -errno with *ret_error. */
static int env_add_layers(json_t *env, const RankEnvRequest *req, const AgentInventory *inv,
                          char **ret_error) {
        json_object_set_new(env, "AXCTL_PROGRESS_FILE", json_string(req->progress_path));

        int r = env_add_devices(env, req->devices, inv, ret_error);
        if (r < 0)
                return r;

        if (req->profile_dir && req->accelerator && *req->accelerator) {
                r = accel_profile_apply(req->profile_dir, req->accelerator, env);
                if (r < 0) {
                        *ret_error = xasprintf("launch profile %s/%s.env: %s", req->profile_dir,
                                               req->accelerator, strerror(-r));
                        return r;
                }
        }

        /* Who the rank is, from the account it runs as: a job cannot claim another. */
        const RankUser *u = req->user;
        if (u && u->name) {
                json_object_set_new(env, "USER", json_string(u->name));
                json_object_set_new(env, "LOGNAME", json_string(u->name));
        }
        if (u && u->home)
                json_object_set_new(env, "HOME", json_string(u->home));
        if (u && u->shell)
                json_object_set_new(env, "SHELL", json_string(u->shell));

        for (size_t i = 0; inherited_vars[i]; i++) {
                const char *v = getenv(inherited_vars[i]);
                if (v && !json_object_get(env, inherited_vars[i]))
                        json_object_set_new(env, inherited_vars[i], json_string(v));
        }
        return 0;
}

/* Turns env into sorted "KEY=VALUE" strings. Returns NULL with *ret_error on a non-string. */
static char **env_to_envp(json_t *env, char **ret_error) {
        size_t n = json_object_size(env), i = 0;
        char **envp = xcalloc(n + 1, sizeof(char *));
        const char *key;
        json_t *value;
        json_object_foreach(env, key, value) {
                if (!json_is_string(value)) {
                        *ret_error = xasprintf("env variable \"%s\" set by a backend or "
                                               "profile is not a string",
                                               key);
                        return agent_env_free(envp);
                }
                envp[i++] = xasprintf("%s=%s", key, json_string_value(value));
        }
        qsort(envp, i, sizeof(char *), env_compare);
        return envp;
}

int agent_env_build(const RankEnvRequest *req, const AgentInventory *inv, char ***ret_envp,
                    char **ret_error) {
        /* The job's env with the shared variables its rank names (the decoder refused
         * a variable in both). */
        json_t *env = json_object();
        int r = env_copy_desired(env, req->env, ret_error);
        if (r >= 0)
                r = env_copy_desired(env, req->shared_env, ret_error);
        if (r >= 0)
                r = env_add_layers(env, req, inv, ret_error);
        char **envp = r < 0 ? NULL : env_to_envp(env, ret_error);
        json_decref(env);
        if (r < 0)
                return r;
        if (!envp)
                return -EINVAL;
        *ret_envp = envp;
        return 0;
}

char **agent_env_free(char **envp) {
        if (!envp)
                return NULL;
        for (char **p = envp; *p; p++)
                free(*p);
        free(envp);
        return NULL;
}
