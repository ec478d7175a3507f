/* SPDX-License-Identifier: MIT */
/*
 * The table of every route the API serves, matched against a method and path, with the
 * roles that may use it. The router dispatches on it, /metrics counts by it, and a unit
 * test checks it against the OpenAPI document in both directions, so the three cannot
 * drift apart. Deny by default: a path not in the table is 404, and a route without a
 * role rule is admin-only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef enum ApiRoute {
        ROUTE_HEALTHZ,
        ROUTE_METRICS,
        ROUTE_OPENAPI,
        ROUTE_JOBS_SUBMIT,
        ROUTE_JOBS_LIST,
        ROUTE_JOB_GET,
        ROUTE_JOB_CANCEL,
        ROUTE_JOB_EVENTS,
        ROUTE_JOB_LOGS,
        ROUTE_NODES_LIST,
        ROUTE_NODE_DRAIN,
        ROUTE_NODE_UNDRAIN,
        ROUTE_EVENTS,
        ROUTE_QUOTAS,
        ROUTE_AGENT_REGISTER,
        ROUTE_AGENT_SYNC,
        ROUTE_GOODPUT,
        ROUTE_UI, /* the status page and its files: no data, open, like /healthz */
        ROUTE_UI_SCRIPT,
        ROUTE_UI_STYLE,
        _ROUTE_MAX,
        ROUTE_NOT_FOUND = _ROUTE_MAX, /* for counting: requests that matched nothing */
} ApiRoute;

/* Who may use a route when the controller runs with --auth (docs/SECURITY.md). */
typedef enum ApiRoles {
        API_ROLE_ADMIN = 1 << 0,
        API_ROLE_USER = 1 << 1,
        API_ROLE_AGENT = 1 << 2,
        API_ROLE_OPEN = 1 << 3, /* no token needed at all */
} ApiRoles;

typedef struct ApiRouteInfo {
        const char *method;
        const char *path; /* OpenAPI template: /v1/jobs/{id} */
        unsigned roles; /* ApiRoles; 0 (no rule) means admin only */
} ApiRouteInfo;

extern const ApiRouteInfo api_routes[_ROUTE_MAX];

/* The roles allowed on a route: its rule, or admin alone when it has none. */
unsigned api_route_roles(const ApiRouteInfo *info);

/*
 * Finds the route of method and path. Returns the route, or ROUTE_NOT_FOUND with
 * *ret_path_known set when the path exists under another method (405). Template
 * parameters are copied into params (in order, each up to param_size bytes).
 */
ApiRoute api_route_find(const char *method, const char *path, bool *ret_path_known,
                        char params[][128], size_t max_params);
