/* SPDX-License-Identifier: MIT */
/*
 * The REST API: maps HTTP requests (libmicrohttpd, driven by the controller's own
 * epoll loop) onto controller operations and renders answers as JSON. A request whose
 * handling wrote to the store is answered only after the loop commits the turn;
 * agent syncs may wait (long-poll) until their node's desired state changes.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "controller.h"
#include "early-leases.h"

typedef struct Api Api;

typedef struct ApiOptions {
        bool auth; /* every route but /healthz needs a bearer token (docs/SECURITY.md) */
        const char *tls_cert_pem; /* both set: serve HTTPS */
        const char *tls_key_pem;
        int log_streams_per_user; /* log answers one user may hold at once; 0: the default */
        const char *role; /* what /healthz says this controller is ("leader"); NULL: alone */
} ApiOptions;

#define API_DEFAULT_LOG_STREAMS_PER_USER 8

/* Serves on listen_fd (already bound and listening; the Api owns it) once api_serve
 * names the controller. 0 or -errno. */
int api_new(int listen_fd, const ApiOptions *opts, Api **ret);
/*
 * While the state loads on another thread (api/loading.c): serves until done_fd is
 * readable, answering agents' first syncs from leases (daemon/early-leases.h; NULL:
 * none) and holding every other request until api_serve.
 */
void api_serve_while_loading(Api *api, EarlyLeases *leases, int done_fd);
/* The controller whose requests the Api answers, once its state is loaded. */
void api_serve(Api *api, Controller *ctl);
Api *api_free(Api *api);
/* Log streams (GET /v1/jobs/{id}/logs): an fd to watch, and what to call when it is
 * readable (a stream has data for its suspended client). */
int api_streams_fd(Api *api);
void api_streams_run(Api *api);

/* The fd to watch for readability (an epoll set of the shards' libmicrohttpd epoll sets). */
int api_fd(Api *api);
/* Processes ready connections; call when api_fd is readable or the timeout passes. */
void api_run(Api *api);
/* Milliseconds until api_run must be called again at the latest; -1 for no limit. */
int64_t api_timeout_ms(Api *api);
/* After the controller committed a turn: answer waiting requests, wake long-polls. After
 * a turn that failed (ctl_failure), every waiting request is answered 503. */
void api_after_commit(Api *api);

/*
 * SIGTERM: from now on new requests are answered 503 `unavailable` (nothing more is
 * taken on), and held long-polls are answered with their node's desired state at the
 * next api_after_commit, so that nothing in flight is cut off without an answer.
 */
void api_shutdown_begin(Api *api);
/* Whether no request is in progress (log streams aside: api_free ends them). */
bool api_idle(const Api *api);
