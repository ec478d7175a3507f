/* SPDX-License-Identifier: MIT */
/*
 * Streams a rank's log from its agent through the controller. A worker thread fetches
 * the agent's URL with libcurl and writes into a pipe: first the agent's HTTP status as
 * one line ("200\n"; "502\n" and a message when the agent cannot be reached), then the
 * body as it arrives. The controller's loop reads the pipe without blocking, so a slow
 * agent or client never holds it. The thread touches nothing but its own LogProxy.
 */
#pragma once

typedef struct LogProxy LogProxy;

/* Starts fetching url; follow keeps the stream open as the log grows. 0 or -errno. */
int logproxy_start(const char *url, int follow, LogProxy **ret);
/* The pipe's read end (non-blocking), for epoll. */
int logproxy_fd(const LogProxy *p);
/* Stops the transfer (the thread notices within a second) and releases p. */
void logproxy_release(LogProxy *p);
