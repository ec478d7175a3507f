/* SPDX-License-Identifier: MIT */
/*
 * The axctl command-line tool: shared declarations of its modules. The tool speaks only
 * the REST API of docs/PROTOCOL.md. Every command returns one of the documented exit
 * codes (CliExit) instead of exiting, so tests can drive the whole tool through
 * cli_run() with their own output streams. Pure helpers (argument parsing, spec
 * building, formatting, error mapping) are exposed here for the unit tests.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* Exit codes: part of the interface (CI scripts branch on them; see docs/CLI.md). */
typedef enum CliExit {
        CLI_EXIT_OK = 0,
        CLI_EXIT_FAILED = 1, /* job failed, conflict (409), other command failure */
        CLI_EXIT_USAGE = 2, /* bad arguments or input rejected by the API (400/413/422) */
        CLI_EXIT_CANCELLED = 3, /* wait: the job was cancelled */
        CLI_EXIT_TIMEOUT = 4, /* wait: --timeout passed */
        CLI_EXIT_UNREACHABLE = 5, /* controller unreachable or an unexpected API answer */
        CLI_EXIT_NOT_FOUND = 6, /* job or node not found (404) */
        CLI_EXIT_UNAUTHENTICATED = 7, /* no token, or the controller rejected it (401) */
        CLI_EXIT_FORBIDDEN = 8, /* the token's role may not do this (403) */
} CliExit;

#define CLI_DEFAULT_URL "http://127.0.0.1:8470"

#ifndef AXCTL_VERSION
#define AXCTL_VERSION "unknown"
#endif

typedef struct CliContext {
        char *url; /* controller base URL, or several separated by commas (route.c) */
        size_t *url_current; /* which of them answered last, where the next request
                              * starts; NULL: the first. Owned; a pointer so that
                              * requests through a const context can move it. */
        char *token; /* bearer token, NULL for none; never printed */
        char *ca_file; /* CA bundle for https URLs, NULL: the system's */
        bool json; /* print the API's JSON instead of tables */
        FILE *out; /* control characters from the controller are escaped on both */
        FILE *err;
        FILE *log_out; /* a rank's own bytes (logs): as they are unless stdout is a
                        * terminal; NULL: out */
} CliContext;

/* Entry point of the whole tool: parses global options and runs one command. */
int cli_main(int argc, char **argv);
/* Like cli_main, but printing to the given streams (for tests). */
int cli_run(int argc, char **argv, FILE *out, FILE *err);

/* Prints "axctl: <message>" as one line on ctx->err. */
void cli_error(const CliContext *ctx, const char *fmt, ...) _printf_(2, 3);

/* ---- args.c: option parsing shared by all commands ---- */

enum {
        CLI_ARG_END = 0, /* no more arguments */
        CLI_ARG_ERROR = -1, /* bad argument: the message is already printed */
        CLI_ARG_POSITIONAL = -2, /* *ret_value is a positional word */
        CLI_ARG_REST = -3, /* options are over; the rest starts at parser.index */
        CLI_ARG_EXIT = -4, /* cli_args_next_own: help printed or error reported; the
                            * command returns parser.exit */
        CLI_OPT_HELP = 1000, /* -h / --help: every command has it */
        CLI_OPT_JSON, /* --json, also accepted after the command */
        CLI_OPT_URL, /* --url URL, also accepted after the command */
        CLI_OPT_CA_FILE, /* --ca-file PATH, also accepted after the command */
};

typedef struct CliOption {
        const char *long_name; /* without the leading dashes */
        char short_name; /* 0 for none */
        bool has_arg;
        int id; /* positive, below CLI_OPT_HELP */
} CliOption;

typedef struct CliArgs {
        CliContext *ctx; /* --json, --url and --ca-file after the command change it */
        const char *command; /* for messages: "unknown flag --x for <command>" */
        const char *help; /* printed by cli_args_next_own for -h / --help */
        const CliOption *options; /* terminated by an entry with long_name NULL */
        int argc;
        char **argv;
        int index; /* next argument to look at */
        bool rest_at_positional; /* submit: the first positional word starts the command */
        bool options_done; /* after "--": everything is positional */
        int exit; /* after CLI_ARG_EXIT: CLI_EXIT_OK (help) or CLI_EXIT_USAGE */
} CliArgs;

void cli_args_init(CliArgs *a, CliContext *ctx, const char *command, const char *help,
                   const CliOption *options, int argc, char **argv);
/* Returns an option id (with *ret_value set for options with arguments), or one of
 * CLI_ARG_END, CLI_ARG_POSITIONAL, CLI_ARG_REST, CLI_ARG_ERROR. */
int cli_args_next(CliArgs *a, const char **ret_value);
/* What a command's loop calls: like cli_args_next, but applies the common options
 * itself and turns --help and errors into CLI_ARG_EXIT, so that only the command's
 * own ids, CLI_ARG_POSITIONAL, CLI_ARG_REST and CLI_ARG_END are left to it. */
int cli_args_next_own(CliArgs *a, const char **ret_value);
/* Parses a whole decimal integer within [min, max]; prints an error naming flag. */
int cli_parse_int(const CliContext *ctx, const char *flag, const char *s, int64_t min, int64_t max,
                  int64_t *ret);
/* Parses a job id argument (positive integer); CLI_EXIT_USAGE with a message if not. */
int cli_parse_job_id(const CliContext *ctx, const char *s, int64_t *ret);
/* Parses a non-negative number of seconds ("1.5" allowed) into milliseconds. */
int cli_parse_seconds(const CliContext *ctx, const char *flag, const char *s, int64_t *ret_ms);
/* Applies --json / --url / --ca-file to the context. */
void cli_args_apply_common(CliContext *ctx, int id, const char *value);
/* Message for a positional word a command does not take; returns CLI_EXIT_USAGE. */
int cli_args_unexpected(const CliContext *ctx, const char *command, const char *word);
/* Message for a missing positional argument; returns CLI_EXIT_USAGE. */
int cli_args_missing(const CliContext *ctx, const char *command, const char *what);

/* ---- config.c: URL, token and CA from flags, environment and config file ---- */

/* What a config file holds; strings owned (the token is wiped when freed). */
typedef struct CliConfig {
        char *url;
        char *token;
        char *ca_file;
} CliConfig;

/* $AXCTL_CONFIG, else $XDG_CONFIG_HOME/axctl/config, else ~/.config/axctl/config;
 * NULL when there is no home. Owned by the caller. */
char *cli_config_path(void);
/* Reads a config file (keys url, token, ca_file). A missing file is fine unless
 * must_exist; a file holding a token must be private to its owner. Returns 0 or -errno
 * with *ret_error (one line, never containing the token). */
int cli_config_load(const char *path, bool must_exist, CliConfig *ret, char **ret_error);
void cli_config_done(CliConfig *c);
/* Sets url, token and ca_file of ctx from the environment and the config file (flags
 * are applied afterwards by the caller). Returns 0 or -errno with *ret_error. */
int cli_context_configure(CliContext *ctx, char **ret_error);
void cli_context_set_url(CliContext *ctx, const char *url);
void cli_context_set_ca_file(CliContext *ctx, const char *path);
/* Frees what the context owns (wiping the token). */
void cli_context_done(CliContext *ctx);

/* ---- transport.c: HTTP/1.1 requests (http.c: what they mean) ---- */

/* The most axctl reads of one answer into memory (a followed log is streamed instead). */
#define CLI_MAX_ANSWER (64u << 20)

typedef struct CliResponse {
        long status; /* HTTP status, 0 when the request did not complete */
        bool too_large; /* the answer ran past CLI_MAX_ANSWER and was dropped */
        char *body; /* NUL-terminated, never NULL after a completed request */
        size_t len;
        char *error; /* transport error text when status is 0 */
        char *final_url; /* URL after redirects */
        uint64_t streamed; /* bytes of a streamed 2xx body received, skipped ones too */
} CliResponse;

void cli_response_done(CliResponse *r);

typedef struct CliRequest {
        const char *method; /* "GET" or "POST" */
        const char *path; /* appended to ctx->url, e.g. "/v1/jobs?limit=5" */
        const char *body; /* JSON body for POST, NULL for none */
        const char *idempotency_key;
        bool follow_redirects;
        bool stream; /* write a 2xx body to ctx->out as it arrives (logs -f) */
        uint64_t stream_skip; /* bytes of the streamed body not to write again */
        long timeout_ms; /* 0: no total limit */
} CliRequest;

/* ---- route.c: which controller a request goes to ---- */

/*
 * Performs a request with the controller that leads: it starts with the URL that
 * answered last, follows a follower's redirect to the leader, tries the next URL when
 * one cannot be reached, and waits out a failover for a few seconds (docs/CLI.md).
 * Returns 0 when an HTTP answer arrived (any status; the caller looks at r->status),
 * -EIO with r->error set when no controller could be reached, -EFBIG (r->too_large)
 * for an answer past CLI_MAX_ANSWER.
 */
int cli_http_perform(const CliContext *ctx, const CliRequest *req, CliResponse *r);

/* One request to one absolute URL, as route.c sends it. */
typedef struct CliHop {
        const char *url;
        const char *method;
        const char *body; /* NULL: none */
        bool send_token;
        int64_t deadline; /* util_now_ms() time of the whole request, 0 for none */
} CliHop;
/* Sends hop on a new connection. Returns as cli_http_perform, with *ret_location (owned)
 * for a 3xx that has one, and *ret_sent once connected: the request may have arrived. */
int cli_http_exchange(const CliContext *ctx, const CliRequest *req, const CliHop *hop,
                      CliResponse *r, char **ret_location, bool *ret_sent);
void cli_sleep_ms(int64_t ms);

/* ---- tls.c: GnuTLS for https, loaded on first use ---- */

typedef struct CliTls CliTls;
/* Prepares TLS on a connected non-blocking socket: certificates checked against ca_file
 * (NULL: the system's) and host. 0, or < 0 with *ret_error. */
int cli_tls_new(int fd, const char *host, const char *ca_file, CliTls **ret, char **ret_error);
CliTls *cli_tls_free(CliTls *t);
/* Each returns -EAGAIN when the socket must first be ready for cli_tls_wanted_events(),
 * or -EIO with *ret_error. */
int cli_tls_handshake(CliTls *t, char **ret_error);
/* Bytes read, 0 at the end of the stream. */
ssize_t cli_tls_recv(CliTls *t, void *buf, size_t n, char **ret_error);
ssize_t cli_tls_send(CliTls *t, const void *buf, size_t n, char **ret_error);
short cli_tls_wanted_events(CliTls *t);

/* ---- http.c: the REST client ---- */

/* Maps an HTTP error status to the documented exit code. */
int cli_exit_for_status(long status);
/* Builds the one-line message for an API error answer, e.g.
 * "invalid spec: ranks: must be positive (field ranks)". Owned by the caller. */
char *cli_api_error_message(long status, const char *body);
/* The API's message of an error answer, else "HTTP <status>"; owned by the caller. */
char *cli_api_error_reason(long status, const char *body);
/* Prints the error for a failed request (transport or API) and returns its exit code. */
int cli_report_failure(const CliContext *ctx, const CliResponse *r);

/* The usual call: JSON in, JSON object out. Returns CLI_EXIT_OK with *ret_json set
 * (2xx with a JSON object body), or prints the error and returns its exit code. */
int cli_api_call(const CliContext *ctx, const char *method, const char *path, json_t *body,
                 const char *idempotency_key, json_t **ret_json);

/* ---- format.c: what people read ---- */

/* "12s", "3m", "2h", "5d"; negative ages print as "0s". */
char *cli_format_age(int64_t seconds, char *buf, size_t size);
/* Parses RFC 3339 ("2026-11-22T02:33:35.123Z", offsets allowed) into epoch ms. */
int cli_parse_time(const char *s, int64_t *ret_ms);
/* Age of an RFC 3339 time at now_ms into buf, "-" when s is NULL or unparsable. */
char *cli_format_age_since(const char *s, int64_t now_ms, char *buf, size_t size);

typedef struct CliTable CliTable;
CliTable *cli_table_new(size_t n_columns, const char *const *headers);
CliTable *cli_table_free(CliTable *t);
/* Adds a row of n_columns cells; NULL or "" cells show as "-". */
void cli_table_add_row(CliTable *t, const char *const *cells);
/* Prints header (once) and rows added since the last print; column widths only grow. */
void cli_table_print(CliTable *t, FILE *f);
static inline void cli_table_freep(CliTable **t) {
        cli_table_free(*t);
}
#define _cleanup_table_ _cleanup_(cli_table_freep)

/* Text of a JSON scalar for a table cell: strings as is, integers in decimal,
 * null/absent as "-"; owned by the caller. */
char *cli_json_cell(const json_t *v);
/*
 * A stream that writes to `to` with what a terminal would act on made visible: C0
 * control characters but newline and tab (and carriage return when keep_cr), DEL, and
 * the C1 controls U+0080-U+009F print as \xNN or \u00NN, so that nothing the
 * controller passes on from agents or ranks can move the cursor, retitle the window or
 * write to the clipboard. Line-buffered; fclose flushes it (and `to`) but leaves `to`
 * open. NULL when the stream cannot be made.
 */
FILE *cli_escaping_stream(FILE *to, bool keep_cr);
/* Pretty JSON with sorted keys and a final newline. */
void cli_json_print(FILE *f, const json_t *v);
/* "<state>[: <reason>][ (exit code N)]" for a job view; owned by the caller. */
char *cli_job_state_line(const json_t *job);
/* jansson.h provides json_decrefp (for its json_auto_t) with GCC and clang. */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- submit.c ---- */

typedef struct CliSubmit {
        json_t *spec; /* built from flags (and the -f file merged under them) */
        char *spec_file; /* -f argument, "-" for stdin, NULL when none */
        char *idempotency_key; /* --idempotency-key, else $AXCTL_IDEMPOTENCY_KEY */
        bool wait;
        int64_t wait_timeout_ms; /* --timeout with --wait, 0 = none */
        bool help; /* -h / --help: printed by cli_submit_parse; nothing else to do */
} CliSubmit;

void cli_submit_done(CliSubmit *s);
/* Parses the arguments after "submit" into s. default_user is $USER (may be NULL).
 * Returns CLI_EXIT_OK or CLI_EXIT_USAGE (message printed). The spec file is not read. */
int cli_submit_parse(CliContext *ctx, int argc, char **argv, const char *default_user,
                     CliSubmit *s);
/* Reads the -f file (or stdin) and puts the flag-built fields over it. */
int cli_submit_load_file(const CliContext *ctx, CliSubmit *s, FILE *in);
int cli_cmd_submit(CliContext *ctx, int argc, char **argv);

/* ---- jobs.c ---- */

/* Exit code for a terminal job state: 0 succeeded, 1 failed, 3 cancelled, -1 if the
 * state is not terminal. */
int cli_exit_for_job_state(const char *state);
/* Polls the job until it ends or timeout_ms passes (0 = forever); prints the state
 * line (or the JSON view) and returns the exit code of the outcome. */
int cli_job_wait(const CliContext *ctx, int64_t id, int64_t timeout_ms);
int cli_cmd_status(CliContext *ctx, int argc, char **argv);
int cli_cmd_list(CliContext *ctx, int argc, char **argv);
int cli_cmd_cancel(CliContext *ctx, int argc, char **argv);
int cli_cmd_wait(CliContext *ctx, int argc, char **argv);

/* ---- goodput.c ---- */

/* The "goodput:", "badput:" and "advice:" lines of a job view's goodput object. */
void cli_print_goodput(FILE *f, json_t *goodput);
int cli_cmd_goodput(CliContext *ctx, int argc, char **argv);

/* ---- logs.c ---- */

/* Finds the last "--- axctl environment ---" ... "--- end environment ---" block of a
 * rank log; returns a new string with its lines, or NULL when there is none. */
char *cli_env_block_extract(const char *log);
int cli_print_rank_env(const CliContext *ctx, const json_t *job, int64_t rank, int64_t attempt);
int cli_cmd_logs(CliContext *ctx, int argc, char **argv);
int cli_cmd_events(CliContext *ctx, int argc, char **argv);

/* ---- nodes.c ---- */

/* "nvidia-h100 x8 (6 free), amd-mi300x x2 (2 free)" for a node view; owned by caller. */
char *cli_node_accelerators_cell(const json_t *node);
int cli_cmd_nodes(CliContext *ctx, int argc, char **argv);
int cli_cmd_drain(CliContext *ctx, int argc, char **argv);
int cli_cmd_undrain(CliContext *ctx, int argc, char **argv);
