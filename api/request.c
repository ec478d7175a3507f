/* SPDX-License-Identifier: MIT */
/*
 * A request's answer (JSON bodies, the error shape of docs/PROTOCOL.md, the core's
 * errors as HTTP statuses) and its input: query values and a bounded JSON body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api-internal.h"
#include "util.h"
#include "wire.h"

/* text: a malloc'd JSON body, taken over. */
void request_set_answer_text(Request *req, unsigned status, char *text) {
        free(req->answer);
        req->status = status;
        req->answer = text;
}

void request_set_answer(Request *req, unsigned status, json_t *body) {
        request_set_answer_text(req, status, json_dumps(body, JSON_COMPACT));
        json_decref(body);
}

void request_set_error(Request *req, unsigned status, const char *code, const char *field,
                       const char *message) {
        WireError e = {.code = code, .message = message, .field = field};
        request_set_answer(req, status, wire_error_encode(&e));
}

/* The HTTP face of the core's errors. */
static const struct {
        unsigned status;
        const char *code;
} ctl_error_http[_CTL_ERR_MAX] = {
        [CTL_ERR_NONE] = {500, "internal"},
        [CTL_ERR_INVALID_SPEC] = {400, "invalid_spec"},
        [CTL_ERR_NOT_FOUND] = {404, "not_found"},
        [CTL_ERR_CONFLICT] = {409, "conflict"},
        [CTL_ERR_UNSCHEDULABLE] = {422, "unschedulable"},
        [CTL_ERR_TOO_MANY_JOBS] = {429, "too_many_jobs"},
        [CTL_ERR_UNKNOWN_NODE] = {404, "unknown_node"},
        [CTL_ERR_NODE_CLAIMED] = {409, "node_claimed"},
        [CTL_ERR_BOOT_MISMATCH] = {409, "boot_mismatch"},
};

void request_set_ctl_error(Request *req, const CtlError *err) {
        CtlErrorCode c = err->code > 0 && err->code < _CTL_ERR_MAX ? err->code : CTL_ERR_NONE;
        request_set_error(req, ctl_error_http[c].status, ctl_error_http[c].code, err->field,
                          err->message);
}

/* The controller stopped after a failed durable write: nothing more is acknowledged. */
void request_set_unavailable(Request *req, const char *why) {
        request_set_error(req, 503, "unavailable", NULL, why);
}

const char *api_query(struct MHD_Connection *con, const char *key) {
        return MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, key);
}

/* Parses a non-negative decimal query value; def when absent, -1 when malformed. */
int64_t api_query_int(struct MHD_Connection *con, const char *key, int64_t def) {
        const char *s = api_query(con, key);
        if (!s)
                return def;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || *end || v < 0)
                return -1;
        return v;
}

/*
 * Whether JSON text nests at most max levels. jansson's own limit is 2048, far deeper
 * than any spec or report needs, and a deep document costs recursion and memory.
 */
static bool json_depth_ok(const char *text, size_t len, int max) {
        int depth = 0;
        bool in_string = false;
        for (size_t i = 0; i < len; i++) {
                char c = text[i];
                if (in_string) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_string = false;
                } else if (c == '"')
                        in_string = true;
                else if (c == '{' || c == '[') {
                        if (++depth > max)
                                return false;
                } else if (c == '}' || c == ']')
                        depth--;
        }
        return true;
}

/* The body as a JSON object, or NULL with why it is not one in why[size]. */
static json_t *body_object(const Request *req, char *why, size_t size) {
        if (!req->body || req->len == 0) {
                snprintf(why, size, "the request needs a JSON body");
                return NULL;
        }
        if (!json_depth_ok(req->body, req->len, API_MAX_JSON_DEPTH)) {
                snprintf(why, size, "the JSON nests deeper than 32 levels");
                return NULL;
        }
        json_error_t jerr;
        json_t *j = json_loadb(req->body, req->len, JSON_REJECT_DUPLICATES, &jerr);
        if (!j) {
                snprintf(why, size, "malformed JSON at line %d column %d: %s", jerr.line,
                         jerr.column, jerr.text);
                return NULL;
        }
        /* jansson limits nesting to 2048; a JSON object is all we ever take. */
        if (!json_is_object(j)) {
                json_decref(j);
                snprintf(why, size, "the body must be a JSON object");
                return NULL;
        }
        return j;
}

json_t *api_body_object(const Request *req) {
        char why[300];
        return req->too_large ? NULL : body_object(req, why, sizeof(why));
}

json_t *api_parse_body(Request *req) {
        char why[300];
        json_t *j = body_object(req, why, sizeof(why));
        if (!j)
                request_set_error(req, 400, "bad_json", NULL, why);
        return j;
}

const char *api_bearer_token(struct MHD_Connection *con) {
        const char *h = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
        return h && strncasecmp(h, "Bearer ", 7) == 0 && h[7] ? h + 7 : NULL;
}

void request_set_forbidden(Request *req, const char *what) {
        char msg[300];
        snprintf(msg, sizeof(msg), "token %s (%s) may not %s", req->who.name ? req->who.name : "?",
                 token_role_to_string(req->who.role) ?: "?", what);
        request_set_error(req, 403, "forbidden", NULL, msg);
}
