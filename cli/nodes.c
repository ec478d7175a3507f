/* SPDX-License-Identifier: MIT */
/*
 * Node commands: `nodes` (the fleet as a table), `drain` and `undrain`. Drain is how an
 * operator takes a host out of service for maintenance; `--now` also stops the ranks
 * running there instead of letting them finish.
 */
#include "cli.h"
#include "url.h"

#include <string.h>

static const char nodes_help[] =
        "Usage: axctl nodes\n"
        "\n"
        "Lists nodes: NAME STATE ADDRESS CPUS ACCELERATORS RANKS REASON LAST-SEEN\n"
        "  CPUS          free/total, e.g. \"4/8\"\n"
        "  ACCELERATORS  per kind: \"<kind> x<count> (<free> free)\", comma-separated\n"
        "  RANKS         ranks running there\n"
        "  LAST-SEEN     age of the last sync, e.g. \"2s\"\n";

static const char drain_help[] =
        "Usage: axctl drain NODE [--now]\n"
        "\n"
        "Stops placing ranks on NODE; running ranks finish (or, with --now, are stopped\n"
        "and their jobs restart elsewhere). Prints the node's new state line.\n";

static const char undrain_help[] =
        "Usage: axctl undrain NODE\n"
        "\n"
        "Returns NODE to service (also clears quarantine). Prints its new state line.\n";

char *cli_node_accelerators_cell(const json_t *node) {
        json_t *inventory = json_object_get(node, "inventory");
        json_t *list = json_object_get(inventory, "accelerators");
        json_t *free_map = json_object_get(json_object_get(node, "free"), "accelerators");

        /* Count per kind, in the order kinds first appear in the inventory. */
        _cleanup_json_ json_t *counts = json_object();
        _cleanup_json_ json_t *order = json_array();
        size_t i;
        json_t *acc;
        json_array_foreach(list, i, acc) {
                const char *kind = json_string_value(json_object_get(acc, "kind"));
                if (!kind)
                        kind = "unknown";
                json_t *c = json_object_get(counts, kind);
                if (c) {
                        json_integer_set(c, json_integer_value(c) + 1);
                } else {
                        json_object_set_new(counts, kind, json_integer(1));
                        json_array_append_new(order, json_string(kind));
                }
        }
        if (json_array_size(order) == 0)
                return xstrdup("-");

        char *s = xstrdup("");
        json_t *k;
        json_array_foreach(order, i, k) {
                const char *kind = json_string_value(k);
                json_t *free_v = json_object_get(free_map, kind);
                /* A kind missing from "free" is unknown, not zero. */
                _cleanup_free_ char *free_s =
                        json_is_integer(free_v) ? cli_json_cell(free_v) : xstrdup("?");
                char *n = xasprintf("%s%s%s x%lld (%s free)", s, i ? ", " : "", kind,
                                    (long long) json_integer_value(json_object_get(counts, kind)),
                                    free_s);
                free(s);
                s = n;
        }
        return s;
}

static char *cpus_cell(const json_t *node) {
        json_t *total = json_object_get(json_object_get(node, "inventory"), "cpus");
        json_t *free_v = json_object_get(json_object_get(node, "free"), "cpus");
        if (!json_is_integer(total))
                return xstrdup("-");
        _cleanup_free_ char *f = cli_json_cell(free_v);
        return xasprintf("%s/%lld", f, (long long) json_integer_value(total));
}

/* Returns -1 when the command is to run, else the exit status to return (0 after the
 * help). */
static int parse_simple(CliContext *ctx, const char *command, const char *help, const char *what,
                        int argc, char **argv, bool *now_flag, const char **ret_positional) {
        static const CliOption drain_options[] = {
                {"now", 0, false, 1},
                {},
        };
        static const CliOption no_options[] = {{}};
        CliArgs a;
        cli_args_init(&a, ctx, command, help, now_flag ? drain_options : no_options, argc, argv);
        *ret_positional = NULL;
        for (;;) {
                const char *value;
                int opt = cli_args_next_own(&a, &value);
                if (opt == CLI_ARG_END)
                        break;
                if (opt == CLI_ARG_EXIT)
                        return a.exit;
                if (opt == CLI_ARG_POSITIONAL) {
                        if (!what || *ret_positional)
                                return cli_args_unexpected(ctx, command, value);
                        *ret_positional = value;
                } else if (opt == 1 && now_flag) {
                        *now_flag = true;
                }
        }
        if (what && !*ret_positional)
                return cli_args_missing(ctx, command, what);
        return -1;
}

int cli_cmd_nodes(CliContext *ctx, int argc, char **argv) {
        const char *unused;
        int r = parse_simple(ctx, "nodes", nodes_help, NULL, argc, argv, NULL, &unused);
        if (r >= 0)
                return r;

        _cleanup_json_ json_t *doc = NULL;
        r = cli_api_call(ctx, "GET", "/v1/nodes", NULL, NULL, &doc);
        if (r != CLI_EXIT_OK)
                return r;
        json_t *nodes = json_object_get(doc, "nodes");
        if (!json_is_array(nodes)) {
                cli_error(ctx, "unexpected answer from controller: no \"nodes\" list");
                return CLI_EXIT_UNREACHABLE;
        }
        if (ctx->json) {
                cli_json_print(ctx->out, doc);
                return CLI_EXIT_OK;
        }

        static const char *const headers[] = {"NAME",         "STATE", "ADDRESS", "CPUS",
                                              "ACCELERATORS", "RANKS", "REASON",  "LAST-SEEN"};
        _cleanup_table_ CliTable *t = cli_table_new(ELEMENTSOF(headers), headers);
        int64_t now = util_wall_ms();
        size_t i;
        json_t *node;
        json_array_foreach(nodes, i, node) {
                char seen[32];
                _cleanup_free_ char *name = cli_json_cell(json_object_get(node, "name"));
                _cleanup_free_ char *state = cli_json_cell(json_object_get(node, "state"));
                _cleanup_free_ char *address = cli_json_cell(json_object_get(node, "address"));
                _cleanup_free_ char *cpus = cpus_cell(node);
                _cleanup_free_ char *accels = cli_node_accelerators_cell(node);
                _cleanup_free_ char *ranks = cli_json_cell(json_object_get(node, "ranks"));
                _cleanup_free_ char *reason = cli_json_cell(json_object_get(node, "reason"));
                cli_format_age_since(json_string_value(json_object_get(node, "last_seen")), now,
                                     seen, sizeof(seen));
                const char *cells[] = {name, state, address, cpus, accels, ranks, reason, seen};
                cli_table_add_row(t, cells);
        }
        cli_table_print(t, ctx->out);
        return CLI_EXIT_OK;
}

static int node_post(CliContext *ctx, const char *name, const char *verb, json_t *body) {
        _cleanup_free_ char *escaped = url_escape(name);
        _cleanup_free_ char *path = xasprintf("/v1/nodes/%s/%s", escaped, verb);
        _cleanup_json_ json_t *node = NULL;
        int r = cli_api_call(ctx, "POST", path, body, NULL, &node);
        if (r != CLI_EXIT_OK)
                return r;
        if (ctx->json) {
                cli_json_print(ctx->out, node);
                return CLI_EXIT_OK;
        }
        const char *state = json_string_value(json_object_get(node, "state"));
        const char *reason = json_string_value(json_object_get(node, "reason"));
        fprintf(ctx->out, "%s%s%s\n", state ? state : "unknown", reason && *reason ? ": " : "",
                reason && *reason ? reason : "");
        return CLI_EXIT_OK;
}

int cli_cmd_drain(CliContext *ctx, int argc, char **argv) {
        const char *name;
        bool now = false;
        int r = parse_simple(ctx, "drain", drain_help, "a NODE name", argc, argv, &now, &name);
        if (r >= 0)
                return r;
        _cleanup_json_ json_t *body = json_pack("{s:b}", "now", now);
        return node_post(ctx, name, "drain", body);
}

int cli_cmd_undrain(CliContext *ctx, int argc, char **argv) {
        const char *name;
        int r = parse_simple(ctx, "undrain", undrain_help, "a NODE name", argc, argv, NULL, &name);
        if (r >= 0)
                return r;
        return node_post(ctx, name, "undrain", NULL);
}
