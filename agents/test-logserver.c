/* SPDX-License-Identifier: MIT */
/*
 * The rank log server over real HTTP: plain reads, refusals of anything that is not
 * three integers, and a follow stream that ends once the rank's status is recorded.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logserver.h"
#include "test-util.h"

typedef struct Body {
        char *data;
        size_t len;
} Body;

static size_t body_write(char *p, size_t size, size_t n, void *userdata) {
        Body *b = userdata;
        b->data = xrealloc(b->data, b->len + size * n + 1);
        memcpy(b->data + b->len, p, size * n);
        b->len += size * n;
        b->data[b->len] = '\0';
        return size * n;
}

/* GETs path from the server; returns the status, *ret_body malloc'd. */
static long http_get(uint16_t port, const char *path, char **ret_body) {
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%u%s", port, path);
        Body b = {.data = xstrdup(""), .len = 0};
        CURL *c = curl_easy_init();
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
        CHECK(curl_easy_perform(c) == CURLE_OK);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        *ret_body = b.data;
        return status;
}

static void test_parsers(void) {
        int64_t j, a, r;
        CHECK(agent_log_path_parse("/v1/logs/7/1/0", &j, &a, &r) == 0);
        CHECK(j == 7 && a == 1 && r == 0);
        CHECK(agent_log_path_parse("/v1/logs/7/1/0/", &j, &a, &r) < 0);
        CHECK(agent_log_path_parse("/v1/logs/7/1", &j, &a, &r) < 0);
        CHECK(agent_log_path_parse("/v1/logs/7/1/-1", &j, &a, &r) < 0);
        CHECK(agent_log_path_parse("/v1/logs/7/1/..", &j, &a, &r) < 0);
        CHECK(agent_log_path_parse("/v1/logs/../../etc/passwd", &j, &a, &r) < 0);
        CHECK(agent_log_path_parse("/v1/logs/7//0", &j, &a, &r) < 0);
        CHECK(agent_log_path_parse("/v1/logs/1234567890123456789/1/0", &j, &a, &r) < 0);

        char *host;
        uint16_t port;
        CHECK(agent_listen_parse("127.0.0.1:0", &host, &port) == 0);
        CHECK(strcmp(host, "127.0.0.1") == 0 && port == 0);
        free(host);
        CHECK(agent_listen_parse("[::1]:8080", &host, &port) == 0);
        CHECK(strcmp(host, "::1") == 0 && port == 8080);
        free(host);
        CHECK(agent_listen_parse(":9", &host, &port) == 0);
        CHECK(strcmp(host, "") == 0 && port == 9);
        free(host);
        CHECK(agent_listen_parse("localhost", &host, &port) < 0);
        CHECK(agent_listen_parse("h:65536", &host, &port) < 0);
        CHECK(agent_listen_parse("h:8x", &host, &port) < 0);
        CHECK(agent_listen_parse("[::1]8080", &host, &port) < 0);
}

typedef struct Writer {
        char *log;
        char *rank_dir;
} Writer;

/* Plays a rank: writes more output, then ends (its shim records the status). */
static void *writer_run(void *arg) {
        Writer *w = arg;
        usleep(300 * 1000);
        FILE *f = fopen(w->log, "ae");
        fputs("step 2\n", f);
        fclose(f);
        usleep(300 * 1000);
        f = fopen(w->log, "ae");
        fputs("done\n", f);
        fclose(f);
        _cleanup_free_ char *status = xasprintf("%s/status", w->rank_dir);
        test_write(status, "exit 0\n");
        return NULL;
}

static void test_server(void) {
        _cleanup_free_ char *state = test_tmpdir();
        _cleanup_free_ char *log_dir = xasprintf("%s/logs/7/1", state);
        _cleanup_free_ char *rank_dir = xasprintf("%s/ranks/7-1-0", state);
        CHECK(util_mkdir_p(log_dir, 0755) == 0);
        CHECK(util_mkdir_p(rank_dir, 0755) == 0);
        _cleanup_free_ char *log = xasprintf("%s/rank-0.log", log_dir);
        test_write(log, "step 1\n");

        AgentLogServer *s;
        CHECK(agent_logserver_start("127.0.0.1:0", state, false, &s) == 0);
        uint16_t port = agent_logserver_port(s);
        CHECK(port != 0);

        char *body;
        CHECK(http_get(port, "/v1/logs/7/1/0", &body) == 200);
        CHECK(strcmp(body, "step 1\n") == 0);
        free(body);
        CHECK(http_get(port, "/v1/logs/7/1/5", &body) == 404);
        CHECK(strstr(body, "\"not_found\""));
        free(body);
        CHECK(http_get(port, "/v1/logs/7/1/../../../etc", &body) == 400);
        free(body);
        CHECK(http_get(port, "/v1/logs/x/1/0", &body) == 400);
        free(body);
        CHECK(http_get(port, "/v1/other", &body) == 404);
        free(body);
        CHECK(http_get(port, "/healthz", &body) == 200);
        free(body);

        /* A symlink planted where a log would be is not followed. */
        _cleanup_free_ char *link = xasprintf("%s/rank-1.log", log_dir);
        CHECK(symlink("/etc/passwd", link) == 0);
        CHECK(http_get(port, "/v1/logs/7/1/1", &body) == 404);
        free(body);

        Writer w = {.log = log, .rank_dir = rank_dir};
        pthread_t thread;
        CHECK(pthread_create(&thread, NULL, writer_run, &w) == 0);
        int64_t start = util_now_ms();
        CHECK(http_get(port, "/v1/logs/7/1/0?follow=1", &body) == 200);
        CHECK(strcmp(body, "step 1\nstep 2\ndone\n") == 0);
        CHECK(util_now_ms() - start >= 500);
        free(body);
        pthread_join(thread, NULL);

        /* Following a finished rank returns at once. */
        CHECK(http_get(port, "/v1/logs/7/1/0?follow=1", &body) == 200);
        CHECK(strcmp(body, "step 1\nstep 2\ndone\n") == 0);
        free(body);

        agent_logserver_stop(s);
        util_rm_rf(state);
}

int main(void) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        test_parsers();
        test_server();
        curl_global_cleanup();
        return 0;
}
