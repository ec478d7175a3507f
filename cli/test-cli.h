/* SPDX-License-Identifier: MIT */
/*
 * What the CLI's tests share: running axctl with its output captured, and the request
 * side of the small HTTP servers they run in a thread (test-cli-api.c,
 * test-cli-failover.c): one request per connection, read whole, with the parts the
 * tests look at.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct Run {
        int code;
        char *out;
        char *err;
} Run;

/* Runs axctl with exactly argv (NULL-terminated) through cli_run, output captured. */
static inline Run run_argv(char **argv) {
        int argc = 0;
        while (argv[argc])
                argc++;
        Run r = {};
        size_t n1, n2;
        FILE *out = open_memstream(&r.out, &n1);
        FILE *err = open_memstream(&r.err, &n2);
        r.code = cli_run(argc, argv, out, err);
        fclose(out);
        fclose(err);
        return r;
}

static inline void run_done(Run *r) {
        free(r->out);
        free(r->err);
}

/* The developer's own settings and token must not leak into a test; a client that
 * hangs up must not kill the test's server thread. */
static inline void test_environment_clean(void) {
        unsetenv("AXCTL_TOKEN");
        unsetenv("AXCTL_CONFIG");
        unsetenv("AXCTL_CA_FILE");
        unsetenv("AXCTL_URL");
        setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
        signal(SIGPIPE, SIG_IGN);
}

typedef struct TestRequest {
        char method[8];
        char target[1024];
        char body[8192];
        char idempotency_key[256];
        char authorization[256]; /* the Authorization header, "" when absent */
} TestRequest;

/* Reads the head and a Content-Length body from fd into ret; false when the client
 * went away before a whole head came. */
static inline bool test_request_read(int fd, TestRequest *ret) {
        char buf[16384];
        size_t len = 0;
        char *end = NULL;
        while (!end && len < sizeof(buf) - 1) {
                ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (n <= 0)
                        return false;
                len += (size_t) n;
                buf[len] = '\0';
                end = strstr(buf, "\r\n\r\n");
        }
        if (!end)
                return false;
        size_t header_len = (size_t) (end - buf) + 4;
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        size_t body_len = cl && cl < end ? (size_t) strtoul(cl + 17, NULL, 10) : 0;
        while (len < header_len + body_len && len < sizeof(buf) - 1) {
                ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (n <= 0)
                        return false;
                len += (size_t) n;
        }
        buf[len] = '\0';

        *ret = (TestRequest){};
        sscanf(buf, "%7s %1023s", ret->method, ret->target);
        snprintf(ret->body, sizeof(ret->body), "%s", buf + header_len);
        const char *k = strcasestr(buf, "\r\nIdempotency-Key: ");
        if (k && k < end)
                sscanf(k + 19, "%255[^\r]", ret->idempotency_key);
        const char *a = strcasestr(buf, "\r\nAuthorization: ");
        if (a && a < end)
                sscanf(a + 17, "%255[^\r]", ret->authorization);
        return true;
}
