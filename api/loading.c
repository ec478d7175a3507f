/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server while a restarted controller loads its state (about a second at
 * 10,000 nodes and 100,000 jobs, on another thread): the reconnecting fleet's
 * connections are accepted and its requests read as they come, not left to the kernel's
 * listen backlog. An agent's first sync is answered from the stored state where it
 * allows (daemon/early-leases.h), which renews the agent's lease; every other request
 * waits, suspended, until serving starts (api_serve).
 */
#include <errno.h>
#include <string.h>

#include "api-internal.h"
#include "util.h"
#include "wire.h"

/*
 * The reconnecting fleet comes within a fraction of a second, faster than its requests
 * are answered, and a connection that finds the listen backlog full waits a second or
 * more for its SYN to be sent again: so every waiting connection is accepted before any
 * request is read.
 */
bool api_loading_accept(Api *api) {
        unsigned open[API_SHARDS];
        for (unsigned i = 0; i < API_SHARDS; i++) {
                const union MHD_DaemonInfo *info =
                        MHD_get_daemon_info(api->shard[i].mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
                open[i] = info ? info->num_connections : 0;
        }
        for (;;) {
                /* The shard with the fewest: one at its limit would close the connection. */
                unsigned least = 0;
                for (unsigned i = 1; i < API_SHARDS; i++)
                        if (open[i] < open[least])
                                least = i;
                if (open[least] >= api->shard_connection_limit)
                        return false;
                struct sockaddr_storage addr;
                socklen_t len = sizeof(addr);
                int fd = accept4(api->listen_fd, (struct sockaddr *) &addr, &len,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
                        continue;
                if (fd < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK;
                if (MHD_add_connection(api->shard[least].mhd, fd, (struct sockaddr *) &addr, len) !=
                    MHD_YES)
                        return false; /* it closed fd: no memory, say; look again later */
                open[least]++;
                api_loading_populate(api);
        }
}

/* Connections' worth populated ahead of those accepted: 5 MB, a few milliseconds. */
#define POPULATE_LEAD 256

void api_loading_populate(Api *api) {
        if (!api->loading_reserve ||
            api->loading_connections + POPULATE_LEAD / 2 < api->loading_populated_for)
                return;
        api->loading_populated_for = api->loading_connections + POPULATE_LEAD;
        (void) heap_reserve_populate(api->loading_reserve, (size_t) api->loading_populated_for *
                                                                   API_LOADING_CONNECTION_BYTES);
}

/* A sync's answer from the stored state (early-leases.h), or NULL; *ret_renewed as
 * early_leases_answer's. */
static char *early_sync_answer(Api *api, Request *req, struct MHD_Connection *con,
                               bool *ret_renewed) {
        int64_t version = api_query_int(con, "version", -1);
        const char *token = api_bearer_token(con);
        *ret_renewed = false;
        if (version < 0 || !early_leases_admits(api->early_leases, token))
                return NULL; /* before the body is parsed: a stranger costs a hash */
        json_t *j = api_body_object(req);
        WireSync msg = {0};
        JsonError err = {0};
        char *answer = NULL;
        const char *accept = api_query(con, "accept");
        EarlyAccepts accepts = {.unchanged = wire_accepts(accept, WIRE_ACCEPT_UNCHANGED),
                                .lease_only = wire_accepts(accept, WIRE_ACCEPT_LEASE_ONLY)};
        if (j && wire_sync_parse(j, &msg, &err) == 0)
                answer = early_leases_answer(api->early_leases, token, &msg, (uint64_t) version,
                                             &accepts, ret_renewed);
        wire_sync_clear(&msg);
        json_decref(j);
        return answer;
}

bool api_loading_request(Api *api, Request *req, struct MHD_Connection *con, const char *method,
                         const char *url) {
        bool path_known;
        Connection *c = connection_of(con);
        bool renewed = c && c->renewed_early;
        char *answer = c && !c->renewed_early &&
                                       api_route_find(method, url, &path_known, NULL, 0) ==
                                               ROUTE_AGENT_SYNC
                               ? early_sync_answer(api, req, con, &renewed)
                               : NULL;
        if (answer) {
                c->renewed_early = true;
                api->early_lease_answers++;
                req->route = ROUTE_AGENT_SYNC;
                request_set_answer_text(req, 200, answer);
                return true;
        }
        /* What the load's end must answer first: not a sync of a node renewed here. */
        DeferredQueue *queue = renewed ? &api->deferred_renewed : &api->deferred;
        if (queue->last)
                queue->last->next_deferred = req;
        else
                queue->first = req;
        queue->last = req;
        MHD_suspend_connection(con);
        return false;
}

/* Resumes the first max of queue. */
static void resume_first(DeferredQueue *queue, size_t max) {
        for (size_t n = 0; n < max && queue->first; n++) {
                Request *r = queue->first;
                queue->first = r->next_deferred;
                r->next_deferred = NULL;
                MHD_resume_connection(r->connection);
        }
        if (!queue->first)
                queue->last = NULL;
}

/* Renewed agents' syncs read in a turn: about a tenth of a second of the loop. */
#define RENEWED_BATCH 512

void api_loading_resume(Api *api, bool renewed_too) {
        resume_first(&api->deferred, SIZE_MAX);
        if (!renewed_too || !api->deferred_renewed.first)
                return;
        /* Half a lease after serving started, the rest at once: a fleet larger or turns
         * slower than here must not wait for batches past its renewed leases. */
        int64_t now = util_now_ms();
        if (!api->renewed_all_at_ms)
                api->renewed_all_at_ms = now + ctl_config(api->ctl)->lease_ms / 2;
        resume_first(&api->deferred_renewed,
                     now >= api->renewed_all_at_ms ? SIZE_MAX : RENEWED_BATCH);
}

void api_loading_resume_all(Api *api) {
        resume_first(&api->deferred, SIZE_MAX);
        resume_first(&api->deferred_renewed, SIZE_MAX);
}
