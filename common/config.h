/* SPDX-License-Identifier: MIT */
/*
 * Configuration files of the daemons (/etc/axctl/axctld.conf, axagent.conf): lines of
 * `key = value`, where every key is the name of a long command-line option with '_'
 * for '-' (lease_ms is --lease-ms). main() loads the file, hands each entry to the same
 * function that handles the option on the command line, then applies the flags, so a
 * flag always wins over the file and every option is settable both ways by construction.
 *
 * Syntax: blank lines and lines whose first non-blank character is '#' are ignored.
 * A value is taken verbatim after trimming blanks, except that " #" (a blank, then '#')
 * starts a trailing comment; a value may be put in double quotes (with \" \\ \n \t
 * escapes) or single quotes (no escapes) to keep leading or trailing blanks or a '#'.
 * A key given twice keeps its last value, as a repeated flag does.
 *
 * Both daemons read their flags, files and values through this module alone, so a
 * boolean or a number is spelled the same on the command line and in either file.
 *
 * Library-like: nothing here logs. Errors come back as "FILE:LINE: message" strings.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ConfigFile ConfigFile;

typedef struct ConfigEntry {
        const char *key; /* normalised: '-' replaced by '_' */
        const char *value;
        unsigned line;
} ConfigEntry;

/*
 * Parses text (NUL-terminated) as if read from path, which only names it in errors.
 * Returns 0, -ENOMEM never (aborts), or -EINVAL with *ret_error set to
 * "PATH:LINE: message" (owned by the caller). *ret is not written on failure.
 */
int config_file_parse(const char *path, const char *text, ConfigFile **ret, char **ret_error);

/*
 * Reads and parses path. -ENOENT and other read errors come back as -errno with
 * *ret_error "PATH: reason"; syntax errors as for config_file_parse().
 */
int config_file_load(const char *path, ConfigFile **ret, char **ret_error);

ConfigFile *config_file_free(ConfigFile *c);
static inline void config_file_freep(ConfigFile **c) {
        config_file_free(*c);
}
#define _cleanup_config_file_ __attribute__((cleanup(config_file_freep)))

const char *config_file_path(const ConfigFile *c);
size_t config_file_size(const ConfigFile *c);
/* The i-th entry in file order (i < config_file_size()). */
const ConfigEntry *config_file_entry(const ConfigFile *c, size_t i);
/* The last value given for key, or NULL. */
const char *config_file_get(const ConfigFile *c, const char *key);

/*
 * Sets one option from its string value: the same function main() calls for a flag.
 * opt is the option's `val` from the struct option table. Returns 0, or a negative
 * errno with *ret_reason (static text, e.g. "needs an integer of at least 100") set.
 */
typedef int (*ConfigSetFn)(void *userdata, int opt, const char *value, const char **ret_reason);

/*
 * Applies every entry of c through set, mapping each key to the option of options
 * with the same name. Options without an argument and those listed in skip (e.g.
 * "config", "help"; NULL-terminated, may be NULL) are not configuration keys.
 * Returns 0, or -EINVAL at the first unknown key or rejected value with *ret_error
 * "PATH:LINE: message".
 */
int config_file_apply(const ConfigFile *c, const struct option *options, const char *const *skip,
                      ConfigSetFn set, void *userdata, char **ret_error);

/*
 * The usual start of a daemon: loads path when given (a missing file is an error),
 * otherwise default_path if it exists (a missing default file is fine), and applies
 * it as config_file_apply() does. *ret_used (may be NULL) gets the path that was
 * read, or NULL. Returns 0 or a negative errno with *ret_error set.
 */
int config_load_and_apply(const char *path, const char *default_path, const struct option *options,
                          const char *const *skip, ConfigSetFn set, void *userdata,
                          const char **ret_used, char **ret_error);

/* What config_parse_args() returns when -h or --help was given. */
#define CONFIG_HELP 1

/*
 * The whole command line of a daemon: reads argv with getopt_long over options, where
 * the option named "help" (and -h) asks for help and the one named "config" names the
 * file; loads that file (or default_path if it exists, as config_load_and_apply()
 * does), then applies every flag through set, so a flag wins over the file. Returns 0,
 * CONFIG_HELP (nothing applied), or -EINVAL with *ret_error one line, e.g.
 * "--lease-ms needs milliseconds, at least 100, not '50'" or
 * "PATH:LINE: auth = \"maybe\": needs true or false (or yes/no, on/off, 1/0)".
 */
int config_parse_args(int argc, char **argv, const struct option *options, const char *default_path,
                      ConfigSetFn set, void *userdata, const char **ret_config, char **ret_error);

/*
 * A boolean setting, spelled the same for every flag and key: true/false, yes/no,
 * on/off or 1/0, in any case. NULL (a bare --flag of an optional_argument option) is
 * true. Returns 0, or -EINVAL with *ret_reason set as a ConfigSetFn wants it.
 */
int config_parse_bool(const char *value, bool *ret, const char **ret_reason);

/* A decimal integer in [min, max]: 0, or -EINVAL (not a number) or -ERANGE. */
int config_parse_int(const char *value, int64_t min, int64_t max, int64_t *ret);
