/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/config.c: the `key = value` syntax, its error messages (file and
 * line), the mapping of keys onto long options, with flags applied after the file, and
 * the boolean and integer values both daemons share.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "config.h"
#include "util.h"

/* Parses text and returns the error message, or "" on success. */
static char *parse_error(const char *text) {
        ConfigFile *c = NULL;
        char *err = NULL;
        int r = config_file_parse("t.conf", text, &c, &err);
        if (r == 0) {
                CHECK(c);
                CHECK(!err);
                config_file_free(c);
                return xstrdup("");
        }
        CHECK_INT(r, -EINVAL);
        CHECK(!c);
        CHECK(err);
        return err;
}

static void test_syntax(void) {
        ConfigFile *c = NULL;
        char *err = NULL;
        const char *text = "# controller settings\n"
                           "\n"
                           "   listen = 0.0.0.0:8470\n"
                           "db=/var/lib/axctl/axctld.db\n"
                           "lease-ms = 5000   # five seconds\n"
                           "\tlog_level\t=\tdebug\t\n"
                           "url = http://x/a#frag\n"
                           "quoted = \"  spaced # not a comment \"  # a comment\n"
                           "single = 'a\\b'\n"
                           "escaped = \"say \\\"hi\\\"\\n\\\\\"\n"
                           "empty =\n"
                           "crlf = yes\r\n"
                           "listen = 127.0.0.1:1\n";
        CHECK_INT(config_file_parse("a.conf", text, &c, &err), 0);
        CHECK_STR(config_file_path(c), "a.conf");
        CHECK_INT(config_file_size(c), 11);
        CHECK_STR(config_file_entry(c, 0)->key, "listen");
        CHECK_INT(config_file_entry(c, 0)->line, 3);
        CHECK_STR(config_file_entry(c, 2)->key, "lease_ms");
        CHECK_STR(config_file_entry(c, 2)->value, "5000");
        CHECK_INT(config_file_entry(c, 2)->line, 5);
        CHECK(!config_file_entry(c, 11));
        CHECK_STR(config_file_get(c, "db"), "/var/lib/axctl/axctld.db");
        CHECK_STR(config_file_get(c, "log_level"), "debug");
        CHECK_STR(config_file_get(c, "url"), "http://x/a#frag");
        CHECK_STR(config_file_get(c, "quoted"), "  spaced # not a comment ");
        CHECK_STR(config_file_get(c, "single"), "a\\b");
        CHECK_STR(config_file_get(c, "escaped"), "say \"hi\"\n\\");
        CHECK_STR(config_file_get(c, "empty"), "");
        CHECK_STR(config_file_get(c, "crlf"), "yes");
        /* The last of two values wins, as with a repeated flag. */
        CHECK_STR(config_file_get(c, "listen"), "127.0.0.1:1");
        CHECK(!config_file_get(c, "missing"));
        config_file_free(c);

        /* An empty file and a file without a final newline. */
        char *ok = parse_error("");
        CHECK_STR(ok, "");
        free(ok);
        ok = parse_error("a = 1");
        CHECK_STR(ok, "");
        free(ok);
}

static void test_errors(void) {
        struct {
                const char *text, *error;
        } cases[] = {
                {"a = 1\nlisten 0.0.0.0:1\n", "t.conf:2: expected '=' after 'listen'"},
                {"= 1\n", "t.conf:1: expected a key (letters, digits, '_')"},
                {"[controller]\n", "t.conf:1: expected a key (letters, digits, '_')"},
                {"\n\nlease.ms = 1\n", "t.conf:3: invalid character '.' in key"},
                {"a = \"open\n", "t.conf:1: a: unterminated quoted value"},
                {"a = \"x\" y\n", "t.conf:1: a: text after the closing quote"},
                {"a = \"\\q\"\n", "t.conf:1: a: unknown escape in quoted value (use \\\\, \\\", "
                                  "\\n or \\t)"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *err = parse_error(cases[i].text);
                CHECK_STR(err, cases[i].error);
        }
}

/* What a daemon's main() keeps: the options the test table below can set. */
typedef struct Settings {
        long lease_ms;
        bool auth;
        const char *listen;
        char listen_buf[64];
        int n_set;
} Settings;

enum {
        OPT_LISTEN = 256,
        OPT_LEASE,
        OPT_AUTH,
        OPT_CONFIG,
        OPT_HELP,
        OPT_VERBOSE
};

static const struct option test_options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"lease-ms", required_argument, NULL, OPT_LEASE},
        {"auth", optional_argument, NULL, OPT_AUTH},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"help", no_argument, NULL, OPT_HELP},
        {},
};
static const char *const test_skip[] = {"config", NULL};

static int settings_set(void *userdata, int opt, const char *value, const char **ret_reason) {
        Settings *s = userdata;
        s->n_set++;
        switch (opt) {
        case OPT_LISTEN:
                snprintf(s->listen_buf, sizeof(s->listen_buf), "%s", value);
                s->listen = s->listen_buf;
                return 0;
        case OPT_LEASE: {
                char *end;
                long v = strtol(value, &end, 10);
                if (end == value || *end || v < 100) {
                        *ret_reason = "needs an integer of at least 100";
                        return -EINVAL;
                }
                s->lease_ms = v;
                return 0;
        }
        case OPT_AUTH:
                return config_parse_bool(value, &s->auth, ret_reason);
        default:
                CHECK(!"an option the file may not set was applied");
                return -EINVAL;
        }
}

static char *apply_error(const char *text, Settings *s) {
        _cleanup_config_file_ ConfigFile *c = NULL;
        char *err = NULL;
        CHECK_INT(config_file_parse("d.conf", text, &c, &err), 0);
        int r = config_file_apply(c, test_options, test_skip, settings_set, s, &err);
        if (r == 0)
                return xstrdup("");
        CHECK_INT(r, -EINVAL);
        return err;
}

static void test_apply(void) {
        Settings s = {.lease_ms = 5000, .listen = "127.0.0.1:8470"};
        _cleanup_free_ char *e1 = apply_error("listen = 0.0.0.0:9\nlease_ms = 700\n", &s);
        CHECK_STR(e1, "");
        CHECK_STR(s.listen, "0.0.0.0:9");
        CHECK_INT(s.lease_ms, 700);
        CHECK_INT(s.n_set, 2);

        /* Keys may use '-' like the flags. */
        _cleanup_free_ char *e2 = apply_error("lease-ms = 800\n", &s);
        CHECK_STR(e2, "");
        CHECK_INT(s.lease_ms, 800);

        _cleanup_free_ char *e3 = apply_error("# x\nlease_ms = 50\n", &s);
        CHECK_STR(e3, "d.conf:2: lease_ms = \"50\": needs an integer of at least 100");
        CHECK_INT(s.lease_ms, 800);

        _cleanup_free_ char *e4 = apply_error("listen_addr = x\n", &s);
        CHECK_STR(e4, "d.conf:1: unknown key 'listen_addr'");
        /* Flags without a value and the skipped ones are not keys. */
        _cleanup_free_ char *e5 = apply_error("verbose = 1\n", &s);
        CHECK_STR(e5, "d.conf:1: unknown key 'verbose'");
        _cleanup_free_ char *e6 = apply_error("config = /etc/x\n", &s);
        CHECK_STR(e6, "d.conf:1: unknown key 'config'");
        /* A prefix of an option name is not that option. */
        _cleanup_free_ char *e7 = apply_error("lease = 900\n", &s);
        CHECK_STR(e7, "d.conf:1: unknown key 'lease'");
}

static void test_load(void) {
        _cleanup_free_ char *dir = check_tmpdir("axctl-test-config");
        _cleanup_free_ char *path = xasprintf("%s/axctld.conf", dir);
        _cleanup_free_ char *missing = xasprintf("%s/nothere.conf", dir);
        const char *text = "lease_ms = 1234\n";
        CHECK_INT(util_write_file_atomic(path, text, strlen(text)), 0);

        Settings s = {.lease_ms = 5000};
        const char *used = "unset";
        char *err = NULL;
        /* A missing default file is fine and applies nothing. */
        CHECK_INT(config_load_and_apply(NULL, missing, test_options, test_skip, settings_set, &s,
                                        &used, &err),
                  0);
        CHECK(!used);
        CHECK_INT(s.lease_ms, 5000);
        /* An existing default file is read. */
        CHECK_INT(config_load_and_apply(NULL, path, test_options, test_skip, settings_set, &s,
                                        &used, &err),
                  0);
        CHECK_STR(used, path);
        CHECK_INT(s.lease_ms, 1234);
        /* A file named explicitly must exist. */
        CHECK_INT(config_load_and_apply(missing, path, test_options, test_skip, settings_set, &s,
                                        &used, &err),
                  -ENOENT);
        _cleanup_free_ char *want = xasprintf("%s: %s", missing, strerror(ENOENT));
        CHECK_STR(err, want);
        free(err);
        err = NULL;

        /* A file with a NUL byte is not a configuration file. */
        CHECK_INT(util_write_file_atomic(path, "a = 1\0b", 7), 0);
        ConfigFile *c = NULL;
        CHECK_INT(config_file_load(path, &c, &err), -EINVAL);
        CHECK(!c);
        free(err);
        CHECK_INT(util_rm_rf(dir), 0);
}

static void test_bool(void) {
        static const char *const yes[] = {"true", "yes", "on", "1", "TRUE", "Yes", "ON", "oN"};
        static const char *const no[] = {"false", "no", "off", "0", "FALSE", "No", "OFF"};
        static const char *const bad[] = {"",      "maybe", "y",       "n",  "2", "01",
                                          "true ", " on",   "enabled", "-1", "t"};
        const char *reason = NULL;
        bool b = false;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                b = false;
                CHECK_INT(config_parse_bool(yes[i], &b, &reason), 0);
                CHECK(b);
        }
        for (size_t i = 0; i < ELEMENTSOF(no); i++) {
                b = true;
                CHECK_INT(config_parse_bool(no[i], &b, &reason), 0);
                CHECK(!b);
        }
        CHECK(!reason);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                b = true;
                reason = NULL;
                CHECK_INT(config_parse_bool(bad[i], &b, &reason), -EINVAL);
                CHECK(b); /* untouched */
                CHECK_STR(reason, "needs true or false (or yes/no, on/off, 1/0)");
        }
        /* A bare --flag. */
        b = false;
        CHECK_INT(config_parse_bool(NULL, &b, &reason), 0);
        CHECK(b);
}

static void test_int(void) {
        int64_t v = 7;
        CHECK_INT(config_parse_int("100", 100, 200, &v), 0);
        CHECK_INT(v, 100);
        CHECK_INT(config_parse_int("-5", -10, 0, &v), 0);
        CHECK_INT(v, -5);
        CHECK_INT(config_parse_int("9223372036854775807", 0, INT64_MAX, &v), 0);
        CHECK_INT(v, INT64_MAX);
        v = 7;
        CHECK_INT(config_parse_int("99", 100, 200, &v), -ERANGE);
        CHECK_INT(config_parse_int("201", 100, 200, &v), -ERANGE);
        CHECK_INT(config_parse_int("99999999999999999999", 0, INT64_MAX, &v), -ERANGE);
        CHECK_INT(config_parse_int("", 0, 10, &v), -EINVAL);
        CHECK_INT(config_parse_int("5ms", 0, 10, &v), -EINVAL);
        CHECK_INT(config_parse_int("0x5", 0, 10, &v), -EINVAL);
        CHECK_INT(config_parse_int("five", 0, 10, &v), -EINVAL);
        CHECK_INT(v, 7);
}

/* Runs config_parse_args on a NULL-terminated argv; returns its result, *ret_error kept. */
static int args_run(Settings *s, const char *default_path, char **ret_error, const char **ret_used,
                    ...) {
        char *argv[16] = {(char *) "axtest"};
        int argc = 1;
        va_list ap;
        va_start(ap, ret_used);
        for (const char *a; (a = va_arg(ap, const char *));)
                argv[argc++] = (char *) a;
        va_end(ap);
        *ret_error = NULL;
        return config_parse_args(argc, argv, test_options, default_path, settings_set, s, ret_used,
                                 ret_error);
}

static void test_args(void) {
        _cleanup_free_ char *dir = check_tmpdir("axctl-test-args");
        _cleanup_free_ char *path = xasprintf("%s/d.conf", dir);
        _cleanup_free_ char *bad = xasprintf("%s/bad.conf", dir);
        _cleanup_free_ char *missing = xasprintf("%s/nothere.conf", dir);
        const char *text = "lease_ms = 1234\nauth = On\nlisten = 10.0.0.1:1\n";
        CHECK_INT(util_write_file_atomic(path, text, strlen(text)), 0);
        const char *bad_text = "\nauth = maybe\n";
        CHECK_INT(util_write_file_atomic(bad, bad_text, strlen(bad_text)), 0);
        char *err = NULL;
        const char *used = NULL;

        /* The default file, then the flags, which win. */
        Settings s = {.lease_ms = 5000};
        CHECK_INT(args_run(&s, path, &err, &used, "--lease-ms", "700", NULL), 0);
        CHECK_STR(used, path);
        CHECK_INT(s.lease_ms, 700);
        CHECK(s.auth);
        CHECK_STR(s.listen, "10.0.0.1:1");
        CHECK_INT(args_run(&s, path, &err, &used, "--auth=OFF", NULL), 0);
        CHECK(!s.auth);
        CHECK_INT(s.lease_ms, 1234);
        /* A bare optional-value flag is true; --config replaces the default file. */
        s = (Settings){.lease_ms = 5000};
        CHECK_INT(args_run(&s, missing, &err, &used, "--auth", NULL), 0);
        CHECK(!used);
        CHECK(s.auth);
        CHECK_INT(s.lease_ms, 5000);
        CHECK_INT(args_run(&s, missing, &err, &used, "--config", path, "--auth=no", NULL), 0);
        CHECK_STR(used, path);
        CHECK(!s.auth);
        CHECK_INT(s.lease_ms, 1234);
        /* Help wins over everything and applies nothing. */
        s = (Settings){.lease_ms = 5000};
        CHECK_INT(args_run(&s, path, &err, &used, "--lease-ms", "900", "--help", NULL),
                  CONFIG_HELP);
        CHECK_INT(args_run(&s, path, &err, &used, "-h", NULL), CONFIG_HELP);
        CHECK_INT(s.n_set, 0);

        /* Every refusal is one line naming the flag or key and the value. */
        struct {
                const char *a1, *a2, *error;
        } cases[] = {
                {"--auth=maybe", NULL,
                 "--auth needs true or false (or yes/no, on/off, 1/0), not 'maybe'"},
                {"--auth=", NULL, "--auth needs true or false (or yes/no, on/off, 1/0), not ''"},
                {"--lease-ms", "50", "--lease-ms needs an integer of at least 100, not '50'"},
                {"--lease-ms", NULL, "--lease-ms needs a value (see --help)"},
                {"--bogus", NULL, "unknown option --bogus (see --help)"},
                {"--verbose=1", NULL, "unknown option --verbose=1 (see --help)"},
                {"stray", NULL, "unexpected argument 'stray' (see --help)"},
                {"--config", missing, NULL},
                {"--config", bad, NULL},
        };
        _cleanup_free_ char *missing_error = xasprintf("%s: %s", missing, strerror(ENOENT));
        _cleanup_free_ char *bad_error = xasprintf(
                "%s:2: auth = \"maybe\": needs true or false (or yes/no, on/off, 1/0)", bad);
        cases[7].error = missing_error;
        cases[8].error = bad_error;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                s = (Settings){.lease_ms = 5000};
                int r = args_run(&s, missing, &err, &used, cases[i].a1, cases[i].a2, NULL);
                CHECK(r < 0);
                CHECK_STR(err, cases[i].error);
                free(err);
        }
        /* A bad default file is refused too; the flags are not applied after it. */
        s = (Settings){.lease_ms = 5000};
        CHECK_INT(args_run(&s, bad, &err, &used, "--lease-ms", "700", NULL), -EINVAL);
        CHECK_STR(err, bad_error);
        free(err);
        CHECK_INT(s.lease_ms, 5000);
        CHECK_INT(util_rm_rf(dir), 0);
}

int main(void) {
        test_syntax();
        test_errors();
        test_apply();
        test_load();
        test_bool();
        test_int();
        test_args();
        printf("config: all tests passed\n");
        return 0;
}
