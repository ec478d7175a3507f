/* SPDX-License-Identifier: MIT */
/*
 * The REST client of axctl: one blocking libcurl request at a time, the mapping from
 * HTTP answers to the documented exit codes, and the one-line error messages built
 * from the API's {"error":{"code","message","field"}} bodies. Transport failures are
 * reported with the operating system's words ("Connection refused") because that is
 * what a person debugging a CI job searches for.
 */
#include "cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "token.h"
#include "wire.h"

/* A slow controller is a problem, but a hung axctl in CI is a worse one. */
#define CLI_API_TIMEOUT_MS 30000
#define CLI_CONNECT_TIMEOUT_MS 5000

typedef struct Sink {
        CURL *curl;
        CliResponse *r;
        FILE *stream_to; /* non-NULL: 2xx bodies go here instead of memory */
        size_t cap;
} Sink;

void cli_response_done(CliResponse *r) {
        free(r->body);
        free(r->error);
        free(r->final_url);
        *r = (CliResponse){};
}

static size_t sink_write(char *data, size_t size, size_t nmemb, void *userdata) {
        Sink *s = userdata;
        size_t n = size * nmemb;

        if (s->stream_to) {
                long code = 0;
                curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
                if (code >= 200 && code < 300) {
                        if (fwrite(data, 1, n, s->stream_to) != n)
                                return 0;
                        /* Followed logs are read by people and tail-like scripts. */
                        fflush(s->stream_to);
                        return n;
                }
        }
        if (n > CLI_MAX_ANSWER - s->r->len) {
                /* An endless answer must not take all memory: drop it. */
                s->r->too_large = true;
                return 0;
        }
        if (s->r->len + n + 1 > s->cap) {
                size_t cap = s->cap ? s->cap : 4096;
                while (cap < s->r->len + n + 1)
                        cap *= 2;
                s->r->body = xrealloc(s->r->body, cap);
                s->cap = cap;
        }
        memcpy(s->r->body + s->r->len, data, n);
        s->r->len += n;
        s->r->body[s->r->len] = '\0';
        return n;
}

static char *transport_error(CURL *curl, CURLcode code, const char *errbuf) {
        long os_errno = 0;
        curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
        if (code == CURLE_COULDNT_CONNECT && os_errno != 0)
                return xstrdup(strerror((int) os_errno));
        if (code == CURLE_OPERATION_TIMEDOUT)
                return xstrdup("timed out");
        if (errbuf[0])
                return xstrdup(errbuf);
        return xstrdup(curl_easy_strerror(code));
}

int cli_http_perform(const CliContext *ctx, const CliRequest *req, CliResponse *r) {
        *r = (CliResponse){};
        CURL *curl = curl_easy_init();
        if (!curl) {
                r->error = xstrdup("cannot initialise libcurl");
                return -ENOMEM;
        }

        /* Checked here, because libcurl would only say "problem with the SSL CA cert". */
        if (ctx->ca_file && access(ctx->ca_file, R_OK) < 0) {
                r->error = xasprintf("cannot read CA file %s: %s", ctx->ca_file, strerror(errno));
                r->final_url = xstrdup(ctx->url);
                curl_easy_cleanup(curl);
                return -EIO;
        }

        _cleanup_free_ char *url = xasprintf("%s%s", ctx->url, req->path);
        char errbuf[CURL_ERROR_SIZE] = "";
        FILE *log_out = ctx->log_out ? ctx->log_out : ctx->out;
        Sink sink = {.curl = curl, .r = r, .stream_to = req->stream ? log_out : NULL};
        struct curl_slist *headers = NULL;
        headers = curl_slist_append(headers, "Accept: application/json");
        /* The API answers at once; waiting for "100 Continue" only adds a round trip. */
        headers = curl_slist_append(headers, "Expect:");
        /* A POST without a body must not claim to be a form (libcurl's default). */
        headers = curl_slist_append(headers,
                                    req->body ? "Content-Type: application/json" : "Content-Type:");
        /* libcurl sends a custom Authorization header to the original host and port
         * only, so the token never follows the logs redirect to an agent. */
        if (ctx->token) {
                _cleanup_free_ char *h = token_auth_header(ctx->token);
                headers = curl_slist_append(headers, h);
                explicit_bzero(h, strlen(h));
        }
        if (req->idempotency_key) {
                _cleanup_free_ char *h = xasprintf("Idempotency-Key: %s", req->idempotency_key);
                headers = curl_slist_append(headers, h);
        }

        curl_easy_setopt(curl, CURLOPT_URL, url);
        /* A proxy from the environment must never see loopback traffic (a controller on
         * 127.0.0.1 in CI); the user's own no_proxy list still applies. */
        const char *no_proxy = getenv("no_proxy");
        if (!no_proxy || !*no_proxy)
                no_proxy = getenv("NO_PROXY");
        _cleanup_free_ char *no_proxy_list =
                xasprintf("%s%slocalhost,127.0.0.1,::1", no_proxy ? no_proxy : "",
                          no_proxy && *no_proxy ? "," : "");
        curl_easy_setopt(curl, CURLOPT_NOPROXY, no_proxy_list);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_USERAGENT, "axctl/" AXCTL_VERSION);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sink_write);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long) CLI_CONNECT_TIMEOUT_MS);
        /* Certificates are always checked, against --ca-file when given: a controller
         * that cannot prove its name gets neither the token nor the job. */
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
        if (ctx->ca_file)
                curl_easy_setopt(curl, CURLOPT_CAINFO, ctx->ca_file);
#if LIBCURL_VERSION_NUM >= 0x075500
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
        if (req->timeout_ms > 0)
                curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, req->timeout_ms);
        if (req->follow_redirects) {
                /* The controller streams logs itself; a redirect (as older controllers
                 * sent) is followed to the agent that holds the file. */
                curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
                curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
        }
        if (strcmp(req->method, "POST") == 0) {
                const char *body = req->body ? req->body : "";
                curl_easy_setopt(curl, CURLOPT_POST, 1L);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
                curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, body);
        } else if (strcmp(req->method, "GET") != 0) {
                curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
        }

        CURLcode code = curl_easy_perform(curl);
        char *final_url = NULL;
        curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &final_url);
        r->final_url = xstrdup(final_url ? final_url : url);
        int ret = 0;
        if (r->too_large) {
                r->error = xasprintf("the answer is larger than %u MiB", CLI_MAX_ANSWER >> 20);
                r->status = 0;
                ret = -EFBIG;
        } else if (code != CURLE_OK) {
                r->error = transport_error(curl, code, errbuf);
                r->status = 0;
                ret = -EIO;
        } else {
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
                if (!r->body)
                        r->body = xstrdup("");
        }
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        return ret;
}

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
                if (strncmp(u, ctx->url, strlen(ctx->url)) == 0)
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

char *cli_url_escape(const char *s) {
        char *e = curl_easy_escape(NULL, s, 0);
        if (!e)
                return xstrdup(s);
        char *copy = xstrdup(e);
        curl_free(e);
        return copy;
}
