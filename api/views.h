/* SPDX-License-Identifier: MIT */
/* JSON views of the controller's model, as docs/PROTOCOL.md fixes them. */
#pragma once

#include <jansson.h>

#include "controller.h"

json_t *view_job(Controller *ctl, Job *job, bool with_details);
json_t *view_node(Controller *ctl, Node *node);
json_t *view_event(const StoreEvent *e);
/* Per project, its quota and use of each resource kind (GET /v1/quotas). */
json_t *view_quotas(Controller *ctl);
/* The desired state answer of a sync for node. */
json_t *view_desired(Controller *ctl, Node *node);
json_t *view_time(int64_t wall_ms); /* RFC 3339 or null for 0 */
