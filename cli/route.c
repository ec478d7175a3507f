/* SPDX-License-Identifier: MIT */
/*
 * Which controller a request of axctl goes to. --url (and $AXCTL_URL, the config file's
 * url) may name several controllers, comma separated: one leads, the others follow and
 * answer every request with 307 and the leader's URL, or with 503 no_leader while none
 * leads (docs/PROTOCOL.md). A request starts with the URL that answered last, follows
 * a follower to the leader, tries the next URL when one cannot be reached, and waits
 * out a failover for a few seconds, as Slurm's commands wait out a slurmctld takeover.
 *
 * Where the token may go (docs/SECURITY.md): to the configured URLs; along a follower's
 * redirect to one of them; and, when only one URL is configured (a load-balanced name),
 * along a follower's redirect to any URL of the same scheme: whoever answers at that
 * URL has the token already. Never from https to http. Other redirects (the logs route
 * of earlier controllers) keep it only for a configured scheme, host and port.
 *
 * A request that may have reached a controller is sent again elsewhere only when that
 * cannot do anything twice: a GET whose body has not started, or a request with an
 * Idempotency-Key. A submit without a key that lost its answer is reported instead.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "url.h"
#include "wire.h"

/* Follower to leader, and spares for a leader that changed meanwhile. */
#define LEADER_HOPS 3
/* Other redirects: libcurl's default, which axctl used before. */
#define MAX_REDIRECTS 5
/* A follower takes over within its lease and a second; this covers it. */
#define NO_LEADER_WAIT_MS 10000
#define NO_LEADER_PAUSE_MS 250

typedef enum Outcome {
        OUTCOME_ANSWERED, /* r holds the answer for the caller */
        OUTCOME_NEXT, /* not reached, or a redirect not to follow: try the next URL */
        OUTCOME_FOLLOWER, /* a follower answered: no leader, or one not reachable yet */
        OUTCOME_FAILED, /* failed once the request may have taken effect: not sent again */
} Outcome;

typedef struct Route {
        const CliContext *ctx;
        const CliRequest *req;
        UrlList urls;
        Url origins[URL_LIST_MAX];
        Url leader; /* a leader outside the list that a follower sent us to; host NULL: none */
        int64_t deadline;
} Route;

static void route_done(Route *rt) {
        for (size_t i = 0; i < rt->urls.n; i++)
                url_done(&rt->origins[i]);
        url_list_done(&rt->urls);
        url_done(&rt->leader);
}

/* Whether r is an API error with this code. */
static bool answer_has_code(const CliResponse *r, const char *code) {
        _cleanup_json_ json_t *root = r->body ? json_loads(r->body, 0, NULL) : NULL;
        WireError e;
        wire_error_parse(root, &e);
        return e.code && strcmp(e.code, code) == 0;
}

/* "HTTP 503 no_leader: <message>" for an answer that is not to be given to the caller. */
static char *answer_describe(const CliResponse *r) {
        _cleanup_json_ json_t *root = r->body ? json_loads(r->body, 0, NULL) : NULL;
        WireError e;
        wire_error_parse(root, &e);
        return xasprintf("HTTP %ld%s%s%s%s", r->status, e.code ? " " : "", e.code ? e.code : "",
                         e.message ? ": " : "", e.message ? e.message : "");
}

static bool route_token_may_go(const Route *rt, const char *url) {
        if (!rt->ctx->token)
                return false;
        Url u;
        _cleanup_free_ char *unused = NULL;
        if (url_parse(url, &u, &unused) < 0)
                return false;
        bool ok = rt->leader.host && url_same_origin(&u, &rt->leader);
        for (size_t i = 0; !ok && i < rt->urls.n; i++)
                ok = url_same_origin(&u, &rt->origins[i]);
        url_done(&u);
        return ok;
}

/* Makes r a transport failure (status 0) saying why. */
_printf_(2, 3) static void response_fail(CliResponse *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        free(r->error);
        if (vasprintf(&r->error, fmt, ap) < 0)
                abort();
        va_end(ap);
        r->status = 0;
}

/* The URL a follower at `from` sends us to, when we may go there; NULL with r failed. */
static char *route_leader_target(Route *rt, const char *from, const char *location,
                                 CliResponse *r) {
        Url base, next;
        _cleanup_free_ char *why = NULL;
        if (url_parse(from, &base, &why) < 0) {
                response_fail(r, "%s", why);
                return NULL;
        }
        _cleanup_free_ char *target = url_resolve(&base, location);
        bool from_tls = base.tls;
        url_done(&base);
        if (!target || url_parse(target, &next, &why) < 0) {
                response_fail(r, "the follower sent an unusable leader URL: %s", location);
                return NULL;
        }
        bool listed = url_list_find_origin(&rt->urls, target) >= 0;
        bool allowed = listed || (rt->urls.n == 1 && next.tls == rt->origins[0].tls);
        if (from_tls && !next.tls) {
                response_fail(r, "the follower sent us from https to http (%s): not followed",
                              target);
                allowed = false;
        } else if (!allowed) {
                response_fail(r,
                              "the follower sent us to %s, which is not one of the URLs of "
                              "--url: not followed",
                              target);
        }
        if (allowed && !listed) {
                /* The token may go there (the newest leader named, if it changed). */
                url_done(&rt->leader);
                rt->leader = next;
                return TAKE_PTR(target);
        }
        url_done(&next);
        return allowed ? TAKE_PTR(target) : NULL;
}

/* The request and the redirects it meets, starting at URL i of the list. */
static Outcome route_try(Route *rt, size_t i, CliResponse *r) {
        const CliRequest *req = rt->req;
        _cleanup_free_ char *url = xasprintf("%s%s", rt->urls.items[i], req->path);
        CliHop hop = {.method = req->method, .body = req->body, .deadline = rt->deadline};
        int leader_hops = 0, other_hops = 0;
        for (;;) {
                hop.url = url;
                hop.send_token = route_token_may_go(rt, url);
                cli_response_done(r);
                _cleanup_free_ char *location = NULL;
                bool sent;
                if (cli_http_exchange(rt->ctx, req, &hop, r, &location, &sent) < 0) {
                        bool again =
                                !sent || (r->streamed == 0 && !r->too_large &&
                                          (strcmp(hop.method, "GET") == 0 || req->idempotency_key));
                        if (!again)
                                return OUTCOME_FAILED;
                        return leader_hops > 0 ? OUTCOME_FOLLOWER : OUTCOME_NEXT;
                }
                if (r->status == 503 && answer_has_code(r, "no_leader"))
                        return OUTCOME_FOLLOWER;
                if ((r->status == 307 || r->status == 308) && location &&
                    answer_has_code(r, "not_leader")) {
                        if (leader_hops++ == LEADER_HOPS) {
                                response_fail(r, "more than %d redirects to the leader",
                                              LEADER_HOPS);
                                return OUTCOME_FOLLOWER;
                        }
                        char *next = route_leader_target(rt, url, location, r);
                        if (!next)
                                return OUTCOME_NEXT;
                        /* Method and body kept: the follower did nothing with them. */
                        free(url);
                        url = next;
                        continue;
                }
                bool redirect = req->follow_redirects && location &&
                                (r->status == 301 || r->status == 302 || r->status == 303 ||
                                 r->status == 307 || r->status == 308);
                if (!redirect)
                        return OUTCOME_ANSWERED;
                Url base;
                _cleanup_free_ char *why = NULL;
                char *next = url_parse(url, &base, &why) == 0 ? url_resolve(&base, location) : NULL;
                url_done(&base);
                if (!next || other_hops++ == MAX_REDIRECTS) {
                        if (next)
                                response_fail(r, "more than %d redirects", MAX_REDIRECTS);
                        else
                                response_fail(r, "unsupported redirect to %s", location);
                        free(next);
                        return OUTCOME_FAILED;
                }
                /* As browsers and libcurl do: a 303, or a 301/302 after a POST, is a GET. */
                if (r->status == 303 ||
                    ((r->status == 301 || r->status == 302) && strcmp(hop.method, "POST") == 0)) {
                        hop.method = "GET";
                        hop.body = NULL;
                }
                free(url);
                url = next;
        }
}

/* Adds "URL: why" of a try that got no answer to give to the list of failures. */
static void failures_add(char **failures, const char *base, const CliResponse *r) {
        const char *where = strncmp(r->final_url, base, strlen(base)) == 0 ? base : r->final_url;
        _cleanup_free_ char *why =
                r->status ? answer_describe(r) : xstrdup(r->error ? r->error : "unknown error");
        char *joined = xasprintf("%s%s%s: %s", *failures ? *failures : "", *failures ? "; " : "",
                                 where, why);
        free(*failures);
        *failures = joined;
}

int cli_http_perform(const CliContext *ctx, const CliRequest *req, CliResponse *r) {
        *r = (CliResponse){};
        /* Checked here, because GnuTLS would only say "Error while reading file". */
        if (ctx->ca_file && access(ctx->ca_file, R_OK) < 0) {
                r->error = xasprintf("cannot read CA file %s: %s", ctx->ca_file, strerror(errno));
                return -EIO;
        }
        /* A header value with a line break would smuggle headers of its own. */
        if (req->idempotency_key && strpbrk(req->idempotency_key, "\r\n")) {
                r->error = xstrdup("the idempotency key must be one line");
                r->final_url = xasprintf("%s%s", ctx->url, req->path);
                return -EINVAL;
        }
        Route rt = {
                .ctx = ctx,
                .req = req,
                .deadline = req->timeout_ms > 0 ? util_now_ms() + req->timeout_ms : 0,
        };
        if (url_list_parse(ctx->url, &rt.urls, &r->error) < 0)
                return -EIO;
        for (size_t i = 0; i < rt.urls.n; i++) {
                _cleanup_free_ char *unused = NULL;
                url_parse(rt.urls.items[i], &rt.origins[i], &unused);
        }

        size_t n = rt.urls.n;
        size_t start = ctx->url_current && *ctx->url_current < n ? *ctx->url_current : 0;
        int64_t give_up = util_now_ms() + NO_LEADER_WAIT_MS;
        _cleanup_free_ char *failures = NULL;
        Outcome o = OUTCOME_NEXT;
        bool follower = false;
        size_t answered = start;
        do {
                if (follower)
                        cli_sleep_ms(NO_LEADER_PAUSE_MS);
                follower = false;
                free(failures);
                failures = NULL;
                for (size_t k = 0; k < n; k++) {
                        answered = (start + k) % n;
                        o = route_try(&rt, answered, r);
                        if (o == OUTCOME_ANSWERED || o == OUTCOME_FAILED)
                                break;
                        follower = follower || o == OUTCOME_FOLLOWER;
                        failures_add(&failures, rt.urls.items[answered], r);
                }
                if (o == OUTCOME_ANSWERED || o == OUTCOME_FAILED)
                        break;
                int64_t resume = util_now_ms() + NO_LEADER_PAUSE_MS;
                if (resume >= give_up || (rt.deadline && resume >= rt.deadline))
                        break;
        } while (follower);

        if (o == OUTCOME_ANSWERED && ctx->url_current) {
                /* A follower's redirect to a listed leader makes that one current. */
                int leader = url_list_find_origin(&rt.urls, r->final_url);
                *ctx->url_current = leader >= 0 ? (size_t) leader : answered;
        }
        bool tried = o == OUTCOME_NEXT || o == OUTCOME_FOLLOWER;
        if (tried && (n > 1 || (follower && r->status == 0))) {
                /* No URL led to an answer: say how each failed (docs/CLI.md). One URL's
                 * own answer (503 no_leader) or failure speaks for itself. */
                free(r->error);
                r->error = TAKE_PTR(failures);
                free(r->final_url);
                r->final_url = xstrdup(ctx->url);
                r->status = 0;
        }
        route_done(&rt);
        if (r->status != 0)
                return 0;
        return r->too_large ? -EFBIG : -EIO;
}
