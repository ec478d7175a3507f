/* SPDX-License-Identifier: MIT */
/* Route table and matcher; see routes.h. */
#include "routes.h"

#include <string.h>

#define ADMIN API_ROLE_ADMIN
#define USER API_ROLE_USER
#define AGENT API_ROLE_AGENT

/* Admin is in every rule on purpose: a rule lists everyone, so none is implied. */
const ApiRouteInfo api_routes[_ROUTE_MAX] = {
        [ROUTE_HEALTHZ] = {"GET", "/healthz", API_ROLE_OPEN | ADMIN | USER | AGENT},
        [ROUTE_METRICS] = {"GET", "/metrics", ADMIN | USER},
        [ROUTE_OPENAPI] = {"GET", "/v1/openapi.json", ADMIN | USER},
        [ROUTE_JOBS_SUBMIT] = {"POST", "/v1/jobs", ADMIN | USER},
        [ROUTE_JOBS_LIST] = {"GET", "/v1/jobs", ADMIN | USER},
        [ROUTE_JOB_GET] = {"GET", "/v1/jobs/{id}", ADMIN | USER},
        [ROUTE_JOB_CANCEL] = {"POST", "/v1/jobs/{id}/cancel", ADMIN | USER},
        [ROUTE_JOB_EVENTS] = {"GET", "/v1/jobs/{id}/events", ADMIN | USER},
        [ROUTE_JOB_LOGS] = {"GET", "/v1/jobs/{id}/logs", ADMIN | USER},
        [ROUTE_NODES_LIST] = {"GET", "/v1/nodes", ADMIN | USER},
        [ROUTE_NODE_DRAIN] = {"POST", "/v1/nodes/{name}/drain", ADMIN},
        [ROUTE_NODE_UNDRAIN] = {"POST", "/v1/nodes/{name}/undrain", ADMIN},
        [ROUTE_EVENTS] = {"GET", "/v1/events", ADMIN | USER},
        [ROUTE_QUOTAS] = {"GET", "/v1/quotas", ADMIN | USER},
        [ROUTE_AGENT_REGISTER] = {"POST", "/v1/agent/register", ADMIN | AGENT},
        [ROUTE_AGENT_SYNC] = {"POST", "/v1/agent/sync", ADMIN | AGENT},
        [ROUTE_GOODPUT] = {"GET", "/v1/goodput", ADMIN | USER},
        [ROUTE_UI] = {"GET", "/", API_ROLE_OPEN | ADMIN | USER | AGENT},
        [ROUTE_UI_SCRIPT] = {"GET", "/ui/app.js", API_ROLE_OPEN | ADMIN | USER | AGENT},
        [ROUTE_UI_STYLE] = {"GET", "/ui/app.css", API_ROLE_OPEN | ADMIN | USER | AGENT},
};

#undef ADMIN
#undef USER
#undef AGENT

unsigned api_route_roles(const ApiRouteInfo *info) {
        return info->roles ? info->roles : API_ROLE_ADMIN;
}

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
