/* SPDX-License-Identifier: MIT */
/*
 * The REST client of axctl over transport.c's requests: the mapping from HTTP answers
 * to the documented exit codes, and the one-line error messages built from the API's
 * {"error":{"code","message","field"}} bodies. Transport failures are reported with
 * the operating system's words ("Connection refused") because that is what a person
 * debugging a CI job searches for.
 */
#include "cli.h"

#include <string.h>

#include "wire.h"

/* A slow controller is a problem, but a hung axctl in CI is a worse one. */
#define CLI_API_TIMEOUT_MS 30000

int cli_exit_for_status(long status) {
        if (status >= 200 && status < 300)
                return CLI_EXIT_OK;
        switch (status) {
        case 400:
        case 413:
        case 422:
                return CLI_EXIT_USAGE;
        case 401:
                return CLI_EXIT_UNAUTHENTICATED;
        case 403:
                return CLI_EXIT_FORBIDDEN;
        case 404:
                return CLI_EXIT_NOT_FOUND;
        case 409:
                return CLI_EXIT_FAILED;
        default:
                return CLI_EXIT_UNREACHABLE;
        }
}

char *cli_api_error_message(long status, const char *body) {
        _cleanup_json_ json_t *root = body ? json_loads(body, JSON_DECODE_ANY, NULL) : NULL;
        WireError e;
        wire_error_parse(root, &e);
        const char *code = e.code, *message = e.message, *field = e.field;

        if (!code && !message) {
                /* Not the API's error shape: a proxy, an agent, or another server. */
                size_t n = body ? strcspn(body, "\r\n") : 0;
                if (n > 200)
                        n = 200;
                if (n == 0)
                        return xasprintf("HTTP %ld", status);
                return xasprintf("HTTP %ld: %.*s", status, (int) n, body);
        }

        _cleanup_free_ char *words = xstrdup(code ? code : "error");
        for (char *p = words; *p; p++)
                if (*p == '_')
                        *p = ' ';
        if (field && *field)
                return xasprintf("%s: %s (field %s)", words, message ? message : "", field);
        if (message && *message)
                return xasprintf("%s: %s", words, message);
        return xstrdup(words);
}

char *cli_api_error_reason(long status, const char *body) {
        _cleanup_json_ json_t *root = body ? json_loads(body, JSON_DECODE_ANY, NULL) : NULL;
        WireError e;
        wire_error_parse(root, &e);
        if (e.message && *e.message)
                return xstrdup(e.message);
        return xasprintf("HTTP %ld", status);
}

int cli_report_failure(const CliContext *ctx, const CliResponse *r) {
        if (r->too_large) {
                cli_error(ctx, "unexpected answer from %s: %s; not read",
                          r->final_url ? r->final_url : ctx->url, r->error);
                return CLI_EXIT_UNREACHABLE;
        }
        if (r->status == 0) {
                const char *u = r->final_url ? r->final_url : ctx->url;
                if (r->final_url && strcmp(u, ctx->url) == 0 && strchr(ctx->url, ','))
                        /* route.c's list of how each controller failed. */
                        cli_error(ctx, "cannot reach a leading controller: %s",
                                  r->error ? r->error : "unknown error");
                else if (strncmp(u, ctx->url, strlen(ctx->url)) == 0)
                        cli_error(ctx, "cannot reach controller at %s: %s", ctx->url,
                                  r->error ? r->error : "unknown error");
                else
                        cli_error(ctx, "cannot reach %s: %s", u,
                                  r->error ? r->error : "unknown error");
                return CLI_EXIT_UNREACHABLE;
        }
        if (r->status == 401 || r->status == 403) {
                /* The API's own message says why; the code word would only repeat it. */
                _cleanup_free_ char *why = cli_api_error_reason(r->status, r->body);
                if (r->status == 401)
                        cli_error(ctx, "not authenticated: %s (%s AXCTL_TOKEN)", why,
                                  ctx->token ? "check" : "set");
                else
                        cli_error(ctx, "not allowed: %s", why);
                return cli_exit_for_status(r->status);
        }
        _cleanup_free_ char *msg = cli_api_error_message(r->status, r->body);
        cli_error(ctx, "%s", msg);
        return cli_exit_for_status(r->status);
}

int cli_api_call(const CliContext *ctx, const char *method, const char *path, json_t *body,
                 const char *idempotency_key, json_t **ret_json) {
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        CliRequest req = {
                .method = method,
                .path = path,
                .body = text,
                .idempotency_key = idempotency_key,
                .timeout_ms = CLI_API_TIMEOUT_MS,
        };
        CliResponse r;
        cli_http_perform(ctx, &req, &r);
        if (r.status < 200 || r.status >= 300) {
                int ret = cli_report_failure(ctx, &r);
                cli_response_done(&r);
                return ret;
        }
        json_error_t jerr;
        json_t *root = json_loads(r.body, 0, &jerr);
        if (!json_is_object(root)) {
                cli_error(ctx, "unexpected answer from controller at %s (HTTP %ld): %s", ctx->url,
                          r.status, root ? "not a JSON object" : jerr.text);
                json_decref(root);
                cli_response_done(&r);
                return CLI_EXIT_UNREACHABLE;
        }
        cli_response_done(&r);
        *ret_json = root;
        return CLI_EXIT_OK;
}
