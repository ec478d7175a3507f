/* SPDX-License-Identifier: MIT */
/* JSON views of the controller's model, as docs/PROTOCOL.md fixes them. */
#pragma once

#include <jansson.h>

#include "controller.h"

json_t *view_job(Controller *ctl, Job *job, bool with_details);
/* A node as GET /v1/nodes lists it; view_node_status: all of it but its inventory. */
json_t *view_node(Controller *ctl, Node *node);
json_t *view_node_status(Controller *ctl, Node *node);
json_t *view_event(const StoreEvent *e);
/* Per project, its quota and use of each resource kind (GET /v1/quotas). */
json_t *view_quotas(Controller *ctl);
/* The answer of a sync for node: its desired ranks, or with unchanged the short answer
 * saying they are still those of the node's version (docs/PROTOCOL.md); with shared_env,
 * each job's host list once, not in each of its ranks. Compact JSON text, malloc'd:
 * written directly, as it is the hottest answer. */
char *view_desired(Controller *ctl, Node *node, bool unchanged, bool shared_env);
json_t *view_time(int64_t wall_ms); /* RFC 3339 or null for 0 */

/* Goodput (goodput-view.c). A job's: its buckets, and with details its timeline and
 * checkpoint advice. */
json_t *view_job_goodput(Controller *ctl, Job *job, bool with_details);
/* Whether the caller may see a project's jobs. */
typedef bool (*ViewProjectFilter)(void *userdata, const char *project);
/* The report of GET /v1/goodput: per job, per project and summed, over the time since
 * since_ms (0: all), of the jobs of project (NULL: all) that visible lets through. */
json_t *view_goodput(Controller *ctl, const char *project, int64_t since_ms, bool timelines,
                     ViewProjectFilter visible, void *userdata);
/* Parses a `since` value: a duration back from now ("24h": s, m, h, d) or an RFC 3339
 * UTC time. 0, or -EINVAL. */
int view_parse_since(const char *s, int64_t now_ms, int64_t *ret_ms);
