/* SPDX-License-Identifier: MIT */
/*
 * axagent: the per-node agent of axctl. Parses the command line, prepares the process
 * (signals, libcurl) and hands over to the agent loop in agent.c.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "util.h"

static const char usage[] =
        "Usage: axagent --controller URL --node NAME --state-dir DIR [options]\n"
        "\n"
        "Runs the ranks the axctl controller assigns to this node and reports on them.\n"
        "\n"
        "  --controller URL            controller base URL, e.g. http://10.0.0.1:8080\n"
        "  --node NAME                 this node's name (letters, digits, '-', '_', '.')\n"
        "  --state-dir DIR             rank state and logs; survives agent restarts\n"
        "  --topology FILE             hwloc XML to use instead of probing the machine\n"
        "  --dev-root DIR              prefix for /dev paths (tests)\n"
        "  --sys-root DIR              prefix for /sys paths (tests)\n"
        "  --listen HOST:PORT          log server address (default 127.0.0.1:0)\n"
        "  --labels K=V,K=V            node labels for scheduling constraints\n"
        "  --health-cmd CMD            shell command; non-zero exit marks the node unhealthy\n"
        "  --health-interval-ms MS     how often to check health (default 10000)\n"
        "  --profile-dir DIR           launch profiles <kind>.env per accelerator kind\n"
        "  --kill-grace-ms MS          SIGTERM to SIGKILL delay when stopping ranks "
        "(default 3000)\n"
        "  --log-level LEVEL           error, warning, info (default) or debug\n"
        "  --help                      show this text\n";

enum {
        OPT_CONTROLLER = 256,
        OPT_NODE,
        OPT_STATE_DIR,
        OPT_TOPOLOGY,
        OPT_DEV_ROOT,
        OPT_SYS_ROOT,
        OPT_LISTEN,
        OPT_LABELS,
        OPT_HEALTH_CMD,
        OPT_HEALTH_INTERVAL,
        OPT_PROFILE_DIR,
        OPT_KILL_GRACE,
        OPT_LOG_LEVEL,
        OPT_HELP,
};

static const struct option options[] = {
        { "controller", required_argument, NULL, OPT_CONTROLLER },
        { "node", required_argument, NULL, OPT_NODE },
        { "state-dir", required_argument, NULL, OPT_STATE_DIR },
        { "topology", required_argument, NULL, OPT_TOPOLOGY },
        { "dev-root", required_argument, NULL, OPT_DEV_ROOT },
        { "sys-root", required_argument, NULL, OPT_SYS_ROOT },
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "labels", required_argument, NULL, OPT_LABELS },
        { "health-cmd", required_argument, NULL, OPT_HEALTH_CMD },
        { "health-interval-ms", required_argument, NULL, OPT_HEALTH_INTERVAL },
        { "profile-dir", required_argument, NULL, OPT_PROFILE_DIR },
        { "kill-grace-ms", required_argument, NULL, OPT_KILL_GRACE },
        { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
        { "help", no_argument, NULL, OPT_HELP },
        {},
};

/* Reports a command line error in one line and exits with 2. */
_Noreturn _printf_(1, 2) static void die_usage(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("axagent: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputs(" (see --help)\n", stderr);
        va_end(ap);
        exit(2);
}

static int64_t parse_ms(const char *name, const char *s, int64_t min) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < min || v > 24LL * 3600 * 1000)
                die_usage("--%s needs a number of milliseconds, not \"%s\"", name, s);
        return v;
}

static bool node_name_valid(const char *s) {
        if (!*s || strlen(s) > 128)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
                        return false;
        return true;
}

/* Parses "k=v,k=v" into a JSON object of strings; exits on a malformed list. */
static json_t *parse_labels(const char *s) {
        json_t *labels = json_object();
        _cleanup_free_ char *copy = xstrdup(s);
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(item, '=');
                if (!eq || eq == item)
                        die_usage("--labels needs KEY=VALUE pairs separated by commas, not "
                                  "\"%s\"",
                                  item);
                *eq = '\0';
                json_object_set_new(labels, item, json_string(eq + 1));
        }
        return labels;
}

int main(int argc, char **argv) {
        AgentConfig cfg = {
                .listen = "127.0.0.1:0",
                .dev_root = "",
                .sys_root = "",
                .health_interval_ms = 10000,
                .kill_grace_ms = 3000,
        };
        json_t *labels = NULL;
        LogLevel level = LOG_LEVEL_INFO;

        opterr = 0;
        int c;
        while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
                switch (c) {
                case OPT_CONTROLLER:
                        cfg.controller = optarg;
                        break;
                case OPT_NODE:
                        cfg.node = optarg;
                        break;
                case OPT_STATE_DIR:
                        cfg.state_dir = optarg;
                        break;
                case OPT_TOPOLOGY:
                        cfg.topology = optarg;
                        break;
                case OPT_DEV_ROOT:
                        cfg.dev_root = optarg;
                        break;
                case OPT_SYS_ROOT:
                        cfg.sys_root = optarg;
                        break;
                case OPT_LISTEN:
                        cfg.listen = optarg;
                        break;
                case OPT_LABELS:
                        json_decref(labels);
                        labels = parse_labels(optarg);
                        break;
                case OPT_HEALTH_CMD:
                        cfg.health_cmd = optarg;
                        break;
                case OPT_HEALTH_INTERVAL:
                        cfg.health_interval_ms = parse_ms("health-interval-ms", optarg, 100);
                        break;
                case OPT_PROFILE_DIR:
                        cfg.profile_dir = optarg;
                        break;
                case OPT_KILL_GRACE:
                        cfg.kill_grace_ms = parse_ms("kill-grace-ms", optarg, 0);
                        break;
                case OPT_LOG_LEVEL:
                        level = log_level_from_string(optarg);
                        if (level == _LOG_LEVEL_INVALID)
                                die_usage("--log-level must be error, warning, info or debug");
                        break;
                case OPT_HELP:
                        fputs(usage, stdout);
                        return 0;
                case ':':
                        die_usage("%s needs a value", argv[optind - 1]);
                default:
                        die_usage("unknown option %s", argv[optind - 1]);
                }
        }
        if (optind < argc)
                die_usage("unexpected argument \"%s\"", argv[optind]);
        if (!cfg.controller || !*cfg.controller)
                die_usage("--controller is required");
        if (!cfg.node)
                die_usage("--node is required");
        if (!node_name_valid(cfg.node))
                die_usage("--node may only contain letters, digits, '-', '_' and '.'");
        if (!cfg.state_dir || !*cfg.state_dir)
                die_usage("--state-dir is required");
        cfg.labels = labels ? labels : json_object();

        log_setup("axagent", level);

        /*
         * Before any thread exists (libmicrohttpd, curl's resolver), so that SIGTERM
         * and SIGINT reach only the agent's signalfd.
         */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                log_error("Cannot initialise libcurl");
                return 1;
        }

        Agent *agent;
        int r = agent_new(&cfg, &agent);
        if (r >= 0) {
                r = agent_run(agent);
                agent_free(agent);
        }
        curl_global_cleanup();
        json_decref(cfg.labels);
        return r < 0 ? 1 : 0;
}
