/* SPDX-License-Identifier: MIT */
/*
 * Runs whole axctl commands (cli_run) against a small HTTP server in a thread of this
 * test that answers with the JSON of docs/PROTOCOL.md. It checks what goes over the
 * wire (spec body, Idempotency-Key header, drain body, query strings) and what comes
 * out (tables, state lines, exit codes), including the 307 redirect of the logs route
 * and the pagination of list --all. The real controller is covered by
 * tests/integration; this keeps the client honest without one.
 */
#include "../tests/unit/check.h"
#include "cli.h"
#include "test-cli.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct Fake {
        int fd;
        int port;
        pthread_t thread;
        TestRequest req; /* the last one, for the tests to inspect (one at a time) */
        int polls[8]; /* GET /v1/jobs/{id} count per job id */
} Fake;

static Fake fake;

static void send_response(int fd, int status, const char *extra_headers, const char *body) {
        char head[1024];
        int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                         status, strlen(body), extra_headers ? extra_headers : "");
        assert(write(fd, head, (size_t) n) == n);
        assert(write(fd, body, strlen(body)) == (ssize_t) strlen(body));
}

static const char *job_json(int id, const char *state, const char *reason, const char *exit_code) {
        static char buf[2048];
        snprintf(buf, sizeof(buf),
                 "{\"id\": %d, \"name\": \"job%d\", \"project\": \"default\", \"user\": \"alice\","
                 " \"priority\": 0, \"state\": \"%s\", \"attempt\": 1, \"restarts\": 0,"
                 " \"reason\": \"%s\", \"exit_code\": %s,"
                 " \"created_at\": \"2020-01-01T00:00:00.000Z\", \"started_at\": null,"
                 " \"finished_at\": null, \"last_checkpoint\": null,"
                 " \"ranks\": [{\"rank\": 0, \"attempt\": 1, \"node\": \"n1\", \"state\": "
                 "\"running\","
                 " \"pid\": 42, \"exit_code\": null, \"signal\": null, \"step\": 3, \"devices\": "
                 "[0, 1]},"
                 " {\"rank\": 1, \"attempt\": 1, \"node\": \"n2\", \"state\": \"running\","
                 " \"pid\": 43, \"exit_code\": null, \"signal\": null, \"step\": null, "
                 "\"devices\": []}],"
                 " \"attempts\": []}",
                 id, id, state, reason, exit_code);
        return buf;
}

/* An answer without an end (no length, never closed by the server): the client must
 * stop reading it. Sends at most 80 MiB, fewer when the client hangs up. */
static void send_endless(int fd) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Connection: close\r\n\r\n{\"events\": [";
        if (write(fd, head, sizeof(head) - 1) < 0)
                return;
        static char chunk[1 << 20];
        memset(chunk, ' ', sizeof(chunk));
        for (int i = 0; i < 80; i++)
                if (write(fd, chunk, sizeof(chunk)) < 0)
                        return;
}

/* Job 16 was submitted by someone who put terminal controls where the table shows them
 * (a reason as a hostile node would report it; a C1 CSI in the user name). */
static const char hostile_job[] =
        "{\"id\": 16, \"name\": \"job16\", \"project\": \"default\", \"user\": \"a\\u009b2Jb\","
        " \"priority\": 0, \"state\": \"failed\", \"attempt\": 1, \"restarts\": 0,"
        " \"reason\": \"node says \\u001b]52;c;cHduZWQ=\\u0007\\u001b[2J\\rok\", \"exit_code\": 1,"
        " \"created_at\": \"2020-01-01T00:00:00.000Z\", \"ranks\": [], \"attempts\": []}";

/* Writes text as it is, in one write (the test's answers are small). */
static void send_raw(int fd, const char *text) {
        assert(write(fd, text, strlen(text)) == (ssize_t) strlen(text));
}

/* Answers that test the client's HTTP framing and limits rather than the API. */
static bool route_transport(int fd) {
        const char *t = fake.req.target;
        char buf[4096];
        if (strcmp(t, "/v1/jobs/20") == 0) {
                /* An interim answer, then the job in chunks (an extension, a trailer),
                 * written apart so the client reads them in pieces. */
                const char *job = job_json(20, "running", "", "null");
                size_t half = strlen(job) / 2;
                send_raw(fd, "HTTP/1.1 100 Continue\r\n\r\n");
                snprintf(buf, sizeof(buf),
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%zx;x=y\r\n%.*s\r\n",
                         half, (int) half, job);
                send_raw(fd, buf);
                snprintf(buf, sizeof(buf), "%zX\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n",
                         strlen(job + half), job + half);
                send_raw(fd, buf);
                return true;
        }
        if (strcmp(t, "/v1/jobs/21") == 0) {
                send_raw(fd, "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"id\": 21");
                return true;
        }
        if (strcmp(t, "/v1/jobs/22") == 0) {
                send_raw(fd, "SSH-2.0-OpenSSH_9.2\r\n");
                return true;
        }
        if (strcmp(t, "/v1/jobs/24") == 0) {
                /* A header line longer than any API server sends. */
                memset(buf, 'a', sizeof(buf) - 1);
                buf[sizeof(buf) - 1] = '\0';
                send_raw(fd, "HTTP/1.1 200 OK\r\nX-Long: ");
                send_raw(fd, buf);
                send_raw(fd, buf);
                send_raw(fd, buf);
                return true;
        }
        if (strcmp(t, "/v1/jobs/25") == 0) {
                /* Interim answers without end: the client stops listening. */
                while (write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25) > 0)
                        ;
                return true;
        }
        if (strcmp(t, "/v1/jobs/23") == 0) {
                /* Silent until the client gives up and hangs up. */
                while (read(fd, buf, sizeof(buf)) > 0)
                        ;
                return true;
        }
        if (strncmp(t, "/v1/jobs/10/logs?", 17) == 0) {
                send_raw(fd, "HTTP/1.1 307 Again\r\nLocation: /v1/jobs/10/logs?again\r\n"
                             "Content-Length: 0\r\n\r\n");
                return true;
        }
        if (strncmp(t, "/v1/jobs/11/logs?", 17) == 0) {
                snprintf(buf, sizeof(buf),
                         "HTTP/1.1 302 Found\r\nLocation: /agent/log?%.900s\r\n"
                         "Content-Length: 0\r\n\r\n",
                         t + 17);
                send_raw(fd, buf);
                return true;
        }
        return false;
}

static void route(int fd) {
        const char *t = fake.req.target;
        char extra[1200];
        if (route_transport(fd))
                return;
        if (strcmp(t, "/v1/jobs/16") == 0)
                return send_response(fd, 200, NULL, hostile_job);
        if (strcmp(t, "/v1/jobs/16/cancel") == 0)
                return send_response(fd, 409, NULL,
                                     "{\"error\": {\"code\": \"conflict\", \"message\":"
                                     " \"\\u001b[31mred\\u007f\"}}");
        if (strcmp(t, "/v1/jobs/16/events") == 0)
                return send_endless(fd);
        if (strcmp(fake.req.method, "POST") == 0 && strcmp(t, "/v1/jobs") == 0) {
                if (strstr(fake.req.body, "\"ranks\":0"))
                        return send_response(
                                fd, 400, NULL,
                                "{\"error\": {\"code\": \"invalid_spec\", \"message\":"
                                " \"ranks: must be at least 1\", \"field\": \"ranks\"}}");
                return send_response(fd, 201, NULL, job_json(1, "pending", "", "null"));
        }
        if (strncmp(t, "/v1/jobs?", 9) == 0 || strcmp(t, "/v1/jobs") == 0) {
                /* Five jobs, two per page, newest first. */
                if (!strstr(t, "after="))
                        return send_response(
                                fd, 200, NULL,
                                "{\"jobs\": [{\"id\": 5, \"state\": \"running\"},"
                                " {\"id\": 4, \"state\": \"pending\"}], \"next_after\": 4}");
                if (strstr(t, "after=4"))
                        return send_response(
                                fd, 200, NULL,
                                "{\"jobs\": [{\"id\": 3}, {\"id\": 2}], \"next_after\": 2}");
                return send_response(fd, 200, NULL,
                                     "{\"jobs\": [{\"id\": 1}], \"next_after\": null}");
        }
        /* Job 7 is guarded like the real controller: a user token of another project. */
        if (strcmp(t, "/v1/jobs/7") == 0) {
                if (strcmp(fake.req.authorization, "Bearer admin-token") == 0)
                        return send_response(fd, 200, NULL, job_json(7, "running", "", "null"));
                if (strcmp(fake.req.authorization, "Bearer user-token") == 0)
                        return send_response(fd, 403, NULL,
                                             "{\"error\": {\"code\": \"forbidden\", \"message\":"
                                             " \"job 7 belongs to project vision\"}}");
                return send_response(fd, 401, "WWW-Authenticate: Bearer\r\n",
                                     "{\"error\": {\"code\": \"unauthorized\", \"message\":"
                                     " \"missing or unknown token\"}}");
        }
        /* Job 8's logs live on an agent with another host name: no token goes there. */
        if (strncmp(t, "/v1/jobs/8/logs?", 16) == 0) {
                snprintf(extra, sizeof(extra), "Location: http://localhost:%d/agent/log?%.900s\r\n",
                         fake.port, t + 16);
                return send_response(fd, 307, extra, "");
        }
        int id;
        char rest[512] = "";
        if (sscanf(t, "/v1/jobs/%d%511s", &id, rest) >= 1) {
                if (strcmp(fake.req.method, "GET") == 0 && rest[0] == '\0') {
                        int n = id < 8 ? ++fake.polls[id] : 0;
                        switch (id) {
                        case 1: /* succeeds on the third look */
                                return send_response(fd, 200, NULL,
                                                     job_json(1, n < 3 ? "running" : "succeeded",
                                                              "", n < 3 ? "null" : "0"));
                        case 2:
                                return send_response(
                                        fd, 200, NULL,
                                        job_json(2, "failed", "rank 1 exited with 3", "3"));
                        case 3:
                                return send_response(
                                        fd, 200, NULL,
                                        job_json(3, "cancelled", "cancelled by user", "null"));
                        case 4:
                                return send_response(fd, 200, NULL,
                                                     job_json(4, "running", "", "null"));
                        case 5: /* the controller restarts: two 503s, then the answer */
                                if (n == 2 || n == 3)
                                        return send_response(fd, 503, NULL, "");
                                return send_response(
                                        fd, 200, NULL,
                                        job_json(5, n < 4 ? "running" : "succeeded", "", "0"));
                        }
                        return send_response(fd, 404, NULL,
                                             "{\"error\": {\"code\": \"not_found\", \"message\":"
                                             " \"no such job\"}}");
                }
                if (strcmp(rest, "/cancel") == 0) {
                        if (id == 2)
                                return send_response(
                                        fd, 409, NULL,
                                        "{\"error\": {\"code\": \"conflict\", \"message\":"
                                        " \"job 2 already ended\"}}");
                        return send_response(
                                fd, 200, NULL,
                                job_json(id, "cancelled", "cancelled by user", "null"));
                }
                if (strncmp(rest, "/logs?", 6) == 0 && id <= 5) {
                        snprintf(extra, sizeof(extra),
                                 "Location: http://127.0.0.1:%d/agent/log%s\r\n", fake.port,
                                 rest + 5);
                        return send_response(fd, 307, extra, "");
                }
        }
        if (strncmp(t, "/agent/log?", 11) == 0) {
                char body[2048];
                const char *rank = strstr(t, "rank=");
                snprintf(body, sizeof(body),
                         "query %.500s\n--- axctl environment ---\nAXCTL_RANK=%c\nA=b=c\n"
                         "--- end environment ---\ntraining\n",
                         t + 11, rank ? rank[5] : '?');
                return send_response(fd, 200, NULL, body);
        }
        if (strcmp(t, "/v1/nodes") == 0)
                return send_response(
                        fd, 200, NULL,
                        "{\"nodes\": [{\"name\": \"n1\", \"state\": \"ready\", \"address\": "
                        "\"h:1\","
                        " \"reason\": \"\", \"last_seen\": \"2020-01-01T00:00:00Z\", \"ranks\": 2,"
                        " \"inventory\": {\"cpus\": 8, \"accelerators\": [{\"kind\": \"tpu-v5e\"},"
                        " {\"kind\": \"tpu-v5e\"}]}, \"free\": {\"cpus\": 6, \"accelerators\":"
                        " {\"tpu-v5e\": 0}}}]}");
        if (strcmp(t, "/v1/nodes/n%201/drain") == 0 || strcmp(t, "/v1/nodes/n1/undrain") == 0)
                return send_response(
                        fd, 200, NULL,
                        "{\"name\": \"n1\", \"state\": \"draining\", \"reason\": \"\"}");
        send_response(fd, 404, NULL,
                      "{\"error\": {\"code\": \"not_found\", \"message\": \"no route\"}}");
}

static void serve_one(int fd) {
        if (test_request_read(fd, &fake.req))
                route(fd);
}

static void *fake_thread(void *userdata) {
        for (;;) {
                int c = accept(fake.fd, NULL, NULL);
                if (c < 0)
                        return NULL;
                serve_one(c);
                close(c);
        }
}

static void fake_start(void) {
        fake.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert(fake.fd >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert(bind(fake.fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
        assert(listen(fake.fd, 16) == 0);
        socklen_t len = sizeof(sa);
        assert(getsockname(fake.fd, (struct sockaddr *) &sa, &len) == 0);
        fake.port = ntohs(sa.sin_port);
        assert(pthread_create(&fake.thread, NULL, fake_thread, NULL) == 0);
}

/* Runs "axctl --url <fake> args..." (args NULL-terminated). */
static Run run(char **args) {
        char *argv[32] = {"axctl", "--url"};
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d", fake.port);
        argv[2] = url;
        int argc = 3;
        for (int i = 0; args[i]; i++)
                argv[argc++] = args[i];
        return run_argv(argv);
}

static void expect(Run r, int code, const char *out, const char *err) {
        if (r.code != code || (out && strcmp(r.out, out) != 0) || (err && !strstr(r.err, err)))
                fprintf(stderr, "exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\n", r.code, code,
                        r.out, r.err);
        assert(r.code == code);
        if (out)
                assert(strcmp(r.out, out) == 0);
        if (err)
                assert(strstr(r.err, err));
        run_done(&r);
}

static void test_submit(void) {
        expect(run((char *[]){"submit", "--ranks", "2", "--idempotency-key", "k-1", "--env", "X=1",
                              "--user", "bob", "--", "python3", "train.py", NULL}),
               0, "1\n", NULL);
        assert(strcmp(fake.req.method, "POST") == 0);
        assert(strcmp(fake.req.target, "/v1/jobs") == 0);
        assert(strcmp(fake.req.idempotency_key, "k-1") == 0);
        _cleanup_json_ json_t *sent = json_loads(fake.req.body, 0, NULL);
        _cleanup_free_ char *s = json_dumps(sent, JSON_COMPACT | JSON_SORT_KEYS);
        assert(strcmp(s, "{\"command\":[\"python3\",\"train.py\"],\"env\":{\"X\":\"1\"},"
                         "\"ranks\":2,\"user\":\"bob\"}") == 0);

        expect(run((char *[]){"submit", "--ranks", "0", "--", "true", NULL}), 2, "",
               "axctl: invalid spec: ranks: must be at least 1 (field ranks)\n");

        Run r = run((char *[]){"submit", "--json", "--ranks", "1", "--", "true", NULL});
        assert(r.code == 0 && strstr(r.out, "\"id\": 1,") &&
               strstr(r.out, "\"state\": \"pending\""));
        run_done(&r);

        /* submit --wait: the id, then the outcome of job 1 (running, running, succeeded). */
        fake.polls[1] = 0;
        expect(run((char *[]){"submit", "--wait", "--ranks", "1", "--", "true", NULL}), 0,
               "1\nsucceeded (exit code 0)\n", NULL);
}

static void test_wait(void) {
        fake.polls[1] = 0;
        expect(run((char *[]){"wait", "1", NULL}), 0, "succeeded (exit code 0)\n", NULL);
        assert(fake.polls[1] == 3);
        expect(run((char *[]){"wait", "2", NULL}), 1,
               "failed: rank 1 exited with 3 (exit code 3)\n", NULL);
        expect(run((char *[]){"wait", "3", NULL}), 3, "cancelled: cancelled by user\n", NULL);
        expect(run((char *[]){"wait", "4", "--timeout", "0.3", NULL}), 4, "",
               "axctl: timed out after 0.3s waiting for job 4 (state running)\n");
        expect(run((char *[]){"wait", "6", NULL}), 6, "", "axctl: not found: no such job\n");
        /* A 5xx after the first answer is a controller restart: keep waiting. */
        fake.polls[5] = 0;
        expect(run((char *[]){"wait", "5", NULL}), 0, "succeeded (exit code 0)\n", NULL);
        Run r = run((char *[]){"wait", "--json", "2", NULL});
        assert(r.code == 1 && strstr(r.out, "\"state\": \"failed\""));
        run_done(&r);
}

static void test_cancel(void) {
        expect(run((char *[]){"cancel", "4", NULL}), 0, "cancelled: cancelled by user\n", NULL);
        assert(strcmp(fake.req.method, "POST") == 0 &&
               strcmp(fake.req.target, "/v1/jobs/4/cancel") == 0);
        assert(fake.req.body[0] == '\0');
        expect(run((char *[]){"cancel", "2", NULL}), 1, "",
               "axctl: conflict: job 2 already ended\n");
}

static void test_list(void) {
        Run r = run((char *[]){"list", "--all", "--json", NULL});
        assert(r.code == 0);
        _cleanup_json_ json_t *doc = json_loads(r.out, 0, NULL);
        assert(json_array_size(json_object_get(doc, "jobs")) == 5);
        assert(json_is_null(json_object_get(doc, "next_after")));
        run_done(&r);

        r = run((char *[]){"list", "--state", "running", "--limit", "2", NULL});
        assert(r.code == 0);
        assert(strcmp(fake.req.target, "/v1/jobs?state=running&limit=2") == 0);
        const char *want = "ID  NAME  PROJECT  USER  STATE    ATTEMPT  RESTARTS  AGE  REASON\n"
                           "5   -     -        -     running  -        -         -    -\n";
        assert(strncmp(r.out, want, strlen(want)) == 0);
        run_done(&r);
}

static void test_status(void) {
        Run r = run((char *[]){"status", "4", NULL});
        assert(r.code == 0);
        assert(strstr(r.out, "job:        4\n"));
        assert(strstr(r.out, "state:      running\n"));
        assert(strstr(r.out, "exit code:  -\n"));
        assert(strstr(r.out, "RANK  ATTEMPT  NODE  STATE    PID  EXIT  SIGNAL  STEP  DEVICES\n"
                             "0     1        n1    running  42   -     -       3     0,1\n"
                             "1     1        n2    running  43   -     -       -     -\n"));
        run_done(&r);

        /* --env goes through the 307 of the logs route for every rank. */
        expect(run((char *[]){"status", "4", "--env", NULL}), 0,
               "# rank 0\nAXCTL_RANK=0\nA=b=c\n# rank 1\nAXCTL_RANK=1\nA=b=c\n", NULL);
        r = run((char *[]){"status", "4", "--env", "--rank", "1", "--attempt", "1", "--json",
                           NULL});
        assert(r.code == 0);
        assert(strstr(fake.req.target, "/agent/log?rank=1&attempt=1"));
        _cleanup_json_ json_t *doc = json_loads(r.out, 0, NULL);
        json_t *env = json_object_get(json_array_get(json_object_get(doc, "ranks"), 0), "env");
        assert(strcmp(json_string_value(json_object_get(env, "A")), "b=c") == 0);
        run_done(&r);
}

static void test_logs(void) {
        expect(run((char *[]){"logs", "4", "--rank", "1", NULL}), 0,
               "query rank=1\n--- axctl environment ---\nAXCTL_RANK=1\nA=b=c\n"
               "--- end environment ---\ntraining\n",
               NULL);
        /* -f travels to the controller, which keeps it in the redirect. */
        Run r = run((char *[]){"logs", "4", "-f", "--attempt", "2", NULL});
        assert(r.code == 0 && strncmp(r.out, "query rank=0&attempt=2&follow=1\n", 32) == 0);
        run_done(&r);
        expect(run((char *[]){"logs", "9", NULL}), 6, "", "axctl: not found: no route\n");
}

static void test_nodes(void) {
        Run r = run((char *[]){"nodes", NULL});
        const char *want =
                "NAME  STATE  ADDRESS  CPUS  ACCELERATORS         RANKS  REASON  LAST-SEEN\n"
                "n1    ready  h:1      6/8   tpu-v5e x2 (0 free)  2      -       ";
        if (strncmp(r.out, want, strlen(want)) != 0)
                fprintf(stderr, "%s", r.out);
        assert(r.code == 0 && strncmp(r.out, want, strlen(want)) == 0);
        assert(r.out[strlen(r.out) - 2] == 'd'); /* last seen in days */
        run_done(&r);

        /* Node names are escaped into the path; drain sends {"now": ...}. */
        expect(run((char *[]){"drain", "n 1", "--now", NULL}), 0, "draining\n", NULL);
        assert(strcmp(fake.req.body, "{\"now\":true}") == 0);
        expect(run((char *[]){"undrain", "n1", NULL}), 0, "draining\n", NULL);
        expect(run((char *[]){"drain", "n2", NULL}), 6, "", "axctl: not found: no route\n");
}

static void write_config(const char *path, mode_t mode, const char *text) {
        FILE *f = fopen(path, "we");
        assert(f);
        fputs(text, f);
        fclose(f);
        assert(chmod(path, mode) == 0);
}

/* The token never shows in what axctl prints. */
static void expect_secret_kept(Run r, const char *token) {
        assert(!strstr(r.out, token));
        assert(!strstr(r.err, token));
}

static void test_auth(void) {
        /* No token: 401 is exit 7 with the hint; nothing is sent. */
        Run r = run((char *[]){"status", "7", NULL});
        assert(fake.req.authorization[0] == '\0');
        expect(r, 7, "", "axctl: not authenticated: missing or unknown token (set AXCTL_TOKEN)\n");

        setenv("AXCTL_TOKEN", "admin-token", 1);
        r = run((char *[]){"status", "7", NULL});
        assert(strcmp(fake.req.authorization, "Bearer admin-token") == 0);
        expect_secret_kept(r, "admin-token");
        expect(r, 0, NULL, NULL);
        /* Every request carries it, POSTs too. */
        expect(run((char *[]){"cancel", "4", NULL}), 0, NULL, NULL);
        assert(strcmp(fake.req.authorization, "Bearer admin-token") == 0);
        /* With a token the controller names the user: $USER is not sent for it. */
        setenv("USER", "runner", 1);
        expect(run((char *[]){"submit", "--ranks", "1", "--", "true", NULL}), 0, "1\n", NULL);
        assert(strcmp(fake.req.authorization, "Bearer admin-token") == 0);
        assert(!strstr(fake.req.body, "runner") && !strstr(fake.req.body, "\"user\""));

        setenv("AXCTL_TOKEN", "user-token", 1);
        r = run((char *[]){"status", "7", NULL});
        expect_secret_kept(r, "user-token");
        expect(r, 8, "", "axctl: not allowed: job 7 belongs to project vision\n");

        setenv("AXCTL_TOKEN", "stale-token", 1);
        r = run((char *[]){"status", "7", NULL});
        expect_secret_kept(r, "stale-token");
        expect(r, 7, "",
               "axctl: not authenticated: missing or unknown token (check AXCTL_TOKEN)\n");

        /* The redirect to an agent does not carry the token. */
        r = run((char *[]){"logs", "8", NULL});
        assert(r.code == 0 && strstr(r.out, "query rank=0"));
        assert(fake.req.authorization[0] == '\0');
        run_done(&r);

        /* A token with a newline would inject a header: refused before any request. */
        setenv("AXCTL_TOKEN", "abc\r\nX-Evil: 1", 1);
        r = run((char *[]){"status", "7", NULL});
        assert(!strstr(r.err, "abc"));
        expect(r, 2, "", "axctl: AXCTL_TOKEN must be one word of visible ASCII characters\n");
        unsetenv("AXCTL_TOKEN");
}

/* Nothing from the server reaches the terminal as a control; answers are bounded. */
static void test_hostile_answers(void) {
        Run r = run((char *[]){"status", "16", NULL});
        assert(r.code == 0);
        assert(!strchr(r.out, '\x1b') && !strchr(r.out, '\a') && !strchr(r.out, '\r'));
        assert(!strstr(r.out, "\xc2\x9b"));
        assert(strstr(r.out, "user:       a\\u009b2Jb\n"));
        assert(strstr(r.out, "reason:     node says \\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x0dok"));
        run_done(&r);
        /* --json stays JSON, with the controls as JSON escapes. */
        r = run((char *[]){"status", "16", "--json", NULL});
        assert(r.code == 0 && !strchr(r.out, '\x1b') && !strstr(r.out, "\xc2\x9b"));
        _cleanup_json_ json_t *doc = json_loads(r.out, 0, NULL);
        assert(strcmp(json_string_value(json_object_get(doc, "user")), "a\xc2\x9b"
                                                                       "2Jb") == 0);
        run_done(&r);
        expect(run((char *[]){"cancel", "16", NULL}), 1, "",
               "axctl: conflict: \\x1b[31mred\\x7f\n");

        /* An answer that never ends is dropped at 64 MiB with one line, not buffered. */
        r = run((char *[]){"events", "16", NULL});
        assert(r.code == 5);
        assert(strstr(r.err, "axctl: unexpected answer from http://127.0.0.1:"));
        assert(strstr(r.err, "/v1/jobs/16/events: the answer is larger than 64 MiB; not read\n"));
        assert(strcmp(r.out, "") == 0);
        run_done(&r);

        /* A rank's log goes to a pipe or file as it is. */
        char *raw = NULL;
        size_t n;
        FILE *f = open_memstream(&raw, &n);
        FILE *esc = cli_escaping_stream(f, true);
        fputs("tab\tcr\rbell\aesc\x1b[0m c1\xc2\x85 e\xc3\xa9 end\xc2", esc);
        fclose(esc);
        fclose(f);
        assert(strcmp(raw, "tab\tcr\rbell\\x07esc\\x1b[0m c1\\u0085 e\xc3\xa9 end\xc2") == 0);
        free(raw);
}

/* The client's own HTTP: framing, redirects, limits and URLs. */
static void test_transport(void) {
        Run r = run((char *[]){"status", "20", NULL});
        assert(r.code == 0 && strstr(r.out, "job:        20\n") &&
               strstr(r.out, "state:      running\n"));
        run_done(&r);
        expect(run((char *[]){"status", "21", NULL}), 5, "",
               "the answer is not HTTP or ended early\n");
        expect(run((char *[]){"status", "22", NULL}), 5, "",
               "the answer is not HTTP or ended early\n");
        expect(run((char *[]){"status", "24", NULL}), 5, "",
               "the answer is not HTTP or ended early\n");
        expect(run((char *[]){"status", "25", NULL}), 5, "",
               "the answer is not HTTP or ended early\n");
        int64_t start = util_now_ms();
        expect(run((char *[]){"wait", "23", "--timeout", "0.2", NULL}), 5, "", ": timed out\n");
        /* The request's limit is the wait's and one second more. */
        assert(util_now_ms() - start < 3000);
        expect(run((char *[]){"logs", "10", NULL}), 5, "", "more than 5 redirects\n");

        /* A redirect to the controller itself keeps the token; elsewhere it is dropped
         * (test_auth's job 8). */
        setenv("AXCTL_TOKEN", "admin-token", 1);
        expect(run((char *[]){"logs", "11", "--rank", "1", NULL}), 0, NULL, "");
        assert(strcmp(fake.req.target, "/agent/log?rank=1") == 0);
        assert(strcmp(fake.req.authorization, "Bearer admin-token") == 0);
        unsetenv("AXCTL_TOKEN");

        const char *bad_urls[][2] = {
                {"ftp://127.0.0.1",
                 "at ftp://127.0.0.1: unsupported URL (http:// or https:// only)\n"},
                {"http://127.0.0.1:99999", "invalid URL"},
                {"http://user@127.0.0.1:1", "invalid URL"},
                {"http://[::1", "invalid URL"},
                {"http://127.0.0.1:1/a b", "invalid URL: spaces or control characters\n"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_urls); i++)
                expect(run_argv(
                               (char *[]){"axctl", "--url", (char *) bad_urls[i][0], "list", NULL}),
                       5, "", bad_urls[i][1]);
}

static void test_config(void) {
        _cleanup_free_ char *dir = check_tmpdir("axctl-cfg");
        _cleanup_free_ char *path = xasprintf("%s/config", dir);
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d", fake.port);
        setenv("AXCTL_CONFIG", path, 1);

        /* url and token from the file; no --url given. */
        _cleanup_free_ char *text = xasprintf("# client\nurl = %s/\ntoken = admin-token\n", url);
        write_config(path, 0600, text);
        Run r = run_argv((char *[]){"axctl", "status", "7", NULL});
        assert(strcmp(fake.req.authorization, "Bearer admin-token") == 0);
        expect(r, 0, NULL, NULL);

        /* $AXCTL_TOKEN wins over the file. */
        setenv("AXCTL_TOKEN", "user-token", 1);
        expect(run_argv((char *[]){"axctl", "status", "7", NULL}), 8, "", NULL);
        unsetenv("AXCTL_TOKEN");

        /* A token others can read or write is refused, naming the fix. */
        _cleanup_free_ char *want = xasprintf("axctl: %s is readable by group or others: run "
                                              "chmod 600 %s\n",
                                              path, path);
        write_config(path, 0644, text);
        r = run_argv((char *[]){"axctl", "status", "7", NULL});
        expect_secret_kept(r, "admin-token");
        expect(r, 2, "", want);
        write_config(path, 0620, text);
        expect(run_argv((char *[]){"axctl", "list", NULL}), 2, "",
               "is writable by group or others: run chmod 600");
        /* ... but help still works. */
        expect(run_argv((char *[]){"axctl", "--help", NULL}), 0, NULL, "");

        /* Without a token the file may be world-readable. */
        _cleanup_free_ char *plain = xasprintf("url = %s\n", url);
        write_config(path, 0644, plain);
        expect(run_argv((char *[]){"axctl", "status", "7", NULL}), 7, "", "(set AXCTL_TOKEN)");

        /* Unknown keys and a missing $AXCTL_CONFIG are errors, mangled tokens too. */
        write_config(path, 0600, "tokn = x\n");
        expect(run_argv((char *[]){"axctl", "list", NULL}), 2, "", "unknown key tokn");
        write_config(path, 0600, "token = \"a b\"\n");
        expect(run_argv((char *[]){"axctl", "list", NULL}), 2, "",
               "token must be one word of visible ASCII characters");
        _cleanup_free_ char *missing = xasprintf("%s/nope", dir);
        setenv("AXCTL_CONFIG", missing, 1);
        expect(run_argv((char *[]){"axctl", "list", NULL}), 2, "", "No such file or directory");

        /* A FIFO (or any file that is not a regular one) is refused, never waited on. */
        _cleanup_free_ char *fifo = xasprintf("%s/fifo", dir);
        assert(mkfifo(fifo, 0600) == 0);
        setenv("AXCTL_CONFIG", fifo, 1);
        expect(run_argv((char *[]){"axctl", "list", NULL}), 2, "", "is not a regular file\n");
        unlink(fifo);

        /* The default location under $XDG_CONFIG_HOME; absent is fine. */
        unsetenv("AXCTL_CONFIG");
        setenv("XDG_CONFIG_HOME", dir, 1);
        expect(run((char *[]){"status", "7", NULL}), 7, NULL, NULL);
        _cleanup_free_ char *sub = xasprintf("%s/axctl", dir);
        assert(mkdir(sub, 0700) == 0);
        _cleanup_free_ char *xdg_path = xasprintf("%s/config", sub);
        write_config(xdg_path, 0600, "token = admin-token\n");
        expect(run((char *[]){"status", "7", NULL}), 0, NULL, NULL);
        unlink(xdg_path);
        rmdir(sub);

        /* A CA file that cannot be read; an https URL against a plain HTTP server fails
         * the handshake (exit 5) rather than falling back to plain text. */
        _cleanup_free_ char *https = xasprintf("https://127.0.0.1:%d", fake.port);
        expect(run_argv((char *[]){"axctl", "--ca-file", missing, "--url", https, "list", NULL}), 5,
               "", "cannot read CA file");
        write_config(path, 0600, "ca_file = /etc/ssl/certs/ca-certificates.crt\n");
        expect(run_argv((char *[]){"axctl", "--url", https, "list", "--ca-file", path, NULL}), 5,
               "", "cannot reach controller at https://");
        expect(run_argv((char *[]){"axctl", "--url", https, "list", "--ca-file", missing, NULL}), 5,
               "", "cannot read CA file");
        unlink(path);
        rmdir(dir);
        unsetenv("XDG_CONFIG_HOME");
}

int main(void) {
        test_environment_clean();
        fake_start();
        test_submit();
        test_wait();
        test_cancel();
        test_list();
        test_status();
        test_logs();
        test_nodes();
        test_auth();
        test_hostile_answers();
        test_transport();
        test_config();
        printf("cli-api: ok\n");
        return 0;
}
