/* SPDX-License-Identifier: MIT */
#include "follower.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "url.h"
#include "util.h"
#include "wire.h"

struct Follower {
        struct MHD_Daemon *mhd;
        pthread_mutex_t lock;
        char *leader_url; /* NULL: none known */
        char *leader_holder;
};

/* The longest a follower that stops waits for the requests in progress. */
#define FOLLOWER_DRAIN_MS 500

static enum MHD_Result answer(struct MHD_Connection *con, unsigned status, json_t *body,
                              const char *location) {
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        size_t len = strlen(text);
        text = xrealloc(text, len + 2);
        text[len++] = '\n';
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        /* One answer per connection: an idle one kept alive would hold follower_stop. */
        MHD_add_response_header(resp, "Connection", "close");
        if (location)
                MHD_add_response_header(resp, "Location", location);
        if (status == 503)
                MHD_add_response_header(resp, "Retry-After", "1");
        enum MHD_Result r = MHD_queue_response(con, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static json_t *error_body(const char *code, const char *message) {
        WireError e = {.code = code, .message = message};
        return wire_error_encode(&e);
}

/* The request's query, as it came: "?k=v&k2=v2", or "" (text grows in place). */
static enum MHD_Result add_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
        (void) kind;
        char **query = cls;
        _cleanup_free_ char *k = url_escape(key), *v = value ? url_escape(value) : NULL;
        char *longer =
                xasprintf("%s%c%s%s%s", *query, **query ? '&' : '?', k, v ? "=" : "", v ? v : "");
        free(*query);
        *query = longer;
        return MHD_YES;
}

/* The leader's URL for this request: its base, the same path, the same query. */
static char *redirect_target(struct MHD_Connection *con, const char *base, const char *path) {
        _cleanup_free_ char *query = xstrdup("");
        MHD_get_connection_values(con, MHD_GET_ARGUMENT_KIND, add_argument, &query);
        size_t n = strlen(base);
        while (n > 0 && base[n - 1] == '/')
                n--;
        return xasprintf("%.*s%s%s", (int) n, base, path, query);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *path,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
        (void) version;
        (void) upload;
        (void) upload_size;
        (void) con_cls;
        Follower *f = cls;
        pthread_mutex_lock(&f->lock);
        char *leader = f->leader_url ? xstrdup(f->leader_url) : NULL;
        char *holder = f->leader_holder ? xstrdup(f->leader_holder) : NULL;
        pthread_mutex_unlock(&f->lock);
        enum MHD_Result r;
        if (strcmp(path, "/healthz") == 0 && strcmp(method, "GET") == 0)
                r = answer(con, 200,
                           json_pack("{s:s,s:s,s:s?,s:s?}", "status", "ok", "role", "follower",
                                     "leader", leader, "leader_id", holder),
                           NULL);
        else if (!leader)
                r = answer(
                        con, 503,
                        error_body("no_leader", "no controller leads at the moment: retry shortly"),
                        NULL);
        else {
                /* The body is not read: the client sends it again to the leader (307
                 * keeps the method and body), and this connection closes after. */
                _cleanup_free_ char *target = redirect_target(con, leader, path);
                _cleanup_free_ char *why = xasprintf("this controller follows; %s leads", leader);
                r = answer(con, 307, error_body("not_leader", why), target);
        }
        free(leader);
        free(holder);
        return r;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        (void) cls;
        char buf[512];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        log_debug("http (following): %s", buf);
}

int follower_new(int listen_fd, const char *tls_cert_pem, const char *tls_key_pem, Follower **ret) {
        Follower *f = xcalloc(1, sizeof(Follower));
        pthread_mutex_init(&f->lock, NULL);
        /* ITC: follower_stop quiesces the listening socket out of the serving thread. */
        unsigned flags =
                MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
        bool tls = tls_cert_pem && tls_key_pem;
        if (tls)
                flags |= MHD_USE_TLS;
        f->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, f, MHD_OPTION_LISTEN_SOCKET,
                                  listen_fd, MHD_OPTION_CONNECTION_TIMEOUT, 10,
                                  MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                                  tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, tls_cert_pem,
                                  MHD_OPTION_HTTPS_MEM_KEY, tls_key_pem, MHD_OPTION_END);
        if (!f->mhd) {
                pthread_mutex_destroy(&f->lock);
                free(f);
                return -EIO;
        }
        *ret = f;
        return 0;
}

void follower_set_leader(Follower *f, const char *url, const char *holder) {
        pthread_mutex_lock(&f->lock);
        if (!util_streq_ptr(url, f->leader_url) || !util_streq_ptr(holder, f->leader_holder)) {
                free(f->leader_url);
                free(f->leader_holder);
                f->leader_url = url && *url ? xstrdup(url) : NULL;
                f->leader_holder = holder && *holder ? xstrdup(holder) : NULL;
        }
        pthread_mutex_unlock(&f->lock);
}

int follower_stop(Follower *f) {
        /* New connections wait in the kernel's backlog for the next server; requests in
         * progress are answered first: closed, they would fail a client in the middle of
         * a failover it rides out otherwise (axctl gives up when no URL answers). */
        int fd = MHD_quiesce_daemon(f->mhd);
        int64_t until = util_now_ms() + FOLLOWER_DRAIN_MS;
        log_info("following no more: answering the requests in progress");
        for (;;) {
                const union MHD_DaemonInfo *info =
                        MHD_get_daemon_info(f->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
                if (!info || info->num_connections == 0 || util_now_ms() >= until)
                        break;
                usleep(2000);
        }
        MHD_stop_daemon(f->mhd);
        pthread_mutex_destroy(&f->lock);
        free(f->leader_url);
        free(f->leader_holder);
        free(f);
        return fd;
}
