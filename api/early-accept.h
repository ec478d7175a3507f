/* SPDX-License-Identifier: MIT */
/*
 * Connections accepted while the controller loads its state, then served as any other.
 * A restarted controller's fleet reconnects within a fraction of a second, while the
 * load takes about one: left in the kernel's listen backlog (net.core.somaxconn, 4096
 * by default) the rest of 10,000 agents' connections were dropped and waited for TCP's
 * SYN retransmits (1 s, then 3 s), past their lease.
 */
#pragma once

#include <sys/socket.h>

typedef struct EarlyAccept EarlyAccept;

/* Takes an accepted connection, which it owns from then on. */
typedef void (*EarlyAcceptFn)(void *userdata, int fd, const struct sockaddr *addr, socklen_t len);
/* Starts accepting on listen_fd (non-blocking) in a thread, at most max connections, and
 * hands each to fn as it comes, on that thread: what fn touches must not be used
 * elsewhere until early_accept_finish (the HTTP server is not run while the state loads,
 * so its per-connection set-up, 20 us each, is done beside the load, not after it). */
int early_accept_start(int listen_fd, int max, EarlyAcceptFn fn, void *userdata, EarlyAccept **ret);
/* Stops accepting; frees ea. */
void early_accept_finish(EarlyAccept *ea);
