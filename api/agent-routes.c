/* SPDX-License-Identifier: MIT */
/*
 * The agents' routes: registration and the sync, with the bound on the connections
 * agents hold (the rest are the API users' reserve) and the sync's long-poll.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"
#include "util.h"
#include "views.h"
#include "wire.h"

void agent_connection_release(Api *api, Connection *c) {
        if (!c->node)
                return;
        intptr_t n = (intptr_t) strmap_get(api->agent_connections_of, c->node);
        if (n > 1)
                strmap_put(api->agent_connections_of, c->node, (void *) (n - 1));
        else
                strmap_remove(api->agent_connections_of, c->node);
        api->agent_connections--;
        free(c->node);
        c->node = NULL;
}

/* 503 busy: the connection closes, and the agent retries with jitter as after any failed
 * request. */
static bool agent_turned_away(Api *api, Request *req, const char *why) {
        api->agents_turned_away++;
        req->busy = true;
        request_set_error(req, 503, "busy", NULL, why);
        return false;
}

/*
 * An agent's request for node is served on a connection that already speaks for that
 * node; on another, while the node holds fewer than API_AGENT_CONNECTIONS_PER_NODE and
 * agents fewer than their limit. So a fleet larger than the process can hold never takes
 * the API users' reserve, and one agent (with its node's token) cannot take the fleet's.
 * Called once the node is known to be the token's.
 */
static bool agent_admitted(Api *api, Request *req, struct MHD_Connection *con, const char *node) {
        Connection *c = connection_of(con);
        if (!c || (c->node && strcmp(c->node, node) == 0))
                return true;
        agent_connection_release(api, c);
        intptr_t n = (intptr_t) strmap_get(api->agent_connections_of, node);
        if (n >= API_AGENT_CONNECTIONS_PER_NODE)
                return agent_turned_away(api, req,
                                         "this node's agent holds as many connections as one "
                                         "node may; retry");
        if (api->agent_connections >= api->agent_connection_limit)
                return agent_turned_away(api, req,
                                         "the controller holds as many agent connections as "
                                         "it may; retry");
        strmap_put(api->agent_connections_of, node, (void *) (n + 1));
        c->node = xstrdup(node);
        api->agent_connections++;
        return true;
}

void api_handle_register(Api *api, Request *req, struct MHD_Connection *con) {
        json_t *j = api_parse_body(req);
        if (!j)
                return;
        WireRegister msg;
        JsonError jerr = {0};
        Node *node = NULL;
        CtlError err = {0};
        if (wire_register_parse(j, &msg, &jerr) < 0)
                request_set_error(req, 400, "bad_request", jerr.field, jerr.message);
        else if (api->auth && req->who.role == TOKEN_ROLE_AGENT &&
                 !util_streq_ptr(req->who.node, msg.node))
                request_set_forbidden(req, "register another node");
        else if (!agent_admitted(api, req, con, msg.node))
                ;
        else if (ctl_node_register(api->ctl, &msg, &node, &err) < 0)
                request_set_ctl_error(req, &err);
        else {
                char log_key[TOKEN_HASH_HEX];
                bool keyed = ctl_node_log_key(api->ctl, node->name, log_key) == 0;
                request_set_answer(req, 200,
                                   wire_register_answer_encode(&(WireRegisterAnswer){
                                           .node = node->name,
                                           .lease_ms = ctl_config(api->ctl)->lease_ms,
                                           .sync_period_ms = ctl_config(api->ctl)->sync_period_ms,
                                           .log_key = keyed ? log_key : NULL,
                                   }));
                explicit_bzero(log_key, sizeof(log_key));
        }
        json_decref(j);
}

/*
 * A sync's answer: the node's desired ranks, or, to an agent that accepts it and has
 * applied the node's version, the short answer that they did not change. The version
 * grows with every change of the desired set (daemon/transition.c), so an equal version
 * means an equal set, and the answer costs nothing to render.
 */
void request_set_sync_answer(Api *api, Request *req, Node *node) {
        bool unchanged = req->accepts_unchanged && node->version == req->applied_version;
        api->sync_answers[unchanged]++;
        request_set_answer_text(req, 200,
                                view_desired(api->ctl, node, unchanged, req->accepts_shared_env));
}

/*
 * Answers a sync now, or holds it (returns true) until its node's desired state changes
 * or a sync period passes. The agent's other request, held before this one, was dropped
 * for it: answered with the next sweep of deadlines, it frees its connection then
 * instead of at its deadline.
 */
static bool sync_answer_or_hold(Api *api, Request *req, Node *node, int64_t wait_ms,
                                uint64_t version, bool answer_now) {
        for (unsigned i = 0; i < API_SHARDS; i++) {
                LongPolls *polls = &api->shard[i].polls;
                for (LongPoll *p = longpolls_of_node(polls, node->index); p; p = p->node_next) {
                        request_of_poll(p)->dropped = true;
                        longpolls_set_deadline(polls, p, 0);
                }
        }
        if (wait_ms <= 0 || node->version != version || answer_now) {
                request_set_sync_answer(api, req, node);
                return false;
        }
        /* Held at most one sync period: an answer is the agent's proof of contact for
         * its lease, and each request is ours for the node's. */
        int64_t period = ctl_config(api->ctl)->sync_period_ms;
        req->polling = true;
        req->poll.node = node->index;
        req->poll.deadline_ms = util_now_ms() + (wait_ms < period ? wait_ms : period);
        return true;
}

/* Returns true when the request should wait for a change of its node's state. */
bool api_handle_sync(Api *api, Request *req, struct MHD_Connection *con) {
        int64_t wait_ms = api_query_int(con, "wait_ms", 0),
                version = api_query_int(con, "version", 0);
        if (wait_ms < 0 || version < 0) {
                request_set_error(req, 400, "bad_request", wait_ms < 0 ? "wait_ms" : "version",
                                  "must be a non-negative integer");
                return false;
        }
        req->applied_version = (uint64_t) version;
        const char *accept = api_query(con, "accept");
        req->accepts_unchanged = wire_accepts(accept, WIRE_ACCEPT_UNCHANGED);
        req->accepts_shared_env = wire_accepts(accept, WIRE_ACCEPT_SHARED_ENV);
        /* The same bytes as this connection's last sync: the same report, decoded then. */
        Connection *c = connection_of(con);
        const WireSync *msg = sync_memo_get(c ? c->sync_memo : NULL, req->body, req->len);
        WireSync parsed = {0};
        json_t *j = NULL;
        if (!msg) {
                JsonError jerr = {0};
                if (!(j = api_parse_body(req)))
                        return false;
                if (wire_sync_parse(j, &parsed, &jerr) < 0) {
                        request_set_error(req, 400, "bad_request", jerr.field, jerr.message);
                        json_decref(j);
                        return false;
                }
                msg = &parsed;
        }
        bool wait = false;
        if (api->auth && req->who.role == TOKEN_ROLE_AGENT &&
            !util_streq_ptr(req->who.node, msg->node)) {
                request_set_forbidden(req, "sync for another node");
        } else if (agent_admitted(api, req, con, msg->node)) {
                api->sync_reports[msg != &parsed]++;
                /* Kept only for admitted agents: their connections are bounded. */
                if (msg == &parsed && c) {
                        sync_memo_free(c->sync_memo);
                        c->sync_memo = sync_memo_new(req->body, req->len, &parsed);
                }
                /* The first sync since this controller started is answered at once: the
                 * agent's lease still counts from a request sent to the controller before,
                 * and holding this one would spend up to a sync period more of it. */
                Node *node = NULL;
                CtlError err = {0};
                int r = ctl_node_sync(api->ctl, msg, (uint64_t) version,
                                      sync_memo_mark(c ? c->sync_memo : NULL), &node, &err);
                if (r < 0)
                        request_set_ctl_error(req, &err);
                else
                        wait = sync_answer_or_hold(api, req, node, wait_ms, (uint64_t) version,
                                                   r > 0);
        }
        wire_sync_clear(&parsed);
        json_decref(j);
        return wait;
}
