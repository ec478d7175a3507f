/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of axctl's error contract: HTTP status to exit code, the one-line messages
 * built from API error bodies, usage errors of every command (one line on stderr, exit
 * 2), help on every command (exit 0), and "cannot reach controller" (exit 5) against a
 * port nobody listens on.
 */
#include "cli.h"
#include "test-cli.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static bool one_line(const char *s) {
        size_t n = strlen(s);
        return n > 0 && s[n - 1] == '\n' && strchr(s, '\n') == s + n - 1;
}

/* Runs argv and checks exit code and that stderr holds exactly one line with needle. */
static void expect_error(int code, const char *needle, char **argv) {
        Run r = run_argv(argv);
        if (r.code != code || !strstr(r.err, needle) || !one_line(r.err))
                fprintf(stderr, "%s: exit %d (want %d), stderr '%s' (want '%s')\n", argv[1], r.code,
                        code, r.err, needle);
        assert(r.code == code);
        assert(strstr(r.err, needle));
        assert(one_line(r.err));
        assert(strncmp(r.err, "axctl: ", 7) == 0);
        run_done(&r);
}

static void test_status_mapping(void) {
        assert(cli_exit_for_status(200) == CLI_EXIT_OK);
        assert(cli_exit_for_status(201) == CLI_EXIT_OK);
        assert(cli_exit_for_status(400) == CLI_EXIT_USAGE);
        assert(cli_exit_for_status(413) == CLI_EXIT_USAGE);
        assert(cli_exit_for_status(422) == CLI_EXIT_USAGE);
        assert(cli_exit_for_status(404) == CLI_EXIT_NOT_FOUND);
        assert(cli_exit_for_status(409) == CLI_EXIT_FAILED);
        assert(cli_exit_for_status(401) == CLI_EXIT_UNAUTHENTICATED);
        assert(cli_exit_for_status(403) == CLI_EXIT_FORBIDDEN);
        assert(CLI_EXIT_UNAUTHENTICATED == 7 && CLI_EXIT_FORBIDDEN == 8);
        assert(cli_exit_for_status(405) == CLI_EXIT_UNREACHABLE);
        assert(cli_exit_for_status(500) == CLI_EXIT_UNREACHABLE);
        assert(cli_exit_for_status(502) == CLI_EXIT_UNREACHABLE);

        assert(cli_exit_for_job_state("succeeded") == 0);
        assert(cli_exit_for_job_state("failed") == 1);
        assert(cli_exit_for_job_state("cancelled") == 3);
        assert(cli_exit_for_job_state("running") == -1);
        assert(cli_exit_for_job_state("restarting") == -1);
        assert(cli_exit_for_job_state(NULL) == -1);
}

static void test_api_messages(void) {
        struct {
                long status;
                const char *body;
                const char *want;
        } cases[] = {
                {400,
                 "{\"error\":{\"code\":\"invalid_spec\",\"message\":\"ranks: must be at least 1\","
                 "\"field\":\"ranks\"}}",
                 "invalid spec: ranks: must be at least 1 (field ranks)"},
                {404, "{\"error\":{\"code\":\"not_found\",\"message\":\"no job 9\"}}",
                 "not found: no job 9"},
                {409, "{\"error\":{\"code\":\"conflict\",\"message\":\"job 7 already ended\"}}",
                 "conflict: job 7 already ended"},
                {422,
                 "{\"error\":{\"code\":\"unschedulable\",\"message\":\"no node has 9 "
                 "accelerators\",\"field\":\"\"}}",
                 "unschedulable: no node has 9 accelerators"},
                {500, "{\"error\":{\"code\":\"internal\"}}", "internal"},
                {502, "<html>Bad gateway</html>\nmore", "HTTP 502: <html>Bad gateway</html>"},
                {503, "", "HTTP 503"},
                {500, NULL, "HTTP 500"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *m = cli_api_error_message(cases[i].status, cases[i].body);
                if (strcmp(m, cases[i].want) != 0)
                        fprintf(stderr, "got '%s', want '%s'\n", m, cases[i].want);
                assert(strcmp(m, cases[i].want) == 0);
        }
}

static void test_usage(void) {
        expect_error(2, "no command given (see axctl --help)", (char *[]){"axctl", NULL});
        expect_error(2, "unknown command frobnicate (see axctl --help)",
                     (char *[]){"axctl", "frobnicate", NULL});
        expect_error(2, "unknown flag --foo (see axctl --help)",
                     (char *[]){"axctl", "--foo", "list", NULL});
        expect_error(2, "unknown flag --foo for submit (see axctl submit --help)",
                     (char *[]){"axctl", "submit", "--foo", "--", "true", NULL});
        expect_error(2, "unknown flag --bar for list (see axctl list --help)",
                     (char *[]){"axctl", "list", "--bar", NULL});
        expect_error(2, "wait needs a JOB id", (char *[]){"axctl", "wait", NULL});
        expect_error(2, "invalid job id 'abc'", (char *[]){"axctl", "wait", "abc", NULL});
        expect_error(2, "invalid job id '0'", (char *[]){"axctl", "cancel", "0", NULL});
        expect_error(2, "unexpected argument '8' for cancel",
                     (char *[]){"axctl", "cancel", "7", "8", NULL});
        expect_error(2, "--timeout: not a number of seconds: 'soon'",
                     (char *[]){"axctl", "wait", "7", "--timeout", "soon", NULL});
        expect_error(2, "logs needs a JOB id", (char *[]){"axctl", "logs", "-f", NULL});
        expect_error(2, "--rank: not an integer",
                     (char *[]){"axctl", "logs", "1", "--rank", "x", NULL});
        expect_error(2, "drain needs a NODE name", (char *[]){"axctl", "drain", NULL});
        expect_error(2, "unknown flag --now for undrain",
                     (char *[]){"axctl", "undrain", "n1", "--now", NULL});
        expect_error(2, "unexpected argument 'x' for nodes",
                     (char *[]){"axctl", "nodes", "x", NULL});
        expect_error(2, "do not go with a JOB",
                     (char *[]){"axctl", "status", "7", "--state", "running", NULL});
        expect_error(2, "--rank and --attempt go with --env",
                     (char *[]){"axctl", "status", "7", "--rank", "1", NULL});
        expect_error(2, "flag --url needs a value", (char *[]){"axctl", "--url", NULL});
}

static void test_help(void) {
        const char *commands[] = {"submit", "status", "list",  "cancel", "wait",
                                  "logs",   "events", "nodes", "drain",  "undrain"};
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                for (int form = 0; form < 3; form++) {
                        char *argv[4] = {"axctl"};
                        if (form == 0) {
                                argv[1] = (char *) commands[i];
                                argv[2] = "--help";
                        } else if (form == 1) {
                                argv[1] = (char *) commands[i];
                                argv[2] = "-h";
                        } else {
                                argv[1] = "help";
                                argv[2] = (char *) commands[i];
                        }
                        Run r = run_argv(argv);
                        assert(r.code == 0);
                        assert(strncmp(r.out, "Usage: axctl ", 13) == 0);
                        assert(strstr(r.out, commands[i]));
                        assert(r.err[0] == '\0');
                        run_done(&r);
                }
        }
        Run r = run_argv((char *[]){"axctl", "--help", NULL});
        assert(r.code == 0);
        assert(strstr(r.out, "Exit codes:"));
        assert(strstr(r.out, "6  job or node not found"));
        assert(strstr(r.out, "7  not authenticated"));
        assert(strstr(r.out, "8  not allowed"));
        assert(strstr(r.out, "--ca-file PATH"));
        run_done(&r);
        r = run_argv((char *[]){"axctl", "--version", NULL});
        assert(r.code == 0 && strncmp(r.out, "axctl ", 6) == 0);
        run_done(&r);
}

/* A port on 127.0.0.1 that nothing listens on: bound once, then released. */
static int unused_port(void) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert(fd >= 0);
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        assert(bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
        socklen_t len = sizeof(sa);
        assert(getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
        close(fd);
        return ntohs(sa.sin_port);
}

static void test_unreachable(void) {
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d", unused_port());
        _cleanup_free_ char *want =
                xasprintf("cannot reach controller at %s: Connection refused", url);
        const char *commands[][3] = {
                {"list"},   {"status", "7"}, {"wait", "7"},   {"cancel", "7"},          {"nodes"},
                {"events"}, {"logs", "7"},   {"drain", "n1"}, {"submit", "--", "true"},
        };
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                char *argv[8] = {"axctl", "--url", url};
                int n = 3;
                for (int k = 0; k < 3 && commands[i][k]; k++)
                        argv[n++] = (char *) commands[i][k];
                expect_error(5, want, argv);
        }

        /* $AXCTL_URL is the default; a trailing slash is harmless. */
        _cleanup_free_ char *slash = xasprintf("%s/", url);
        setenv("AXCTL_URL", slash, 1);
        expect_error(5, want, (char *[]){"axctl", "list", NULL});
        /* --url after the command works too and wins over the environment. */
        setenv("AXCTL_URL", "http://127.0.0.1:1", 1);
        expect_error(5, want, (char *[]){"axctl", "nodes", "--url", url, NULL});
        unsetenv("AXCTL_URL");
}

int main(void) {
        /* A developer's own config file must not change what these tests see. */
        unsetenv("AXCTL_TOKEN");
        unsetenv("AXCTL_CONFIG");
        setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
        test_status_mapping();
        test_api_messages();
        test_usage();
        test_help();
        test_unreachable();
        printf("cli-errors: ok\n");
        return 0;
}
