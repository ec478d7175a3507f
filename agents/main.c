/* SPDX-License-Identifier: MIT */
/*
 * axagent: the per-node agent of axctl. Reads its settings (configuration file, then
 * flags, which win), prepares the process (signals, libcurl) and hands over to the
 * agent loop in agent.c.
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
#include <unistd.h>

#include "agent.h"
#include "config.h"
#include "log.h"
#include "logserver.h"
#include "token.h"
#include "url.h"
#include "util.h"

#define DEFAULT_CONFIG "/etc/axctl/axagent.conf"
/* Longest duration accepted, in ms: keeps every timer within the loop's int ms. */
#define DAY_MS (24LL * 3600 * 1000)

static const char usage[] =
        "Usage: axagent --controller URL --state-dir DIR [options]\n"
        "\n"
        "Runs the ranks the axctl controller assigns to this node and reports on them.\n"
        "\n"
        "  --config PATH               configuration file (default " DEFAULT_CONFIG ",\n"
        "                              read only if it exists); flags win over it\n"
        "  --controller URL[,URL...]   controller base URL, e.g. http://10.0.0.1:8470;\n"
        "                              several for controllers that fail over: the agent\n"
        "                              syncs with the one that leads\n"
        "  --node NAME                 this node's name (letters, digits, '-', '_', '.');\n"
        "                              default: the host name\n"
        "  --state-dir DIR             rank state and logs; survives agent restarts\n"
        "  --topology FILE             hwloc XML to use instead of probing the machine\n"
        "  --dev-root DIR              prefix for /dev paths (tests)\n"
        "  --sys-root DIR              prefix for /sys paths (tests)\n"
        "  --listen HOST:PORT          log server address (default 127.0.0.1:0)\n"
        "  --labels K=V,K=V            node labels for scheduling constraints\n"
        "  --health-cmd CMD            shell command; non-zero exit marks the node unhealthy\n"
        "  --health-interval-ms MS     how often to check health (default 10000)\n"
        "  --profile-dir DIR           launch profiles <kind>.env per accelerator kind\n"
        "  --kill-grace-ms MS          SIGTERM to SIGKILL delay when stopping ranks\n"
        "                              (default 3000)\n"
        "  --cgroup NAME|BOOL          the agent's cgroup, made below its own, that holds\n"
        "                              a cgroup per rank (default, or yes: axagent-NODE);\n"
        "                              no: none, rank supervisors alone stop what ranks\n"
        "                              start\n"
        "  --log-max-mb MB             size of one rank log file before it is rotated\n"
        "                              (default 100)\n"
        "  --log-keep N                rotated files kept per rank log, 0 to 100\n"
        "                              (default 2); older output is deleted\n"
        "  --log-level LEVEL           error, warning, info (default) or debug\n"
        "  -h, --help                  show this text\n"
        "\n"
        "Security (see docs/SECURITY.md):\n"
        "  --token-file PATH           bearer token for the controller (role agent, bound\n"
        "                              to this node); must be private to its owner\n"
        "                              (chmod 600); read once at start\n"
        "  --ca-file PATH              CA certificates to verify an https controller with\n"
        "  --allow-users LIST          accounts ranks may run as when the agent is root:\n"
        "                              comma-separated names, or '*' for any but root\n"
        "                              (default: regular accounts, uid >= 1000)\n"
        "  --allow-root[=BOOL]         let ranks run as root (default: refused)\n"
        "  --default-user NAME         account for jobs whose user is not a local account\n"
        "                              or that name no user (default: refuse them)\n"
        "  --strict-user[=BOOL]        an agent that is not root refuses jobs of any user\n"
        "                              but its own (default: runs them as itself)\n"
        "A rank refused by this policy exits with code 126 and says why in its log.\n"
        "\n"
        "Every option but --config and --help is also a key of the configuration file,\n"
        "written with '_' for '-' (state_dir = /var/lib/axagent). A BOOL is true or false,\n"
        "yes or no, on or off, 1 or 0, in any case; a bare flag means true. See axagent(8).\n";

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
        OPT_CGROUP,
        OPT_LOG_MAX_MB,
        OPT_LOG_KEEP,
        OPT_LOG_LEVEL,
        OPT_TOKEN_FILE,
        OPT_CA_FILE,
        OPT_ALLOW_USERS,
        OPT_ALLOW_ROOT,
        OPT_DEFAULT_USER,
        OPT_STRICT_USER,
        OPT_CONFIG,
        OPT_HELP,
};

static const struct option options[] = {
        {"controller", required_argument, NULL, OPT_CONTROLLER},
        {"node", required_argument, NULL, OPT_NODE},
        {"state-dir", required_argument, NULL, OPT_STATE_DIR},
        {"topology", required_argument, NULL, OPT_TOPOLOGY},
        {"dev-root", required_argument, NULL, OPT_DEV_ROOT},
        {"sys-root", required_argument, NULL, OPT_SYS_ROOT},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"labels", required_argument, NULL, OPT_LABELS},
        {"health-cmd", required_argument, NULL, OPT_HEALTH_CMD},
        {"health-interval-ms", required_argument, NULL, OPT_HEALTH_INTERVAL},
        {"profile-dir", required_argument, NULL, OPT_PROFILE_DIR},
        {"kill-grace-ms", required_argument, NULL, OPT_KILL_GRACE},
        {"cgroup", required_argument, NULL, OPT_CGROUP},
        {"log-max-mb", required_argument, NULL, OPT_LOG_MAX_MB},
        {"log-keep", required_argument, NULL, OPT_LOG_KEEP},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"ca-file", required_argument, NULL, OPT_CA_FILE},
        {"allow-users", required_argument, NULL, OPT_ALLOW_USERS},
        /* Optional values so that a configuration file can say allow_root = yes. */
        {"allow-root", optional_argument, NULL, OPT_ALLOW_ROOT},
        {"default-user", required_argument, NULL, OPT_DEFAULT_USER},
        {"strict-user", optional_argument, NULL, OPT_STRICT_USER},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"help", no_argument, NULL, OPT_HELP},
        {},
};

/* Everything the configuration file and the flags set, in that order; strings owned. */
typedef struct Settings {
        char *controller, *node, *state_dir, *topology, *dev_root, *sys_root, *listen;
        char *health_cmd, *profile_dir;
        char *token_file, *ca_file;
        char *cgroup; /* NULL: the default name; "no": none */
        char *controller_error; /* why --controller was refused, for the message */
        AgentUserPolicy users;
        json_t *labels;
        int64_t health_interval_ms;
        int64_t kill_grace_ms;
        int64_t log_max_mb, log_keep;
        LogLevel level;
} Settings;

static void settings_done(Settings *s) {
        char **strings[] = {&s->controller,      &s->node,       &s->state_dir, &s->topology,
                            &s->dev_root,        &s->sys_root,   &s->listen,    &s->health_cmd,
                            &s->profile_dir,     &s->token_file, &s->ca_file,   &s->cgroup,
                            &s->controller_error};
        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                free(*strings[i]);
        agent_user_policy_done(&s->users);
        json_decref(s->labels);
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

/* Parses "k=v,k=v" into a JSON object of strings; NULL on a malformed list. */
static json_t *labels_parse(const char *s) {
        json_t *labels = json_object();
        _cleanup_free_ char *copy = xstrdup(s);
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(item, '=');
                if (!eq || eq == item) {
                        json_decref(labels);
                        return NULL;
                }
                *eq = '\0';
                json_object_set_new(labels, item, json_string(eq + 1));
        }
        return labels;
}

static void string_set(char **field, const char *value) {
        free(*field);
        *field = xstrdup(value);
}

/* Sets one option from its text, for a flag and a configuration key alike (config.h). */
static int settings_set(void *userdata, int opt, const char *value, const char **ret_reason) {
        Settings *s = userdata;
        switch (opt) {
        case OPT_CONTROLLER: {
                /* Checked now, so a typo stops the agent with one line instead of
                 * leaving it to retry a URL that can never work. */
                UrlList list;
                _cleanup_free_ char *why = NULL;
                if (url_list_parse(value, &list, &why) < 0) {
                        free(s->controller_error);
                        s->controller_error = xasprintf(
                                "needs URLs like http://HOST:PORT, separated by commas (%s)", why);
                        *ret_reason = s->controller_error;
                        return -EINVAL;
                }
                url_list_done(&list);
                string_set(&s->controller, value);
                break;
        }
        case OPT_NODE:
                if (!node_name_valid(value)) {
                        *ret_reason = "may only contain letters, digits, '-', '_' and '.'";
                        return -EINVAL;
                }
                string_set(&s->node, value);
                break;
        case OPT_STATE_DIR:
                string_set(&s->state_dir, value);
                break;
        case OPT_TOPOLOGY:
                string_set(&s->topology, value);
                break;
        case OPT_DEV_ROOT:
                string_set(&s->dev_root, value);
                break;
        case OPT_SYS_ROOT:
                string_set(&s->sys_root, value);
                break;
        case OPT_LISTEN: {
                _cleanup_free_ char *host = NULL;
                uint16_t port;
                if (agent_listen_parse(value, &host, &port) < 0) {
                        *ret_reason = "needs HOST:PORT";
                        return -EINVAL;
                }
                string_set(&s->listen, value);
                break;
        }
        case OPT_LABELS: {
                json_t *labels = labels_parse(value);
                if (!labels) {
                        *ret_reason = "needs KEY=VALUE pairs separated by commas";
                        return -EINVAL;
                }
                json_decref(s->labels);
                s->labels = labels;
                break;
        }
        case OPT_HEALTH_CMD:
                string_set(&s->health_cmd, value);
                break;
        case OPT_HEALTH_INTERVAL:
                if (config_parse_int(value, 100, DAY_MS, &s->health_interval_ms) < 0) {
                        *ret_reason = "needs a number of milliseconds of at least 100";
                        return -EINVAL;
                }
                break;
        case OPT_PROFILE_DIR:
                string_set(&s->profile_dir, value);
                break;
        case OPT_KILL_GRACE:
                if (config_parse_int(value, 0, DAY_MS, &s->kill_grace_ms) < 0) {
                        *ret_reason = "needs a number of milliseconds";
                        return -EINVAL;
                }
                break;
        case OPT_CGROUP: {
                /* A directory name, and one that cannot be taken for a rank's. */
                bool on;
                const char *unused;
                if (config_parse_bool(value, &on, &unused) == 0) {
                        free(s->cgroup);
                        s->cgroup = on ? NULL : xstrdup("no");
                        break;
                }
                if (!node_name_valid(value) || value[0] == '.' || strncmp(value, "job", 3) == 0) {
                        *ret_reason = "needs no, or a name of letters, digits, '-', '_' and '.' "
                                      "that starts with neither '.' nor \"job\"";
                        return -EINVAL;
                }
                string_set(&s->cgroup, value);
                break;
        }
        case OPT_LOG_MAX_MB:
                /* A mebibyte at least, so a note or a rank's line fits in a file. */
                if (config_parse_int(value, 1, 1024 * 1024, &s->log_max_mb) < 0) {
                        *ret_reason = "needs a size in MiB, 1 to 1048576";
                        return -EINVAL;
                }
                break;
        case OPT_LOG_KEEP:
                if (config_parse_int(value, 0, LOGPUMP_MAX_KEEP, &s->log_keep) < 0) {
                        *ret_reason = "needs a number of files, 0 to 100";
                        return -EINVAL;
                }
                break;
        case OPT_TOKEN_FILE:
                string_set(&s->token_file, value);
                break;
        case OPT_CA_FILE:
                string_set(&s->ca_file, value);
                break;
        case OPT_ALLOW_USERS:
                if (agent_user_policy_set_allow(&s->users, value) < 0) {
                        *ret_reason = "needs '*' or account names separated by commas";
                        return -EINVAL;
                }
                break;
        case OPT_ALLOW_ROOT:
                return config_parse_bool(value, &s->users.allow_root, ret_reason);
        case OPT_DEFAULT_USER:
                if (!agent_user_name_valid(value)) {
                        *ret_reason = "needs an account name";
                        return -EINVAL;
                }
                string_set(&s->users.default_user, value);
                break;
        case OPT_STRICT_USER:
                return config_parse_bool(value, &s->users.strict, ret_reason);
        case OPT_LOG_LEVEL:
                s->level = log_level_from_string(value);
                if (s->level == _LOG_LEVEL_INVALID) {
                        *ret_reason = "must be error, warning, info or debug";
                        return -EINVAL;
                }
                break;
        default:
                *ret_reason = "is not an option";
                return -EINVAL;
        }
        return 0;
}

/* Reports a usage or configuration error in one line and exits with 2. */
_Noreturn _printf_(1, 2) static void die_usage(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("axagent: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputs(" (see --help)\n", stderr);
        va_end(ap);
        exit(2);
}

/*
 * Reads the configuration file and the command line into s, or exits: 0 after --help,
 * 2 on a usage or configuration error (the unit's RestartPreventExitStatus=2). Flags
 * are applied after the file that --config names, so they are kept until then.
 */
static void settings_parse(Settings *s, int argc, char **argv, const char **ret_config) {
        _cleanup_free_ char *error = NULL;
        int r = config_parse_args(argc, argv, options, DEFAULT_CONFIG, settings_set, s, ret_config,
                                  &error);
        if (r == CONFIG_HELP) {
                fputs(usage, stdout);
                exit(0);
        }
        if (r < 0) {
                fprintf(stderr, "axagent: %s\n", error);
                exit(2);
        }
        if (!s->controller || !*s->controller)
                die_usage("--controller is required");
        if (!s->state_dir || !*s->state_dir)
                die_usage("--state-dir is required");
        if (!s->node) {
                char host[256] = "";
                gethostname(host, sizeof(host) - 1);
                /* The short name: a node is named once in the cluster, not per domain. */
                host[strcspn(host, ".")] = '\0';
                if (!node_name_valid(host))
                        die_usage("--node is required: the host name \"%s\" is not a valid "
                                  "node name",
                                  host);
                s->node = xstrdup(host);
        }
        if (!s->labels)
                s->labels = json_object();
        if (!s->cgroup)
                s->cgroup = xasprintf("axagent-%s", s->node);
}

int main(int argc, char **argv) {
        Settings s = {
                .listen = xstrdup("127.0.0.1:0"),
                .health_interval_ms = 10000,
                .kill_grace_ms = 3000,
                .log_max_mb = LOGPUMP_DEFAULT_MAX_MB,
                .log_keep = LOGPUMP_DEFAULT_KEEP,
                .level = LOG_LEVEL_INFO,
        };
        const char *config_used = NULL;
        settings_parse(&s, argc, argv, &config_used);
        log_setup("axagent", s.level);
        if (config_used)
                log_info("Configuration read from %s", config_used);

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
                settings_done(&s);
                return 1;
        }

        /*
         * Read once, now: the agent may drop access to the file later, and a token that
         * changed under a running agent would be a surprise. A file others could read is
         * a configuration error (exit 2), like any other.
         */
        char *token = NULL;
        if (s.token_file) {
                _cleanup_free_ char *error = NULL;
                if (token_file_read(s.token_file, &token, &error) < 0) {
                        fprintf(stderr, "axagent: --token-file: %s\n", error);
                        curl_global_cleanup();
                        settings_done(&s);
                        return 2;
                }
                log_info("Authenticating to the controller with the token in %s", s.token_file);
        }
        if (s.ca_file && access(s.ca_file, R_OK) < 0) {
                fprintf(stderr, "axagent: --ca-file: cannot read %s: %s\n", s.ca_file,
                        strerror(errno));
                token_free_secret(token);
                curl_global_cleanup();
                settings_done(&s);
                return 2;
        }
        if (geteuid() == 0)
                log_info("Ranks run as %s%s%s; root %s",
                         s.users.allow_any ? "any account"
                         : s.users.allow   ? "the listed accounts"
                                           : "regular accounts (uid >= 1000)",
                         s.users.default_user ? ", unknown users as " : "",
                         s.users.default_user ? s.users.default_user : "",
                         s.users.allow_root ? "allowed" : "refused");
        else
                log_info("Not running as root: ranks run as this agent's user (uid %u)%s",
                         (unsigned) geteuid(),
                         s.users.strict ? ", jobs of other users are refused" : "");

        AgentConfig cfg = {
                .controller = s.controller,
                .node = s.node,
                .state_dir = s.state_dir,
                .topology = s.topology,
                .dev_root = s.dev_root ? s.dev_root : "",
                .sys_root = s.sys_root ? s.sys_root : "",
                .listen = s.listen,
                .labels = s.labels,
                .health_cmd = s.health_cmd,
                .health_interval_ms = s.health_interval_ms,
                .profile_dir = s.profile_dir,
                .kill_grace_ms = s.kill_grace_ms,
                .log_limits = {.max_bytes = s.log_max_mb * 1024 * 1024, .keep = (int) s.log_keep},
                .token = token,
                .ca_file = s.ca_file,
                .users = &s.users,
                .cgroup = strcmp(s.cgroup, "no") == 0 ? NULL : s.cgroup,
        };
        Agent *agent;
        int r = agent_new(&cfg, &agent);
        if (r >= 0) {
                r = agent_run(agent);
                agent_free(agent);
        }
        token_free_secret(token);
        curl_global_cleanup();
        settings_done(&s);
        return r < 0 ? 1 : 0;
}
