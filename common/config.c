/* SPDX-License-Identifier: MIT */
/*
 * The `key = value` parser of the daemons' configuration files and the glue that feeds
 * its entries through the command-line option handlers; see config.h for the syntax.
 * About 150 lines of parsing did not justify a parser library dependency: the files
 * are flat, and errors must name the file and line the way compilers do.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

struct ConfigFile {
        char *path;
        ConfigEntry *entries;
        size_t n_entries;
        size_t cap_entries;
};

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r';
}

static bool is_key_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
}

_printf_(3, 4) static char *error_at(const char *path, unsigned line, const char *fmt, ...) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return xasprintf("%s:%u: %s", path, line, msg);
}

/*
 * Decodes the value that starts at p (blanks already skipped) into a new string.
 * Returns NULL with *ret_msg set when the value is malformed.
 */
static char *value_parse(const char *p, const char **ret_msg) {
        size_t len = strlen(p);
        char *out = xmalloc(len + 1), *o = out;
        char quote = 0;
        if (*p == '"' || *p == '\'')
                quote = *p++;
        if (!quote) {
                /* A '#' after a blank starts a comment; one inside a word (URL#x) does not. */
                for (; *p; p++) {
                        if (*p == '#' && o > out && is_blank(o[-1]))
                                break;
                        *o++ = *p;
                }
                while (o > out && is_blank(o[-1]))
                        o--;
                *o = '\0';
                return out;
        }
        for (;; p++) {
                if (!*p) {
                        *ret_msg = "unterminated quoted value";
                        free(out);
                        return NULL;
                }
                if (*p == quote)
                        break;
                if (*p == '\\' && quote == '"') {
                        p++;
                        switch (*p) {
                        case '\\':
                        case '"':
                                *o++ = *p;
                                continue;
                        case 'n':
                                *o++ = '\n';
                                continue;
                        case 't':
                                *o++ = '\t';
                                continue;
                        default:
                                *ret_msg = "unknown escape in quoted value (use \\\\, \\\", \\n "
                                           "or \\t)";
                                free(out);
                                return NULL;
                        }
                }
                *o++ = *p;
        }
        *o = '\0';
        for (p++; is_blank(*p); p++)
                ;
        if (*p && *p != '#') {
                *ret_msg = "text after the closing quote";
                free(out);
                return NULL;
        }
        return out;
}

/* Parses one line (NUL-terminated, no newline) into c; NULL or an error message. */
static char *line_parse(ConfigFile *c, char *s, unsigned line) {
        while (is_blank(*s))
                s++;
        if (!*s || *s == '#')
                return NULL;
        char *key = s;
        while (is_key_char(*s))
                s++;
        char *key_end = s;
        while (is_blank(*s))
                s++;
        if (key_end == key)
                return error_at(c->path, line, "expected a key (letters, digits, '_')");
        if (*s != '=') {
                if (*s && !is_key_char(*s) && !is_blank(*s) && *s != '=')
                        return error_at(c->path, line, "invalid character '%c' in key", *s);
                return error_at(c->path, line, "expected '=' after '%.*s'", (int) (key_end - key),
                                key);
        }
        *key_end = '\0';
        for (char *k = key; *k; k++)
                if (*k == '-')
                        *k = '_';
        for (s++; is_blank(*s); s++)
                ;
        const char *msg = NULL;
        char *value = value_parse(s, &msg);
        if (!value)
                return error_at(c->path, line, "%s: %s", key, msg);
        if (c->n_entries == c->cap_entries) {
                c->cap_entries = c->cap_entries ? 2 * c->cap_entries : 16;
                c->entries = xrealloc(c->entries, c->cap_entries * sizeof(ConfigEntry));
        }
        c->entries[c->n_entries++] =
                (ConfigEntry){.key = xstrdup(key), .value = value, .line = line};
        return NULL;
}

int config_file_parse(const char *path, const char *text, ConfigFile **ret, char **ret_error) {
        ConfigFile *c = xcalloc(1, sizeof(ConfigFile));
        c->path = xstrdup(path);
        _cleanup_free_ char *copy = xstrdup(text);
        unsigned line = 1;
        for (char *s = copy; s; line++) {
                char *nl = strchr(s, '\n');
                if (nl)
                        *nl = '\0';
                char *err = line_parse(c, s, line);
                if (err) {
                        config_file_free(c);
                        *ret_error = err;
                        return -EINVAL;
                }
                s = nl ? nl + 1 : NULL;
        }
        *ret = c;
        return 0;
}

int config_file_load(const char *path, ConfigFile **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = util_read_file(path, &text, &len);
        if (r < 0) {
                *ret_error = xasprintf("%s: %s", path, strerror(-r));
                return r;
        }
        if (strlen(text) != len) {
                *ret_error = xasprintf("%s: contains a NUL byte; not a text file", path);
                return -EINVAL;
        }
        return config_file_parse(path, text, ret, ret_error);
}

ConfigFile *config_file_free(ConfigFile *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_entries; i++) {
                free((char *) c->entries[i].key);
                free((char *) c->entries[i].value);
        }
        free(c->entries);
        free(c->path);
        free(c);
        return NULL;
}

const char *config_file_path(const ConfigFile *c) {
        return c->path;
}

size_t config_file_size(const ConfigFile *c) {
        return c->n_entries;
}

const ConfigEntry *config_file_entry(const ConfigFile *c, size_t i) {
        return i < c->n_entries ? &c->entries[i] : NULL;
}

const char *config_file_get(const ConfigFile *c, const char *key) {
        for (size_t i = c->n_entries; i > 0; i--)
                if (strcmp(c->entries[i - 1].key, key) == 0)
                        return c->entries[i - 1].value;
        return NULL;
}

/* The option whose name is key with '-' for '_', if it may appear in a file. */
static const struct option *option_for_key(const struct option *options, const char *const *skip,
                                           const char *key) {
        for (const struct option *o = options; o->name; o++) {
                size_t i = 0;
                for (; key[i] && o->name[i]; i++)
                        if (key[i] != (o->name[i] == '-' ? '_' : o->name[i]))
                                break;
                if (key[i] || o->name[i])
                        continue;
                if (o->has_arg == no_argument)
                        return NULL;
                for (const char *const *s = skip; s && *s; s++)
                        if (strcmp(*s, o->name) == 0)
                                return NULL;
                return o;
        }
        return NULL;
}

int config_file_apply(const ConfigFile *c, const struct option *options, const char *const *skip,
                      ConfigSetFn set, void *userdata, char **ret_error) {
        for (size_t i = 0; i < c->n_entries; i++) {
                const ConfigEntry *e = &c->entries[i];
                const struct option *o = option_for_key(options, skip, e->key);
                if (!o) {
                        *ret_error = error_at(c->path, e->line, "unknown key '%s'", e->key);
                        return -EINVAL;
                }
                const char *reason = "invalid value";
                int r = set(userdata, o->val, e->value, &reason);
                if (r < 0) {
                        *ret_error = error_at(c->path, e->line, "%s = \"%s\": %s", e->key, e->value,
                                              reason);
                        return -EINVAL;
                }
        }
        return 0;
}

int config_load_and_apply(const char *path, const char *default_path, const struct option *options,
                          const char *const *skip, ConfigSetFn set, void *userdata,
                          const char **ret_used, char **ret_error) {
        const char *use = path;
        if (!use) {
                if (!default_path || access(default_path, F_OK) < 0) {
                        if (ret_used)
                                *ret_used = NULL;
                        return 0;
                }
                use = default_path;
        }
        _cleanup_config_file_ ConfigFile *c = NULL;
        int r = config_file_load(use, &c, ret_error);
        if (r < 0)
                return r;
        r = config_file_apply(c, options, skip, set, userdata, ret_error);
        if (r < 0)
                return r;
        if (ret_used)
                *ret_used = use;
        return 0;
}

/* The option of options called name, or NULL. */
static const struct option *option_named(const struct option *options, const char *name) {
        for (const struct option *o = options; o->name; o++)
                if (strcmp(o->name, name) == 0)
                        return o;
        return NULL;
}

int config_parse_args(int argc, char **argv, const struct option *options, const char *default_path,
                      ConfigSetFn set, void *userdata, const char **ret_config, char **ret_error) {
        static const char *const flag_only[] = {"config", NULL};
        const struct option *help = option_named(options, "help");
        const struct option *config_opt = option_named(options, "config");
        /* Flags are applied after the file, which --config names: keep them until then. */
        _cleanup_free_ int *opts = xcalloc((size_t) argc + 1, sizeof(int));
        _cleanup_free_ char **args = xcalloc((size_t) argc + 1, sizeof(char *));
        const char *config = NULL;
        int n = 0, c;
        opterr = 0;
        optind = 0; /* a full rescan, also for a second call (tests) */
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
                if (c == 'h' || (help && c == help->val))
                        return CONFIG_HELP;
                if (c == ':' || c == '?') {
                        *ret_error = xasprintf(c == ':' ? "%s needs a value (see --help)"
                                                        : "unknown option %s (see --help)",
                                               argv[optind - 1]);
                        return -EINVAL;
                }
                if (config_opt && c == config_opt->val) {
                        config = optarg;
                        continue;
                }
                opts[n] = c;
                args[n++] = optarg;
        }
        if (optind < argc) {
                *ret_error = xasprintf("unexpected argument '%s' (see --help)", argv[optind]);
                return -EINVAL;
        }
        int r = config_load_and_apply(config, default_path, options, flag_only, set, userdata,
                                      ret_config, ret_error);
        if (r < 0)
                return r;
        for (int i = 0; i < n; i++) {
                const char *reason = "invalid value";
                if (set(userdata, opts[i], args[i], &reason) < 0) {
                        const struct option *o = options;
                        while (o->name && o->val != opts[i])
                                o++;
                        *ret_error = xasprintf("--%s %s, not '%s'", o->name ? o->name : "?", reason,
                                               args[i] ? args[i] : "");
                        return -EINVAL;
                }
        }
        return 0;
}

int config_parse_bool(const char *value, bool *ret, const char **ret_reason) {
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};
        if (!value) {
                *ret = true;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(value, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(value, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        *ret_reason = "needs true or false (or yes/no, on/off, 1/0)";
        return -EINVAL;
}

int config_parse_int(const char *value, int64_t min, int64_t max, int64_t *ret) {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (end == value || *end)
                return -EINVAL;
        if (errno == ERANGE || v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}
