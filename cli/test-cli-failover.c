/* SPDX-License-Identifier: MIT */
/*
 * axctl against several controllers (cli/route.c): small HTTP servers in threads of
 * this test play a leader, followers (307 not_leader to a URL, 503 no_leader), a server
 * outside the configuration, one that drops requests unanswered and a port nobody
 * listens on. Checks where requests and the token go, what is sent again and what is
 * not, the wait for a leader, the one-line errors, and `logs -f` going on after its
 * stream broke without printing anything twice.
 */
#include "../tests/unit/check.h"
#include "cli.h"
#include "test-cli.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum Role {
        ROLE_LEADER,
        ROLE_FOLLOWER, /* 307 not_leader to `leader` */
        ROLE_NO_LEADER, /* 503 no_leader, then (after `no_leader_left` answers) a follower */
        ROLE_DROP, /* reads the request and closes without an answer */
} Role;

typedef struct Server {
        int fd;
        int port;
        char url[64];
        pthread_t thread;
        _Atomic Role role;
        const struct Server *leader; /* where a follower redirects */
        atomic_int no_leader_left;
        /* What came in, for the checks; one request at a time. */
        pthread_mutex_t lock;
        int requests;
        TestRequest req; /* the last one */
        int log_streams; /* GET .../logs: the first stream breaks */
} Server;

static Server leader, follower, rogue, no_leader, dropper;

static const char job_json[] = "{\"id\": 1, \"state\": \"succeeded\", \"attempt\": 2, "
                               "\"reason\": \"\", \"exit_code\": 0, \"ranks\": []}";
static const char log_text[] = "line 1\nline 2\nline 3\nline 4\n";

static void send_text(int fd, const char *text) {
        size_t n = strlen(text);
        assert(write(fd, text, n) == (ssize_t) n);
}

static void send_answer(int fd, int status, const char *headers, const char *body) {
        char head[2048]; /* room for the longest headers, a follower's Location */
        snprintf(head, sizeof(head),
                 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n%s\r\n",
                 status, strlen(body), headers);
        send_text(fd, head);
        send_text(fd, body);
}

/* The log, chunked; the first stream stops after two lines without its last chunk, as
 * when the controller serving it dies. */
static void send_log(Server *s, int fd) {
        pthread_mutex_lock(&s->lock);
        bool broken = s->log_streams++ == 0;
        pthread_mutex_unlock(&s->lock);
        send_text(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        char chunk[128];
        snprintf(chunk, sizeof(chunk), "e\r\n%.14s\r\n", log_text);
        send_text(fd, chunk);
        if (broken)
                return;
        snprintf(chunk, sizeof(chunk), "%zx\r\n%s\r\n0\r\n\r\n", strlen(log_text + 14),
                 log_text + 14);
        send_text(fd, chunk);
}

static void leader_answer(Server *s, int fd) {
        if (strcmp(s->req.method, "POST") == 0 && strcmp(s->req.target, "/v1/jobs") == 0)
                return send_answer(fd, 201, "", job_json);
        if (strcmp(s->req.target, "/v1/jobs/1") == 0)
                return send_answer(fd, 200, "", job_json);
        if (strncmp(s->req.target, "/v1/jobs/1/logs?", 16) == 0)
                return send_log(s, fd);
        send_answer(fd, 404, "",
                    "{\"error\": {\"code\": \"not_found\", \"message\": \"no route\"}}");
}

static void follower_answer(Server *s, int fd) {
        char headers[1200];
        snprintf(headers, sizeof(headers), "Location: %s%s\r\n", s->leader->url, s->req.target);
        send_answer(fd, 307, headers,
                    "{\"error\": {\"code\": \"not_leader\", \"message\": \"this controller "
                    "follows\", \"status\": 307}}");
}

static void serve(Server *s, int fd) {
        TestRequest req;
        if (!test_request_read(fd, &req))
                return;
        pthread_mutex_lock(&s->lock);
        s->requests++;
        s->req = req;
        pthread_mutex_unlock(&s->lock);

        switch (s->role) {
        case ROLE_LEADER:
                return leader_answer(s, fd);
        case ROLE_FOLLOWER:
                return follower_answer(s, fd);
        case ROLE_NO_LEADER:
                if (atomic_fetch_sub(&s->no_leader_left, 1) <= 0)
                        return follower_answer(s, fd);
                return send_answer(fd, 503, "Retry-After: 1\r\n",
                                   "{\"error\": {\"code\": \"no_leader\", \"message\": \"no "
                                   "controller leads now\", \"status\": 503}}");
        case ROLE_DROP:
                return;
        }
}

static void *server_thread(void *userdata) {
        Server *s = userdata;
        for (;;) {
                int c = accept(s->fd, NULL, NULL);
                if (c < 0)
                        return NULL;
                serve(s, c);
                close(c);
        }
}

static void server_start(Server *s, Role role, const Server *to) {
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert(s->fd >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert(bind(s->fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
        assert(listen(s->fd, 16) == 0);
        socklen_t len = sizeof(sa);
        assert(getsockname(s->fd, (struct sockaddr *) &sa, &len) == 0);
        s->port = ntohs(sa.sin_port);
        snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
        s->role = role;
        s->leader = to;
        pthread_mutex_init(&s->lock, NULL);
        assert(pthread_create(&s->thread, NULL, server_thread, s) == 0);
}

static void server_reset(Server *s) {
        pthread_mutex_lock(&s->lock);
        s->requests = 0;
        s->req = (TestRequest){};
        s->log_streams = 0;
        pthread_mutex_unlock(&s->lock);
}

static int requests(Server *s) {
        pthread_mutex_lock(&s->lock);
        int n = s->requests;
        pthread_mutex_unlock(&s->lock);
        return n;
}

/* A URL where a connection is refused: bound (so nothing else takes the port) but not
 * listening. */
static char dead_url[64];

static void dead_port_open(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert(bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
        socklen_t len = sizeof(sa);
        assert(getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
        snprintf(dead_url, sizeof(dead_url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
}

/* Runs "axctl --url urls args..." (args NULL-terminated) with every server reset. */
static Run run(const char *urls, char **args) {
        Server *all[] = {&leader, &follower, &rogue, &no_leader, &dropper};
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                server_reset(all[i]);
        char *argv[32] = {"axctl", "--url", (char *) urls};
        int argc = 3;
        for (int i = 0; args[i]; i++)
                argv[argc++] = args[i];
        return run_argv(argv);
}

static void expect(Run r, int code, const char *out, const char *err) {
        bool ok = r.code == code && (!out || strcmp(r.out, out) == 0) &&
                  (!err || strstr(r.err, err)) && strchr(r.err, '\n') == strrchr(r.err, '\n');
        if (!ok)
                fprintf(stderr, "exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\n", r.code, code,
                        r.out, r.err);
        assert(ok);
        run_done(&r);
}

static char *urls(const char *a, const char *b) {
        return xasprintf("%s,%s", a, b);
}

/* A dead first URL costs a refused connection; the second answers. */
static void test_next_url(void) {
        _cleanup_free_ char *list = urls(dead_url, leader.url);
        expect(run(list, (char *[]){"status", "1", NULL}), 0, NULL, "");
        CHECK_INT(requests(&leader), 1);
        CHECK_STR(leader.req.target, "/v1/jobs/1");

        /* Every URL dead: one line that names each failure. */
        _cleanup_free_ char *dead = urls(dead_url, dead_url);
        _cleanup_free_ char *want =
                xasprintf("axctl: cannot reach a leading controller: %s: Connection refused; %s: "
                          "Connection refused\n",
                          dead_url, dead_url);
        expect(run(dead, (char *[]){"list", NULL}), 5, "", want);

        /* A list with a bad item is refused, naming it. */
        _cleanup_free_ char *bad = xasprintf("%s,ftp://x", leader.url);
        expect(run(bad, (char *[]){"list", NULL}), 5, "", "ftp://x: unsupported URL");
        _cleanup_free_ char *empty = xasprintf("%s,,%s", leader.url, leader.url);
        expect(run(empty, (char *[]){"list", NULL}), 5, "", "an empty URL in the list");
}

/* A follower's 307 is followed to a listed leader, method, body and token kept; the
 * leader is then asked first. */
static void test_follow_leader(void) {
        setenv("AXCTL_TOKEN", "admin-token", 1);
        _cleanup_free_ char *list = urls(follower.url, leader.url);
        expect(run(list, (char *[]){"submit", "--idempotency-key", "k1", "--wait", "--ranks", "1",
                                    "--", "true", NULL}),
               0, "1\nsucceeded (exit code 0)\n", NULL);
        CHECK_INT(requests(&follower), 1); /* the submit; wait went to the leader at once */
        CHECK_STR(follower.req.method, "POST");
        CHECK_INT(requests(&leader), 2);
        CHECK_STR(leader.req.target, "/v1/jobs/1");
        CHECK_STR(leader.req.authorization, "Bearer admin-token");

        /* Only the POST: its body and key went to the leader as they were. */
        expect(run(list, (char *[]){"submit", "--idempotency-key", "k2", "--ranks", "1", "--",
                                    "true", NULL}),
               0, "1\n", NULL);
        CHECK_STR(leader.req.method, "POST");
        CHECK_STR(leader.req.target, "/v1/jobs");
        CHECK_STR(leader.req.idempotency_key, "k2");
        CHECK(strstr(leader.req.body, "\"command\":[\"true\"]"));
        CHECK_STR(leader.req.body, follower.req.body);
        CHECK_STR(leader.req.authorization, "Bearer admin-token");

        /* One URL (a load-balanced name): the leader may be anywhere of that scheme. */
        expect(run(follower.url, (char *[]){"status", "1", NULL}), 0, NULL, "");
        CHECK_INT(requests(&leader), 1);
        CHECK_STR(leader.req.authorization, "Bearer admin-token");
        unsetenv("AXCTL_TOKEN");
}

/* With several URLs, a follower that sends us elsewhere is not followed: that server
 * sees nothing (least of all the token); the next URL is asked. */
static void test_unlisted_leader(void) {
        setenv("AXCTL_TOKEN", "admin-token", 1);
        follower.leader = &rogue;
        _cleanup_free_ char *list = urls(follower.url, leader.url);
        expect(run(list, (char *[]){"status", "1", NULL}), 0, NULL, "");
        CHECK_INT(requests(&rogue), 0);
        CHECK_INT(requests(&leader), 1);

        _cleanup_free_ char *alone = urls(follower.url, dead_url);
        _cleanup_free_ char *want = xasprintf("%s: the follower sent us to %s/v1/jobs/1, which is "
                                              "not one of the URLs of --url: not followed",
                                              follower.url, rogue.url);
        expect(run(alone, (char *[]){"status", "1", NULL}), 5, "", want);
        CHECK_INT(requests(&rogue), 0);
        follower.leader = &leader;
        unsetenv("AXCTL_TOKEN");
}

/* 503 no_leader: asked again until a leader is known, within the request's time. */
static void test_no_leader(void) {
        no_leader.leader = &leader;
        atomic_store(&no_leader.no_leader_left, 3);
        int64_t start = util_now_ms();
        expect(run(no_leader.url, (char *[]){"status", "1", NULL}), 0, NULL, "");
        CHECK(util_now_ms() - start >= 2 * 250); /* paced, not hammered */
        CHECK_INT(requests(&no_leader), 4);
        CHECK_INT(requests(&leader), 1);

        /* No leader within wait's time: its one line. */
        atomic_store(&no_leader.no_leader_left, 1000);
        start = util_now_ms();
        expect(run(no_leader.url, (char *[]){"wait", "1", "--timeout", "0.5", NULL}), 5, "",
               "axctl: no leader: no controller leads now\n");
        CHECK(util_now_ms() - start < 3000);
        CHECK(requests(&no_leader) >= 3);
}

/* A request that may have reached a controller that then failed is sent again only
 * when that cannot do it twice. */
static void test_resend(void) {
        _cleanup_free_ char *list = urls(dropper.url, leader.url);
        expect(run(list, (char *[]){"submit", "--ranks", "1", "--", "true", NULL}), 5, "",
               "the answer is not HTTP or ended early");
        CHECK_INT(requests(&dropper), 1);
        CHECK_INT(requests(&leader), 0);
        expect(run(list, (char *[]){"submit", "--idempotency-key", "k3", "--ranks", "1", "--",
                                    "true", NULL}),
               0, "1\n", NULL);
        CHECK_INT(requests(&leader), 1);
        expect(run(list, (char *[]){"status", "1", NULL}), 0, NULL, "");
        CHECK_INT(requests(&leader), 1);
}

/* logs -f: the attempt is fixed first; a stream that breaks is asked for again and the
 * output goes on where it stopped. */
static void test_logs_follow(void) {
        _cleanup_free_ char *list = urls(follower.url, leader.url);
        expect(run(list, (char *[]){"logs", "1", "-f", NULL}), 0, log_text, "");
        CHECK_INT(leader.log_streams, 2);
        CHECK_STR(leader.req.target, "/v1/jobs/1/logs?rank=0&attempt=2&follow=1");
        /* Without -f a broken stream is an error, as before. */
        expect(run(leader.url, (char *[]){"logs", "1", NULL}), 5, "line 1\nline 2\n",
               "the answer is not HTTP or ended early");
}

int main(void) {
        test_environment_clean();
        server_start(&leader, ROLE_LEADER, NULL);
        server_start(&follower, ROLE_FOLLOWER, &leader);
        server_start(&rogue, ROLE_LEADER, NULL);
        server_start(&no_leader, ROLE_NO_LEADER, &leader);
        server_start(&dropper, ROLE_DROP, NULL);
        dead_port_open();
        test_next_url();
        test_follow_leader();
        test_unlisted_leader();
        test_no_leader();
        test_resend();
        test_logs_follow();
        printf("cli-failover: ok\n");
        return 0;
}
