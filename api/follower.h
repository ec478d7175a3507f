/* SPDX-License-Identifier: MIT */
/*
 * What a controller that does not lead serves while it waits to (docs/OPERATIONS.md,
 * "Controller failover"): /healthz says it follows and who leads; every other request is
 * sent to the leader with 307 (method and body kept), or answered 503 `no_leader` with
 * Retry-After while none is known. It holds no state, so it answers nothing itself.
 * libmicrohttpd serves it from a thread of its own: the caller's thread polls the
 * database meanwhile.
 */
#pragma once

#include <stdint.h>

typedef struct Follower Follower;

/* Serves on listen_fd (bound and listening); TLS when both PEMs are set. 0 or -errno. */
int follower_new(int listen_fd, const char *tls_cert_pem, const char *tls_key_pem, Follower **ret);
/* Who leads now: its URL (NULL: none known) and instance id. Thread-safe. */
void follower_set_leader(Follower *f, const char *url, const char *holder);
/* Stops serving, after answering the requests in progress (for half a second at most),
 * and gives the listening socket back, still open, for the leader's API. */
int follower_stop(Follower *f);
