/* SPDX-License-Identifier: MIT */
/*
 * The agent's HTTP server for rank logs: GET /v1/logs/{job}/{attempt}/{rank} answers
 * the rank's log file as text/plain, and with ?follow=1 keeps the answer open, sending
 * what the rank writes, until the rank has ended. The controller redirects
 * `GET /v1/jobs/{id}/logs` here. It only reads files below the state directory, so it
 * runs on libmicrohttpd's own threads and shares no memory with the agent's loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct AgentLogServer AgentLogServer;

/*
 * Listens on listen_addr ("HOST:PORT", "[V6HOST]:PORT"; port 0 picks a free one) and
 * serves the logs under state_dir. Once the node's log key is set (the controller hands
 * it over at registration) a request must carry the controller's signature
 * (?expires=E&sig=S, see token_sign_path()), so only clients the controller authorised
 * read logs; with require_signature (an agent with a token) none is served before.
 * Returns 0 or -errno.
 */
int agent_logserver_start(const char *listen_addr, const char *state_dir, bool require_signature,
                          AgentLogServer **ret);
/* Sets the key signatures are checked with (64 hex digits); NULL forgets it. */
void agent_logserver_set_key(AgentLogServer *s, const char *key_hex);

/*
 * Whether a signed log request is valid at now_s: sig is the controller's signature of
 * path and expires, which must not have passed nor lie more than an hour ahead.
 */
bool agent_log_signature_ok(const char *key_hex, const char *path, const char *expires,
                            const char *sig, int64_t now_s);
/* Stops serving (ends follow streams) and frees s; returns NULL. */
AgentLogServer *agent_logserver_stop(AgentLogServer *s);

/* The port actually bound. */
uint16_t agent_logserver_port(const AgentLogServer *s);

/*
 * Splits "HOST:PORT" or "[HOST]:PORT" into a malloc'd host (brackets removed) and a
 * port. Returns 0 or -EINVAL.
 */
int agent_listen_parse(const char *addr, char **ret_host, uint16_t *ret_port);

/*
 * Parses the path of a log request. Returns 0 with the three numbers, or -EINVAL for
 * anything that is not exactly /v1/logs/<digits>/<digits>/<digits>.
 */
int agent_log_path_parse(const char *url, int64_t *ret_job, int64_t *ret_attempt,
                         int64_t *ret_rank);
