/* SPDX-License-Identifier: MIT */
/* The log-streaming worker; see logproxy.h. */
#include <pthread.h>

#include "logproxy.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

struct LogProxy {
        atomic_int refs; /* the loop's and the thread's */
        atomic_bool cancelled;
        int rd, wr; /* the loop owns rd, the thread wr */
        char *url;
        int follow;
        CURL *easy;
        bool status_sent;
};

static void proxy_unref(LogProxy *p) {
        if (atomic_fetch_sub(&p->refs, 1) != 1)
                return;
        free(p->url);
        free(p);
}

/* Writes all of buf to the pipe; false when the reader is gone. */
static bool pipe_write_all(LogProxy *p, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t n = write(p->wr, buf, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return false; /* EPIPE: the client left */
                }
                buf += n;
                len -= (size_t) n;
        }
        return true;
}

static bool send_status(LogProxy *p) {
        if (p->status_sent)
                return true;
        long code = 0;
        curl_easy_getinfo(p->easy, CURLINFO_RESPONSE_CODE, &code);
        char line[16];
        int n = snprintf(line, sizeof(line), "%03ld\n", code >= 100 && code < 600 ? code : 502);
        p->status_sent = true;
        return pipe_write_all(p, line, (size_t) n);
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *userdata) {
        LogProxy *p = userdata;
        if (atomic_load(&p->cancelled) || !send_status(p) || !pipe_write_all(p, data, size * nmemb))
                return 0; /* aborts the transfer */
        return size * nmemb;
}

/* Called about once a second even while the agent sends nothing: notice a client gone. */
static int on_progress(void *userdata, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
        LogProxy *p = userdata;
        return atomic_load(&p->cancelled) ? 1 : 0;
}

static void *proxy_run(void *arg) {
        LogProxy *p = arg;
        p->easy = curl_easy_init();
        CURLcode rc = CURLE_FAILED_INIT;
        if (p->easy) {
                curl_easy_setopt(p->easy, CURLOPT_URL, p->url);
                curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, on_data);
                curl_easy_setopt(p->easy, CURLOPT_WRITEDATA, p);
                curl_easy_setopt(p->easy, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(p->easy, CURLOPT_XFERINFOFUNCTION, on_progress);
                curl_easy_setopt(p->easy, CURLOPT_XFERINFODATA, p);
                curl_easy_setopt(p->easy, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(p->easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
                curl_easy_setopt(p->easy, CURLOPT_PROTOCOLS_STR, "http,https");
                if (!p->follow)
                        curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, 60000L);
                rc = curl_easy_perform(p->easy);
        }
        if (!p->status_sent) {
                if (rc == CURLE_OK)
                        send_status(p); /* an empty answer */
                else if (!atomic_load(&p->cancelled)) {
                        char msg[300];
                        int n = snprintf(msg, sizeof(msg),
                                         "502\n{\"error\":{\"code\":\"bad_gateway\",\"message\":"
                                         "\"cannot read the log from the rank's agent: %s\"}}\n",
                                         curl_easy_strerror(rc));
                        pipe_write_all(p, msg, (size_t) n);
                        p->status_sent = true;
                }
        }
        if (p->easy)
                curl_easy_cleanup(p->easy);
        close(p->wr);
        proxy_unref(p);
        return NULL;
}

int logproxy_start(const char *url, int follow, LogProxy **ret) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
        LogProxy *p = xcalloc(1, sizeof(LogProxy));
        atomic_init(&p->refs, 2);
        atomic_init(&p->cancelled, false);
        p->rd = fds[0];
        p->wr = fds[1];
        p->url = xstrdup(url);
        p->follow = follow;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        int r = pthread_create(&t, &attr, proxy_run, p);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                close(fds[0]);
                close(fds[1]);
                free(p->url);
                free(p);
                return -r;
        }
        *ret = p;
        return 0;
}

int logproxy_fd(const LogProxy *p) {
        return p->rd;
}

void logproxy_release(LogProxy *p) {
        if (!p)
                return;
        atomic_store(&p->cancelled, true);
        close(p->rd); /* the thread's next write fails with EPIPE */
        proxy_unref(p);
}
