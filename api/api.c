/* SPDX-License-Identifier: MIT */
/*
 * HTTP front of the controller: request bodies, routing, error answers and the two
 * kinds of delayed answers (after commit, and long-poll). Runs entirely on the
 * controller's loop thread; libmicrohttpd is used without internal threads.
 */
#include "api-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "logproxy.h"
#include "longpoll.h"
#include "metrics.h"
#include "routes.h"
#include "syncmemo.h"
#include "util.h"
#include "views.h"
#include "wire.h"

/* The OpenAPI document, embedded at build time from api/openapi.json. */
extern const char api_openapi_json[];
/* The status page, embedded at build time from api/ui/. */
extern const char api_ui_index_html[], api_ui_app_js[], api_ui_app_css[];

#define API_MAX_BODY (1024 * 1024)
#define API_FD_RESERVE 256
/* Rank logs streamed at once, whoever asks (each holds a descriptor to its agent). */
#define API_MAX_STREAMS 1024
/* How long a connection may be idle (api_new says why). */
#define API_CONNECTION_TIMEOUT_S 30u
/* Connections agents can never take, so that API users are served beside any fleet: a
 * sixteenth of the limit, at least this many. */
#define API_USER_RESERVE_MIN 16
#define API_RUNS_PER_TURN 64

/* The status page loads nothing but its own files and the API, and no one frames it. */
static void ui_headers(struct MHD_Response *resp) {
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'none'; script-src 'self'; style-src 'self'; "
                                "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'");
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
}

static enum MHD_Result queue_answer(struct MHD_Connection *con, Request *req) {
        char *text = req->answer ? req->answer : xstrdup("{}");
        req->answer = NULL;
        size_t len = strlen(text);
        if (!req->content_type) {
                /* Newline-terminated, like most JSON APIs, so curl output is readable. */
                text = xrealloc(text, len + 2);
                text[len++] = '\n';
                text[len] = '\0';
        }
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type",
                                req->content_type ? req->content_type : "application/json");
        if (req->location)
                MHD_add_response_header(resp, "Location", req->location);
        if (req->status == 401)
                MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"axctl\"");
        if (req->busy) {
                MHD_add_response_header(resp, "Retry-After", "1");
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        }
        if (req->route == ROUTE_UI || req->route == ROUTE_UI_SCRIPT || req->route == ROUTE_UI_STYLE)
                ui_headers(resp);
        enum MHD_Result r = MHD_queue_response(con, req->status, resp);
        MHD_destroy_response(resp);
        return r;
}

/* Parses a positive job id from a path segment; -1 if it is not one. */
static int64_t parse_id(const char *s, size_t len) {
        if (len == 0 || len > 18)
                return -1;
        int64_t v = 0;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v > 0 ? v : -1;
}

/* With authentication on, a user sees and acts on the jobs of its projects only. */
static bool may_see_project(const Api *api, const Request *req, const char *project) {
        return !api->auth || token_identity_has_project(&req->who, project);
}

typedef struct ListCtx {
        const Api *api;
        const Request *req;
        json_t *jobs;
        Controller *ctl;
        int limit;
        int64_t last_id;
        bool more;
} ListCtx;

static bool list_one(void *userdata, Job *job) {
        ListCtx *c = userdata;
        if (!may_see_project(c->api, c->req, job->spec->project))
                return true;
        if ((int) json_array_size(c->jobs) == c->limit) {
                c->more = true;
                return false;
        }
        json_array_append_new(c->jobs, view_job(c->ctl, job, false));
        c->last_id = job->id;
        return true;
}

static void handle_jobs_list(Api *api, Request *req, struct MHD_Connection *con) {
        const char *state_s = api_query(con, "state");
        JobState state = _JOB_STATE_INVALID;
        if (state_s && (state = job_state_from_string(state_s)) == _JOB_STATE_INVALID) {
                request_set_error(req, 400, "bad_request", "state", "unknown job state");
                return;
        }
        int64_t limit = api_query_int(con, "limit", 100), after = api_query_int(con, "after", 0);
        if (limit < 1 || limit > 1000) {
                request_set_error(req, 400, "bad_request", "limit",
                                  "limit must be between 1 and 1000");
                return;
        }
        if (after < 0) {
                request_set_error(req, 400, "bad_request", "after", "after must be a job id");
                return;
        }
        const char *project = api_query(con, "project");
        if (project && !may_see_project(api, req, project)) {
                request_set_forbidden(req, "list the jobs of that project");
                return;
        }
        ListCtx c = {.api = api,
                     .req = req,
                     .jobs = json_array(),
                     .ctl = api->ctl,
                     .limit = (int) limit};
        ctl_jobs_foreach(api->ctl, after, state, project, list_one, &c);
        request_set_answer(req, 200,
                           json_pack("{s:o,s:o}", "jobs", c.jobs, "next_after",
                                     c.more ? json_integer(c.last_id) : json_null()));
}

typedef struct EventCtx {
        const Api *api;
        const Request *req;
        json_t *events;
} EventCtx;

static int event_one(void *userdata, const StoreEvent *e) {
        EventCtx *c = userdata;
        if (c->api->auth && c->req->who.role != TOKEN_ROLE_ADMIN) {
                /* Users see the events of their projects' jobs, not the fleet's. */
                Job *job = e->job > 0 ? ctl_job_lookup(c->api->ctl, e->job) : NULL;
                if (!job || !may_see_project(c->api, c->req, job->spec->project))
                        return 0;
        }
        json_array_append_new(c->events, view_event(e));
        return 0;
}

static void handle_events(Api *api, Request *req, struct MHD_Connection *con, int64_t job) {
        int64_t after = api_query_int(con, "after", 0), limit = api_query_int(con, "limit", 1000);
        if (after < 0 || limit < 1 || limit > 10000) {
                request_set_error(req, 400, "bad_request", after < 0 ? "after" : "limit",
                                  "after must be a sequence number, limit 1 to 10000");
                return;
        }
        EventCtx c = {.api = api, .req = req, .events = json_array()};
        if (ctl_events_list(api->ctl, job, after, (int) limit, event_one, &c) < 0) {
                json_decref(c.events);
                request_set_error(req, 500, "internal", NULL, "cannot read events");
                return;
        }
        request_set_answer(req, 200, json_pack("{s:o}", "events", c.events));
}

/*
 * Who a log stream counts against: the token's name, or without authentication the
 * client's address, on the rank's node (malloc'd). Each agent serves a bounded number
 * of streams, all to the controller's address, so the controller shares each node's
 * out per user; a user's streams from one node leave it its share of every other.
 */
static char *stream_owner(const Api *api, const Request *req, struct MHD_Connection *con,
                          const char *node) {
        if (api->auth && req->who.name)
                return xasprintf("user %s on node %s", req->who.name, node);
        char addr[INET6_ADDRSTRLEN] = "?";
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        if (sa && sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, addr,
                          sizeof(addr));
        else if (sa && sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, addr,
                          sizeof(addr));
        return xasprintf("address %s on node %s", addr, node);
}

static int streams_of(const Api *api, const char *owner) {
        int n = 0;
        for (const Request *r = api->streams; r; r = r->stream_next)
                n += util_streq_ptr(r->stream_owner, owner);
        return n;
}

static void handle_logs(Api *api, Request *req, struct MHD_Connection *con, Job *job) {
        int64_t rank = api_query_int(con, "rank", 0),
                attempt = api_query_int(con, "attempt", job->attempt);
        if (rank < 0 || rank >= job->spec->ranks) {
                request_set_error(req, 400, "bad_request", "rank", "no such rank in this job");
                return;
        }
        if (attempt != job->attempt || job->n_ranks == 0) {
                request_set_error(req, 404, "not_found", "attempt",
                                  job->n_ranks == 0 ? "the job has not started yet"
                                                    : "logs are kept for the current attempt only");
                return;
        }
        Rank *r = &job->ranks[rank];
        Node *node = ctl_node_find(api->ctl, r->node_name);
        /* Checked again here: a node stored by an older controller kept what it sent. */
        if (!node || !node->address || !wire_address_valid(node->address)) {
                request_set_error(req, 404, "not_found", NULL,
                                  "the rank's node has no valid address");
                return;
        }
        if (api->n_streams >= API_MAX_STREAMS) {
                request_set_error(req, 429, "too_many_streams", NULL,
                                  "the controller streams as many rank logs as it allows; "
                                  "try again later");
                return;
        }
        char *owner = stream_owner(api, req, con, node->name);
        if (streams_of(api, owner) >= api->streams_per_user) {
                char msg[400];
                snprintf(msg, sizeof(msg),
                         "%s has %d log streams open, the most this controller allows per "
                         "user and node (log_streams_per_user); close one first",
                         owner, api->streams_per_user);
                free(owner);
                request_set_error(req, 429, "too_many_streams", NULL, msg);
                return;
        }
        req->stream_owner = owner;
        const char *follow = api_query(con, "follow");
        bool following = follow && strcmp(follow, "0") != 0;
        _cleanup_free_ char *path =
                xasprintf("/v1/logs/%lld/%d/%d", (long long) job->id, r->attempt, r->rank);
        _cleanup_free_ char *signed_query = ctl_log_url_query(api->ctl, node->name, path);
        _cleanup_free_ char *url =
                xasprintf("http://%s%s%s%s", node->address, path, signed_query,
                          following ? (*signed_query ? "&follow=1" : "?follow=1") : "");
        if (logproxy_start(url, following, &req->proxy) < 0) {
                request_set_error(req, 500, "internal", NULL, "cannot start streaming the log");
                return;
        }
        req->stream_next = api->streams;
        if (api->streams)
                api->streams->stream_prev = req;
        api->streams = req;
        req->in_streams = true;
        api->n_streams++;
}

/* Routes under /v1/jobs/{id}: the id must name a job. */
static void route_job(Api *api, Request *req, struct MHD_Connection *con, ApiRoute route,
                      const char *id_text) {
        int64_t id = parse_id(id_text, strlen(id_text));
        Job *job = id > 0 ? ctl_job_lookup(api->ctl, id) : NULL;
        if (!job) {
                char msg[200];
                snprintf(msg, sizeof(msg), "job %.100s does not exist", id_text);
                request_set_error(req, 404, "not_found", NULL, msg);
                return;
        }
        if (!may_see_project(api, req, job->spec->project)) {
                request_set_forbidden(req, "use the jobs of that project");
                return;
        }
        CtlError err = {0};
        switch (route) {
        case ROUTE_JOB_GET:
                request_set_answer(req, 200, view_job(api->ctl, job, true));
                break;
        case ROUTE_JOB_CANCEL:
                if (ctl_job_cancel(api->ctl, id, &job, &err) < 0)
                        request_set_ctl_error(req, &err);
                else
                        request_set_answer(req, 200, view_job(api->ctl, job, true));
                break;
        case ROUTE_JOB_EVENTS:
                handle_events(api, req, con, id);
                break;
        case ROUTE_JOB_LOGS:
                handle_logs(api, req, con, job);
                break;
        default:
                /* No fall-through to another job route: what is not listed is not served. */
                request_set_error(req, 404, "not_found", NULL, "no such route");
                break;
        }
}

static void route_node(Api *api, Request *req, ApiRoute route, const char *name) {
        Node *node = NULL;
        CtlError err = {0};
        int r;
        if (route == ROUTE_NODE_DRAIN) {
                bool now = false;
                if (req->len > 0) {
                        json_t *j = api_parse_body(req);
                        if (!j)
                                return;
                        json_t *v = json_object_get(j, "now");
                        if ((v && !json_is_boolean(v)) || json_object_size(j) > (v ? 1u : 0u)) {
                                json_decref(j);
                                request_set_error(req, 400, "bad_request", "now",
                                                  "the body may only hold \"now\": true/false");
                                return;
                        }
                        now = json_is_true(v);
                        json_decref(j);
                }
                r = ctl_node_drain(api->ctl, name, now, &node, &err);
        } else
                r = ctl_node_undrain(api->ctl, name, &node, &err);
        if (r < 0)
                request_set_ctl_error(req, &err);
        else
                request_set_answer(req, 200, view_node(api->ctl, node));
}

static void handle_submit(Api *api, Request *req, struct MHD_Connection *con) {
        json_t *spec = api_parse_body(req);
        if (!spec)
                return;
        const char *key = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Idempotency-Key");
        if (key && (strlen(key) == 0 || strlen(key) > 256)) {
                json_decref(spec);
                request_set_error(req, 400, "bad_request", "Idempotency-Key",
                                  "the Idempotency-Key header must be 1 to 256 bytes");
                return;
        }
        if (api->auth && req->who.role == TOKEN_ROLE_USER && json_is_object(spec)) {
                /* A user submits as itself, into its own projects. The spec parser
                 * checks the types; here only the identity matters. */
                json_t *user = json_object_get(spec, "user");
                if (!user)
                        json_object_set_new(spec, "user", json_string(req->who.name));
                else if (!json_is_string(user) ||
                         strcmp(json_string_value(user), req->who.name) != 0) {
                        json_decref(spec);
                        request_set_forbidden(req, "submit as another user");
                        return;
                }
                json_t *project = json_object_get(spec, "project");
                const char *p = json_is_string(project) ? json_string_value(project) : "default";
                if (!may_see_project(api, req, p)) {
                        json_decref(spec);
                        request_set_forbidden(req, "submit to that project");
                        return;
                }
        }
        Job *job = NULL;
        bool created = false;
        CtlError err = {0};
        int r = ctl_job_submit(api->ctl, spec, key, &job, &created, &err);
        json_decref(spec);
        if (r < 0)
                request_set_ctl_error(req, &err);
        else
                request_set_answer(req, created ? 201 : 200, view_job(api->ctl, job, true));
}

/* An answer written as a stream: the 500 is set when there is no memory for one. */
typedef struct StreamedAnswer {
        char *text;
        size_t len;
        FILE *f;
} StreamedAnswer;

static bool answer_stream_open(Request *req, StreamedAnswer *a) {
        *a = (StreamedAnswer){0};
        a->f = open_memstream(&a->text, &a->len);
        if (!a->f)
                request_set_error(req, 500, "internal", NULL, "out of memory");
        return a->f != NULL;
}

/* content_type NULL: JSON. */
static void answer_stream_close(Request *req, StreamedAnswer *a, const char *content_type) {
        fclose(a->f);
        free(req->answer);
        req->status = 200;
        req->answer = a->text;
        req->content_type = content_type;
}

/* A node keeps its inventory as JSON text (daemon/model.h): the listing splices that text
 * into each node's view rather than parse every node's inventory per listing. */
static void handle_nodes(Api *api, Request *req) {
        int n;
        Node **nodes = ctl_nodes(api->ctl, &n);
        StreamedAnswer a;
        if (!answer_stream_open(req, &a))
                return;
        FILE *f = a.f;
        fputs("{\"nodes\":[", f);
        for (int i = 0; i < n; i++) {
                json_t *view = view_node_status(api->ctl, nodes[i]);
                char *status = json_dumps(view, JSON_COMPACT);
                json_decref(view);
                /* An object, "{...}": the inventory goes in before its closing brace. */
                fprintf(f, "%s%.*s,\"inventory\":%s}", i > 0 ? "," : "", (int) strlen(status) - 1,
                        status, nodes[i]->inventory);
                free(status);
        }
        fputs("]}", f);
        answer_stream_close(req, &a, NULL);
}

/* A counter split by one label of two values. */
static void write_two_way_counter(FILE *f, const char *name, const char *help, const char *label,
                                  const char *const values[2], const uint64_t counts[2]) {
        metrics_write_header(f, name, "counter", help);
        for (int i = 0; i < 2; i++)
                fprintf(f, "%s{%s=\"%s\"} %llu\n", name, label, values[i],
                        (unsigned long long) counts[i]);
}

static void handle_metrics(Api *api, Request *req) {
        StreamedAnswer a;
        if (!answer_stream_open(req, &a))
                return;
        FILE *f = a.f;
        ctl_metrics_write(api->ctl, f);
        metrics_write_header(f, "axctl_api_requests_total", "counter",
                             "API requests answered, by route and status class.");
        static const char *const classes[6] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
        for (int r = 0; r <= _ROUTE_MAX; r++)
                for (int c = 1; c < 6; c++) {
                        if (!api->answers[r][c])
                                continue;
                        fprintf(f, "axctl_api_requests_total{route=\"%s %s\",code=\"%s\"} %llu\n",
                                r < _ROUTE_MAX ? api_routes[r].method : "ANY",
                                r < _ROUTE_MAX ? api_routes[r].path : "unknown", classes[c],
                                (unsigned long long) api->answers[r][c]);
                }
        metrics_write_header(f, "axctl_api_request_seconds", "histogram",
                             "From a request's first byte to its answer, by route.");
        for (int r = 0; r <= _ROUTE_MAX; r++) {
                if (!api->latency[r].count)
                        continue;
                char labels[160];
                snprintf(labels, sizeof(labels), "route=\"%s %s\"",
                         r < _ROUTE_MAX ? api_routes[r].method : "ANY",
                         r < _ROUTE_MAX ? api_routes[r].path : "unknown");
                metrics_write_histogram(f, "axctl_api_request_seconds", labels, &api->latency[r]);
        }
        write_two_way_counter(f, "axctl_agent_sync_answers_total",
                              "Answers to agent syncs: the whole desired state, or the short "
                              "answer that it did not change.",
                              "body", (const char *[]){"whole", "unchanged"}, api->sync_answers);
        write_two_way_counter(f, "axctl_agent_sync_reports_total",
                              "Admitted agent syncs' bodies: parsed, or the same bytes as the "
                              "connection's last one, whose decoding was kept.",
                              "decoded", (const char *[]){"parsed", "repeated"}, api->sync_reports);
        metrics_write_header(f, "axctl_agent_syncs_answered_while_loading_total", "counter",
                             "Agent syncs answered from the stored state while it loaded "
                             "after a start, renewing the agents' leases.");
        fprintf(f, "axctl_agent_syncs_answered_while_loading_total %llu\n",
                (unsigned long long) api->early_lease_answers);
        metrics_write_header(f, "axctl_agent_connections", "gauge",
                             "Connections agents hold; they may hold up to "
                             "axctl_agent_connections_limit, the rest are kept for API users.");
        fprintf(f, "axctl_agent_connections %u\n", api->agent_connections);
        metrics_write_header(f, "axctl_agent_connections_limit", "gauge",
                             "Connections agents may hold.");
        fprintf(f, "axctl_agent_connections_limit %u\n", api->agent_connection_limit);
        metrics_write_header(f, "axctl_agent_requests_turned_away_total", "counter",
                             "Agent requests answered 503 busy because agents, or their "
                             "node, held their limit of connections.");
        fprintf(f, "axctl_agent_requests_turned_away_total %llu\n",
                (unsigned long long) api->agents_turned_away);
        answer_stream_close(req, &a, "text/plain; version=0.0.4");
}

static void handle_static(Request *req, const char *text, const char *content_type) {
        free(req->answer);
        req->status = 200;
        req->answer = xstrdup(text);
        req->content_type = content_type;
}

typedef struct GoodputAccess {
        const Api *api;
        const Request *req;
} GoodputAccess;

static bool goodput_visible(void *userdata, const char *project) {
        GoodputAccess *a = userdata;
        return may_see_project(a->api, a->req, project);
}

static void handle_goodput(Api *api, Request *req, struct MHD_Connection *con) {
        const char *project = api_query(con, "project"), *since_s = api_query(con, "since");
        const char *timeline = api_query(con, "timeline");
        if (project && !may_see_project(api, req, project)) {
                request_set_forbidden(req, "see the goodput of that project");
                return;
        }
        int64_t since = 0;
        if (since_s && view_parse_since(since_s, util_wall_ms(), &since) < 0) {
                request_set_error(req, 400, "bad_request", "since",
                                  "since must be a duration back from now (90s, 30m, 24h, 7d) "
                                  "or an RFC 3339 UTC time");
                return;
        }
        GoodputAccess access = {api, req};
        request_set_answer(req, 200,
                           view_goodput(api->ctl, project, since,
                                        timeline && strcmp(timeline, "1") == 0, goodput_visible,
                                        &access));
}

static void handle_healthz(Api *api, Request *req) {
        const char *failure = ctl_failure(api->ctl);
        if (failure) {
                request_set_answer(req, 503,
                                   json_pack("{s:s,s:s}", "status", "failed", "reason", failure));
                return;
        }
        int jobs, nodes;
        ctl_counts(api->ctl, &jobs, &nodes);
        request_set_answer(req, 200,
                           json_pack("{s:s,s:i,s:i,s:s?}", "status", "ok", "active_jobs", jobs,
                                     "ready_nodes", nodes, "role", api->role));
}

/* Whether the route table lets role use r; projects and nodes are checked by handlers. */
static bool role_allowed(TokenRole role, ApiRoute r) {
        unsigned bit = role == TOKEN_ROLE_ADMIN   ? API_ROLE_ADMIN
                       : role == TOKEN_ROLE_USER  ? API_ROLE_USER
                       : role == TOKEN_ROLE_AGENT ? API_ROLE_AGENT
                                                  : 0;
        return (api_route_roles(&api_routes[r]) & bit) != 0;
}

/* Sets req->who from the bearer token; false (with the answer set) when refused. */
static bool authenticate(Api *api, Request *req, struct MHD_Connection *con, ApiRoute r) {
        const char *token = api_bearer_token(con);
        if (!token) {
                request_set_error(
                        req, 401, "unauthorized", NULL,
                        "this controller needs a bearer token (Authorization: Bearer ...)");
                return false;
        }
        int k = ctl_token_identify(api->ctl, token, &req->who);
        if (k == -EACCES) {
                request_set_error(req, 401, "unauthorized", NULL, "unknown or revoked token");
                return false;
        }
        if (k < 0) {
                request_set_error(req, 500, "internal", NULL, "cannot check the token");
                return false;
        }
        if (!role_allowed(req->who.role, r)) {
                char what[160];
                snprintf(what, sizeof(what), "use %s %s", api_routes[r].method, api_routes[r].path);
                request_set_forbidden(req, what);
                return false;
        }
        return true;
}

static void on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        Api *api = cls;
        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                *socket_context = xcalloc(1, sizeof(Connection));
                if (!api->ctl)
                        api->loading_connections++;
                return;
        }
        Connection *c = *socket_context;
        if (c) {
                agent_connection_release(api, c);
                sync_memo_free(c->sync_memo);
        }
        free(c);
        *socket_context = NULL;
}

/* Routes one complete request; returns true when the answer must wait for a node change. */
static bool route(Api *api, Request *req, struct MHD_Connection *con, const char *method,
                  const char *url) {
        char params[2][128];
        bool path_known;
        ApiRoute r = api_route_find(method, url, &path_known, params, 2);
        req->route = r;
        if (r == ROUTE_NOT_FOUND) {
                if (path_known)
                        request_set_error(req, 405, "method_not_allowed", NULL,
                                          "this path does not take that method");
                else
                        request_set_error(req, 404, "not_found", NULL, "no such route");
                return false;
        }
        if (req->too_large) {
                request_set_error(req, 413, "too_large", NULL, "the request body is over 1 MiB");
                return false;
        }
        if (r != ROUTE_HEALTHZ && ctl_failure(api->ctl)) {
                request_set_unavailable(req, ctl_failure(api->ctl));
                return false;
        }
        if (r != ROUTE_HEALTHZ && api->stopping) {
                request_set_unavailable(req, "the controller is shutting down; try again");
                return false;
        }
        if (api->auth && !(api_route_roles(&api_routes[r]) & API_ROLE_OPEN) &&
            !authenticate(api, req, con, r))
                return false;
        switch (r) {
        case ROUTE_HEALTHZ:
                handle_healthz(api, req);
                break;
        case ROUTE_METRICS:
                handle_metrics(api, req);
                break;
        case ROUTE_OPENAPI:
                handle_static(req, api_openapi_json, "application/json");
                break;
        case ROUTE_GOODPUT:
                handle_goodput(api, req, con);
                break;
        case ROUTE_UI:
                handle_static(req, api_ui_index_html, "text/html; charset=utf-8");
                break;
        case ROUTE_UI_SCRIPT:
                handle_static(req, api_ui_app_js, "text/javascript; charset=utf-8");
                break;
        case ROUTE_UI_STYLE:
                handle_static(req, api_ui_app_css, "text/css; charset=utf-8");
                break;
        case ROUTE_JOBS_SUBMIT:
                handle_submit(api, req, con);
                break;
        case ROUTE_JOBS_LIST:
                handle_jobs_list(api, req, con);
                break;
        case ROUTE_JOB_GET:
        case ROUTE_JOB_CANCEL:
        case ROUTE_JOB_EVENTS:
        case ROUTE_JOB_LOGS:
                route_job(api, req, con, r, params[0]);
                break;
        case ROUTE_NODES_LIST:
                handle_nodes(api, req);
                break;
        case ROUTE_NODE_DRAIN:
        case ROUTE_NODE_UNDRAIN:
                route_node(api, req, r, params[0]);
                break;
        case ROUTE_EVENTS:
                handle_events(api, req, con, 0);
                break;
        case ROUTE_QUOTAS:
                request_set_answer(req, 200, view_quotas(api->ctl));
                break;
        case ROUTE_AGENT_REGISTER:
                api_handle_register(api, req, con);
                break;
        case ROUTE_AGENT_SYNC:
                return api_handle_sync(api, req, con);
        case ROUTE_NOT_FOUND:
                /* Answered above. No default: -Wswitch makes every new route need a case. */
                request_set_error(req, 404, "not_found", NULL, "no such route");
                break;
        }
        return false;
}

/* The shard whose daemon serves con. */
static unsigned shard_of(Api *api, struct MHD_Connection *con) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(con, MHD_CONNECTION_INFO_DAEMON);
        unsigned i = 0;
        while (info && i < API_SHARDS - 1 && api->shard[i].mhd != info->daemon)
                i++;
        return i;
}

/*
 * Holds a request: a sync, suspended, until its node's state changes or its time is up;
 * any other until this turn's commit. That one is not suspended: a suspend and resume
 * cost two epoll_ctl calls, and any resume makes libmicrohttpd walk all suspended
 * connections (every held sync of its shard). libmicrohttpd asks the handler again on
 * each run until it queues an answer, and the commit comes at this turn's end.
 */
static void request_hold(Api *api, Request *req, struct MHD_Connection *con) {
        req->connection = con;
        req->shard = shard_of(api, con);
        if (req->polling) {
                req->suspended = true;
                longpolls_add(&api->shard[req->shard].polls, &req->poll);
                MHD_suspend_connection(con);
        } else {
                req->awaiting_commit = true;
                req->next_waiting = api->committing;
                api->committing = req;
        }
}

/* A request whose connection closed before its turn committed leaves the list. */
static void committing_forget(Api *api, Request *req) {
        for (Request **r = &api->committing; *r; r = &(*r)->next_waiting)
                if (*r == req) {
                        *r = req->next_waiting;
                        break;
                }
        req->awaiting_commit = false;
}

/* Waits (suspended) until the stream's pipe has data; one-shot, so a slow client whose
 * stream has data pending does not wake the loop over and over. */
static void proxy_wait(Api *api, Request *req) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = req};
        if (epoll_ctl(api->proxy_ep, EPOLL_CTL_MOD, logproxy_fd(req->proxy), &ev) < 0)
                epoll_ctl(api->proxy_ep, EPOLL_CTL_ADD, logproxy_fd(req->proxy), &ev);
        req->proxy_suspended = true;
        MHD_suspend_connection(req->connection);
}

static void stream_forget(Api *api, Request *req) {
        if (!req->in_streams)
                return;
        req->in_streams = false;
        api->n_streams--;
        if (req->stream_prev)
                req->stream_prev->stream_next = req->stream_next;
        else if (api->streams == req)
                api->streams = req->stream_next;
        if (req->stream_next)
                req->stream_next->stream_prev = req->stream_prev;
        req->stream_prev = req->stream_next = NULL;
}

static ssize_t proxy_read(void *cls, uint64_t pos, char *buf, size_t max) {
        Request *req = cls;
        ssize_t n = read(logproxy_fd(req->proxy), buf, max);
        if (n > 0)
                return n;
        if (n == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (errno == EAGAIN || errno == EINTR) {
                proxy_wait(req->api, req);
                return 0;
        }
        return MHD_CONTENT_READER_END_WITH_ERROR;
}

/*
 * Reads the agent's status line of a log stream and queues the answer that streams the
 * body; suspends again while the line is not complete.
 */
static enum MHD_Result proxy_answer(Api *api, Request *req, struct MHD_Connection *con) {
        while (req->proxy_status_len < sizeof(req->proxy_status) - 1) {
                char c;
                ssize_t n = read(logproxy_fd(req->proxy), &c, 1);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        req->connection = con;
                        proxy_wait(api, req);
                        return MHD_YES;
                }
                if (n <= 0 || c == '\n')
                        break;
                req->proxy_status[req->proxy_status_len++] = c;
        }
        req->proxy_status[req->proxy_status_len] = '\0';
        unsigned status = (unsigned) atoi(req->proxy_status);
        if (status < 100 || status > 599)
                status = 502;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024,
                                                                      proxy_read, req, NULL);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type",
                                status < 400 ? "text/plain; charset=utf-8" : "application/json");
        req->status = status;
        req->proxy_started = true;
        enum MHD_Result r = MHD_queue_response(con, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
        Api *api = cls;
        Request *req = *con_cls;
        if (!req) {
                req = xcalloc(1, sizeof(Request));
                req->route = ROUTE_NOT_FOUND;
                req->who.role = _TOKEN_ROLE_INVALID;
                req->connection = con;
                req->started_us = util_now_us();
                *con_cls = req;
                api->requests++;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                if (req->len + *upload_data_size > API_MAX_BODY)
                        req->too_large = true;
                if (!req->too_large) {
                        req->body = xrealloc(req->body, req->len + *upload_data_size + 1);
                        memcpy(req->body + req->len, upload_data, *upload_data_size);
                        req->len += *upload_data_size;
                }
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (req->awaiting_commit)
                return MHD_YES;
        if (req->answer)
                return queue_answer(con, req); /* committed, or resumed, with its answer */
        if (req->proxy)
                return req->proxy_started ? MHD_YES : proxy_answer(api, req, con);
        req->api = api;
        if (!api->ctl) /* the state loads */
                return api_loading_request(api, req, con, method, url) ? queue_answer(con, req)
                                                                       : MHD_YES;
        bool wait = route(api, req, con, method, url);
        if (req->proxy && !req->answer)
                return proxy_answer(api, req, con);
        /* /healthz writes nothing and must answer even while a turn fails. */
        if (wait || (ctl_turn_has_writes(api->ctl) && req->route != ROUTE_HEALTHZ)) {
                request_hold(api, req, con);
                return MHD_YES;
        }
        return queue_answer(con, req);
}

static void on_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        Api *api = cls;
        Request *req = *con_cls;
        if (!req)
                return;
        if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && req->status >= 100 && req->status < 600) {
                api->answers[req->route][req->status / 100]++;
                histogram_observe(&api->latency[req->route],
                                  (double) (util_now_us() - req->started_us) / 1e6);
        }
        free(req->body);
        free(req->answer);
        free(req->location_buf);
        if (req->polling && req->suspended)
                longpolls_remove(&api->shard[req->shard].polls, &req->poll);
        if (req->awaiting_commit)
                committing_forget(api, req);
        free(req->stream_owner);
        token_identity_clear(&req->who);
        if (req->proxy) {
                stream_forget(api, req);
                epoll_ctl(api->proxy_ep, EPOLL_CTL_DEL, logproxy_fd(req->proxy), NULL);
                logproxy_release(req->proxy);
        }
        free(req);
        *con_cls = NULL;
        api->requests--;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char buf[512];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        size_t n = strlen(buf);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        log_debug("http: %s", buf);
}

int api_new(int listen_fd, const ApiOptions *opts, Api **ret) {
        Api *api = xcalloc(1, sizeof(Api));
        api->auth = opts->auth;
        api->role = opts->role;
        api->streams_per_user = opts->log_streams_per_user > 0 ? opts->log_streams_per_user
                                                               : API_DEFAULT_LOG_STREAMS_PER_USER;
        api->proxy_ep = epoll_create1(EPOLL_CLOEXEC);
        if (api->proxy_ep < 0) {
                free(api);
                return -errno;
        }
        api->ep = -1;
        api->agent_connections_of = strmap_new();
        for (int r = 0; r <= _ROUTE_MAX; r++)
                histogram_init_latency(&api->latency[r]);
        /*
         * Slow or half-open clients cannot hold the server: idle connections close after
         * 30 s. There is no cap per address (a fleet behind NAT is one address) and none
         * below the descriptor limit (main raises it to the hard limit) but what the
         * process needs besides: API_MAX_STREAMS log streams' connections to their agents,
         * and API_FD_RESERVE for the database, the journal, and the listening socket
         * and epoll set of each HTTP shard (below).
         */
        struct rlimit rl;
        unsigned limit = 4096, reserve = API_FD_RESERVE + API_MAX_STREAMS;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                limit = rl.rlim_cur > 2 * reserve ? (unsigned) (rl.rlim_cur - reserve)
                                                  : (unsigned) rl.rlim_cur / 2;
        unsigned user_reserve =
                limit / 16 > API_USER_RESERVE_MIN ? limit / 16 : API_USER_RESERVE_MIN;
        api->agent_connection_limit = limit > user_reserve ? limit - user_reserve : 0;
        log_info("serving up to %u connections, of which agents may hold %u", limit,
                 api->agent_connection_limit);
        /* Rounded up: the shards together serve the limit and at most API_SHARDS - 1
         * more, which the descriptors kept besides cover (API_FD_RESERVE, or half of
         * them under a small limit). */
        unsigned per_shard = (limit + API_SHARDS - 1) / API_SHARDS;
        api->listen_fd = listen_fd;
        api->shard_connection_limit = per_shard;
        struct MHD_OptionItem items[] = {
                {MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL}, /* first: set per shard below */
                {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t) on_completed, api},
                {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t) on_connection, api},
                {MHD_OPTION_CONNECTION_TIMEOUT, API_CONNECTION_TIMEOUT_S, NULL},
                {MHD_OPTION_CONNECTION_LIMIT, per_shard, NULL},
                {MHD_OPTION_CONNECTION_MEMORY_LIMIT, API_CONNECTION_MEMORY, NULL},
                {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t) on_mhd_log, NULL},
                {MHD_OPTION_END, 0, NULL}, /* TLS options go here */
                {MHD_OPTION_END, 0, NULL},
                {MHD_OPTION_END, 0, NULL},
        };
        unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        if (opts->tls_cert_pem && opts->tls_key_pem) {
                flags |= MHD_USE_TLS;
                /* The first of the three END items: the last stays the end. */
                size_t tls = sizeof(items) / sizeof(items[0]) - 3;
                items[tls] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                                     (void *) opts->tls_cert_pem};
                items[tls + 1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
                                                         (void *) opts->tls_key_pem};
        }
        /*
         * Shards: any resume makes libmicrohttpd walk all of its daemon's suspended
         * connections (every held sync: about 1.7 ms at 10,000 nodes), so the held syncs
         * are spread over API_SHARDS daemons that share the listening socket (each its
         * own descriptor of it, as each closes it), and each daemon's syncs whose time
         * is up are answered together at its own sweep, the sweeps spread evenly over
         * API_SWEEP_MS: a turn walks about the held syncs of the shards swept since the
         * last, not the fleet's.
         */
        api->ep = epoll_create1(EPOLL_CLOEXEC);
        unsigned ready = 0;
        for (unsigned i = 0; i < API_SHARDS && api->ep >= 0; i++) {
                int fd = i == 0 ? listen_fd : fcntl(listen_fd, F_DUPFD_CLOEXEC, 0);
                if (fd < 0)
                        break;
                items[0].value = fd;
                api->shard[i].mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, api,
                                                     MHD_OPTION_ARRAY, items, MHD_OPTION_END);
                const union MHD_DaemonInfo *info =
                        api->shard[i].mhd
                                ? MHD_get_daemon_info(api->shard[i].mhd, MHD_DAEMON_INFO_EPOLL_FD)
                                : NULL;
                struct epoll_event ev = {.events = EPOLLIN};
                if (!info || epoll_ctl(api->ep, EPOLL_CTL_ADD, info->epoll_fd, &ev) < 0) {
                        if (!api->shard[i].mhd && i > 0)
                                close(fd);
                        break;
                }
                ready++;
        }
        if (ready < API_SHARDS) {
                api_free(api);
                return -EIO;
        }
        *ret = api;
        return 0;
}

void api_serve(Api *api, Controller *ctl) {
        api->ctl = ctl;
        /* The agents renewed while it loaded wait for the first commit, if it has
         * anything to read before them. */
        api_loading_resume(api, !api->deferred.first);
}

Api *api_free(Api *api) {
        if (!api)
                return NULL;
        api_loading_resume_all(api);
        /* Suspended connections must be resumed before the daemon can stop (it aborts
         * otherwise): long-polls, and log streams waiting for their agent. Those
         * awaiting a commit are not suspended; stopping closes them. */
        for (unsigned i = 0; i < API_SHARDS; i++) {
                LongPolls *polls = &api->shard[i].polls;
                for (LongPoll *p; (p = longpolls_earliest(polls));) {
                        Request *r = request_of_poll(p);
                        longpolls_remove(polls, p);
                        r->suspended = false;
                        MHD_resume_connection(r->connection);
                }
                longpolls_clear(polls);
        }
        for (Request *r = api->streams; r; r = r->stream_next)
                if (r->proxy_suspended) {
                        r->proxy_suspended = false;
                        MHD_resume_connection(r->connection);
                }
        for (unsigned i = 0; i < API_SHARDS; i++)
                if (api->shard[i].mhd)
                        MHD_stop_daemon(api->shard[i].mhd);
        strmap_free(api->agent_connections_of); /* after the connections' release */
        close(api->proxy_ep);
        if (api->ep >= 0)
                close(api->ep);
        free(api);
        return NULL;
}

void api_shutdown_begin(Api *api) {
        api->stopping = true;
}

bool api_idle(const Api *api) {
        int streams = 0;
        for (const Request *r = api->streams; r; r = r->stream_next)
                streams++;
        return api->requests - streams <= 0;
}

int api_streams_fd(Api *api) {
        return api->proxy_ep;
}

/* Runs every shard's daemon, starting with each in turn: the first to run accepts what
 * waits on the shared listening socket, so new connections spread over the shards. */
static void shards_run(Api *api) {
        for (unsigned k = 0; k < API_SHARDS; k++)
                MHD_run(api->shard[(api->run_first + k) % API_SHARDS].mhd);
        api->run_first = (api->run_first + 1) % API_SHARDS;
}

/*
 * As shards_run, accepting what waits before each shard's run: when the fleet reconnects
 * one run reads a shard's every ready request (a tenth of a second at 10,000 nodes), and
 * the listen backlog would overflow while all eight run. False when the last accepting
 * stopped for want of room.
 */
static bool shards_run_accepting(Api *api) {
        for (unsigned k = 0; k < API_SHARDS; k++) {
                api_loading_accept(api);
                MHD_run(api->shard[(api->run_first + k) % API_SHARDS].mhd);
        }
        api->run_first = (api->run_first + 1) % API_SHARDS;
        return api_loading_accept(api);
}

/* How often a server without room looks whether connections closed. */
#define ROOM_CHECK_MS 100

/* api.h; the requests that come meanwhile: api/loading.c. */
void api_serve_while_loading(Api *api, EarlyLeases *leases, int done_fd) {
        api->early_leases = leases;
        /* The fleet's connections come at once: their memory is faulted in just ahead of
         * them (api/loading.c), in about 90 ms at 10,000 nodes instead of half a second or
         * more of single faults on the core the load needs (docs/PERFORMANCE.md,
         * "2026-11-29 (evening)"). */
        size_t expected = early_leases_nodes(leases);
        if (expected > (size_t) api->shard_connection_limit * API_SHARDS)
                expected = (size_t) api->shard_connection_limit * API_SHARDS;
        api->loading_reserve = heap_reserve(expected * API_LOADING_CONNECTION_BYTES);
        api_loading_populate(api);
        struct pollfd fds[3] = {{.fd = api->listen_fd, .events = POLLIN},
                                {.fd = api->ep, .events = POLLIN},
                                {.fd = done_fd, .events = POLLIN}};
        bool room = true;
        for (;;) {
                /* libmicrohttpd's timeouts too: idle connections close meanwhile. */
                int64_t timeout = api_timeout_ms(api);
                if (!room && (timeout < 0 || timeout > ROOM_CHECK_MS))
                        timeout = ROOM_CHECK_MS;
                fds[0].fd = room ? api->listen_fd : -1; /* else it stays readable */
                int n = poll(fds, 3, timeout < 0 || timeout > INT_MAX ? -1 : (int) timeout);
                if (n < 0 && errno != EINTR)
                        break;
                if (fds[2].revents)
                        break;
                room = n == 0 || fds[1].revents ? shards_run_accepting(api)
                                                : api_loading_accept(api);
        }
        api->early_leases = NULL; /* the caller's, freed after this */
        heap_reserve_release(api->loading_reserve);
        api->loading_reserve = NULL;
        if (api->loading_connections > 0)
                log_info("%u connections came while the state loaded; %llu agents' leases "
                         "renewed meanwhile",
                         api->loading_connections, (unsigned long long) api->early_lease_answers);
}

void api_streams_run(Api *api) {
        struct epoll_event events[32];
        int n = epoll_wait(api->proxy_ep, events, 32, 0);
        for (int i = 0; i < n; i++) {
                Request *req = events[i].data.ptr;
                req->proxy_suspended = false;
                MHD_resume_connection(req->connection);
        }
        if (n > 0)
                shards_run(api);
}

int api_fd(Api *api) {
        return api->ep;
}

void api_run(Api *api) {
        /*
         * libmicrohttpd accepts at most a few connections per run: after a restart, or
         * under a wave of agents' news, run again while it has work, so a turn (and its
         * one commit) serves them all; bounded, so that timers are not starved.
         */
        struct pollfd pfd = {.fd = api->ep, .events = POLLIN};
        for (int i = 0; i < API_RUNS_PER_TURN; i++) {
                shards_run(api);
                if (poll(&pfd, 1, 0) <= 0)
                        break;
        }
}

int64_t api_timeout_ms(Api *api) {
        int64_t timeout = -1, now = util_now_ms();
        for (unsigned i = 0; i < API_SHARDS; i++) {
                MHD_UNSIGNED_LONG_LONG t;
                if (MHD_get_timeout(api->shard[i].mhd, &t) == MHD_YES &&
                    (timeout < 0 || (int64_t) t < timeout))
                        timeout = (int64_t) t;
                LongPoll *p = longpolls_earliest(&api->shard[i].polls);
                if (!p)
                        continue;
                int64_t due = p->deadline_ms > api->shard[i].sweep_at_ms
                                      ? p->deadline_ms
                                      : api->shard[i].sweep_at_ms;
                int64_t left = due > now ? due - now : 0;
                if (timeout < 0 || left < timeout)
                        timeout = left;
        }
        return timeout;
}

/* Answers a held sync: the node's desired state, or why the controller cannot. */
static void poll_answer(Api *api, Request *r, const char *failure) {
        longpolls_remove(&api->shard[r->shard].polls, &r->poll);
        r->suspended = false;
        int n;
        Node **nodes = ctl_nodes(api->ctl, &n);
        if (failure)
                request_set_unavailable(r, failure); /* its turn did not commit */
        else if (r->dropped)
                /* Its agent let it go for a newer sync, whose answer carries the node's
                 * state: the desired ranks again would be rendered and sent for nothing. */
                request_set_error(r, 409, "superseded", NULL,
                                  "a newer sync from this node's agent superseded this one");
        else if (r->poll.node < n)
                request_set_sync_answer(api, r, nodes[r->poll.node]);
        else
                request_set_error(r, 404, "unknown_node", NULL, "node is gone");
        MHD_resume_connection(r->connection);
}

/* The first time after now at which shard i may sweep: the shards' sweeps are spread
 * evenly over API_SWEEP_MS. */
static int64_t sweep_next(unsigned i, int64_t now) {
        int64_t phase = (int64_t) i * API_SWEEP_MS / API_SHARDS;
        return now - ((now - phase) % API_SWEEP_MS + API_SWEEP_MS) % API_SWEEP_MS + API_SWEEP_MS;
}

/*
 * After a commit: the requests that waited for it, the held syncs of the nodes whose
 * desired state changed, and those whose time is up (or that their agents dropped),
 * answered together at their shard's sweep (at most API_SWEEPS_PER_TURN shards a turn);
 * the work follows what changed.
 */
void api_after_commit(Api *api) {
        const char *failure = ctl_failure(api->ctl);
        int n_changed;
        Node **changed = ctl_take_changed_nodes(api->ctl, &n_changed);
        int64_t now = util_now_ms();
        bool answered[API_SHARDS] = {false};
        for (unsigned i = 0; i < API_SHARDS; i++) {
                ApiShard *shard = &api->shard[i];
                for (LongPoll *p;
                     (failure || api->stopping) && (p = longpolls_earliest(&shard->polls));) {
                        poll_answer(api, request_of_poll(p), failure);
                        answered[i] = true;
                }
                for (int c = 0; c < n_changed; c++) {
                        LongPoll *next;
                        for (LongPoll *p = longpolls_of_node(&shard->polls, changed[c]->index); p;
                             p = next) {
                                next = p->node_next;
                                Request *r = request_of_poll(p);
                                if (!r->dropped && r->applied_version != changed[c]->version) {
                                        poll_answer(api, r, NULL);
                                        answered[i] = true;
                                }
                        }
                }
        }
        unsigned first = api->sweep_first, sweeps = 0;
        for (unsigned k = 0; k < API_SHARDS && sweeps < API_SWEEPS_PER_TURN; k++) {
                unsigned i = (first + k) % API_SHARDS;
                ApiShard *shard = &api->shard[i];
                if (now < shard->sweep_at_ms)
                        continue;
                bool swept = false;
                for (LongPoll *p;
                     (p = longpolls_earliest(&shard->polls)) && p->deadline_ms <= now;) {
                        poll_answer(api, request_of_poll(p), NULL);
                        swept = true;
                }
                if (!swept)
                        continue;
                shard->sweep_at_ms = sweep_next(i, now);
                answered[i] = true;
                sweeps++;
                api->sweep_first = (i + 1) % API_SHARDS;
        }
        for (Request *r = api->committing, *next; r; r = next) {
                next = r->next_waiting;
                if (failure)
                        request_set_unavailable(r, failure); /* its turn did not commit */
                r->awaiting_commit = false;
                answered[r->shard] = true;
        }
        api->committing = NULL;
        /* After a restart's first commit, the next turns read the syncs of the agents
         * whose leases were renewed while the state loaded, 512 a turn in the order they
         * came: read all in one turn, at 10,000 nodes, the first renewed were answered
         * last, over two seconds later. */
        if (api->deferred_renewed.first)
                api_loading_resume(api, true);
        /* Send the answers now rather than on the next wake-up: a run calls the handlers,
         * which queue them, and libmicrohttpd writes a queued answer on its next run. */
        for (unsigned i = 0; i < API_SHARDS; i++)
                if (answered[i]) {
                        MHD_run(api->shard[i].mhd);
                        MHD_run(api->shard[i].mhd);
                }
}
