/* SPDX-License-Identifier: MIT */
/*
 * axctld: the controller. One thread owns all state (DESIGN.md §2a): an epoll loop
 * over libmicrohttpd's epoll fd, a signalfd and timeouts computed from the
 * controller's deadlines. Each turn ends with one group commit, after which the
 * requests that wrote are answered.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "api.h"
#include "config.h"
#include "controller.h"
#include "early-leases.h"
#include "leadership.h"
#include "log.h"
#include "tokens.h"
#include "util.h"

/* A restarted controller meets every agent at once; the kernel caps this at
 * net.core.somaxconn (4096 by default). */
#define LISTEN_BACKLOG 65535

#define DEFAULT_CONFIG "/etc/axctl/axctld.conf"

static void usage(FILE *f) {
        fputs("Usage: axctld [OPTIONS]\n"
              "\n"
              "The axctl controller: queues jobs, places their ranks on nodes, watches them\n"
              "and restarts failed gangs from their last checkpoint.\n"
              "\n"
              "  --config PATH           configuration file (default " DEFAULT_CONFIG ",\n"
              "                          read only if it exists); flags win over it\n"
              "  --listen HOST:PORT      address to serve on (default 127.0.0.1:8470;\n"
              "                          port 0 picks a free port and prints it;\n"
              "                          ignored when systemd passes a socket)\n"
              "  --db PATH|URL           state database: a SQLite file (default ./axctld.db)\n"
              "                          or a postgresql:// URL (PostgreSQL)\n"
              "  --log-key-file PATH     the key that signs log links (default: the\n"
              "                          database's path with .logkey); controllers that\n"
              "                          fail over to each other must share it\n"
              "  --leader-elect[=BOOL]   share the database with standby controllers: one\n"
              "                          leads, the others redirect to it and take over\n"
              "                          when it stops (default off)\n"
              "  --leader-lease-ms N     how long a leader's lease lasts (default 2000)\n"
              "  --instance-id ID        this controller's name in the election (default\n"
              "                          HOSTNAME:PORT)\n"
              "  --advertise-url URL     where followers send clients to reach this one\n"
              "                          when it leads (default from --listen)\n"
              "  --lease-ms N            agent lease (default 5000)\n"
              "  --grace-ms N            extra wait before a silent node is lost (default 1000)\n"
              "  --sync-period-ms N      agent sync period (default 1000)\n"
              "  --quarantine-after N    blames that quarantine a node (default 3, 0 = never)\n"
              "  --quarantine-window-s N window for those blames (default 3600)\n"
              "  --auth[=BOOL]           require bearer tokens (see axctld token --help)\n"
              "  --tls-cert PATH         serve HTTPS with this PEM certificate (chain)...\n"
              "  --tls-key PATH          ...and this PEM private key\n"
              "  --log-streams-per-user N  rank logs one user (one address without --auth)\n"
              "                          may stream at once per node (default 8)\n"
              "  --quota-file PATH       project quotas for the scheduler (default: none,\n"
              "                          equal shares); re-read on SIGHUP\n"
              "  --failure-rules PATH    the operator's failure rules, a JSON list\n"
              "                          (docs/FAILURE-RULES.md); re-read on SIGHUP\n"
              "  --start-timeout-s N     a placed rank not running after N s blames its\n"
              "                          node and the job moves (default 120, 0 = never)\n"
              "  --job-retention-s N     a job over for N s leaves memory; it stays in the\n"
              "                          database and the API (default 300)\n"
              "  --max-jobs-per-user N   jobs not ended one user may have; a submit beyond\n"
              "                          gets 429 (default 10000, 0 = no limit)\n"
              "  --log-level LEVEL       error, warning, info or debug (default info)\n"
              "  -h, --help              show this help\n"
              "\n"
              "Every option but --config and --help is also a key of the configuration file,\n"
              "written with '_' for '-' (lease_ms = 5000). A BOOL is true or false, yes or\n"
              "no, on or off, 1 or 0, in any case. See axctld(8).\n",
              f);
}

enum {
        OPT_LISTEN = 256,
        OPT_DB,
        OPT_LEASE_MS,
        OPT_GRACE_MS,
        OPT_SYNC_PERIOD_MS,
        OPT_QUARANTINE_AFTER,
        OPT_QUARANTINE_WINDOW_S,
        OPT_LOG_LEVEL,
        OPT_QUOTA_FILE,
        OPT_FAILURE_RULES,
        OPT_START_TIMEOUT_S,
        OPT_JOB_RETENTION_S,
        OPT_MAX_JOBS_PER_USER,
        OPT_AUTH,
        OPT_TLS_CERT,
        OPT_TLS_KEY,
        OPT_LOG_STREAMS_PER_USER,
        OPT_CONFIG,
        OPT_LOG_KEY_FILE,
        OPT_LEADER_ELECT,
        OPT_LEADER_LEASE_MS,
        OPT_INSTANCE_ID,
        OPT_ADVERTISE_URL,
};

static const struct option options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"db", required_argument, NULL, OPT_DB},
        {"lease-ms", required_argument, NULL, OPT_LEASE_MS},
        {"grace-ms", required_argument, NULL, OPT_GRACE_MS},
        {"sync-period-ms", required_argument, NULL, OPT_SYNC_PERIOD_MS},
        {"quarantine-after", required_argument, NULL, OPT_QUARANTINE_AFTER},
        {"quarantine-window-s", required_argument, NULL, OPT_QUARANTINE_WINDOW_S},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"quota-file", required_argument, NULL, OPT_QUOTA_FILE},
        {"failure-rules", required_argument, NULL, OPT_FAILURE_RULES},
        {"start-timeout-s", required_argument, NULL, OPT_START_TIMEOUT_S},
        {"job-retention-s", required_argument, NULL, OPT_JOB_RETENTION_S},
        {"max-jobs-per-user", required_argument, NULL, OPT_MAX_JOBS_PER_USER},
        {"auth", optional_argument, NULL, OPT_AUTH},
        {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
        {"tls-key", required_argument, NULL, OPT_TLS_KEY},
        {"log-streams-per-user", required_argument, NULL, OPT_LOG_STREAMS_PER_USER},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"log-key-file", required_argument, NULL, OPT_LOG_KEY_FILE},
        {"leader-elect", optional_argument, NULL, OPT_LEADER_ELECT},
        {"leader-lease-ms", required_argument, NULL, OPT_LEADER_LEASE_MS},
        {"instance-id", required_argument, NULL, OPT_INSTANCE_ID},
        {"advertise-url", required_argument, NULL, OPT_ADVERTISE_URL},
        {"help", no_argument, NULL, 'h'},
        {},
};

/* Everything the configuration file and the flags set, in that order. */
typedef struct Settings {
        char *listen;
        char *db_path;
        char *quota_path;
        char *failure_rules_path;
        bool auth;
        char *tls_cert, *tls_key;
        int log_streams_per_user;
        char *log_key_file;
        bool leader_elect;
        int64_t leader_lease_ms;
        char *instance_id, *advertise_url;
        CtlConfig ctl;
        LogLevel level;
} Settings;

/* Frees what the settings hold, on every way out of main. */
static void settings_clear(Settings *s) {
        free(s->listen);
        free(s->db_path);
        free(s->quota_path);
        free(s->failure_rules_path);
        free(s->tls_cert);
        free(s->tls_key);
        free(s->log_key_file);
        free(s->instance_id);
        free(s->advertise_url);
}

/*
 * Sets one option from its text, for a flag and a configuration key alike (see
 * config.h). The limits keep the timing sane: a lease below 100 ms cannot be kept over
 * a real network, and every value must fit the loop's int milliseconds.
 */
static int settings_set(void *userdata, int opt, const char *value, const char **ret_reason) {
        Settings *s = userdata;
        const int64_t day_ms = 24LL * 3600 * 1000;
        int64_t v;
        switch (opt) {
        case OPT_LISTEN:
                if (!strrchr(value, ':')) {
                        *ret_reason = "needs HOST:PORT";
                        return -EINVAL;
                }
                free(s->listen);
                s->listen = xstrdup(value);
                return 0;
        case OPT_DB:
                if (!*value) {
                        *ret_reason = "needs a file name";
                        return -EINVAL;
                }
                free(s->db_path);
                s->db_path = xstrdup(value);
                return 0;
        case OPT_LEASE_MS:
                if (config_parse_int(value, 100, day_ms, &v) < 0) {
                        *ret_reason = "needs milliseconds, at least 100";
                        return -EINVAL;
                }
                s->ctl.lease_ms = v;
                return 0;
        case OPT_GRACE_MS:
                if (config_parse_int(value, 0, day_ms, &v) < 0) {
                        *ret_reason = "needs milliseconds, at least 0";
                        return -EINVAL;
                }
                s->ctl.grace_ms = v;
                return 0;
        case OPT_SYNC_PERIOD_MS:
                if (config_parse_int(value, 10, day_ms, &v) < 0) {
                        *ret_reason = "needs milliseconds, at least 10";
                        return -EINVAL;
                }
                s->ctl.sync_period_ms = v;
                return 0;
        case OPT_QUARANTINE_AFTER:
                if (config_parse_int(value, 0, 1000000, &v) < 0) {
                        *ret_reason = "needs a count, at least 0 (0 = never)";
                        return -EINVAL;
                }
                s->ctl.quarantine_after = (int) v;
                return 0;
        case OPT_QUARANTINE_WINDOW_S:
                if (config_parse_int(value, 1, 365LL * 24 * 3600, &v) < 0) {
                        *ret_reason = "needs seconds, at least 1";
                        return -EINVAL;
                }
                s->ctl.quarantine_window_ms = v * 1000;
                return 0;
        case OPT_AUTH:
                /* "--auth" alone, or "auth = true|false" in the file. */
                return config_parse_bool(value, &s->auth, ret_reason);
        case OPT_TLS_CERT:
        case OPT_TLS_KEY: {
                char **dst = opt == OPT_TLS_CERT ? &s->tls_cert : &s->tls_key;
                free(*dst);
                *dst = *value ? xstrdup(value) : NULL;
                return 0;
        }
        case OPT_LOG_STREAMS_PER_USER:
                if (config_parse_int(value, 1, 10000, &v) < 0) {
                        *ret_reason = "needs a count, 1 to 10000";
                        return -EINVAL;
                }
                s->log_streams_per_user = (int) v;
                return 0;
        case OPT_LOG_KEY_FILE:
        case OPT_INSTANCE_ID:
        case OPT_ADVERTISE_URL: {
                char **dst = opt == OPT_LOG_KEY_FILE  ? &s->log_key_file
                             : opt == OPT_INSTANCE_ID ? &s->instance_id
                                                      : &s->advertise_url;
                if (opt == OPT_INSTANCE_ID &&
                    strlen(value) >= sizeof(((StoreLeader *) 0)->holder)) {
                        *ret_reason = "is too long";
                        return -EINVAL;
                }
                if (opt == OPT_ADVERTISE_URL &&
                    ((strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0) ||
                     strlen(value) >= sizeof(((StoreLeader *) 0)->url) ||
                     strpbrk(value, " \t\r\n?#"))) {
                        *ret_reason = "needs an http:// or https:// URL without a query";
                        return -EINVAL;
                }
                free(*dst);
                *dst = *value ? xstrdup(value) : NULL;
                return 0;
        }
        case OPT_LEADER_ELECT:
                return config_parse_bool(value, &s->leader_elect, ret_reason);
        case OPT_LEADER_LEASE_MS:
                if (config_parse_int(value, 100, 600 * 1000, &v) < 0) {
                        *ret_reason = "needs milliseconds, 100 to 600000";
                        return -EINVAL;
                }
                s->leader_lease_ms = v;
                return 0;
        case OPT_QUOTA_FILE:
                free(s->quota_path);
                s->quota_path = *value ? xstrdup(value) : NULL;
                return 0;
        case OPT_FAILURE_RULES:
                free(s->failure_rules_path);
                s->failure_rules_path = *value ? xstrdup(value) : NULL;
                return 0;
        case OPT_START_TIMEOUT_S:
                if (config_parse_int(value, 0, 24 * 3600, &v) < 0) {
                        *ret_reason = "needs seconds, 0 to 86400";
                        return -EINVAL;
                }
                s->ctl.start_timeout_ms = v * 1000;
                return 0;
        case OPT_JOB_RETENTION_S:
                if (config_parse_int(value, 0, 30 * 24 * 3600, &v) < 0) {
                        *ret_reason = "needs seconds, 0 to 2592000";
                        return -EINVAL;
                }
                s->ctl.job_retention_ms = v * 1000;
                return 0;
        case OPT_MAX_JOBS_PER_USER:
                if (config_parse_int(value, 0, 100 * 1000 * 1000, &v) < 0) {
                        *ret_reason = "needs a count, 0 to 100000000";
                        return -EINVAL;
                }
                s->ctl.max_jobs_per_user = v;
                return 0;
        case OPT_LOG_LEVEL:
                if (log_level_from_string(value) == _LOG_LEVEL_INVALID) {
                        *ret_reason = "needs error, warning, info or debug";
                        return -EINVAL;
                }
                s->level = log_level_from_string(value);
                return 0;
        default:
                *ret_reason = "not a setting";
                return -EINVAL;
        }
}

/*
 * Reads the command line and the configuration file into s, or exits: 0 after --help,
 * 2 on a usage or configuration error (the unit's RestartPreventExitStatus=2 then stops
 * systemd from restarting a controller that cannot start). *ret_config gets the file
 * that was read, or NULL.
 */
static void settings_parse(Settings *s, int argc, char **argv, const char **ret_config) {
        _cleanup_free_ char *error = NULL;
        int r = config_parse_args(argc, argv, options, DEFAULT_CONFIG, settings_set, s, ret_config,
                                  &error);
        if (r == CONFIG_HELP) {
                usage(stdout);
                exit(0);
        }
        if (r < 0) {
                fprintf(stderr, "axctld: %s\n", error);
                exit(2);
        }
        if (s->ctl.sync_period_ms >= s->ctl.lease_ms) {
                fprintf(stderr,
                        "axctld: the sync period (%lld ms) must be below the lease "
                        "(%lld ms)\n",
                        (long long) s->ctl.sync_period_ms, (long long) s->ctl.lease_ms);
                exit(2);
        }
        /* A failover must end before agents fence their ranks: they wait out their own
         * lease without an answer, and a follower leads only once the leader's ran out. */
        if (s->leader_elect && s->leader_lease_ms >= s->ctl.lease_ms) {
                fprintf(stderr,
                        "axctld: the leader's lease (%lld ms) must be below the agents' lease "
                        "(%lld ms), or every failover fences every rank\n",
                        (long long) s->leader_lease_ms, (long long) s->ctl.lease_ms);
                exit(2);
        }
        s->ctl.db_path = s->db_path;
}

/* How often the STATUS= line `systemctl status axctld` shows is brought up to date. */
#define STATUS_PERIOD_MS 1000
/* After a failed turn: how long to keep answering 503 (and /healthz why) before exiting. */
#define FAILED_LINGER_MS 2000
/* After SIGTERM: the longest wait for requests in progress to be answered (a client that
 * sends its body slowly is cut off then). */
#define SHUTDOWN_DRAIN_MS 2000

/*
 * Sends prefix (READY=1, WATCHDOG=1 or nothing) with the counts as STATUS=. Without a
 * prefix the message is sent only when the text changed since *last.
 */
static void notify_status(Controller *ctl, const char *where, const char *prefix, char *last,
                          size_t last_size) {
        int jobs, nodes;
        ctl_counts(ctl, &jobs, &nodes);
        char text[160];
        snprintf(text, sizeof(text), "%d active job%s, %d ready node%s; serving on %s", jobs,
                 jobs == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s", where);
        if (!prefix && strcmp(text, last) == 0)
                return;
        snprintf(last, last_size, "%s", text);
        sd_notifyf(0, "%sSTATUS=%s", prefix ? prefix : "", text);
}

/* Binds host:port and listens; returns the fd or -errno. */
/*
 * Every agent holds a connection, two while it reports news over a held long-poll: the
 * descriptor limit, not a constant, bounds the fleet. The soft limit goes up to the
 * hard one (the unit sets LimitNOFILE).
 */
static void raise_fd_limit(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning("cannot raise the descriptor limit: %s", strerror(errno));
}

static int listen_on(const char *address, int *ret_port) {
        _cleanup_free_ char *copy = xstrdup(address);
        char *colon = strrchr(copy, ':');
        if (!colon)
                return -EINVAL;
        *colon = '\0';
        const char *host = copy, *port = colon + 1;
        if (host[0] == '[') {
                host++;
                char *end = strchr(copy, ']');
                if (end)
                        *end = '\0';
        }
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *res;
        if (getaddrinfo(*host ? host : NULL, port, &hints, &res) != 0)
                return -EINVAL;
        int fd = -1, r = -EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        continue;
                int one = 1;
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0) {
                        r = 0;
                        break;
                }
                r = -errno;
                close(fd);
                fd = -1;
        }
        freeaddrinfo(res);
        if (fd < 0)
                return r;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        getsockname(fd, (struct sockaddr *) &ss, &len);
        *ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                   : ((struct sockaddr_in *) &ss)->sin_port);
        return fd;
}

/* SIGHUP: a bad edit keeps the quotas and failure rules that worked. */
static void reload_files(Controller *ctl) {
        char *error = NULL;
        if (ctl_quota_reload(ctl, &error) < 0)
                log_error("keeping the old quotas: %s", error);
        else
                log_info("quotas reloaded");
        free(error);
        error = NULL;
        if (ctl_failure_rules_reload(ctl, &error) < 0)
                log_error("keeping the old failure rules: %s", error);
        else if (ctl_config(ctl)->failure_rules_path)
                log_info("failure rules reloaded");
        free(error);
}

/* The one line on stdout: scripts and tests read the address from it. */
static void print_listening(const char *scheme, const char *host, int port) {
        printf("listening on %s://%s:%d\n", scheme, host, port);
        fflush(stdout);
}

static int read_tls(const Settings *settings, char **ret_cert, char **ret_key) {
        if (!!settings->tls_cert != !!settings->tls_key) {
                fprintf(stderr, "axctld: --tls-cert and --tls-key go together\n");
                return -EINVAL;
        }
        int r;
        if (settings->tls_cert && ((r = util_read_file(settings->tls_cert, ret_cert, NULL)) < 0 ||
                                   (r = util_read_file(settings->tls_key, ret_key, NULL)) < 0)) {
                fprintf(stderr, "axctld: cannot read the TLS certificate or key: %s\n",
                        strerror(-r));
                return r;
        }
        return 0;
}

typedef struct StateLoad {
        const CtlConfig *cfg;
        Store *store;
        Controller *ctl;
        int r;
        int done_fd; /* an eventfd, written when the load is over */
} StateLoad;

/* Below the HTTP server's priority, on a core they share: the agents' answers first. */
#define LOAD_NICE 10
/* A leader's lease is renewed for the load and its first turn this long at most (seconds
 * at 100,000 jobs): a load stuck for good hands the lead over. */
#define LOAD_RENEW_MAX_MS 60000

static void *state_load_run(void *p) {
        StateLoad *l = p;
        /* Only this thread's and the threads it starts (the spec parsers, and the
         * store's checkpointer should the load's writes start it): it ends with the load,
         * so nothing has to raise the priority again, which needs a privilege. A
         * checkpointer started here keeps it, which a thread in the background can. */
        (void) setpriority(PRIO_PROCESS, (id_t) gettid(), LOAD_NICE);
        l->r = ctl_new_on(l->cfg, l->store, &l->ctl);
        uint64_t one = 1;
        (void) !write(l->done_fd, &one, sizeof(one));
        return NULL;
}

/* The ends of a leader's lease for the answers given while the state loads
 * (early_leases_load). */
static int64_t renewed_lease_end(void *renewer) {
        return leadership_renewer_valid_until_ms(renewer);
}

static int64_t taken_lease_end(void *lead) {
        return ((const Leadership *) lead)->valid_until_ms;
}

/*
 * Loads the state on a thread of its own while this one serves HTTP (api/loading.c):
 * connections are accepted as they come rather than left to the kernel's backlog, and
 * agents' first syncs are answered from leases (early-leases.h), renewing their leases
 * before the load and the first turn (two seconds at 10,000 nodes) are over.
 */
static int load_state(const CtlConfig *cfg, Store *store, Api *api, EarlyLeases *leases,
                      Controller **ret) {
        StateLoad l = {.cfg = cfg, .store = store, .done_fd = eventfd(0, EFD_CLOEXEC)};
        pthread_t thread;
        if (l.done_fd < 0 || pthread_create(&thread, NULL, state_load_run, &l) != 0) {
                log_warning("cannot serve while the state loads: connections wait for it");
                if (l.done_fd >= 0)
                        close(l.done_fd);
                return ctl_new_on(cfg, store, ret);
        }
        api_serve_while_loading(api, leases, l.done_fd);
        pthread_join(thread, NULL);
        close(l.done_fd);
        *ret = l.ctl;
        return l.r;
}

/*
 * The listening socket: systemd's (socket activation, axctld.socket: clients that
 * connect while the controller restarts wait in its backlog instead of being refused;
 * only the first socket is served) or our own on listen_addr. Its fd, or -errno; the host
 * and port it serves on in *ret_host and *ret_port.
 */
static int open_listener(const char *listen_addr, char **ret_host, int *ret_port) {
        int n_fds = sd_listen_fds(1);
        bool activated =
                n_fds >= 1 && sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) > 0;
        if (n_fds > 1)
                log_warning("systemd passed %d sockets; serving only the first", n_fds);
        if (n_fds >= 1 && !activated)
                log_warning("the socket systemd passed is not a listening stream socket; "
                            "listening on %s instead",
                            listen_addr);
        int lfd;
        if (!activated) {
                if ((lfd = listen_on(listen_addr, ret_port)) < 0) {
                        log_error("cannot listen on %s: %s", listen_addr, strerror(-lfd));
                        return lfd;
                }
                *ret_host = xstrdup(listen_addr);
                *strrchr(*ret_host, ':') = '\0';
                return lfd;
        }
        lfd = SD_LISTEN_FDS_START;
        /* The loop must never block in accept(); systemd passes blocking sockets. */
        int fl = fcntl(lfd, F_GETFL);
        if (fl >= 0)
                (void) fcntl(lfd, F_SETFL, fl | O_NONBLOCK);
        (void) fcntl(lfd, F_SETFD, FD_CLOEXEC);
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char buf[INET6_ADDRSTRLEN] = "?";
        *ret_port = 0;
        if (getsockname(lfd, (struct sockaddr *) &ss, &len) == 0) {
                bool v6 = ss.ss_family == AF_INET6;
                inet_ntop(ss.ss_family,
                          v6 ? (void *) &((struct sockaddr_in6 *) &ss)->sin6_addr
                             : (void *) &((struct sockaddr_in *) &ss)->sin_addr,
                          buf, sizeof(buf));
                *ret_port = ntohs(v6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                     : ((struct sockaddr_in *) &ss)->sin_port);
        }
        *ret_host = xstrdup(buf);
        return lfd;
}

/* Whether host names every address (0.0.0.0, ::, nothing): no one can be sent there. */
static bool host_is_wildcard(const char *host) {
        return !*host || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
               strcmp(host, "[::]") == 0;
}

/* HOSTNAME:PORT: the same controller restarted takes its lead back at once. */
static char *default_instance_id(int port) {
        char name[256] = "localhost";
        (void) gethostname(name, sizeof(name) - 1);
        return xasprintf("%s:%d", name, port);
}

static char *default_advertise_url(const char *scheme, const char *host, int port) {
        char name[256] = "localhost";
        if (host_is_wildcard(host))
                (void) gethostname(name, sizeof(name) - 1);
        bool v6 = !host_is_wildcard(host) && strchr(host, ':') && host[0] != '[';
        return xasprintf("%s://%s%s%s:%d", scheme, v6 ? "[" : "",
                         host_is_wildcard(host) ? name : host, v6 ? "]" : "", port);
}

#define AXCTLD_MALLOC_KEEP_BYTES (64 << 20)

int main(int argc, char **argv) {
        if (argc > 1 && strcmp(argv[1], "token") == 0)
                return token_command(argc - 1, argv + 1);
        /* Before any thread: log streams fetch from agents with libcurl (api/logproxy.c). */
        curl_global_init(CURL_GLOBAL_DEFAULT);
        /* A scheduling pass allocates and frees a few MB per 10,000 nodes, many times a
         * second: with glibc's defaults that memory went back to the kernel after every
         * pass and was faulted in again (4 % of the controller's CPU at 10,000 nodes).
         * Kept, it is reused; memory above this stays free to the kernel as before. */
        mallopt(M_MMAP_THRESHOLD, AXCTLD_MALLOC_KEEP_BYTES / 2);
        mallopt(M_TRIM_THRESHOLD, AXCTLD_MALLOC_KEEP_BYTES);
        _cleanup_(settings_clear) Settings settings = {
                .listen = xstrdup("127.0.0.1:8470"),
                .db_path = xstrdup("axctld.db"),
                .ctl = {.lease_ms = 5000,
                        .grace_ms = 1000,
                        .sync_period_ms = 1000,
                        .quarantine_after = 3,
                        .quarantine_window_ms = 3600 * 1000,
                        .start_timeout_ms = 120 * 1000,
                        .job_retention_ms = 300 * 1000,
                        .max_jobs_per_user = 10000},
                .leader_lease_ms = 2000,
                .level = LOG_LEVEL_INFO,
        };
        const char *config_used = NULL;
        settings_parse(&settings, argc, argv, &config_used);
        CtlConfig cfg = settings.ctl;
        cfg.db_path = settings.db_path;
        cfg.quota_path = settings.quota_path;
        cfg.failure_rules_path = settings.failure_rules_path;
        log_setup("axctld", settings.level);
        if (config_used)
                log_info("configuration read from %s", config_used);

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

        /* Beside the database, not in it: a copy of the database (a backup, a file others
         * could read) must not let anyone sign log links. */
        char log_secret[TOKEN_HASH_HEX];
        _cleanup_free_ char *secret_error = NULL;
        /* A PostgreSQL database has no file to sit beside: the working directory then
         * (under systemd the state directory) holds it. */
        _cleanup_free_ char *key_file = settings.log_key_file ? xstrdup(settings.log_key_file)
                                        : store_target_is_url(cfg.db_path)
                                                ? xstrdup("axctld.logkey")
                                                : xasprintf("%s.logkey", cfg.db_path);
        if (ctl_log_secret_load(key_file, log_secret, &secret_error) < 0) {
                fprintf(stderr, "axctld: %s\n", secret_error);
                return 2;
        }
        cfg.log_secret = log_secret;
        _cleanup_free_ char *cert_pem = NULL, *key_pem = NULL;
        if (read_tls(&settings, &cert_pem, &key_pem) < 0)
                return 2;

        _cleanup_free_ char *db_name = store_target_display(cfg.db_path);
        Store *store = NULL;
        int r = store_open(cfg.db_path, &store);
        if (r < 0) {
                const char *why = store_last_error(NULL);
                log_error("cannot open state database %s: %s", db_name, *why ? why : strerror(-r));
                return 1;
        }
        int port = 0, lfd;
        _cleanup_free_ char *host = NULL;
        if ((lfd = open_listener(settings.listen, &host, &port)) < 0) {
                store_close(store);
                return 1;
        }
        const char *scheme = cert_pem ? "https" : "http";
        _cleanup_free_ char *holder =
                settings.instance_id ? xstrdup(settings.instance_id) : default_instance_id(port);
        _cleanup_free_ char *advertised = settings.advertise_url
                                                  ? xstrdup(settings.advertise_url)
                                                  : default_advertise_url(scheme, host, port);
        Leadership lead = {.store = store,
                           .holder = holder,
                           .url = advertised,
                           .lease_ms = settings.leader_lease_ms};
        if (settings.leader_elect) {
                /* A follower that finds its files bad when it must lead fails the failover:
                 * they are checked now (and read again when it leads). */
                _cleanup_free_ char *files_error = NULL;
                if (ctl_files_check(&cfg, &files_error) < 0) {
                        fprintf(stderr, "axctld: %s\n", files_error);
                        store_close(store);
                        close(lfd);
                        return 2;
                }
                /* A follower is reachable at once: its /healthz says who leads. */
                print_listening(scheme, host, port);
                log_info("%s stands for leader of %s", holder, db_name);
                r = leadership_await(&lead, lfd, sfd, cert_pem, key_pem);
                if (r <= 0) {
                        if (r < 0)
                                log_error("cannot take part in the election: %s (%s)", strerror(-r),
                                          store_last_error(store));
                        store_close(store);
                        close(lfd);
                        return r < 0 ? 1 : 0;
                }
        }

        Controller *ctl = NULL;
        /* The test suites set this so that a bug in the state machine fails them loudly. */
        cfg.strict_transitions = util_streq_ptr(getenv("AXCTLD_STRICT_TRANSITIONS"), "1");
        raise_fd_limit();
        ApiOptions api_opts = {.auth = settings.auth,
                               .tls_cert_pem = cert_pem,
                               .tls_key_pem = key_pem,
                               .log_streams_per_user = settings.log_streams_per_user,
                               .role = settings.leader_elect ? "leader" : NULL};
        Api *api = NULL;
        if ((r = api_new(lfd, &api_opts, &api)) < 0) {
                /* With TLS the likely cause is the certificate or key: a configuration
                 * error (exit 2, which the unit does not restart). */
                if (cert_pem)
                        fprintf(stderr,
                                "axctld: cannot serve HTTPS: check that %s and %s are a "
                                "matching PEM certificate and key\n",
                                settings.tls_cert, settings.tls_key);
                else
                        log_error("cannot start the HTTP server");
                store_close(store);
                close(lfd);
                return cert_pem ? 2 : 1;
        }
        /* Until the first turn has ended: the one store is the load's, then the turn's. */
        LeadershipRenewer *renewer = NULL;
        if (settings.leader_elect &&
            (r = leadership_renewer_start(&lead, cfg.db_path, LOAD_RENEW_MAX_MS, &renewer)) < 0)
                log_warning("cannot renew the leader's lease while the state loads: %s",
                            strerror(-r));
        /* A leader answers from the stored state only while its leadership is sure: as
         * renewed while the state loads, else as taken. */
        EarlyLeases *leases = NULL;
        EarlyLeasesUntil until = !settings.leader_elect ? NULL
                                 : renewer              ? renewed_lease_end
                                                        : taken_lease_end;
        if (early_leases_load(store, settings.auth, cfg.lease_ms, cfg.sync_period_ms, until,
                              renewer ? (void *) renewer : (void *) &lead, &leases) < 0)
                log_warning("cannot read the stored nodes: agents wait for the state to load");
        r = load_state(&cfg, store, api, leases, &ctl);
        leases = early_leases_free(leases);
        if (r >= 0 && renewer && leadership_renewer_lost(renewer)) {
                /* What was loaded is not ours to act on. */
                ctl_free(ctl);
                r = -ESTALE;
        }
        if (r < 0) {
                if (renewer)
                        leadership_renewer_stop(renewer);
                if (r == -ESTALE)
                        log_error("the lead was lost while the state loaded");
                else
                        log_error("cannot load state database %s: %s", db_name, strerror(-r));
                api_free(api);
                return 1;
        }
        _cleanup_free_ char *quota_error = NULL, *rules_error = NULL;
        if (ctl_quota_reload(ctl, &quota_error) < 0 ||
            ctl_failure_rules_reload(ctl, &rules_error) < 0) {
                fprintf(stderr, "axctld: %s\n", quota_error ? quota_error : rules_error);
                if (renewer)
                        leadership_renewer_stop(renewer);
                api_free(api);
                ctl_free(ctl);
                return 2;
        }
        api_serve(api, ctl);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = api_fd(api)};
        epoll_ctl(ep, EPOLL_CTL_ADD, api_fd(api), &ev);
        ev.data.fd = sfd;
        epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
        int streams_fd = api_streams_fd(api);
        ev.data.fd = streams_fd;
        epoll_ctl(ep, EPOLL_CTL_ADD, streams_fd, &ev);

        if (!settings.leader_elect)
                print_listening(scheme, host, port);
        log_info("serving on %s:%d, state in %s", host, port, db_name);
        if (!settings.auth)
                log_warning("authentication is off: whoever reaches %s:%d can run programs on "
                            "every node (see --auth)",
                            host, port);

        /*
         * The watchdog is pinged from the end of a loop turn, so a turn stuck in SQLite,
         * the scheduler or a request handler stops the pings and systemd restarts us.
         * Pings come at half of WatchdogSec, as sd_watchdog_enabled(3) advises.
         */
        uint64_t watchdog_usec = 0;
        bool watchdog = sd_watchdog_enabled(false, &watchdog_usec) > 0;
        bool notify = getenv("NOTIFY_SOCKET") != NULL;
        _cleanup_free_ char *where = xasprintf("%s:%d", host, port);
        char status[160] = "";
        int64_t next_watchdog = 0, next_status = util_now_ms() + STATUS_PERIOD_MS;
        notify_status(ctl, where, "READY=1\n", status, sizeof(status));

        ctl_serving_starts(ctl);
        int64_t stop_at = 0; /* set when a turn failed */
        int64_t drain_until = 0; /* set on SIGTERM */
        for (;;) {
                int64_t now = util_now_ms();
                int64_t timeout = ctl_next_deadline_ms(ctl) - now;
                if (stop_at && stop_at - now < timeout)
                        timeout = stop_at - now;
                if (drain_until && drain_until - now < timeout)
                        timeout = drain_until - now;
                int64_t api_timeout = api_timeout_ms(api);
                if (api_timeout >= 0 && api_timeout < timeout)
                        timeout = api_timeout;
                if (watchdog && next_watchdog - now < timeout)
                        timeout = next_watchdog - now;
                if (notify && next_status - now < timeout)
                        timeout = next_status - now;
                if (settings.leader_elect && leadership_deadline_ms(&lead) - now < timeout)
                        timeout = leadership_deadline_ms(&lead) - now;
                if (timeout < 0)
                        timeout = 0;
                struct epoll_event events[8];
                int n = epoll_wait(ep, events, 8, (int) timeout);
                if (n < 0 && errno != EINTR) {
                        log_error("epoll_wait: %s", strerror(errno));
                        break;
                }
                for (int i = 0; i < n; i++) {
                        if (events[i].data.fd == streams_fd)
                                api_streams_run(api);
                        if (events[i].data.fd != sfd)
                                continue;
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                                if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) &&
                                    !drain_until) {
                                        /* Answer what is in flight, take nothing new. */
                                        log_info("shutting down: answering the requests in "
                                                 "progress");
                                        api_shutdown_begin(api);
                                        drain_until = util_now_ms() + SHUTDOWN_DRAIN_MS;
                                } else if (si.ssi_signo == SIGHUP) {
                                        reload_files(ctl);
                                }
                        }
                }
                /* Between turns, outside a transaction: a leader that lost its lease must
                 * not answer from what it holds in memory any more. */
                if (settings.leader_elect && !stop_at &&
                    (renewer ? leadership_renewer_lost(renewer) : !leadership_keep(&lead))) {
                        r = -ESTALE;
                        break;
                }
                int64_t turn_start_us = util_now_us();
                api_run(api);
                if (util_now_ms() >= ctl_next_deadline_ms(ctl))
                        ctl_tick(ctl);
                bool wrote = ctl_turn_has_writes(ctl);
                int ended = ctl_end_turn(ctl);
                if (renewer) {
                        /* The first turn (a whole pass, the reconnecting fleet's answers)
                         * is over: the store is free for leadership_keep again. */
                        bool lost = !leadership_renewer_stop(renewer);
                        renewer = NULL;
                        if (lost && ended >= 0) {
                                log_error("the lead was lost during the first turn");
                                r = -ESTALE;
                                break;
                        }
                }
                if (ended == -ESTALE) {
                        /* Fenced: another controller leads and has loaded the state; this
                         * turn is rolled back and its requests get 503. */
                        log_error("stopping at once: %s", ctl_failure(ctl));
                        api_after_commit(api);
                        r = ended;
                        break;
                }
                if (ended < 0 && !stop_at) {
                        /* Nothing unacknowledged is lost: requests of this turn get 503. */
                        log_error("stopping: %s", ctl_failure(ctl));
                        sd_notifyf(0, "STATUS=stopping: %s", ctl_failure(ctl));
                        stop_at = util_now_ms() + FAILED_LINGER_MS;
                        r = -EIO;
                }
                api_after_commit(api);
                if (wrote)
                        ctl_turn_observe(ctl, (double) (util_now_us() - turn_start_us) / 1e6);
                if (stop_at && util_now_ms() >= stop_at)
                        break;
                if (drain_until && (api_idle(api) || util_now_ms() >= drain_until))
                        break;
                now = util_now_ms();
                if (watchdog && now >= next_watchdog) {
                        notify_status(ctl, where, "WATCHDOG=1\n", status, sizeof(status));
                        next_watchdog = now + (int64_t) (watchdog_usec / 2000);
                } else if (notify && now >= next_status) {
                        notify_status(ctl, where, NULL, status, sizeof(status));
                        next_status = now + STATUS_PERIOD_MS;
                }
        }
        if (renewer)
                leadership_renewer_stop(renewer); /* stopped before the first turn ended */
        sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
        log_info("shutting down");
        api_free(api);
        /* A clean stop hands over at once; a failed or deposed one has nothing to give. */
        if (settings.leader_elect && r >= 0)
                leadership_resign(&lead);
        ctl_free(ctl);
        close(ep);
        close(sfd);
        return r < 0 ? 1 : 0;
}
