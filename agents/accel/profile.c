/* SPDX-License-Identifier: MIT */
/*
 * Launch profiles: per accelerator kind, a data file of tuning variables (XLA_FLAGS,
 * LIBTPU_INIT_ARGS, NCCL_*, NEURON_*) that an operator edits without rebuilding.
 *
 * For kind "nvidia-h100" the files "nvidia-h100.env" and then "nvidia.env" are read:
 * the kind is cut at each '-' from the right, so a model file refines its vendor file.
 * Each key is set only when env does not hold it yet, which gives the precedence
 * job env > model file > vendor file. A file is all or nothing: a malformed line
 * rejects the whole file before any of it is applied, so a typo cannot half-apply.
 *
 * Format: "KEY=VALUE" per line; blank lines and lines starting with '#' are skipped; an
 * optional "export " prefix is accepted so the files can be sourced by a shell; a value
 * wholly in matching single or double quotes loses them (no escapes, no expansion).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "accel.h"
#include "pci.h"
#include "util.h"

/* The kind names a file, and comes from a job spec: keep it to a plain file name. */
static bool profile_kind_valid(const char *kind) {
        if (!kind || !*kind || kind[0] == '.' || strlen(kind) > 64)
                return false;
        for (const char *p = kind; *p; p++)
                if (!isalnum((unsigned char) *p) && *p != '-' && *p != '_' && *p != '.')
                        return false;
        return true;
}

static bool profile_key_valid(const char *key, size_t len) {
        if (len == 0 || isdigit((unsigned char) key[0]))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char) key[i]) && key[i] != '_')
                        return false;
        return true;
}

static char *strip(char *s) {
        char *end;

        while (isspace((unsigned char) *s))
                s++;
        end = s + strlen(s);
        while (end > s && isspace((unsigned char) end[-1]))
                *--end = '\0';
        return s;
}

/*
 * Parses one profile file into a JSON object of strings. Returns 0 with *ret, -ENOENT
 * when the file does not exist, -EBADMSG on a malformed line, other -errno.
 */
static int profile_parse(const char *path, json_t **ret) {
        _cleanup_free_ char *data = NULL;
        json_t *vars;
        char *line, *save = NULL;
        int r;

        r = util_read_file(path, &data, NULL);
        if (r < 0)
                return r;
        vars = json_object();
        if (!vars)
                return -ENOMEM;

        for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *s = strip(line), *eq, *value;
                size_t vlen;

                if (*s == '\0' || *s == '#')
                        continue;
                if (strncmp(s, "export", 6) == 0 && isspace((unsigned char) s[6]))
                        s = strip(s + 7);
                eq = strchr(s, '=');
                if (!eq)
                        goto bad;
                *eq = '\0';
                s = strip(s);
                if (!profile_key_valid(s, strlen(s)))
                        goto bad;
                value = strip(eq + 1);
                vlen = strlen(value);
                if (vlen >= 2 && (value[0] == '"' || value[0] == '\'') &&
                    value[vlen - 1] == value[0]) {
                        value[vlen - 1] = '\0';
                        value++;
                }
                /* Later lines win inside one file, as they would in a shell. */
                r = accel_env_set(vars, s, value);
                if (r < 0) {
                        json_decref(vars);
                        return r;
                }
        }
        *ret = vars;
        return 0;
bad:
        json_decref(vars);
        return -EBADMSG;
}

/* Applies the profile file for name (a kind or a prefix of one), if there is one. */
static int profile_apply_file(const char *profile_dir, const char *name, json_t *env) {
        _cleanup_free_ char *path = xasprintf("%s/%s.env", profile_dir, name);
        json_t *vars = NULL, *value;
        const char *key;
        int r;

        r = profile_parse(path, &vars);
        if (r == -ENOENT || r == -ENOTDIR)
                return 0;
        if (r < 0)
                return r;
        json_object_foreach(vars, key, value) {
                if (json_object_get(env, key))
                        continue;
                if (json_object_set(env, key, value) < 0) {
                        json_decref(vars);
                        return -ENOMEM;
                }
        }
        json_decref(vars);
        return 0;
}

int accel_profile_apply(const char *profile_dir, const char *kind, json_t *env) {
        _cleanup_free_ char *name = NULL;
        char *dash;
        int r;

        if (!profile_dir || !*profile_dir || !kind || !*kind)
                return 0;
        if (!profile_kind_valid(kind) || !json_is_object(env))
                return -EINVAL;

        name = xstrdup(kind);
        for (;;) {
                r = profile_apply_file(profile_dir, name, env);
                if (r < 0)
                        return r;
                dash = strrchr(name, '-');
                if (!dash)
                        return 0;
                *dash = '\0';
                if (*name == '\0')
                        return 0;
        }
}
