/* SPDX-License-Identifier: MIT */
/*
 * The route table against the OpenAPI document, both ways, the matcher against
 * concrete paths (anything not in the table is not found), and the table's role rules
 * against docs/SECURITY.md.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "routes.h"
#include "util.h"

extern const char api_openapi_json[];

static void lower(char *s) {
        for (; *s; s++)
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char) (*s - 'A' + 'a');
}

static bool has_prefix(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool has_suffix(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Near misses of real routes match nothing, under any method: the router answers 404. */
static void test_unknown_paths(void) {
        static const char *const paths[] = {
                "/v1/jobs/1/x",
                "/v1/jobs/1/logs/extra",
                "/v1/jobsx",
                "/v1/jobs/1/cancel/",
                "/v1/jobs/1//logs",
                "/v1/jobs/1/events/1",
                "/v1/job/1",
                "/v1/jobs/1/Logs",
                "/healthz/",
                "/healthzx",
                "/v1/agent/sync/x",
                "/v1/agent",
                "/v1/nodes/n1",
                "/v1/nodes/n1/drain/now",
                "/v1/quotas/p1",
                "/v2/jobs",
                "/v1",
                "/ui",
                "/ui/",
                "/ui/app.js/x",
                "/index.html",
                "",
        };
        static const char *const methods[] = {"GET", "POST", "PUT", "DELETE"};
        char params[2][128];
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                for (size_t m = 0; m < ELEMENTSOF(methods); m++) {
                        bool known = true;
                        ApiRoute r = api_route_find(methods[m], paths[i], &known, params, 2);
                        if (r != ROUTE_NOT_FOUND || known) {
                                fprintf(stderr, "%s %s matched route %d (known %d)\n", methods[m],
                                        paths[i], r, known);
                                exit(1);
                        }
                }
}

/*
 * Every route has an explicit rule that includes admin; users get everything but the
 * agent protocol and drain/undrain; agents only the agent protocol; only /healthz is
 * open. This is the Roles table of docs/SECURITY.md, derived here from the paths.
 */
static void test_roles(void) {
        for (int r = 0; r < _ROUTE_MAX; r++) {
                const ApiRouteInfo *info = &api_routes[r];
                bool agent_route = has_prefix(info->path, "/v1/agent/");
                bool admin_only =
                        has_suffix(info->path, "/drain") || has_suffix(info->path, "/undrain");
                /* The status page's files hold no data: it asks the API with a token. */
                bool open = strcmp(info->path, "/healthz") == 0 || strcmp(info->path, "/") == 0 ||
                            has_prefix(info->path, "/ui/");
                unsigned want = API_ROLE_ADMIN;
                if (open)
                        want |= API_ROLE_OPEN | API_ROLE_USER | API_ROLE_AGENT;
                else if (agent_route)
                        want |= API_ROLE_AGENT;
                else if (!admin_only)
                        want |= API_ROLE_USER;
                if (info->roles == 0 || api_route_roles(info) != want) {
                        fprintf(stderr, "%s %s: roles 0x%x, expected 0x%x\n", info->method,
                                info->path, info->roles, want);
                        exit(1);
                }
        }
        /* A route without a rule is admin-only, never open. */
        const ApiRouteInfo bare = {"GET", "/v1/new"};
        CHECK_INT(api_route_roles(&bare), API_ROLE_ADMIN);
}

int main(void) {
        json_error_t jerr;
        json_t *doc = json_loads(api_openapi_json, 0, &jerr);
        CHECK(doc);
        json_t *paths = json_object_get(doc, "paths");
        CHECK(json_is_object(paths));

        /* Server -> document. */
        for (int r = 0; r < _ROUTE_MAX; r++) {
                char method[16];
                snprintf(method, sizeof(method), "%s", api_routes[r].method);
                lower(method);
                json_t *item = json_object_get(paths, api_routes[r].path);
                if (!item || !json_object_get(item, method)) {
                        fprintf(stderr, "route %s %s is not in openapi.json\n",
                                api_routes[r].method, api_routes[r].path);
                        return 1;
                }
        }
        /* Document -> server. */
        const char *path;
        json_t *item;
        int n_doc = 0;
        json_object_foreach(paths, path, item) {
                const char *method;
                json_t *op;
                json_object_foreach(item, method, op) {
                        bool found = false;
                        for (int r = 0; r < _ROUTE_MAX && !found; r++)
                                found = strcasecmp(api_routes[r].method, method) == 0 &&
                                        strcmp(api_routes[r].path, path) == 0;
                        if (!found) {
                                fprintf(stderr, "openapi.json has %s %s, the server does not\n",
                                        method, path);
                                return 1;
                        }
                        n_doc++;
                }
        }
        CHECK_INT(n_doc, _ROUTE_MAX);

        char params[2][128];
        bool known;
        CHECK_INT(api_route_find("GET", "/v1/jobs/17", &known, params, 2), ROUTE_JOB_GET);
        CHECK_STR(params[0], "17");
        CHECK_INT(api_route_find("POST", "/v1/jobs/17/cancel", &known, params, 2),
                  ROUTE_JOB_CANCEL);
        CHECK_INT(api_route_find("GET", "/v1/jobs/17/cancel", &known, params, 2), ROUTE_NOT_FOUND);
        CHECK(known); /* 405, not 404 */
        CHECK_INT(api_route_find("GET", "/v1/jobs//events", &known, params, 2), ROUTE_NOT_FOUND);
        CHECK(!known);
        CHECK_INT(api_route_find("POST", "/v1/nodes/n-1/drain", &known, params, 2),
                  ROUTE_NODE_DRAIN);
        CHECK_STR(params[0], "n-1");
        CHECK_INT(api_route_find("GET", "/v1/jobs/1/2", &known, params, 2), ROUTE_NOT_FOUND);
        CHECK(!known);
        CHECK_INT(api_route_find("GET", "/v1/jobs", &known, params, 2), ROUTE_JOBS_LIST);
        CHECK_INT(api_route_find("GET", "/v1/jobs/", &known, params, 2), ROUTE_NOT_FOUND);
        json_decref(doc);
        test_unknown_paths();
        test_roles();
        printf("api routes: ok\n");
        return 0;
}
