/* SPDX-License-Identifier: MIT */
/*
 * The route table against the OpenAPI document, both ways, and the matcher against
 * concrete paths.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "routes.h"

extern const char api_openapi_json[];

static void lower(char *s) {
        for (; *s; s++)
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char) (*s - 'A' + 'a');
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
                        fprintf(stderr, "route %s %s is not in openapi.json\n", api_routes[r].method,
                                api_routes[r].path);
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
        CHECK_INT(api_route_find("POST", "/v1/jobs/17/cancel", &known, params, 2), ROUTE_JOB_CANCEL);
        CHECK_INT(api_route_find("GET", "/v1/jobs/17/cancel", &known, params, 2), ROUTE_NOT_FOUND);
        CHECK(known); /* 405, not 404 */
        CHECK_INT(api_route_find("GET", "/v1/jobs//events", &known, params, 2), ROUTE_NOT_FOUND);
        CHECK(!known);
        CHECK_INT(api_route_find("POST", "/v1/nodes/n-1/drain", &known, params, 2), ROUTE_NODE_DRAIN);
        CHECK_STR(params[0], "n-1");
        CHECK_INT(api_route_find("GET", "/v1/jobs/1/2", &known, params, 2), ROUTE_NOT_FOUND);
        CHECK(!known);
        CHECK_INT(api_route_find("GET", "/v1/jobs", &known, params, 2), ROUTE_JOBS_LIST);
        CHECK_INT(api_route_find("GET", "/v1/jobs/", &known, params, 2), ROUTE_NOT_FOUND);
        json_decref(doc);
        printf("api routes: ok\n");
        return 0;
}
