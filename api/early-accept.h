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

/* Starts accepting on listen_fd (non-blocking) in a thread, at most max connections. */
int early_accept_start(int listen_fd, int max, EarlyAccept **ret);
/* Stops accepting and hands each accepted connection to fn (which owns it), in the
 * order they came; frees ea. NULL fn closes them. */
typedef void (*EarlyAcceptFn)(void *userdata, int fd, const struct sockaddr *addr, socklen_t len);
void early_accept_finish(EarlyAccept *ea, EarlyAcceptFn fn, void *userdata);
