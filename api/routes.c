/* SPDX-License-Identifier: MIT */
/* Route table and matcher; see routes.h. */
#include "routes.h"

#include <string.h>

const ApiRouteInfo api_routes[_ROUTE_MAX] = {
        [ROUTE_HEALTHZ] = {"GET", "/healthz"},
        [ROUTE_METRICS] = {"GET", "/metrics"},
        [ROUTE_OPENAPI] = {"GET", "/v1/openapi.json"},
        [ROUTE_JOBS_SUBMIT] = {"POST", "/v1/jobs"},
        [ROUTE_JOBS_LIST] = {"GET", "/v1/jobs"},
        [ROUTE_JOB_GET] = {"GET", "/v1/jobs/{id}"},
        [ROUTE_JOB_CANCEL] = {"POST", "/v1/jobs/{id}/cancel"},
        [ROUTE_JOB_EVENTS] = {"GET", "/v1/jobs/{id}/events"},
        [ROUTE_JOB_LOGS] = {"GET", "/v1/jobs/{id}/logs"},
        [ROUTE_NODES_LIST] = {"GET", "/v1/nodes"},
        [ROUTE_NODE_DRAIN] = {"POST", "/v1/nodes/{name}/drain"},
        [ROUTE_NODE_UNDRAIN] = {"POST", "/v1/nodes/{name}/undrain"},
        [ROUTE_EVENTS] = {"GET", "/v1/events"},
        [ROUTE_QUOTAS] = {"GET", "/v1/quotas"},
        [ROUTE_AGENT_REGISTER] = {"POST", "/v1/agent/register"},
        [ROUTE_AGENT_SYNC] = {"POST", "/v1/agent/sync"},
};

/* Matches path against a template segment by segment; "{x}" takes one non-empty segment. */
static bool template_match(const char *tmpl, const char *path, char params[][128],
                           size_t max_params) {
        size_t n_params = 0;
        while (*tmpl && *path) {
                if (*tmpl != '/' || *path != '/')
                        return false;
                tmpl++;
                path++;
                const char *te = strchr(tmpl, '/'), *pe = strchr(path, '/');
                size_t tl = te ? (size_t) (te - tmpl) : strlen(tmpl);
                size_t pl = pe ? (size_t) (pe - path) : strlen(path);
                if (tl > 0 && tmpl[0] == '{') {
                        if (pl == 0 || pl >= 128)
                                return false;
                        if (n_params < max_params) {
                                memcpy(params[n_params], path, pl);
                                params[n_params][pl] = '\0';
                        }
                        n_params++;
                } else if (tl != pl || strncmp(tmpl, path, tl) != 0)
                        return false;
                tmpl += tl;
                path += pl;
        }
        return *tmpl == '\0' && *path == '\0';
}

ApiRoute api_route_find(const char *method, const char *path, bool *ret_path_known,
                        char params[][128], size_t max_params) {
        bool known = false;
        for (int r = 0; r < _ROUTE_MAX; r++) {
                if (!template_match(api_routes[r].path, path, params, max_params))
                        continue;
                if (strcmp(api_routes[r].method, method) == 0) {
                        *ret_path_known = true;
                        return (ApiRoute) r;
                }
                known = true;
        }
        *ret_path_known = known;
        return ROUTE_NOT_FOUND;
}
