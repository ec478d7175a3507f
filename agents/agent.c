/* SPDX-License-Identifier: MIT */
/*
 * The agent's loop; see agent.h. At most one request to the controller is in flight. A
 * sync is normally a long-poll held by the controller for at most one sync period, so
 * the controller hears from the agent once per period (its liveness signal) and a
 * change of the desired state arrives as soon as the controller makes it. When the agent
 * has news (a rank started or ended, a new checkpoint, a hang, a health change) it drops
 * a held long-poll and sends a sync that is answered at once; new steps ride along with
 * the next sync. Answers to dropped requests are never looked at, so every applied
 * answer was computed after the controller had seen everything reported before it, and
 * the version sent with each sync is that of the desired state already applied.
 */
#include "agent.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cgroup.h"
#include "healthcheck.h"
#include "inventory.h"
#include "log.h"
#include "logserver.h"
#include "protocol.h"
#include "rank.h"
#include "rankenv.h"
#include "shim.h"
#include "token.h"
#include "url.h"
#include "util.h"

/* Defaults until the controller says otherwise (DESIGN.md §5). */
#define AGENT_DEFAULT_LEASE_MS 5000
#define AGENT_DEFAULT_SYNC_PERIOD_MS 1000
/* The longest long-poll asked for; the controller caps it at 30 s anyway. */
#define AGENT_MAX_WAIT_MS 10000
/* Pause before retrying an unreachable or failing controller: 125 to 375 ms, spread so
 * that a fleet does not come back to a restarted controller in step. */
#define AGENT_RETRY_MS 250
/* ... and one that refuses our credentials: that takes an operator, not a blip. */
#define AGENT_RETRY_AUTH_MS 5000
/* Redirects to the leader followed for one request: follower to leader, and spares
 * for a leader that changed meanwhile. */
#define AGENT_LEADER_HOPS 3
/* Keys of ranks that ended here and were forgotten, so a stale answer cannot rerun them. */
#define AGENT_TOMBSTONES 1024

typedef enum AgentRequest {
        AGENT_REQUEST_NONE,
        AGENT_REQUEST_REGISTER,
        AGENT_REQUEST_SYNC,
} AgentRequest;

struct Agent {
        AgentConfig cfg;
        UrlList controllers; /* one leads, the others redirect to it (docs/PROTOCOL.md) */
        size_t current; /* the one requests go to */
        size_t contact; /* the one that answered last */
        /* The last one that could not be reached, and when (0: none): followers name
         * a dead leader until its lease runs out, and it is not tried again meanwhile. */
        size_t unreachable;
        int64_t unreachable_ms;
        char hostname[256];
        char *boot_id;
        char *agent_id; /* <state_dir>/agent-id: this state directory's identity */
        char *address;
        AccelConfig accel_cfg;
        AgentInventory inv;
        AgentLogServer *logs;
        RankTable *ranks;
        CgroupSet *cgroups; /* NULL: ranks are contained by their shims alone */

        /* Controller session. */
        CURLM *multi;
        CURL *easy;
        struct curl_slist *headers; /* with the Authorization header when a token is set */
        AgentRequest request;
        char *request_text; /* its body, sent again along a redirect to the leader */
        int64_t request_timeout_ms;
        int request_redirects;
        uint64_t request_id;
        int64_t request_wait_ms; /* the long-poll time the sync in flight asked for */
        char *response;
        size_t response_len;
        bool registered;
        int64_t version;
        WireSyncAnswer desired; /* the last whole answer: what an unchanged one means */
        bool dirty;
        int64_t retry_at_ms;
        bool failing; /* the last request failed: log recovery once */
        int64_t lease_ms;
        int64_t sync_period_ms;
        int64_t request_sent_ms; /* when the request in flight was sent, both clocks */
        int64_t request_sent_boot_ms;
        int64_t last_contact_ms; /* send time of the last answered request */
        bool fenced;

        /* Periodic work. */
        int64_t next_scan_ms;
        int64_t next_health_ms;
        AgentHealthCmd *healthcmd;
        char *cmd_reason; /* the health command's verdict, NULL when healthy */
        char *probe_reason; /* the backends' verdict, NULL when healthy */
        char *state_reason; /* why the state dir could not take a rank; NULL when it can */
        bool probe_before_sync; /* a rank failed: the devices' health goes with its exit */
        AgentHealth health;
        AgentCheckpoint *ckpts;
        size_t n_ckpts;

        RankKey tombstones[AGENT_TOMBSTONES];
        size_t n_tombstones;

        int sigfd;
        bool quit;
};

static void agent_health_probe(Agent *a);
static void agent_health_combine(Agent *a);

/* True for a URL whose traffic others cannot read: https, or plain HTTP on loopback. */
static bool agent_url_private(const char *url) {
        if (strncmp(url, "https://", 8) == 0)
                return true;
        static const char *const loopback[] = {
                "http://127.", "http://localhost:", "http://localhost/", "http://[::1]"};
        for (size_t i = 0; i < ELEMENTSOF(loopback); i++)
                if (strncmp(url, loopback[i], strlen(loopback[i])) == 0)
                        return true;
        return strcmp(url, "http://localhost") == 0;
}

static void agent_boot_id_read(Agent *a) {
        _cleanup_free_ char *data = NULL;
        if (util_read_file("/proc/sys/kernel/random/boot_id", &data, NULL) == 0) {
                data[strcspn(data, "\n")] = '\0';
                a->boot_id = TAKE_PTR(data);
        } else {
                a->boot_id = xstrdup("unknown");
        }
}

/*
 * Reads <state_dir>/agent-id, creating it with 128 random bits on first start. The id
 * names the state directory, not the process: a restarted agent keeps it (and may take
 * its node back within the lease), a second agent or one whose state was lost has
 * another, and the controller refuses it while the node's lease is live.
 */
static int agent_id_load(const char *state_dir, char **ret) {
        _cleanup_free_ char *path = xasprintf("%s/agent-id", state_dir);
        _cleanup_free_ char *data = NULL;
        int r = util_read_file(path, &data, NULL);
        if (r == 0) {
                data[strcspn(data, "\n")] = '\0';
                if (strlen(data) == 32 && strspn(data, "0123456789abcdef") == 32) {
                        *ret = TAKE_PTR(data);
                        return 0;
                }
        } else if (r != -ENOENT) {
                return r;
        }
        unsigned char raw[16];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t) sizeof(raw))
                return -errno;
        char hex[2 * sizeof(raw) + 1];
        token_hex(raw, sizeof(raw), hex);
        r = util_write_file_atomic(path, hex, strlen(hex));
        if (r < 0)
                return r;
        *ret = xstrdup(hex);
        return 0;
}

/* The address the controller gives clients for logs: the listen host, or our name. */
static char *agent_address_make(const char *listen, const char *hostname, uint16_t port) {
        _cleanup_free_ char *host = NULL;
        uint16_t unused;
        if (agent_listen_parse(listen, &host, &unused) < 0 || !*host ||
            strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0)
                return xasprintf("%s:%u", hostname, port);
        if (strchr(host, ':'))
                return xasprintf("[%s]:%u", host, port);
        return xasprintf("%s:%u", host, port);
}

/* Makes the agent's cgroup where it can and says once how ranks are contained. */
static void agent_cgroups_open(Agent *a) {
        a->inv.containment = "subreaper";
        if (!a->cfg.cgroup) {
                log_info("Containment: cgroups turned off; each rank's supervisor, a child "
                         "subreaper, kills every process the rank starts; cpus and memory_mb "
                         "are not enforced");
                return;
        }
        CgroupLayout layout;
        int r = cgroup_layout_read(&layout);
        if (r >= 0) {
                r = cgroup_set_open(&layout, a->cfg.cgroup, &a->cgroups);
                cgroup_layout_done(&layout);
        }
        if (r < 0) {
                log_info("Containment: no cgroup to use (%s); each rank's supervisor, a child "
                         "subreaper, kills every process the rank starts; cpus and memory_mb "
                         "are not enforced",
                         strerror(-r));
                return;
        }
        _cleanup_free_ char *line = cgroup_set_describe(a->cgroups);
        log_info("Containment: %s", line);
        a->inv.containment = cgroup_set_kind(a->cgroups);
        rank_table_use_cgroups(a->ranks, a->cgroups);
}

int agent_new(const AgentConfig *cfg, Agent **ret) {
        static const AgentUserPolicy default_users = {0};
        Agent *a = xcalloc(1, sizeof(*a));
        a->cfg = *cfg;
        if (!a->cfg.users)
                a->cfg.users = &default_users;
        a->sigfd = -1;
        a->lease_ms = AGENT_DEFAULT_LEASE_MS;
        a->sync_period_ms = AGENT_DEFAULT_SYNC_PERIOD_MS;
        a->health.healthy = true;
        _cleanup_free_ char *url_error = NULL;
        int r = url_list_parse(cfg->controller, &a->controllers, &url_error);
        if (r < 0) {
                log_error("Invalid controller URL: %s", url_error);
                goto fail;
        }
        if (gethostname(a->hostname, sizeof(a->hostname) - 1) < 0)
                snprintf(a->hostname, sizeof(a->hostname), "%s", cfg->node);
        agent_boot_id_read(a);

        a->accel_cfg = (AccelConfig){.dev_root = cfg->dev_root ? cfg->dev_root : "",
                                     .sys_root = cfg->sys_root ? cfg->sys_root : ""};
        r = agent_inventory_load(&a->inv, cfg->topology, &a->accel_cfg);
        if (r < 0) {
                log_error("Cannot read the hardware topology%s%s: %s",
                          cfg->topology ? " from " : "", cfg->topology ? cfg->topology : "",
                          strerror(-r));
                goto fail;
        }
        log_info("Inventory: %u CPUs, %" PRIu64 " MiB, %u NUMA nodes, %zu accelerators",
                 a->inv.cpus, a->inv.memory_mb, a->inv.numa_nodes, a->inv.n_devs);
        for (size_t i = 0; i < a->inv.n_devs; i++)
                log_info("Accelerator %zu: %s %s at %s (NUMA %d)", i, a->inv.devs[i].kind,
                         a->inv.devs[i].model, a->inv.devs[i].pci_bus_id, a->inv.devs[i].numa_node);

        r = rank_table_new(cfg->state_dir, a->boot_id, &a->ranks);
        if (r >= 0)
                r = agent_id_load(cfg->state_dir, &a->agent_id);
        if (r < 0) {
                log_error("Cannot use state directory %s: %s", cfg->state_dir, strerror(-r));
                goto fail;
        }
        agent_cgroups_open(a);
        rank_table_set_log_limits(a->ranks, cfg->log_limits);
        r = rank_table_adopt(a->ranks);
        if (r < 0) {
                log_error("Cannot scan %s/ranks: %s", cfg->state_dir, strerror(-r));
                goto fail;
        }
        for (size_t i = 0; i < rank_table_count(a->ranks); i++) {
                Rank *rk = rank_table_at(a->ranks, i);
                log_info("Adopted rank %" PRId64 "/%" PRId64 "/%" PRId64 ": %s", rk->key.job,
                         rk->key.attempt, rk->key.rank,
                         rk->state == AGENT_RANK_RUNNING ? "running" : "exited");
        }

        r = agent_logserver_start(cfg->listen, cfg->state_dir, cfg->token != NULL, &a->logs);
        if (r < 0) {
                log_error("Cannot serve logs on %s: %s", cfg->listen, strerror(-r));
                goto fail;
        }
        a->address = agent_address_make(cfg->listen, a->hostname, agent_logserver_port(a->logs));
        log_info("Serving rank logs on %s", a->address);

        if (cfg->health_cmd && *cfg->health_cmd)
                a->healthcmd = agent_healthcmd_new(cfg->health_cmd, cfg->health_interval_ms);

        a->multi = curl_multi_init();
        a->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!a->multi || !a->headers) {
                r = -ENOMEM;
                goto fail;
        }
        if (cfg->token) {
                _cleanup_free_ char *h = token_auth_header(cfg->token);
                struct curl_slist *l = curl_slist_append(a->headers, h);
                explicit_bzero(h, strlen(h));
                if (!l) {
                        r = -ENOMEM;
                        goto fail;
                }
                a->headers = l;
                /* The shim must not carry the agent's copies into a rank's process. */
                for (; l->next; l = l->next)
                        ;
                agent_shim_forget_secret(0, l->data);
                agent_shim_forget_secret(1, (char *) cfg->token);
                for (size_t i = 0; i < a->controllers.n; i++)
                        if (!agent_url_private(a->controllers.items[i]))
                                log_warning("Sending the agent's token over plain HTTP to %s: "
                                            "anyone on the path can read it; use https",
                                            a->controllers.items[i]);
        }
        *ret = a;
        return 0;

fail:
        agent_free(a);
        return r;
}

static void agent_request_drop(Agent *a) {
        if (a->easy) {
                curl_multi_remove_handle(a->multi, a->easy);
                curl_easy_cleanup(a->easy);
                a->easy = NULL;
        }
        free(a->response);
        a->response = NULL;
        a->response_len = 0;
        a->request = AGENT_REQUEST_NONE;
}

Agent *agent_free(Agent *a) {
        if (!a)
                return NULL;
        agent_request_drop(a);
        if (a->multi)
                curl_multi_cleanup(a->multi);
        for (struct curl_slist *l = a->headers; l; l = l->next)
                explicit_bzero(l->data, strlen(l->data));
        agent_shim_forget_secret(0, NULL);
        agent_shim_forget_secret(1, NULL);
        curl_slist_free_all(a->headers);
        agent_logserver_stop(a->logs);
        agent_healthcmd_free(a->healthcmd);
        rank_table_free(a->ranks);
        cgroup_set_free(a->cgroups);
        agent_inventory_deinit(&a->inv);
        for (size_t i = 0; i < a->n_ckpts; i++)
                free(a->ckpts[i].path);
        free(a->ckpts);
        free(a->cmd_reason);
        free(a->probe_reason);
        free(a->state_reason);
        free(a->health.reason);
        wire_sync_answer_clear(&a->desired);
        if (a->sigfd >= 0)
                close(a->sigfd);
        url_list_done(&a->controllers);
        free(a->request_text);
        free(a->boot_id);
        free(a->agent_id);
        free(a->address);
        free(a);
        return NULL;
}

/* ---- Talking to the controller ---- */

static size_t agent_response_write(char *data, size_t size, size_t nmemb, void *userdata) {
        Agent *a = userdata;
        size_t n = size * nmemb;
        /* Answers are small; a runaway body is cut off rather than kept. */
        if (a->response_len + n > AGENT_MAX_ANSWER_BYTES)
                return 0;
        a->response = xrealloc(a->response, a->response_len + n + 1);
        memcpy(a->response + a->response_len, data, n);
        a->response_len += n;
        a->response[a->response_len] = '\0';
        return n;
}

static int64_t agent_retry_delay_ms(void) {
        uint16_t r = 0;
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t) sizeof(r))
                r = (uint16_t) getpid();
        return AGENT_RETRY_MS / 2 + r % AGENT_RETRY_MS;
}

/*
 * How long the next sync may be held. News goes out with 0, so that the answer (and
 * the desired state it carries) comes back at once: a report restarting the long-poll
 * each time would, with news every period, never see an answer and fence itself.
 */
static int64_t agent_wait_ms(const Agent *a, int64_t now) {
        if (a->dirty)
                return 0;
        /* A lease half spent already (a request failed, the controller restarted or is
         * behind) is renewed at once: a hold would spend up to a sync period more of it. */
        if (now - a->last_contact_ms > a->lease_ms / 2)
                return 0;
        /*
         * The lease counts from the send time of the last answered request, so while a
         * sync is held its predecessor's lease keeps running: two holds must fit in one
         * lease with room to spare, or the ranks would be fenced while all is well.
         */
        int64_t wait =
                a->sync_period_ms < AGENT_MAX_WAIT_MS ? a->sync_period_ms : AGENT_MAX_WAIT_MS;
        return wait < a->lease_ms / 4 ? wait : a->lease_ms / 4;
}

/*
 * How long to wait for a controller beyond what it was asked to take (an answer, or a
 * connection): `alone` with one controller; with several, a fifth of the lease, so that
 * a leader whose host vanished (no reset ever comes) is left with time to find the next
 * one before the ranks are fenced.
 */
static int64_t agent_patience_ms(const Agent *a, int64_t alone) {
        if (a->controllers.n < 2)
                return alone;
        int64_t p = a->lease_ms / 5;
        return p < 200 ? 200 : p > alone ? alone : p;
}

static const char *agent_controller(const Agent *a) {
        return a->controllers.items[a->current];
}

/*
 * After a controller could not be reached or has no leader: the next request goes to
 * the next URL, after the usual pause. With one URL this is a plain retry.
 */
static void agent_controller_next(Agent *a) {
        a->current = (a->current + 1) % a->controllers.n;
}

/* Hands a->request_text to libcurl for url; the request in flight is then `kind`. */
static int agent_request_post(Agent *a, AgentRequest kind, const char *url) {
        a->easy = curl_easy_init();
        if (!a->easy)
                return -ENOMEM;
        curl_easy_setopt(a->easy, CURLOPT_URL, url);
        curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, a->headers);
        curl_easy_setopt(a->easy, CURLOPT_COPYPOSTFIELDS, a->request_text);
        curl_easy_setopt(a->easy, CURLOPT_WRITEFUNCTION, agent_response_write);
        curl_easy_setopt(a->easy, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(a->easy, CURLOPT_TIMEOUT_MS, (long) a->request_timeout_ms);
        curl_easy_setopt(a->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) agent_patience_ms(a, 2000));
        curl_easy_setopt(a->easy, CURLOPT_NOSIGNAL, 1L);
        /* The controller decides what this node runs: it must prove who it is. */
        curl_easy_setopt(a->easy, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(a->easy, CURLOPT_SSL_VERIFYHOST, 2L);
        if (a->cfg.ca_file)
                curl_easy_setopt(a->easy, CURLOPT_CAINFO, a->cfg.ca_file);
#if LIBCURL_VERSION_NUM >= 0x075500
        curl_easy_setopt(a->easy, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
        /* Redirects are never followed by libcurl: the token goes only to a configured
         * controller (agent_leader_follow). */
        curl_multi_add_handle(a->multi, a->easy);
        a->request = kind;
        return 0;
}

static void agent_request_send(Agent *a, AgentRequest kind, int64_t now) {
        agent_request_drop(a);
        a->request_sent_ms = now;
        a->request_sent_boot_ms = util_boot_ms();
        a->request_redirects = 0;
        json_t *body;
        _cleanup_free_ char *url = NULL;
        int64_t wait_ms = agent_wait_ms(a, now);
        AgentIdentity id = {.boot_id = a->boot_id, .agent_id = a->agent_id};
        a->request_id++;
        if (kind == AGENT_REQUEST_REGISTER) {
                body = agent_proto_register_body(a->cfg.node, a->hostname, a->address, &id,
                                                 a->cfg.labels, &a->inv);
                url = xasprintf("%s/v1/agent/register", agent_controller(a));
                a->request_timeout_ms = 5000;
        } else {
                if (a->probe_before_sync) {
                        /* Once for every rank that failed since the last sync. */
                        a->probe_before_sync = false;
                        agent_health_probe(a);
                        agent_health_combine(a);
                }
                body = agent_proto_sync_body(a->cfg.node, &id, a->ranks, a->ckpts, a->n_ckpts,
                                             &a->health, a->request_id);
                url = xasprintf("%s/v1/agent/sync?wait_ms=%" PRId64 "&version=%" PRId64
                                "&accept=" WIRE_ACCEPT_UNCHANGED "," WIRE_ACCEPT_SHARED_ENV
                                "," WIRE_ACCEPT_LEASE_ONLY,
                                agent_controller(a), wait_ms, a->version);
                a->request_timeout_ms = wait_ms + agent_patience_ms(a, 5000);
        }
        free(a->request_text);
        a->request_text = json_dumps(body, JSON_COMPACT);
        json_decref(body);

        if (!a->request_text || agent_request_post(a, kind, url) < 0) {
                log_error("Cannot prepare a request to the controller");
                agent_request_drop(a);
                a->retry_at_ms = now + agent_retry_delay_ms();
                return;
        }
        log_debug("Sending %s %" PRIu64 " to %s (wait %" PRId64 " ms)",
                  kind == AGENT_REQUEST_REGISTER ? "register" : "sync", a->request_id,
                  agent_controller(a), wait_ms);
        a->request_wait_ms = wait_ms;
        a->dirty = false;
}

_printf_(3, 4) static void agent_request_failed(Agent *a, int64_t now, const char *fmt, ...) {
        if (!a->failing) {
                char msg[512];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(msg, sizeof(msg), fmt, ap);
                va_end(ap);
                log_warning("%s", msg);
        }
        a->failing = true;
        a->retry_at_ms = now + agent_retry_delay_ms();
}

/*
 * A failure of the controller at hand rather than an answer about this node (it cannot
 * be reached, has no leader, or redirects where we may not go): the next request goes
 * to the next controller, after the usual pause.
 */
_printf_(3, 4) static void agent_controller_failed(Agent *a, int64_t now, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        const char *was = agent_controller(a);
        agent_controller_next(a);
        if (agent_controller(a) == was)
                agent_request_failed(a, now, "%s", msg);
        else
                agent_request_failed(a, now, "%s; trying %s", msg, agent_controller(a));
}

/*
 * A follower answered with the leader's URL. When it is one of the configured
 * controllers, the same request (method and body) goes there at once and that one
 * becomes the current; any other URL never sees the token, and the next controller is
 * tried instead.
 */
static void agent_leader_follow(Agent *a, AgentRequest kind, const char *location, int64_t now) {
        int i = location ? url_list_find_origin(&a->controllers, location) : -1;
        if (i >= 0 && (size_t) i == a->unreachable && a->unreachable_ms &&
            now - a->unreachable_ms < a->lease_ms) {
                /* The follower has not seen the leader's lease run out yet: ask it again
                 * after the pause rather than the dead one. */
                agent_request_failed(a, now,
                                     "Controller at %s redirected to %s, which did not "
                                     "answer just now: waiting for a new leader",
                                     agent_controller(a), location);
                return;
        }
        if (i < 0 || a->request_redirects >= AGENT_LEADER_HOPS) {
                agent_controller_failed(a, now, "Controller at %s redirected to %s%s",
                                        agent_controller(a), location ? location : "nowhere",
                                        i < 0 ? ", which is not one of --controller: not followed"
                                              : " once too often");
                return;
        }
        /* Said once: while a failover lasts, followers send us to a dead leader again
         * and again. */
        if ((size_t) i != a->current && !a->failing)
                log_info("Controller at %s follows the leader at %s", agent_controller(a),
                         a->controllers.items[i]);
        a->current = (size_t) i;
        a->request_redirects++;
        if (agent_request_post(a, kind, location) < 0) {
                agent_request_drop(a);
                agent_request_failed(a, now, "Cannot prepare a request to the controller");
        }
}

static void agent_tombstone_add(Agent *a, RankKey key) {
        a->tombstones[a->n_tombstones % AGENT_TOMBSTONES] = key;
        a->n_tombstones++;
}

static bool agent_tombstone_has(const Agent *a, RankKey key) {
        size_t n = a->n_tombstones < AGENT_TOMBSTONES ? a->n_tombstones : AGENT_TOMBSTONES;
        for (size_t i = 0; i < n; i++) {
                RankKey k = a->tombstones[i];
                if (k.job == key.job && k.attempt == key.attempt && k.rank == key.rank)
                        return true;
        }
        return false;
}

/* Turns a JSON array of strings into a NULL-terminated vector borrowing the strings. */
static char **agent_argv_make(json_t *argv) {
        size_t n = json_array_size(argv);
        char **v = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                v[i] = (char *) json_string_value(json_array_get(argv, i));
        return v;
}

static void agent_rank_start(Agent *a, const WireDesiredRank *d) {
        _cleanup_free_ char *progress = rank_table_progress_path(a->ranks, d->key);
        _cleanup_free_ char *env_error = NULL;
        _cleanup_free_ char *user_error = NULL;
        _cleanup_free_ char **argv = NULL;
        char **envp = NULL;
        RankUser user = {0};
        int error_exit = 0;

        const char *error = d->error;
        if (!error && agent_user_resolve(a->cfg.users, d->user, &user, &user_error) < 0) {
                error = user_error;
                error_exit = SHIM_EXIT_USER_REFUSED;
        }
        if (!error) {
                RankEnvRequest req = {
                        .env = d->env,
                        .shared_env = d->shared_env,
                        .devices = d->devices,
                        .accelerator = d->accelerator,
                        .profile_dir = a->cfg.profile_dir,
                        .progress_path = progress,
                        .user = &user,
                };
                if (agent_env_build(&req, &a->inv, &envp, &env_error) < 0)
                        error = env_error;
                argv = agent_argv_make(d->argv);
        }

        RankLaunch l = {
                .key = d->key,
                .argv = argv,
                .envp = envp,
                .workdir = d->workdir,
                .user = d->user,
                .run_as = error ? NULL : &user,
                .checkpoint_dir = d->checkpoint_dir,
                .hang_timeout_s = d->hang_timeout_s,
                .hang_signal = d->hang_signal,
                .hang_signal_grace_s = d->hang_signal_grace_s,
                .cpus = d->cpus,
                .memory_mb = d->memory_mb,
                .error = error,
                .error_exit = error_exit,
        };
        Rank *r;
        int k = rank_table_start(a->ranks, &l, &r);
        agent_env_free(envp);
        unsigned uid = (unsigned) (l.run_as ? user.uid : geteuid());
        rank_user_done(&user);
        if (k < 0)
                return; /* -EEXIST: known already */
        if (r->node_error) {
                /* The node, not the job: say so in its health until a write works again. */
                free(a->state_reason);
                a->state_reason = xasprintf("cannot write rank state under %s: %s",
                                            a->cfg.state_dir, strerror(-r->node_error));
                log_error("Cannot start rank %" PRId64 "/%" PRId64 "/%" PRId64 ": %s", d->key.job,
                          d->key.attempt, d->key.rank, a->state_reason);
                agent_health_combine(a);
        } else if (r->state == AGENT_RANK_EXITED)
                log_warning("Rank %" PRId64 "/%" PRId64 "/%" PRId64 " failed to start: %s",
                            d->key.job, d->key.attempt, d->key.rank, error ? error : "see its log");
        else
                log_info("Started rank %" PRId64 "/%" PRId64 "/%" PRId64 " as pid %d, uid %u",
                         d->key.job, d->key.attempt, d->key.rank, (int) r->rank_pid, uid);
        a->dirty = true;
}

/* Makes the node's ranks what the answer to request_id says they should be. */
static void agent_converge(Agent *a, const WireSyncAnswer *ans, uint64_t request_id, int64_t now) {
        for (size_t i = rank_table_count(a->ranks); i-- > 0;) {
                Rank *r = rank_table_at(a->ranks, i);
                if (wire_sync_answer_find(ans, r->key))
                        continue;
                if (r->state == AGENT_RANK_RUNNING) {
                        if (!r->stopping)
                                log_info("Stopping rank %" PRId64 "/%" PRId64 "/%" PRId64
                                         ": no longer desired",
                                         r->key.job, r->key.attempt, r->key.rank);
                        rank_kill(r, now, a->cfg.kill_grace_ms);
                } else if (r->exit_reported_in != 0 && r->exit_reported_in <= request_id) {
                        /* The controller has seen the exit and let go of the rank. */
                        agent_tombstone_add(a, r->key);
                        rank_table_remove(a->ranks, r);
                }
        }
        for (size_t i = 0; i < ans->n_ranks; i++) {
                const WireDesiredRank *d = &ans->ranks[i];
                if (rank_table_find(a->ranks, d->key) || agent_tombstone_has(a, d->key))
                        continue;
                agent_rank_start(a, d);
        }
}

/*
 * The controller answered the request sent at request_sent_ms, so it received it no
 * earlier and will not declare this node lost before that time + lease + grace: the
 * lease runs from then, for this agent and for every rank supervisor of the node.
 */
static void agent_contact_ok(Agent *a) {
        if (a->current != a->contact)
                log_info("Controller at %s answers now (was %s)", agent_controller(a),
                         a->controllers.items[a->contact]);
        else if (a->failing)
                log_info("Controller at %s reachable again", agent_controller(a));
        a->contact = a->current;
        a->failing = false;
        a->last_contact_ms = a->request_sent_ms;
        a->fenced = false;
        rank_table_renew_lease(a->ranks, a->request_sent_boot_ms + a->lease_ms);
}

/*
 * The controller took this agent for the node, so no other agent holds it: whatever
 * runs in a rank cgroup of the node that this agent's state does not know was started
 * by an agent that lost its state, and must go before anything starts again.
 */
static void agent_sweep_orphans(Agent *a) {
        int n = rank_table_sweep_cgroups(a->ranks);
        if (n < 0)
                log_warning("Cannot look for orphaned ranks in the node's cgroups: %s",
                            strerror(-n));
        else if (n > 0)
                log_warning("Stopped %d orphaned ranks of node %s: their cgroups belong to no "
                            "rank this agent knows (an earlier agent lost its state)",
                            n, a->cfg.node);
}

static void agent_request_done(Agent *a, CURLcode result, int64_t now) {
        AgentRequest kind = a->request;
        uint64_t id = a->request_id;
        long status = 0;
        curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &status);
        char *location = NULL;
        curl_easy_getinfo(a->easy, CURLINFO_REDIRECT_URL, &location);
        _cleanup_free_ char *leader = location ? xstrdup(location) : NULL;
        json_t *body =
                a->response ? json_loadb(a->response, a->response_len, JSON_REJECT_DUPLICATES, NULL)
                            : NULL;
        agent_request_drop(a);

        if (result != CURLE_OK) {
                json_decref(body);
                /* A leader that died holding our long-poll ends up here at once. */
                a->unreachable = a->current;
                a->unreachable_ms = now;
                agent_controller_failed(a, now, "Controller unreachable: %s (%s)",
                                        curl_easy_strerror(result), agent_controller(a));
                return;
        }
        /* The controller's error code, when the answer is an error; it borrows body. */
        WireError werr;
        wire_error_parse(body, &werr);
        const char *code = werr.code;
        if (status == 307 || status == 308) {
                json_decref(body);
                agent_leader_follow(a, kind, leader, now);
                return;
        }
        if (status == 503) {
                /* A follower that knows no leader (no_leader), a controller on its way
                 * out (unavailable), or one whose agents hold all the connections they
                 * may (busy): after the pause, the next URL (or the same one again). */
                agent_controller_failed(a, now, "Controller at %s cannot answer: HTTP 503 %s",
                                        agent_controller(a), code ? code : "");
                json_decref(body);
                return;
        }
        if (status == 404 && kind == AGENT_REQUEST_SYNC) {
                log_warning("Controller does not know this node (%s): registering again",
                            code ? code : "404");
                json_decref(body);
                a->registered = false;
                return;
        }
        if (status == 409 && util_streq_ptr(code, "superseded")) {
                /* The controller read another sync of this node after this one (an
                 * older one of ours, delayed): it answers the newest; ask again. */
                agent_request_failed(a, now, "Controller answered a sync superseded by another");
                json_decref(body);
                return;
        }
        if (status == 409) {
                /* Another agent holds this node's lease (node_claimed), or the node was
                 * registered with another boot (boot_mismatch): register until the
                 * controller takes us, which it does once that lease has run out. */
                agent_request_failed(a, now,
                                     "Controller refused node %s to this agent: HTTP 409 %s "
                                     "(another agent with another state directory holds it; "
                                     "retrying until its lease runs out)",
                                     a->cfg.node, code ? code : "");
                a->registered = false;
                json_decref(body);
                return;
        }
        if (status == 401 || status == 403) {
                agent_request_failed(a, now,
                                     "Controller refused the agent's credentials: HTTP %ld %s "
                                     "(check --token-file; a token of role agent bound to "
                                     "node %s is needed)",
                                     status, code ? code : "", a->cfg.node);
                a->retry_at_ms = now + AGENT_RETRY_AUTH_MS;
                json_decref(body);
                return;
        }
        if (status != 200) {
                agent_request_failed(a, now, "Controller refused the request: HTTP %ld %s", status,
                                     code ? code : "");
                json_decref(body);
                return;
        }

        if (kind == AGENT_REQUEST_REGISTER) {
                WireRegisterAnswer ans;
                int r = wire_register_answer_parse(body, &ans);
                /* Before body goes: the answer's strings are its. */
                if (r == 0 && ans.log_key)
                        agent_logserver_set_key(a->logs, ans.log_key);
                json_decref(body);
                if (r < 0) {
                        agent_request_failed(a, now,
                                             "Controller sent a malformed answer to register");
                        return;
                }
                if (ans.lease_ms > 0)
                        a->lease_ms = ans.lease_ms;
                if (ans.sync_period_ms > 0)
                        a->sync_period_ms = ans.sync_period_ms;
                agent_contact_ok(a);
                log_info("Registered as %s with %s (lease %" PRId64 " ms, sync period %" PRId64
                         " ms)",
                         a->cfg.node, agent_controller(a), a->lease_ms, a->sync_period_ms);
                a->registered = true;
                a->version = 0; /* never a controller's: the next answer is whole */
                wire_sync_answer_clear(&a->desired);
                agent_sweep_orphans(a);
                a->dirty = true;
                return;
        }

        WireSyncAnswer ans;
        if (wire_sync_answer_parse(body, &ans) < 0) {
                agent_request_failed(a, now, "Controller sent a malformed answer to sync");
                return;
        }
        if (ans.unchanged && (ans.version != a->version || !a->desired.json)) {
                /* It cannot be the state we applied: ask for the whole one. */
                wire_sync_answer_clear(&ans);
                wire_sync_answer_clear(&a->desired);
                a->version = 0;
                agent_request_failed(a, now,
                                     "Controller answered sync with an unchanged "
                                     "version this agent does not have");
                return;
        }
        if (ans.lease_ms > 0)
                a->lease_ms = ans.lease_ms;
        agent_contact_ok(a);
        if (ans.lease_only) {
                /* A restarted controller, still loading, renewed the lease and said nothing
                 * more: the ranks stay as they are, reported exits included, until it
                 * answers whole. */
                log_debug("Controller renewed the lease only (version %" PRId64 " stays)",
                          a->version);
                wire_sync_answer_clear(&ans);
                return;
        }
        if (ans.unchanged)
                wire_sync_answer_clear(&ans);
        else {
                if (ans.version != a->version)
                        log_debug("Desired state version %" PRId64 ": %zu ranks", ans.version,
                                  ans.n_ranks);
                wire_sync_answer_clear(&a->desired);
                a->desired = ans;
                a->version = ans.version;
        }
        /* Again with an unchanged answer: exits reported since are let go of. */
        agent_converge(a, &a->desired, id, now);
}

static void agent_http_process(Agent *a, int64_t now) {
        int running;
        curl_multi_perform(a->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(a->multi, &left)))
                if (m->msg == CURLMSG_DONE && m->easy_handle == a->easy)
                        agent_request_done(a, m->data.result, now);
}

/*
 * Whether news drops the long-poll in flight: the controller must hear it now. A sync
 * that is not held answers soon; the news follows right after it. So it does once half
 * the lease is spent: the long-poll in flight is then late rather than held (the
 * controller restarted, or is behind), and its answer renews the lease, where a new
 * request would queue behind every other agent's while the lease runs out.
 */
static bool agent_news_drops_sync(const Agent *a, int64_t now) {
        return a->dirty && a->request == AGENT_REQUEST_SYNC && a->request_wait_ms > 0 &&
               now - a->last_contact_ms <= a->lease_ms / 2;
}

/* Starts the next request when one is due. */
static void agent_http_schedule(Agent *a, int64_t now) {
        if (a->request == AGENT_REQUEST_REGISTER)
                return;
        if (a->request == AGENT_REQUEST_SYNC) {
                if (agent_news_drops_sync(a, now))
                        agent_request_send(a, AGENT_REQUEST_SYNC, now);
                return;
        }
        if (now < a->retry_at_ms)
                return;
        agent_request_send(a, a->registered ? AGENT_REQUEST_SYNC : AGENT_REQUEST_REGISTER, now);
}

/* ---- Periodic work ---- */

static void agent_ckpts_clear(AgentCheckpoint *c, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(c[i].path);
        free(c);
}

static bool agent_scan_checkpoints(Agent *a);

/* Looks whether r has ended; logs it and asks for a sync when it has. */
static bool agent_rank_check_exit(Agent *a, Rank *r) {
        if (!rank_check_exit(r))
                return false;
        log_info("Rank %" PRId64 "/%" PRId64 "/%" PRId64 " exited with %s %d", r->key.job,
                 r->key.attempt, r->key.rank, r->exit.signaled ? "signal" : "code", r->exit.code);
        /* The restart resumes from the newest checkpoint the controller knows: report
         * one the rank may have committed just before it died along with its exit. */
        agent_scan_checkpoints(a);
        if ((r->exit.signaled || r->exit.code != 0) && !r->exit.start_failed && !r->stopping) {
                /* Evidence for the verdict, in the same sync as the exit: the log's tail
                 * for failure rules, and the devices' health, probed as that sync is
                 * built, so a GPU that failed under the rank (an XID, ECC errors) ends
                 * the attempt as the node's fault instead of waiting for the next
                 * periodic probe. */
                free(r->log_tail);
                r->log_tail = rank_table_log_tail(a->ranks, r->key);
                a->probe_before_sync = true;
        }
        a->dirty = true;
        return true;
}

/* Rescans checkpoint directories; true when the report changed. */
static bool agent_scan_checkpoints(Agent *a) {
        size_t n_ranks = rank_table_count(a->ranks), n = 0;
        AgentCheckpoint *c = xcalloc(n_ranks + 1, sizeof(*c));
        for (size_t i = 0; i < n_ranks; i++) {
                Rank *r = rank_table_at(a->ranks, i);
                if (!r->checkpoint_dir)
                        continue;
                size_t j;
                for (j = 0; j < n && c[j].job != r->key.job; j++)
                        ;
                if (j < n) {
                        /* Report it as the newest attempt's view of the job. */
                        if (r->key.attempt > c[j].attempt)
                                c[j].attempt = r->key.attempt;
                        continue;
                }
                int64_t step;
                char *path;
                if (agent_checkpoint_latest_as(&r->run_as, r->checkpoint_dir, &step, &path) <= 0)
                        continue;
                c[n++] = (AgentCheckpoint){
                        .job = r->key.job, .attempt = r->key.attempt, .step = step, .path = path};
        }

        bool changed = n != a->n_ckpts;
        for (size_t i = 0; !changed && i < n; i++)
                changed = c[i].job != a->ckpts[i].job || c[i].step != a->ckpts[i].step ||
                          c[i].attempt != a->ckpts[i].attempt ||
                          strcmp(c[i].path, a->ckpts[i].path) != 0;
        agent_ckpts_clear(a->ckpts, a->n_ckpts);
        a->ckpts = c;
        a->n_ckpts = n;
        return changed;
}

/*
 * Whether r hangs, as reported to the controller. With a hang_signal, a hang seen first
 * sends it (a stack dump into the rank's log) and is reported only after the grace, so
 * the stacks are there when the controller stops the attempt; progress meanwhile clears
 * it.
 */
static bool agent_rank_hung(Agent *a, Rank *r, int64_t boot) {
        bool hung = agent_progress_hung(&r->progress, r->hang_timeout_s, boot);
        if (!hung || r->hang_signal <= 0) {
                r->hang_signalled_ms = 0;
                return hung;
        }
        if (r->hang_signalled_ms == 0) {
                log_warning("Rank %" PRId64 "/%" PRId64 "/%" PRId64 " made no progress for %" PRId64
                            " s: sending %s, reporting the hang "
                            "in %" PRId64 " s",
                            r->key.job, r->key.attempt, r->key.rank, r->hang_timeout_s,
                            strsignal(r->hang_signal), r->hang_signal_grace_s);
                rank_signal(r, r->hang_signal);
                r->hang_signalled_ms = boot;
        }
        int64_t report_at = r->hang_signalled_ms + r->hang_signal_grace_s * 1000;
        if (boot >= report_at)
                return true;
        /* Look again when the grace ends, not a whole period later. */
        int64_t at = util_now_ms() + (report_at - boot);
        if (at < a->next_scan_ms)
                a->next_scan_ms = at;
        return false;
}

/*
 * Reads progress files and looks for exits missed. Returns true for news that cannot
 * wait for the next periodic sync (an exit, a hang); new steps simply ride along with
 * that sync, which comes at least once per period anyway.
 */
static bool agent_scan_ranks(Agent *a) {
        bool news = false;
        int64_t boot = util_boot_ms();
        for (size_t i = 0; i < rank_table_count(a->ranks); i++) {
                Rank *r = rank_table_at(a->ranks, i);
                if (agent_rank_check_exit(a, r)) {
                        news = true;
                        continue;
                }
                if (r->state != AGENT_RANK_RUNNING)
                        continue;
                _cleanup_free_ char *path = rank_table_progress_path(a->ranks, r->key);
                char content[AGENT_PROGRESS_MAX + 1];
                if (agent_progress_read(path, content, sizeof(content)) == 0)
                        agent_progress_update(&r->progress, content, boot);
                bool hung = agent_rank_hung(a, r, boot);
                if (hung != r->hung) {
                        if (hung)
                                log_warning("Rank %" PRId64 "/%" PRId64 "/%" PRId64
                                            " made no progress for %" PRId64 " s",
                                            r->key.job, r->key.attempt, r->key.rank,
                                            r->hang_timeout_s);
                        r->hung = hung;
                        news = true;
                }
        }
        return news;
}

static void agent_health_update(Agent *a, bool healthy, char *reason) {
        bool changed = healthy != a->health.healthy || !util_streq_ptr(reason, a->health.reason);
        if (changed) {
                if (healthy)
                        log_info("Node healthy again");
                else
                        log_warning("Node unhealthy: %s", reason);
                a->dirty = true;
        }
        free(a->health.reason);
        a->health.healthy = healthy;
        a->health.reason = reason;
}

/* The node's health: both verdicts, joined, within the size the controller takes. */
static void agent_health_combine(Agent *a) {
        const char *parts[] = {a->state_reason, a->cmd_reason, a->probe_reason};
        char *joined = NULL;
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                if (!parts[i])
                        continue;
                char *next =
                        xasprintf("%s%s%s", joined ? joined : "", joined ? "; " : "", parts[i]);
                free(joined);
                joined = next;
        }
        char *reason = NULL;
        if (joined) {
                reason = agent_health_reason_trim(joined, strlen(joined));
                free(joined);
                if (!reason)
                        reason = xstrdup("unhealthy");
        }
        agent_health_update(a, reason == NULL, reason);
}

/* After a rank could not be laid out: healthy again once the state dir takes a write. */
static void agent_state_dir_probe(Agent *a) {
        if (!a->state_reason)
                return;
        _cleanup_free_ char *path = xasprintf("%s/.write-probe", a->cfg.state_dir);
        char page[4096] = {0};
        if (util_write_file_atomic(path, page, sizeof(page)) < 0)
                return;
        unlink(path);
        log_info("State dir %s takes writes again", a->cfg.state_dir);
        free(a->state_reason);
        a->state_reason = NULL;
        agent_health_combine(a);
}

/* Asks every backend about its devices (none is fine: a backend then says healthy). */
static void agent_health_probe(Agent *a) {
        char *reason = NULL;
        for (size_t b = 0; accel_backends[b]; b++) {
                const AccelBackend *backend = accel_backends[b];
                if (!backend->health)
                        continue;
                /* This backend's devices are a contiguous run of the inventory. */
                size_t first = 0, n = 0;
                for (size_t i = 0; i < a->inv.n_devs; i++)
                        if (a->inv.devs[i].backend == backend && n++ == 0)
                                first = i;
                char *why = NULL;
                int r = backend->health(a->inv.devs + first, n, &a->accel_cfg, &why);
                if (r < 0)
                        log_debug("Health probe of %s failed: %s", backend->name, strerror(-r));
                if (r == 1) {
                        /* Backends name the device in their reason already. */
                        char *joined =
                                xasprintf("%s%s%s%s", reason ? reason : "", reason ? "; " : "",
                                          why ? why : backend->name, why ? "" : ": unhealthy");
                        free(reason);
                        reason = joined;
                }
                free(why);
        }
        free(a->probe_reason);
        a->probe_reason = reason;
}

static void agent_health_tick(Agent *a, int64_t now) {
        if (now < a->next_health_ms)
                return;
        a->next_health_ms = now + a->cfg.health_interval_ms;
        if (a->healthcmd && !agent_healthcmd_running(a->healthcmd)) {
                int r = agent_healthcmd_start(a->healthcmd, now);
                if (r < 0)
                        log_warning("Cannot run the health command: %s", strerror(-r));
        }
        agent_health_probe(a);
        agent_health_combine(a);
        agent_state_dir_probe(a);
}

static void agent_healthcmd_poll(Agent *a, int64_t now) {
        if (!a->healthcmd)
                return;
        bool healthy;
        char *reason;
        if (agent_healthcmd_process(a->healthcmd, now, &healthy, &reason) <= 0)
                return;
        free(a->cmd_reason);
        a->cmd_reason = healthy ? NULL : reason;
        if (healthy)
                free(reason);
        agent_health_combine(a);
}

static void agent_fence_check(Agent *a, int64_t now) {
        if (a->fenced || now - a->last_contact_ms < a->lease_ms)
                return;
        a->fenced = true;
        size_t n = 0;
        for (size_t i = 0; i < rank_table_count(a->ranks); i++) {
                Rank *r = rank_table_at(a->ranks, i);
                if (r->state != AGENT_RANK_RUNNING)
                        continue;
                rank_kill(r, now, a->cfg.kill_grace_ms);
                n++;
        }
        if (n > 0)
                log_warning("No successful sync for %" PRId64 " ms (lease %" PRId64
                            " ms): killing %zu ranks",
                            now - a->last_contact_ms, a->lease_ms, n);
}

static void agent_periodic(Agent *a, int64_t now) {
        if (now >= a->next_scan_ms) {
                a->next_scan_ms = now + a->sync_period_ms;
                /* Steps, hangs and checkpoints ride on the next sync (at most one period
                 * away): aborting the long-poll for them would, with progress every
                 * period, keep any sync from completing and the lease from renewing. */
                agent_scan_ranks(a);
                agent_scan_checkpoints(a);
        }
        agent_health_tick(a, now);
        agent_healthcmd_poll(a, now);
        rank_table_tick(a->ranks, now);
        agent_fence_check(a, now);
}

static int64_t agent_next_deadline(const Agent *a) {
        int64_t next = a->next_scan_ms;
        if (a->next_health_ms < next)
                next = a->next_health_ms;
        if (a->healthcmd && agent_healthcmd_deadline(a->healthcmd) < next)
                next = agent_healthcmd_deadline(a->healthcmd);
        if (rank_table_next_deadline(a->ranks) < next)
                next = rank_table_next_deadline(a->ranks);
        if (!a->fenced && a->last_contact_ms + a->lease_ms < next)
                next = a->last_contact_ms + a->lease_ms;
        if (a->request == AGENT_REQUEST_NONE && a->retry_at_ms < next)
                next = a->retry_at_ms;
        return next;
}

/* ---- The loop ---- */

static int agent_signals_open(void) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        return fd < 0 ? -errno : fd;
}

static void agent_signal_read(Agent *a) {
        struct signalfd_siginfo si;
        while (read(a->sigfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                log_info("Received %s: exiting, ranks keep running",
                         si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
                a->quit = true;
        }
}

int agent_run(Agent *a) {
        int r = agent_signals_open();
        if (r < 0)
                return log_error_errno(r, "Cannot set up signal handling: %s", strerror(-r));
        a->sigfd = r;

        int64_t now = util_now_ms();
        a->last_contact_ms = now;
        a->next_scan_ms = now;
        a->next_health_ms = now;

        struct curl_waitfd *fds = NULL;
        Rank **fd_ranks = NULL;
        while (!a->quit) {
                now = util_now_ms();
                agent_periodic(a, now);
                agent_http_schedule(a, now);

                /* Extra descriptors: the signalfd, rank pidfds, the health command. */
                size_t cap = 3 + rank_table_count(a->ranks), n = 0;
                fds = xrealloc(fds, cap * sizeof(*fds));
                fd_ranks = xrealloc(fd_ranks, cap * sizeof(*fd_ranks));
                fds[n] = (struct curl_waitfd){.fd = a->sigfd, .events = CURL_WAIT_POLLIN};
                fd_ranks[n++] = NULL;
                for (size_t i = 0; i < rank_table_count(a->ranks); i++) {
                        Rank *rk = rank_table_at(a->ranks, i);
                        if (rk->state != AGENT_RANK_RUNNING || rk->pidfd < 0)
                                continue;
                        fds[n] = (struct curl_waitfd){.fd = rk->pidfd, .events = CURL_WAIT_POLLIN};
                        fd_ranks[n++] = rk;
                }
                int hfds[2];
                size_t nh = a->healthcmd ? agent_healthcmd_fds(a->healthcmd, hfds) : 0;
                for (size_t i = 0; i < nh; i++) {
                        fds[n] = (struct curl_waitfd){.fd = hfds[i], .events = CURL_WAIT_POLLIN};
                        fd_ranks[n++] = NULL;
                }

                int64_t timeout = agent_next_deadline(a) - now;
                if (agent_news_drops_sync(a, now))
                        timeout = 0;
                if (timeout < 0)
                        timeout = 0;
                if (timeout > 1000)
                        timeout = 1000;
                curl_multi_poll(a->multi, fds, (unsigned) n, (int) timeout, NULL);

                /* Rank exits first: converging below may free ranks in fd_ranks. */
                for (size_t i = 0; i < n; i++) {
                        if (!fds[i].revents)
                                continue;
                        if (fds[i].fd == a->sigfd)
                                agent_signal_read(a);
                        else if (fd_ranks[i])
                                agent_rank_check_exit(a, fd_ranks[i]);
                }
                now = util_now_ms();
                agent_healthcmd_poll(a, now);
                agent_http_process(a, now);
        }
        free(fds);
        free(fd_ranks);
        return 0;
}
