/* SPDX-License-Identifier: MIT */
/*
 * Rank log server; see logserver.h. libmicrohttpd runs one thread per connection, so a
 * follow stream may simply block in its content reader: it polls the file every 100 ms
 * while watching the client's socket for a hang-up, and ends once the rank's status is
 * recorded (or its state directory is gone) and the file has been read to the end.
 * A log is rotated by renaming (logpump.h), so a reader holds one file open, reads it
 * to its end and then looks up by inode where that file went: the file after it is the
 * name one number lower.
 * Request paths are parsed as three plain integers and the file name is built from
 * them, so no part of the URL ever reaches the file system.
 */
#include "logserver.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logpump.h"
#include "rank.h"
#include "token.h"
#include "util.h"

/* How often a follow stream looks for new output. */
#define FOLLOW_POLL_MS 100
/*
 * Every connection costs a thread, so their number is bounded, per client address too,
 * and a client that sends nothing (a slow or stuck request, a reader that stopped
 * reading) is dropped after a while. Follow streams of a quiet rank are not idle in this
 * sense: their thread waits in the content reader, not on the client. Every user's
 * streams come from the controller's address, so its share is most of the total; the
 * controller shares it out per user (--log-streams-per-user).
 */
#define LOGSERVER_MAX_CONNECTIONS 128
#define LOGSERVER_MAX_PER_CLIENT 96
#define LOGSERVER_IDLE_TIMEOUT_S 60

struct AgentLogServer {
        struct MHD_Daemon *daemon;
        char *state_dir;
        bool require_signature; /* even before a key is known */
        pthread_mutex_t key_lock; /* the agent's loop sets the key, request threads read it */
        char key[TOKEN_HASH_HEX]; /* "" until the controller gave one */
        uint16_t port;
        atomic_bool stopping;
};

/* One answer: the rank's log from its oldest rotated file on, following or not. */
typedef struct LogReader {
        AgentLogServer *server;
        RankKey key;
        char *path;
        int fd; /* the file being read */
        int next_fd; /* the file after it, once found; fd is then read to its end first */
        int client_fd;
        bool follow;
        bool last_pass; /* the rank has ended: read to the end once more, then stop */
} LogReader;

int agent_listen_parse(const char *addr, char **ret_host, uint16_t *ret_port) {
        const char *colon, *host_start = addr, *host_end;
        if (addr[0] == '[') {
                const char *close = strchr(addr, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                host_start = addr + 1;
                host_end = close;
                colon = close + 1;
        } else {
                colon = strrchr(addr, ':');
                if (!colon)
                        return -EINVAL;
                host_end = colon;
        }
        const char *p = colon + 1;
        if (!*p || strlen(p) > 5)
                return -EINVAL;
        unsigned long port = 0;
        for (; *p; p++) {
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                port = port * 10 + (unsigned long) (*p - '0');
        }
        if (port > 65535)
                return -EINVAL;
        *ret_host = xasprintf("%.*s", (int) (host_end - host_start), host_start);
        *ret_port = (uint16_t) port;
        return 0;
}

/* Parses 1-18 digits, so the value always fits; advances *p. */
static int log_parse_number(const char **p, int64_t *ret) {
        int64_t v = 0;
        int n = 0;
        for (; isdigit((unsigned char) **p); (*p)++, n++) {
                if (n == 18)
                        return -EINVAL;
                v = v * 10 + (**p - '0');
        }
        if (n == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

int agent_log_path_parse(const char *url, int64_t *ret_job, int64_t *ret_attempt,
                         int64_t *ret_rank) {
        static const char prefix[] = "/v1/logs/";
        if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
                return -EINVAL;
        const char *p = url + sizeof(prefix) - 1;
        int64_t v[3];
        for (int i = 0; i < 3; i++) {
                if (log_parse_number(&p, &v[i]) < 0)
                        return -EINVAL;
                if (*p != (i < 2 ? '/' : '\0'))
                        return -EINVAL;
                if (i < 2)
                        p++;
        }
        *ret_job = v[0];
        *ret_attempt = v[1];
        *ret_rank = v[2];
        return 0;
}

static enum MHD_Result log_respond(struct MHD_Connection *c, unsigned status,
                                   struct MHD_Response *resp, const char *content_type) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        enum MHD_Result ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result log_respond_json(struct MHD_Connection *c, unsigned status, const char *code,
                                        const char *message) {
        _cleanup_free_ char *body =
                xasprintf("{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        return log_respond(c, status, resp, "application/json");
}

/* Opens a log file for reading: a regular file, not through a link. -1 if none. */
static int log_file_open(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
                close(fd);
                fd = -1;
        }
        return fd;
}

/* <path>.<n>, or <path> itself for 0 (malloc'd). */
static char *log_file_name(const char *path, int n) {
        return n == 0 ? xstrdup(path) : xasprintf("%s.%d", path, n);
}

/* Opens the oldest file of a log: the highest rotated number, or the log itself. */
static int log_open_oldest(const char *path) {
        int n = 0;
        struct stat st;
        for (; n < LOGPUMP_MAX_KEEP; n++) {
                _cleanup_free_ char *name = log_file_name(path, n + 1);
                if (lstat(name, &st) < 0)
                        break;
        }
        for (; n >= 0; n--) {
                _cleanup_free_ char *name = log_file_name(path, n);
                int fd = log_file_open(name);
                if (fd >= 0)
                        return fd;
        }
        return -1;
}

/*
 * The file written after the one open as fd, or -1 while fd is still the current log
 * (or its successor is not created yet). A file rotated out of the kept ones is
 * followed by the oldest file kept.
 */
static int log_open_successor(const char *path, int fd) {
        struct stat cur, st;
        if (fstat(fd, &cur) < 0)
                return -1;
        if (stat(path, &st) == 0 && st.st_ino == cur.st_ino && st.st_dev == cur.st_dev)
                return -1;
        int n = 1;
        for (; n <= LOGPUMP_MAX_KEEP; n++) {
                _cleanup_free_ char *name = log_file_name(path, n);
                if (lstat(name, &st) < 0)
                        return log_open_oldest(path);
                if (st.st_ino == cur.st_ino && st.st_dev == cur.st_dev)
                        break;
        }
        _cleanup_free_ char *next = log_file_name(path, n - 1);
        return log_file_open(next);
}

static ssize_t log_reader_read(void *cls, uint64_t pos, char *buf, size_t max) {
        LogReader *f = cls;
        for (;;) {
                ssize_t n = read(f->fd, buf, max);
                if (n > 0)
                        return n;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                /* The end of this file. Writes to it may have come in just before it
                 * was rotated, so it is read once more after its successor turned up. */
                if (f->next_fd >= 0) {
                        close(f->fd);
                        f->fd = f->next_fd;
                        f->next_fd = -1;
                        continue;
                }
                if ((f->next_fd = log_open_successor(f->path, f->fd)) >= 0)
                        continue;
                if (!f->follow || f->last_pass || atomic_load(&f->server->stopping))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (rank_finished_on_disk(f->server->state_dir, f->key)) {
                        /* The rank may have written more just before it ended. */
                        f->last_pass = true;
                        continue;
                }
                struct pollfd p = {.fd = f->client_fd, .events = POLLRDHUP};
                if (poll(&p, f->client_fd >= 0 ? 1 : 0, FOLLOW_POLL_MS) > 0 &&
                    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
        }
}

static void log_reader_free(void *cls) {
        LogReader *f = cls;
        close(f->fd);
        if (f->next_fd >= 0)
                close(f->next_fd);
        free(f->path);
        free(f);
}

static enum MHD_Result log_handle(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
        AgentLogServer *s = cls;
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
                return log_respond_json(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
                                        "only GET is served here");
        if (strcmp(url, "/healthz") == 0) {
                static const char ok[] = "{\"status\":\"ok\"}\n";
                struct MHD_Response *resp = MHD_create_response_from_buffer(
                        sizeof(ok) - 1, (void *) ok, MHD_RESPMEM_PERSISTENT);
                return resp ? log_respond(c, MHD_HTTP_OK, resp, "application/json") : MHD_NO;
        }
        if (strncmp(url, "/v1/logs/", 9) != 0)
                return log_respond_json(c, MHD_HTTP_NOT_FOUND, "not_found", "no such path");

        RankKey key;
        if (agent_log_path_parse(url, &key.job, &key.attempt, &key.rank) < 0)
                return log_respond_json(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                        "expected /v1/logs/{job}/{attempt}/{rank}");
        char log_key[TOKEN_HASH_HEX];
        pthread_mutex_lock(&s->key_lock);
        memcpy(log_key, s->key, sizeof(log_key));
        pthread_mutex_unlock(&s->key_lock);
        bool allowed =
                log_key[0]
                        ? agent_log_signature_ok(
                                  log_key, url,
                                  MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "expires"),
                                  MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sig"),
                                  (int64_t) time(NULL))
                        : !s->require_signature;
        explicit_bzero(log_key, sizeof(log_key));
        if (!allowed)
                return log_respond_json(c, MHD_HTTP_FORBIDDEN, "forbidden",
                                        "ask the controller: GET /v1/jobs/{id}/logs gives a "
                                        "signed link");

        char *path = rank_log_path(s->state_dir, key);
        int fd = log_open_oldest(path);
        if (fd < 0) {
                free(path);
                return log_respond_json(c, MHD_HTTP_NOT_FOUND, "not_found",
                                        "no log for this rank on this node");
        }
        const char *follow = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "follow");
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        LogReader *f = xcalloc(1, sizeof(*f));
        *f = (LogReader){.server = s,
                         .key = key,
                         .path = path,
                         .fd = fd,
                         .next_fd = -1,
                         .client_fd = ci ? ci->connect_fd : -1,
                         .follow = follow && strcmp(follow, "1") == 0};
        /* Without follow: every file kept, up to the end of the current one. */
        struct MHD_Response *resp = MHD_create_response_from_callback(
                MHD_SIZE_UNKNOWN, 64 * 1024, log_reader_read, f, log_reader_free);
        if (!resp)
                log_reader_free(f);
        if (!resp)
                return MHD_NO;
        return log_respond(c, MHD_HTTP_OK, resp, "text/plain; charset=utf-8");
}

bool agent_log_signature_ok(const char *key_hex, const char *path, const char *expires,
                            const char *sig, int64_t now_s) {
        if (!expires || !sig || strlen(sig) != TOKEN_HASH_HEX - 1)
                return false;
        char *end;
        errno = 0;
        long long e = strtoll(expires, &end, 10);
        if (errno || end == expires || *end || e < now_s || e > now_s + 3600)
                return false;
        char want[TOKEN_HASH_HEX];
        if (token_sign_path(key_hex, path, e, want) < 0)
                return false;
        /* Constant time: how much of a guess matched must not show in the timing. */
        unsigned char diff = 0;
        for (int i = 0; i < TOKEN_HASH_HEX - 1; i++)
                diff |= (unsigned char) (want[i] ^ sig[i]);
        return diff == 0;
}

int agent_logserver_start(const char *listen_addr, const char *state_dir, bool require_signature,
                          AgentLogServer **ret) {
        _cleanup_free_ char *host = NULL;
        uint16_t port;
        int r = agent_listen_parse(listen_addr, &host, &port);
        if (r < 0)
                return r;

        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE},
                        *ai = NULL;
        char port_s[8];
        snprintf(port_s, sizeof(port_s), "%u", port);
        if (getaddrinfo(*host ? host : NULL, port_s, &hints, &ai) != 0 || !ai)
                return -EADDRNOTAVAIL;

        AgentLogServer *s = xcalloc(1, sizeof(*s));
        s->state_dir = xstrdup(state_dir);
        s->require_signature = require_signature;
        pthread_mutex_init(&s->key_lock, NULL);
        atomic_init(&s->stopping, false);
        unsigned flags =
                MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
        if (ai->ai_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        s->daemon = MHD_start_daemon(
                flags, port, NULL, NULL, log_handle, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned) LOGSERVER_MAX_CONNECTIONS,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned) LOGSERVER_MAX_PER_CLIENT,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) LOGSERVER_IDLE_TIMEOUT_S, MHD_OPTION_END);
        freeaddrinfo(ai);
        if (!s->daemon) {
                pthread_mutex_destroy(&s->key_lock);
                free(s->state_dir);
                free(s);
                return -EADDRINUSE;
        }
        const union MHD_DaemonInfo *info =
                MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
        s->port = info ? info->port : port;
        *ret = s;
        return 0;
}

AgentLogServer *agent_logserver_stop(AgentLogServer *s) {
        if (!s)
                return NULL;
        atomic_store(&s->stopping, true);
        MHD_stop_daemon(s->daemon);
        pthread_mutex_destroy(&s->key_lock);
        explicit_bzero(s->key, sizeof(s->key));
        free(s->state_dir);
        free(s);
        return NULL;
}

void agent_logserver_set_key(AgentLogServer *s, const char *key_hex) {
        pthread_mutex_lock(&s->key_lock);
        snprintf(s->key, sizeof(s->key), "%s", key_hex ? key_hex : "");
        pthread_mutex_unlock(&s->key_lock);
}

uint16_t agent_logserver_port(const AgentLogServer *s) {
        return s->port;
}
