/* SPDX-License-Identifier: MIT */
/*
 * Inside the API (api/ only): a request as the server keeps it from its first byte to
 * its completion, the connection it came on, and the server's state, shared by the
 * server (api.c), the request helpers (request.c) and the agents' routes
 * (agent-routes.c).
 */
#pragma once

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "early-leases.h"
#include "heapreserve.h"
#include "logproxy.h"
#include "longpoll.h"
#include "metrics.h"
#include "routes.h"
#include "syncmemo.h"
#include "tokens.h"

/* Connections one node's agent may hold: its held poll and the request with news that
 * replaced it, with room for the polls it gave up on for news, held until the next sweep
 * of deadlines (API_SWEEP_MS). More from one node is a broken or hostile agent taking
 * the rest of the fleet's share. */
#define API_AGENT_CONNECTIONS_PER_NODE 8
#define API_MAX_JSON_DEPTH 32
/* Each shard's held syncs whose time is up are answered together at most this often
 * (api_after_commit): an answer comes up to this much after its deadline, and a turn or
 * two more when many shards are due at once (API_SWEEPS_PER_TURN). */
#define API_SWEEP_MS 50
/* libmicrohttpd daemons the connections are spread over (api.c says why). */
#define API_SHARDS 8
/* Shards swept in one turn at most: after a long turn every shard is due, and answering
 * all their held syncs at once (about 500 at 10,000 nodes) makes the next turn long too.
 * The others sweep in the next turns, in rotation, each answering all that is due then:
 * a renewal comes at most a turn or two later, and no shard waits behind the others. */
#define API_SWEEPS_PER_TURN 3

typedef struct Request Request;

/* Requests suspended while the state loads, in the order they came. */
typedef struct DeferredQueue {
        Request *first, *last;
} DeferredQueue;

struct Request {
        char *body;
        size_t len;
        bool too_large;
        struct MHD_Connection *connection;
        Api *api;
        ApiRoute route;
        int64_t started_us;
        TokenIdentity who; /* when authentication is on */
        /* A prepared answer, queued when the connection is resumed. */
        unsigned status;
        char *answer;
        const char *content_type; /* NULL: JSON */
        const char *location; /* for redirects */
        char *location_buf;
        /* A rank log streamed from its agent (logproxy.h). */
        LogProxy *proxy;
        char proxy_status[8]; /* the status line read so far */
        size_t proxy_status_len;
        bool proxy_started; /* the answer is queued; the body streams */
        bool proxy_suspended; /* waiting for the stream's pipe */
        char *stream_owner; /* whose stream it is: "user NAME", or "address ADDR" */
        Request *stream_prev, *stream_next; /* Api.streams */
        bool in_streams;
        /* Long-poll of an agent sync (in its shard's polls while held). */
        LongPoll poll;
        bool polling;
        unsigned shard; /* of its connection, once held or awaiting a commit */
        /* Its agent sent another sync, so it dropped this one: answered with its
         * shard's next sweep, not at once for a change of its node's state. */
        bool dropped;
        /* The sync's: the desired version its agent applied, and whether it takes the
         * short answer while that version stands. */
        uint64_t applied_version;
        bool accepts_unchanged;
        bool accepts_shared_env; /* and the jobs' host lists once per answer */
        bool suspended; /* a held sync */
        /* Answered once the turn that wrote for it commits (in Api.committing). */
        bool awaiting_commit;
        Request *next_waiting;
        /* Suspended while the state loads, in Api.deferred or deferred_renewed. */
        Request *next_deferred;
        bool busy; /* turned away to keep the API users' reserve: the connection closes */
};

static inline Request *request_of_poll(LongPoll *p) {
        return (Request *) ((char *) p - offsetof(Request, poll));
}

/* A shard of the connections: one libmicrohttpd daemon and the syncs it holds. */
typedef struct ApiShard {
        struct MHD_Daemon *mhd;
        LongPolls polls; /* held agent syncs: each LongPoll is a Request's member poll */
        int64_t sweep_at_ms; /* its held syncs whose time is up are answered from then on */
} ApiShard;

/* Per connection (libmicrohttpd's socket context), from its start to its close. */
typedef struct Connection {
        /* The node its agent requests speak for: counted in Api.agent_connections and
         * in that node's count. NULL: no agent request yet. */
        char *node;
        SyncMemo *sync_memo; /* its last sync body, decoded, and where it was applied */
        bool renewed_early; /* a sync of it was answered while the state loaded */
} Connection;

static inline Connection *connection_of(struct MHD_Connection *con) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? info->socket_context : NULL;
}

struct Api {
        Controller *ctl;
        /* Connections are spread over API_SHARDS libmicrohttpd daemons on the one
         * listening socket, each with its own held syncs and sweep (api.c says why). */
        ApiShard shard[API_SHARDS];
        int ep; /* epoll of the shards' epoll fds: the loop waits on it */
        unsigned run_first; /* the shard api_run starts with, rotated: each accepts */
        unsigned sweep_first; /* the shard whose sweep comes first, rotated likewise */
        int proxy_ep; /* epoll of log streams' pipes, one-shot: wakes suspended streams */
        bool auth; /* bearer tokens required (ApiOptions) */
        int streams_per_user;
        Request *committing; /* answered once their turn commits */
        Request *streams; /* log streams (suspended while their pipe is empty) */
        int n_streams;
        int requests; /* in progress: from their first byte to their completion */
        bool stopping; /* api_shutdown_begin was called */
        const char *role; /* ApiOptions' */
        /* For /metrics: per route, answers by status class (1xx..5xx) and latency. */
        uint64_t answers[_ROUTE_MAX + 1][6];
        Histogram latency[_ROUTE_MAX + 1];
        uint64_t sync_answers[2]; /* whole, unchanged */
        uint64_t sync_reports[2]; /* parsed, repeated (the connection's last, decoded then) */
        /* Connections that agents hold, and how many they may: the rest are the API
         * users' reserve. */
        unsigned agent_connections, agent_connection_limit;
        StrMap *agent_connections_of; /* node name -> connections counted for it */
        uint64_t agents_turned_away;
        /* While the state loads (api/loading.c): what agents may be answered from, the
         * requests that wait for api_serve, and those that wait for its first commit
         * (syncs of nodes whose leases were renewed meanwhile). */
        int listen_fd;
        unsigned shard_connection_limit; /* of each shard */
        EarlyLeases *early_leases;
        DeferredQueue deferred, deferred_renewed;
        int64_t renewed_all_at_ms; /* from then on, deferred_renewed is resumed whole */
        unsigned loading_connections;
        uint64_t early_lease_answers;
        HeapReserve *loading_reserve; /* their memory, populated ahead of them */
        unsigned loading_populated_for; /* so many connections' worth */
};

/* Per connection: request line, headers and the chunk of a body being read (bodies go
 * to their own buffer), and the answer's headers. libmicrohttpd clears it for every
 * request, so with ten thousand agents its size is CPU and memory; 8 KiB saved 80 MB at
 * 10,000 nodes but refused a browser's 4 KiB of cookies (kept twice), so 16. */
#define API_CONNECTION_MEMORY (16 * 1024)

/* While the state loads (api/loading.c). Accepts every connection waiting, up to the
 * server's limit; false when it stopped for want of room (the limit, or descriptors)
 * rather than of connections. */
bool api_loading_accept(Api *api);
/* The memory each reconnecting agent's connection touches while the state loads:
 * libmicrohttpd's pool, its connection and ours, the request and its answer. At 10,000
 * nodes this left no page to fault in during the load. */
#define API_LOADING_CONNECTION_BYTES (API_CONNECTION_MEMORY + 4096)
/* Keeps the populated part of loading_reserve ahead of the connections accepted. */
void api_loading_populate(Api *api);
/* A complete request: true when answered from the stored state (an agent's first sync
 * on a connection; the answer is set), false when suspended until api_loading_resume. */
bool api_loading_request(Api *api, Request *req, struct MHD_Connection *con, const char *method,
                         const char *url);
/* Resumes the suspended requests: those that came from agents whose leases were not
 * renewed and from API users, and, with renewed_too, the next 512 of the rest in the
 * order they came, so that the earliest renewed are answered first; all of them once
 * half a lease has passed since the first such call. */
void api_loading_resume(Api *api, bool renewed_too);
/* Resumes every suspended request (the server stops). */
void api_loading_resume_all(Api *api);

/* The answer, set by a handler and queued once its turn commits (request.c). */
/* text: a malloc'd JSON body, taken over. */
void request_set_answer_text(Request *req, unsigned status, char *text);
/* body: taken over. */
void request_set_answer(Request *req, unsigned status, json_t *body);
void request_set_error(Request *req, unsigned status, const char *code, const char *field,
                       const char *message);
void request_set_ctl_error(Request *req, const CtlError *err);
void request_set_unavailable(Request *req, const char *why);
void request_set_forbidden(Request *req, const char *what);
const char *api_query(struct MHD_Connection *con, const char *key);
int64_t api_query_int(struct MHD_Connection *con, const char *key, int64_t def);
/* The request's bearer token (Authorization: Bearer ...), or NULL when it has none. */
const char *api_bearer_token(struct MHD_Connection *con);
/* The body as a JSON object, or NULL with the 400 set. */
json_t *api_parse_body(Request *req);
/* The same, or NULL with nothing set (api/loading.c answers such a request later). */
json_t *api_body_object(const Request *req);

/* The agents' routes (agent-routes.c). */
void api_handle_register(Api *api, Request *req, struct MHD_Connection *con);
/* Returns true when the sync is held until its node's desired state changes. */
bool api_handle_sync(Api *api, Request *req, struct MHD_Connection *con);
void request_set_sync_answer(Api *api, Request *req, Node *node);
/* Forgets that c's agent holds it (when it closes). */
void agent_connection_release(Api *api, Connection *c);
