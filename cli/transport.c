/* SPDX-License-Identifier: MIT */
/*
 * axctl's HTTP/1.1 client: one request per connection ("Connection: close"), over a
 * plain socket for http:// and GnuTLS (tls.c, loaded only then) for https://. It took
 * libcurl's place because loading libcurl (30 libraries: two TLS stacks, Kerberos,
 * LDAP, SSH) cost a short command several times the work it does
 * (docs/PERFORMANCE.md). It does what the API needs: a request with a JSON body;
 * answers framed by Content-Length, by chunks or by the end of the connection; a
 * deadline for connecting and one for the whole request. This file makes one exchange
 * with one URL; route.c decides which URLs, and follows redirects and failovers.
 * There is no proxy support: the controller is reached directly (docs/CLI.md).
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "token.h"
#include "url.h"

/* Connecting includes the TLS handshake; a total limit is the request's own. */
#define CLI_CONNECT_TIMEOUT_MS 5000
/* A status line or header longer than this is not from an API server. */
#define MAX_LINE 8192
#define MAX_HEADER_BYTES (64u << 10)
#define MAX_INTERIM 8

typedef struct Conn {
        int fd;
        CliTls *tls;
        int64_t deadline; /* util_now_ms() time, 0 for none */
        char *error; /* why the last call failed */
} Conn;

typedef struct Input {
        Conn *conn;
        char buf[16384];
        size_t pos, len; /* unread bytes: buf[pos, len) */
} Input;

/* Where the body goes; see body_deliver. */
typedef struct Sink {
        CliResponse *r;
        FILE *stream_to; /* non-NULL: a 2xx body goes here as it arrives */
        uint64_t skip; /* bytes of a streamed body still to drop (printed before) */
        size_t cap;
} Sink;

void cli_response_done(CliResponse *r) {
        free(r->body);
        free(r->error);
        free(r->final_url);
        *r = (CliResponse){};
}

/* Waits until fd is ready for events or the deadline passes: 0 or -ETIMEDOUT. */
static int wait_fd(int fd, short events, int64_t deadline) {
        for (;;) {
                int timeout = -1;
                if (deadline) {
                        int64_t left = deadline - util_now_ms();
                        if (left <= 0)
                                return -ETIMEDOUT;
                        timeout = left > INT_MAX ? INT_MAX : (int) left;
                }
                struct pollfd p = {.fd = fd, .events = events};
                int r = poll(&p, 1, timeout);
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

static int conn_fail(Conn *c, int r) {
        free(c->error);
        c->error = xstrdup(r == -ETIMEDOUT ? "timed out" : strerror(-r));
        return r;
}

/* Connects to one address of the host; the last address's failure is the one told. */
static int conn_connect(Conn *c, const Url *u, int64_t deadline) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        int g = getaddrinfo(u->host, u->port, &hints, &ai);
        if (g != 0) {
                c->error = xasprintf("could not resolve host %s: %s", u->host,
                                     g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
                return -EHOSTUNREACH;
        }
        int r = -EHOSTUNREACH;
        for (struct addrinfo *a = ai; a && c->fd < 0; a = a->ai_next) {
                int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                r = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : -errno;
                if (r == -EINPROGRESS) {
                        r = wait_fd(fd, POLLOUT, deadline);
                        int err = 0;
                        socklen_t len = sizeof(err);
                        if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0)
                                r = -err;
                }
                if (r == 0) {
                        /* The TLS handshake's small flights must not wait for delayed
                         * ACKs (40 ms each), as libcurl knew by default. */
                        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
                        c->fd = fd;
                } else {
                        close(fd);
                }
                if (r == -ETIMEDOUT)
                        break;
        }
        freeaddrinfo(ai);
        return r < 0 ? conn_fail(c, r) : 0;
}

/* Opens the connection, with the TLS handshake for https, before connect_deadline. */
static int conn_open(Conn *c, const Url *u, const char *ca_file, int64_t connect_deadline) {
        int r = conn_connect(c, u, connect_deadline);
        if (r < 0 || !u->tls)
                return r;
        r = cli_tls_new(c->fd, u->host, ca_file, &c->tls, &c->error);
        while (r == 0 && (r = cli_tls_handshake(c->tls, &c->error)) == -EAGAIN)
                if ((r = wait_fd(c->fd, cli_tls_wanted_events(c->tls), connect_deadline)) < 0)
                        return conn_fail(c, r);
        return r;
}

static void conn_close(Conn *c) {
        c->tls = cli_tls_free(c->tls);
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        free(c->error);
        c->error = NULL;
}

/* Waits for the socket after an "again" from a read or write of the connection. */
static int conn_wait(Conn *c, short plain_events) {
        int r = wait_fd(c->fd, c->tls ? cli_tls_wanted_events(c->tls) : plain_events, c->deadline);
        return r < 0 ? conn_fail(c, r) : 0;
}

static int conn_send_all(Conn *c, const char *data, size_t n) {
        while (n > 0) {
                ssize_t w = c->tls ? cli_tls_send(c->tls, data, n, &c->error)
                                   : send(c->fd, data, n, MSG_NOSIGNAL);
                if (!c->tls && w < 0)
                        w = errno == EAGAIN || errno == EINTR ? -EAGAIN : conn_fail(c, -errno);
                if (w == -EAGAIN) {
                        int r = conn_wait(c, POLLOUT);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (w < 0)
                        return (int) w;
                data += w;
                n -= (size_t) w;
        }
        return 0;
}

/* Reads what is there: > 0 bytes, 0 at the end of the connection, < 0 an error. */
static ssize_t conn_recv(Conn *c, char *buf, size_t n) {
        for (;;) {
                ssize_t got =
                        c->tls ? cli_tls_recv(c->tls, buf, n, &c->error) : read(c->fd, buf, n);
                if (!c->tls && got < 0)
                        got = errno == EAGAIN || errno == EINTR ? -EAGAIN : conn_fail(c, -errno);
                if (got != -EAGAIN)
                        return got;
                int r = conn_wait(c, POLLIN);
                if (r < 0)
                        return r;
        }
}

/* Makes unread bytes available: their count, 0 at the end, or < 0. */
static ssize_t input_fill(Input *in) {
        if (in->pos < in->len)
                return (ssize_t) (in->len - in->pos);
        in->pos = in->len = 0;
        ssize_t n = conn_recv(in->conn, in->buf, sizeof(in->buf));
        if (n > 0)
                in->len = (size_t) n;
        return n;
}

/* Reads one line without its CRLF (or LF) into line; -EBADMSG at the end or too long. */
static int input_line(Input *in, char *line, size_t size) {
        size_t n = 0;
        for (;;) {
                ssize_t avail = input_fill(in);
                if (avail <= 0)
                        return avail < 0 ? (int) avail : -EBADMSG;
                char *start = in->buf + in->pos;
                char *nl = memchr(start, '\n', (size_t) avail);
                size_t take = nl ? (size_t) (nl - start) : (size_t) avail;
                if (n + take >= size)
                        return -EBADMSG;
                memcpy(line + n, start, take);
                n += take;
                in->pos += take + (nl ? 1 : 0);
                if (nl) {
                        if (n > 0 && line[n - 1] == '\r')
                                n--;
                        line[n] = '\0';
                        return 0;
                }
        }
}

/* Takes one piece of the body: to the stream for a streamed 2xx, else into memory,
 * within CLI_MAX_ANSWER (-EFBIG past it: an endless answer must not take all memory). */
static int body_deliver(Sink *s, const char *data, size_t n) {
        CliResponse *r = s->r;
        if (s->stream_to && r->status >= 200 && r->status < 300) {
                r->streamed += n;
                size_t drop = s->skip < n ? (size_t) s->skip : n;
                s->skip -= drop;
                data += drop;
                n -= drop;
                if (n > 0 && fwrite(data, 1, n, s->stream_to) != n)
                        return -EIO;
                /* Followed logs are read by people and tail-like scripts. */
                fflush(s->stream_to);
                return 0;
        }
        if (n > CLI_MAX_ANSWER - r->len) {
                r->too_large = true;
                return -EFBIG;
        }
        if (r->len + n + 1 > s->cap) {
                size_t cap = s->cap ? s->cap : 4096;
                while (cap < r->len + n + 1)
                        cap *= 2;
                r->body = xrealloc(r->body, cap);
                s->cap = cap;
        }
        memcpy(r->body + r->len, data, n);
        r->len += n;
        r->body[r->len] = '\0';
        return 0;
}

/* Passes up to limit bytes (-1: all until the end) of the input to the sink; -EBADMSG
 * when the connection ends before limit bytes came. */
static int body_copy(Input *in, Sink *s, int64_t limit) {
        while (limit != 0) {
                ssize_t avail = input_fill(in);
                if (avail < 0)
                        return (int) avail;
                if (avail == 0)
                        return limit < 0 ? 0 : -EBADMSG;
                size_t take = limit >= 0 && limit < avail ? (size_t) limit : (size_t) avail;
                int r = body_deliver(s, in->buf + in->pos, take);
                if (r < 0)
                        return r;
                in->pos += take;
                if (limit > 0)
                        limit -= (int64_t) take;
        }
        return 0;
}

/* A chunked body (RFC 9112 §7.1): size lines, data, and trailers that are skipped. */
static int body_copy_chunked(Input *in, Sink *s) {
        char line[MAX_LINE];
        for (;;) {
                int r = input_line(in, line, sizeof(line));
                if (r < 0)
                        return r;
                char *end;
                errno = 0;
                unsigned long long size = strtoull(line, &end, 16);
                if (end == line || errno || (*end && *end != ';' && *end != ' ') ||
                    size > INT64_MAX)
                        return -EBADMSG;
                if (size == 0)
                        break;
                r = body_copy(in, s, (int64_t) size);
                if (r >= 0)
                        r = input_line(in, line, sizeof(line));
                if (r < 0)
                        return r;
                if (line[0])
                        return -EBADMSG;
        }
        do {
                int r = input_line(in, line, sizeof(line));
                if (r < 0)
                        return r;
        } while (line[0]);
        return 0;
}

typedef struct Head {
        int64_t content_length; /* -1: none */
        bool chunked;
        char *location;
} Head;

/* Reads the status line and headers of the final (non-1xx) answer into r and head. */
static int head_read(Input *in, CliResponse *r, Head *head) {
        char line[MAX_LINE];
        /* A few interim answers at most: endless ones would hold a followed log forever. */
        for (int interim = 0; interim < MAX_INTERIM; interim++) {
                *head = (Head){.content_length = -1};
                int rc = input_line(in, line, sizeof(line));
                int status = 0;
                if (rc == 0 && (sscanf(line, "HTTP/1.%*1[01] %3d", &status) != 1 || status < 100 ||
                                status > 999))
                        rc = -EBADMSG;
                size_t total = 0;
                while (rc == 0) {
                        rc = input_line(in, line, sizeof(line));
                        if (rc < 0 || !line[0])
                                break;
                        total += strlen(line);
                        char *colon = strchr(line, ':');
                        if (!colon || total > MAX_HEADER_BYTES) {
                                rc = -EBADMSG;
                                break;
                        }
                        *colon = '\0';
                        const char *value = colon + 1 + strspn(colon + 1, " \t");
                        if (strcasecmp(line, "Content-Length") == 0) {
                                char *end;
                                errno = 0;
                                long long v = strtoll(value, &end, 10);
                                if (errno || end == value || v < 0 ||
                                    (head->content_length >= 0 && head->content_length != v))
                                        rc = -EBADMSG;
                                head->content_length = v;
                        } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
                                head->chunked = strcasestr(value, "chunked") != NULL;
                        } else if (strcasecmp(line, "Location") == 0) {
                                free(head->location);
                                head->location = xstrdup(value);
                        }
                }
                if (rc < 0) {
                        free(head->location);
                        head->location = NULL;
                        return rc;
                }
                /* Interim answers (100 Continue) are followed by the real one. */
                if (status >= 200 || status == 101) {
                        r->status = status;
                        return 0;
                }
                free(head->location);
                head->location = NULL;
        }
        return -EBADMSG;
}

typedef struct Exchange {
        const CliContext *ctx;
        const CliRequest *req;
        const CliHop *hop;
        Sink *sink;
} Exchange;

static char *request_text(const Exchange *x, const Url *u, size_t *ret_len) {
        const char *method = x->hop->method, *body = x->hop->body;
        char *text = NULL;
        FILE *f = open_memstream(&text, ret_len);
        if (!f)
                abort();
        fprintf(f,
                "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: axctl/" AXCTL_VERSION
                "\r\nAccept: application/json\r\nConnection: close\r\n",
                method, u->target, u->authority);
        if (x->hop->send_token) {
                _cleanup_free_ char *h = token_auth_header(x->ctx->token);
                fprintf(f, "%s\r\n", h);
                explicit_bzero(h, strlen(h));
        }
        if (x->req->idempotency_key)
                fprintf(f, "Idempotency-Key: %s\r\n", x->req->idempotency_key);
        if (body)
                fputs("Content-Type: application/json\r\n", f);
        if (body || strcmp(method, "GET") != 0)
                fprintf(f, "Content-Length: %zu\r\n", body ? strlen(body) : 0);
        fprintf(f, "\r\n%s", body ? body : "");
        if (fclose(f) != 0)
                abort();
        return text;
}

/* One request and its answer on a new connection. Returns 0 with r->status set (and
 * *ret_location for a redirect), or < 0 with r->error; *ret_sent once connected. */
static int exchange(const Exchange *x, const Url *u, CliResponse *r, char **ret_location,
                    bool *ret_sent) {
        Conn conn = {.fd = -1, .deadline = x->hop->deadline};
        int64_t connect_deadline = util_now_ms() + CLI_CONNECT_TIMEOUT_MS;
        if (x->hop->deadline && x->hop->deadline < connect_deadline)
                connect_deadline = x->hop->deadline;
        int ret = conn_open(&conn, u, x->ctx->ca_file, connect_deadline);
        bool send_failed = false;
        *ret_sent = ret == 0;
        if (ret == 0) {
                size_t len;
                char *text = request_text(x, u, &len);
                ret = conn_send_all(&conn, text, len);
                send_failed = ret < 0;
                explicit_bzero(text, len);
                free(text);
        }
        /* A server may answer (413, 401) and close before it read all of a body: its
         * answer, if one came, says more than the failed write. */
        _cleanup_free_ char *send_error =
                send_failed ? xstrdup(conn.error ? conn.error : strerror(-ret)) : NULL;
        Input *in = NULL;
        Head head = {};
        if (ret == 0 || send_failed) {
                in = xcalloc(1, sizeof(*in));
                in->conn = &conn;
                ret = head_read(in, r, &head);
        }
        /* A redirect's body is read too: a follower says in it why it redirects. */
        if (ret == 0 && r->status >= 300 && r->status < 400)
                *ret_location = TAKE_PTR(head.location);
        if (ret == 0 && r->status != 204 && r->status != 304) {
                if (head.content_length > (int64_t) CLI_MAX_ANSWER &&
                    !(x->sink->stream_to && r->status >= 200 && r->status < 300)) {
                        r->too_large = true;
                        ret = -EFBIG;
                } else if (head.chunked) {
                        ret = body_copy_chunked(in, x->sink);
                } else {
                        ret = body_copy(in, x->sink, head.content_length);
                }
        }
        if (ret < 0 && !r->too_large) {
                const char *why = send_error ? send_error : conn.error;
                r->error = xstrdup(why               ? why
                                   : ret == -EBADMSG ? "the answer is not HTTP or ended early"
                                                     : strerror(-ret));
        }
        free(head.location);
        free(in);
        conn_close(&conn);
        return ret;
}

void cli_sleep_ms(int64_t ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) < 0)
                ;
}

int cli_http_exchange(const CliContext *ctx, const CliRequest *req, const CliHop *hop,
                      CliResponse *r, char **ret_location, bool *ret_sent) {
        *r = (CliResponse){};
        *ret_location = NULL;
        *ret_sent = false;
        r->final_url = xstrdup(hop->url);
        Url u;
        int ret = url_parse(hop->url, &u, &r->error);
        if (ret < 0)
                return -EIO;
        FILE *log_out = ctx->log_out ? ctx->log_out : ctx->out;
        Sink sink = {.r = r, .stream_to = req->stream ? log_out : NULL, .skip = req->stream_skip};
        Exchange x = {.ctx = ctx, .req = req, .hop = hop, .sink = &sink};
        ret = exchange(&x, &u, r, ret_location, ret_sent);
        url_done(&u);
        if (ret < 0) {
                r->status = 0;
                free(*ret_location);
                *ret_location = NULL;
                if (r->too_large) {
                        free(r->error);
                        r->error =
                                xasprintf("the answer is larger than %u MiB", CLI_MAX_ANSWER >> 20);
                        return -EFBIG;
                }
                return -EIO;
        }
        if (!r->body)
                r->body = xstrdup("");
        return 0;
}
