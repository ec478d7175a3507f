/* SPDX-License-Identifier: MIT */
/*
 * axctl's HTTP/1.1 client: one request per connection ("Connection: close"), over a
 * plain socket for http:// and GnuTLS (tls.c, loaded only then) for https://. It took
 * libcurl's place because loading libcurl (30 libraries: two TLS stacks, Kerberos,
 * LDAP, SSH) cost a short command several times the work it does
 * (docs/PERFORMANCE.md). It does what the API needs: a request with a JSON body;
 * answers framed by Content-Length, by chunks or by the end of the connection; the
 * redirects of the logs route; a deadline for connecting and one for the whole request.
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
#include <unistd.h>

#include "token.h"

/* libcurl's default, which axctl used before. */
#define MAX_REDIRECTS 5
/* Connecting includes the TLS handshake; a total limit is the request's own. */
#define CLI_CONNECT_TIMEOUT_MS 5000
/* A status line or header longer than this is not from an API server. */
#define MAX_LINE 8192
#define MAX_HEADER_BYTES (64u << 10)
#define MAX_INTERIM 8

typedef struct Url {
        bool tls;
        char *host; /* without the brackets of an IPv6 literal */
        char *port;
        char *authority; /* as the Host header carries it */
        char *target; /* path and query */
} Url;

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
        size_t cap;
} Sink;

void cli_response_done(CliResponse *r) {
        free(r->body);
        free(r->error);
        free(r->final_url);
        *r = (CliResponse){};
}

static void url_done(Url *u) {
        free(u->host);
        free(u->port);
        free(u->authority);
        free(u->target);
        *u = (Url){};
}

/* Parses an http:// or https:// URL; -EINVAL with *ret_error (the caller names the
 * URL: it is the one a failure is reported for). */
static int url_parse(const char *s, Url *ret, char **ret_error) {
        *ret = (Url){};
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p <= 0x20 || *p == 0x7f) {
                        *ret_error = xstrdup("invalid URL: spaces or control characters");
                        return -EINVAL;
                }
        ret->tls = strncasecmp(s, "https://", 8) == 0;
        if (!ret->tls && strncasecmp(s, "http://", 7) != 0) {
                *ret_error = xstrdup("unsupported URL (http:// or https:// only)");
                return -EINVAL;
        }
        const char *rest = s + (ret->tls ? 8 : 7);
        size_t n = strcspn(rest, "/?#");
        const char *host = rest, *host_end, *port = NULL;
        if (*host == '[') {
                host_end = memchr(host, ']', n);
                if (host_end && host_end + 1 < rest + n && host_end[1] == ':')
                        port = host_end + 2;
                else if (host_end && host_end + 1 != rest + n)
                        host_end = NULL;
                host++;
        } else {
                host_end = memchr(host, ':', n);
                if (host_end)
                        port = host_end + 1;
                else
                        host_end = rest + n;
        }
        size_t port_len = port ? (size_t) (rest + n - port) : 0;
        bool port_ok =
                !port || (port_len > 0 && port_len <= 5 && strspn(port, "0123456789") >= port_len &&
                          strtol(port, NULL, 10) > 0 && strtol(port, NULL, 10) <= 65535);
        if (!host_end || host_end == host || memchr(rest, '@', n) || !port_ok) {
                *ret_error = xstrdup("invalid URL: expected scheme://host[:port]");
                return -EINVAL;
        }
        ret->host = xasprintf("%.*s", (int) (host_end - host), host);
        ret->port =
                port ? xasprintf("%.*s", (int) port_len, port) : xstrdup(ret->tls ? "443" : "80");
        ret->authority = xasprintf("%.*s", (int) n, rest);
        const char *target = rest + n;
        ret->target =
                xasprintf("%s%.*s", *target == '/' ? "" : "/", (int) strcspn(target, "#"), target);
        return 0;
}

/* Whether a and b are the same scheme, host and port: the token goes to no other. */
static bool url_same_origin(const Url *a, const Url *b) {
        return a->tls == b->tls && strcasecmp(a->host, b->host) == 0 &&
               strcmp(a->port, b->port) == 0;
}

/* The URL a Location header points to, from the URL base that sent it; NULL for a
 * relative path (no server of axctl's sends one). */
static char *url_resolve(const Url *base, const char *location) {
        const char *scheme = base->tls ? "https" : "http";
        if (strncasecmp(location, "http://", 7) == 0 || strncasecmp(location, "https://", 8) == 0)
                return xstrdup(location);
        if (strncmp(location, "//", 2) == 0)
                return xasprintf("%s:%s", scheme, location);
        if (location[0] == '/')
                return xasprintf("%s://%s%s", scheme, base->authority, location);
        return NULL;
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
                if (fwrite(data, 1, n, s->stream_to) != n)
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
        const char *method;
        const char *body; /* NULL: none */
        bool send_token;
        int64_t deadline; /* of the whole request, 0 for none */
        Sink *sink;
} Exchange;

static char *request_text(const Exchange *x, const Url *u, size_t *ret_len) {
        char *text = NULL;
        FILE *f = open_memstream(&text, ret_len);
        if (!f)
                abort();
        fprintf(f,
                "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: axctl/" AXCTL_VERSION
                "\r\nAccept: application/json\r\nConnection: close\r\n",
                x->method, u->target, u->authority);
        if (x->send_token) {
                _cleanup_free_ char *h = token_auth_header(x->ctx->token);
                fprintf(f, "%s\r\n", h);
                explicit_bzero(h, strlen(h));
        }
        if (x->req->idempotency_key)
                fprintf(f, "Idempotency-Key: %s\r\n", x->req->idempotency_key);
        if (x->body)
                fputs("Content-Type: application/json\r\n", f);
        if (x->body || strcmp(x->method, "GET") != 0)
                fprintf(f, "Content-Length: %zu\r\n", x->body ? strlen(x->body) : 0);
        fprintf(f, "\r\n%s", x->body ? x->body : "");
        if (fclose(f) != 0)
                abort();
        return text;
}

/* One request and its answer on a new connection. Returns 0 with r->status set (and
 * *ret_location for a redirect the caller follows), or < 0 with r->error. */
static int exchange(const Exchange *x, const Url *u, CliResponse *r, char **ret_location) {
        Conn conn = {.fd = -1, .deadline = x->deadline};
        int64_t connect_deadline = util_now_ms() + CLI_CONNECT_TIMEOUT_MS;
        if (x->deadline && x->deadline < connect_deadline)
                connect_deadline = x->deadline;
        int ret = conn_open(&conn, u, x->ctx->ca_file, connect_deadline);
        bool send_failed = false;
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
        bool redirect = ret == 0 && x->req->follow_redirects && head.location &&
                        (r->status == 301 || r->status == 302 || r->status == 303 ||
                         r->status == 307 || r->status == 308);
        if (ret == 0 && redirect) {
                *ret_location = TAKE_PTR(head.location);
        } else if (ret == 0 && strcmp(x->method, "HEAD") != 0 && r->status != 204 &&
                   r->status != 304) {
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

int cli_http_perform(const CliContext *ctx, const CliRequest *req, CliResponse *r) {
        *r = (CliResponse){};
        _cleanup_free_ char *url = xasprintf("%s%s", ctx->url, req->path);
        /* Checked here, because GnuTLS would only say "Error while reading file". */
        if (ctx->ca_file && access(ctx->ca_file, R_OK) < 0) {
                r->error = xasprintf("cannot read CA file %s: %s", ctx->ca_file, strerror(errno));
                r->final_url = xstrdup(ctx->url);
                return -EIO;
        }
        /* A header value with a line break would smuggle headers of its own. */
        if (req->idempotency_key && strpbrk(req->idempotency_key, "\r\n")) {
                r->error = xstrdup("the idempotency key must be one line");
                r->final_url = xstrdup(url);
                return -EINVAL;
        }
        FILE *log_out = ctx->log_out ? ctx->log_out : ctx->out;
        Sink sink = {.r = r, .stream_to = req->stream ? log_out : NULL};
        Exchange x = {
                .ctx = ctx,
                .req = req,
                .method = req->method,
                .body = req->body,
                .deadline = req->timeout_ms > 0 ? util_now_ms() + req->timeout_ms : 0,
                .sink = &sink,
        };
        Url origin = {};
        int ret = url_parse(url, &origin, &r->error);
        for (int hops = 0; ret == 0; hops++) {
                Url u = {};
                ret = url_parse(url, &u, &r->error);
                if (ret < 0)
                        break;
                /* The token goes to the controller only, never to where it redirects. */
                x.send_token = ctx->token && url_same_origin(&u, &origin);
                _cleanup_free_ char *location = NULL;
                ret = exchange(&x, &u, r, &location);
                if (ret < 0 || !location) {
                        url_done(&u);
                        break;
                }
                char *next = url_resolve(&u, location);
                url_done(&u);
                if (!next || hops == MAX_REDIRECTS) {
                        r->error = next ? xasprintf("more than %d redirects", MAX_REDIRECTS)
                                        : xasprintf("unsupported redirect to %s", location);
                        free(next);
                        ret = -EIO;
                        break;
                }
                free(url);
                url = next;
                /* As browsers and libcurl do: a 303, or a 301/302 after a POST, is a GET. */
                if (r->status == 303 ||
                    ((r->status == 301 || r->status == 302) && strcmp(x.method, "POST") == 0)) {
                        x.method = "GET";
                        x.body = NULL;
                }
                r->status = 0;
        }
        url_done(&origin);
        r->final_url = xstrdup(url);
        if (ret < 0) {
                r->status = 0;
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
