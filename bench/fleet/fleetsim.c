/* SPDX-License-Identifier: MIT */
/*
 * A fleet of simulated agents in one process, driving a real axctld over loopback
 * (bench/fleet/README.md). Each agent speaks the agent protocol as axagent does: it
 * registers, then keeps one sync in flight, long-polled while it has no news; news (a
 * rank that ended) drops the held poll and goes out at once with wait_ms=0 on a new
 * connection. Ranks "run" for a random time and exit 0. A submitter keeps a backlog of
 * 8-rank jobs waiting. Agents that hear nothing for a lease fence their ranks, as the
 * real supervisors do, and are counted. Agents take the short "unchanged" answer and the
 * "lease_only" one, as axagent does, unless --no-unchanged (neither) or --no-lease-only
 * makes them agents older than it. Ranks report step 1
 * throughout, or, with --step-s, a step that grows every that many seconds from their
 * start (the ranks of a job started together step together, as data-parallel training).
 * --vanish N --vanish-at S: S seconds in, N agents spread over the fleet vanish as a
 * powered-off host does, without a FIN: each stops once its request in flight is all
 * written, reads nothing more and keeps its connection open; the output names them with
 * the wall time (ms) of that last request's send, which bounds the controller's last
 * contact from below.
 * --no-hold: agents that the controller never holds: each sync asks wait_ms=0 and the next
 * goes a second after the last one's send, or at once with news. Not a protocol axagent
 * speaks: it measures what holding syncs costs the controller at the same request rate.
 * Each node's first job starts part-way through its run, so the churn is steady
 * (job_part_left); --synchronized-start starts them all at their beginning.
 *
 *   fleetsim --url http://127.0.0.1:PORT --nodes N [--seconds S] [--backlog B]
 *            [--rank-min-s A --rank-max-s B] [--ramp-per-s R] [--prefix P] [--warmup-s W]
 *            [--no-unchanged] [--no-lease-only] [--step-s T] [--token-file PATH]
 *            [--node-token-file PATH] [--vanish N --vanish-at S] [--no-hold]
 *            [--synchronized-start]
 *
 * --token-file: every request's bearer token. --node-token-file: a secret S from which
 * each agent's own token is S.NODE (fleet.py stores those tokens, bound to their nodes),
 * as a fleet whose nodes each have an agent token; the submitters keep --token-file's.
 *
 * Prints one JSON object of figures on stdout when done (or on SIGINT/SIGTERM).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "token.h"
#include "util.h"

#define MAX_RANKS 16
#define GPUS 8
#define RETRY_MS 250
#define SUBMITTERS 4

typedef struct SimRank {
        int64_t job;
        int attempt, rank;
        int64_t start_ms;
        int64_t end_ms; /* when it exits on its own */
        bool exited;
        bool listed; /* in the last whole answer: what an unchanged one means */
        int exit_code, signal;
} SimRank;

typedef enum Kind {
        KIND_AGENT,
        KIND_SUBMIT
} Kind;

typedef struct Conn {
        Kind kind;
        int idx;
        int fd;
        bool connected;
        char *out;
        size_t out_len, out_off;
        char *in;
        size_t in_len, in_cap;
        int64_t sent_ms; /* wall of this request's send, for its latency */
        /* CLOCK_REALTIME ms: the request's last byte written, and the answer's last bytes
         * arriving at the socket (the kernel's timestamp): the controller's latency, without
         * this process's own delays in writing and reading (exit_sync_wire_*). */
        double written_ms, arrived_ms;
        int64_t wait_ms; /* the long-poll asked for */
        bool urgent; /* carries an exited rank */
        bool busy;
        const char *auth_header; /* NULL: opt.auth_header */
} Conn;

typedef struct Agent {
        char name[48], agent_id[40], boot_id[40];
        Conn c;
        bool registered;
        bool ever_registered; /* counted in n_agents_up */
        int64_t version;
        int64_t last_answer_ms; /* send time of the last answered request: the lease start */
        bool failed; /* a request failed since the last answer */
        int64_t spent_at_failure_ms; /* of its lease at the first (a fence moves
                                      * last_answer_ms later) */
        int64_t failed_at_ms; /* the first */
        int failures; /* requests failed since the last answer */
        int64_t retry_at_ms;
        int64_t next_end_ms;
        bool dirty;
        bool vanishing, vanished; /* --vanish: chosen; stopped for good */
        int64_t next_sync_ms; /* --no-hold: when the next sync without news goes */
        int64_t vanished_last_send_wall_ms;
        bool started; /* has started ranks (its first job started part-way: job_part_left) */
        SimRank ranks[MAX_RANKS];
        int n_ranks;
} Agent;

static struct {
        const char *host;
        int port;
        int nodes;
        int seconds;
        int backlog;
        int rank_min_ms, rank_max_ms;
        int ramp_per_s;
        const char *prefix;
        int lease_ms;
        int warmup_s; /* figures count from then on */
        bool whole_only; /* never ask for the short answer (an older agent) */
        bool no_lease_only; /* never ask for the lease-only answer (an older agent) */
        bool no_shared_env; /* never ask for shared environments (an older agent) */
        int gang_nodes; /* nodes per job, 8 ranks on each */
        int step_ms; /* a rank's step grows every step_ms; 0: it stays 1 */
        int vanish, vanish_at_s; /* --vanish N agents at S seconds in */
        bool no_hold; /* syncs never long-polled (see --no-hold) */
        bool synchronized_start; /* every node's first job starts at its beginning */
        const char *auth_header; /* "Authorization: Bearer ...\r\n" with --token-file, or "" */
        char *node_token_secret; /* --node-token-file's */
} opt = {.warmup_s = 20,
         .nodes = 100,
         .seconds = 60,
         .backlog = 200,
         .rank_min_ms = 30000,
         .rank_max_ms = 60000,
         .ramp_per_s = 2000,
         .prefix = "sim",
         .lease_ms = 5000,
         .gang_nodes = 1,
         .auth_header = ""};

static int ep;
static Agent *agents;
static Conn submitters[SUBMITTERS];
static volatile sig_atomic_t stop;

/* Figures. */
typedef struct Latencies {
        double *ms;
        size_t n, cap;
} Latencies;
/* A sync's with an exited rank: from its queueing to its answer read, as this loop sees
 * it; and on the wire, from its last byte written to its answer's arrival. */
static Latencies exit_lat, exit_wire_lat;
static long n_agents_up; /* agents that registered at least once */
static long n_syncs, n_registers, n_connect_fail, n_http_errors, n_404, n_409, n_fences,
        n_rank_starts, n_rank_exits, n_submits, n_submit_fail, n_unchanged, n_lease_only;
static long status_counts[6];
static int64_t max_silence_ms;
/* An outage (a controller killed): when the first request failed, and per agent that
 * failed, how long after that its next answer came and how much of its lease it had
 * spent when it failed. */
static int64_t outage_at_ms;
static Latencies recovery, silence_at_failure;
static int64_t measure_from_ms;

static double ms_of(const struct timespec *ts) {
        return (double) ts->tv_sec * 1000.0 + (double) ts->tv_nsec / 1e6;
}

static double now_ms_f(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return ms_of(&ts);
}

static void conn_close(Conn *c) {
        if (c->fd >= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
        }
        c->fd = -1;
        c->connected = false;
        c->busy = false;
        c->in_len = 0;
        free(c->out);
        c->out = NULL;
}

static int conn_open(Conn *c) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) opt.port)};
        inet_pton(AF_INET, opt.host, &sa.sin_addr);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
                int e = errno;
                close(fd);
                return -e;
        }
        c->fd = fd;
        c->connected = false;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        return 0;
}

/* Queues a request on c (reusing its connection when it is open). */
static int conn_request(Conn *c, const char *path, const char *body) {
        size_t blen = strlen(body);
        const char *auth = c->auth_header ? c->auth_header : opt.auth_header;
        free(c->out);
        c->out_len = (size_t) asprintf(&c->out,
                                       "POST %s HTTP/1.1\r\nHost: %s:%d\r\n%s"
                                       "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                                       "\r\n%s",
                                       path, opt.host, opt.port, auth, blen, body);
        c->out_off = 0;
        c->in_len = 0;
        c->busy = true;
        c->written_ms = c->arrived_ms = 0;
        c->sent_ms = util_now_ms();
        if (c->fd < 0) {
                int r = conn_open(c);
                if (r < 0) {
                        c->busy = false;
                        return r;
                }
        } else {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
        return 0;
}

static void agent_init(Agent *a, int i) {
        snprintf(a->name, sizeof(a->name), "%s%05d", opt.prefix, i);
        snprintf(a->agent_id, sizeof(a->agent_id), "%08x%08x%08x%08x", (unsigned) rand(),
                 (unsigned) rand(), (unsigned) i, (unsigned) getpid());
        snprintf(a->boot_id, sizeof(a->boot_id), "boot-%s", opt.prefix);
        a->c = (Conn){.kind = KIND_AGENT, .idx = i, .fd = -1};
        if (opt.node_token_secret &&
            asprintf((char **) &a->c.auth_header, "Authorization: Bearer %s.%s\r\n",
                     opt.node_token_secret, a->name) < 0)
                abort();
        a->next_end_ms = INT64_MAX;
}

static json_int_t rank_step(const SimRank *r) {
        return opt.step_ms > 0 ? 1 + (util_now_ms() - r->start_ms) / opt.step_ms : 1;
}

/* A request of a's failed: the first since its last answer starts its outage (and the
 * fleet's, if none did yet). */
static void agent_failed(Agent *a) {
        int64_t now = util_now_ms();
        if (!a->registered || now < measure_from_ms)
                return;
        a->failures++;
        if (a->failed)
                return;
        a->failed = true;
        a->failed_at_ms = now;
        a->spent_at_failure_ms = now - a->last_answer_ms;
        if (!outage_at_ms)
                outage_at_ms = now;
}

static void agent_send(Agent *a) {
        json_t *body;
        char path[128];
        if (!a->registered) {
                json_t *acc = json_array();
                for (int d = 0; d < GPUS; d++) {
                        char bus[32], uuid[64];
                        snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + d);
                        snprintf(uuid, sizeof(uuid), "GPU-%s-%d", a->name, d);
                        json_array_append_new(
                                acc, json_pack("{s:s,s:s,s:i,s:s,s:i,s:s}", "kind", "nvidia-h100",
                                               "model", "H100 SXM5 80GB", "index", d, "pci_bus_id",
                                               bus, "numa_node", d / 4, "uuid", uuid));
                }
                /* An address of its own, as a fleet's hosts have: it goes into the host
                 * list of every gang on the node. Nothing connects to it here. */
                char address[32];
                int idx = (int) (a - agents);
                snprintf(address, sizeof(address), "10.%d.%d.%d:9", idx >> 16 & 255, idx >> 8 & 255,
                         idx & 255);
                body = json_pack("{s:s,s:s,s:s,s:s,s:s,s:{},s:{s:i,s:i,s:i,s:o}}", "node", a->name,
                                 "hostname", a->name, "address", address, "boot_id", a->boot_id,
                                 "agent_id", a->agent_id, "labels", "inventory", "cpus", 96,
                                 "memory_mb", 1024 * 1024, "numa_nodes", 2, "accelerators", acc);
                snprintf(path, sizeof(path), "/v1/agent/register");
                a->c.wait_ms = 0;
                a->c.urgent = false;
        } else {
                json_t *ranks = json_array();
                bool urgent = false;
                for (int i = 0; i < a->n_ranks; i++) {
                        SimRank *r = &a->ranks[i];
                        json_t *o = json_pack("{s:I,s:i,s:i,s:s,s:i,s:I}", "job",
                                              (json_int_t) r->job, "attempt", r->attempt, "rank",
                                              r->rank, "state", r->exited ? "exited" : "running",
                                              "pid", 1000 + i, "step", rank_step(r));
                        if (r->exited) {
                                urgent = true;
                                if (r->signal)
                                        json_object_set_new(o, "signal", json_integer(r->signal));
                                else
                                        json_object_set_new(o, "exit_code",
                                                            json_integer(r->exit_code));
                        }
                        json_array_append_new(ranks, o);
                }
                body = json_pack("{s:s,s:s,s:s,s:o,s:[],s:{s:b,s:s}}", "node", a->name, "boot_id",
                                 a->boot_id, "agent_id", a->agent_id, "ranks", ranks, "checkpoints",
                                 "health", "healthy", 1, "reason", "");
                /* As axagent: news, or a lease half spent, is not held. */
                a->c.wait_ms = opt.no_hold || a->dirty ||
                                               util_now_ms() - a->last_answer_ms > opt.lease_ms / 2
                                       ? 0
                                       : 1000;
                a->c.urgent = urgent && a->dirty;
                snprintf(path, sizeof(path), "/v1/agent/sync?wait_ms=%lld&version=%lld%s%s%s",
                         (long long) a->c.wait_ms, (long long) a->version,
                         opt.whole_only && opt.no_shared_env ? "" : "&accept=",
                         opt.whole_only      ? ""
                         : opt.no_lease_only ? "unchanged,"
                                             : "unchanged,lease_only,",
                         opt.no_shared_env ? "" : "shared_env");
        }
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        a->dirty = false;
        if (conn_request(&a->c, path, text) < 0) {
                n_connect_fail++;
                agent_failed(a);
                a->retry_at_ms = util_now_ms() + RETRY_MS;
        }
        free(text);
}

/*
 * The share of its run a job's ranks have left when a node starts its first job. The whole
 * fleet registers within seconds; if every first job started at its beginning, the fleet's
 * jobs would end and be replaced in waves a job's length apart (rank exits per 2 s swung
 * fivefold over a minute at 10,000 nodes), for many generations, since a job ends with its
 * last rank, at a nearly fixed time. A fleet that has run a while holds jobs at every point
 * of their run: the first jobs start part-way through, the same share for all of a job's
 * ranks (a hash of its id), so the churn is steady from the first generation on.
 * --synchronized-start keeps the waves.
 */
static double job_part_left(int64_t job) {
        uint32_t h = (uint32_t) ((uint64_t) job * 2654435761u);
        return ((double) h + 1.0) / 4294967296.0;
}

static void agent_recompute_end(Agent *a) {
        a->next_end_ms = INT64_MAX;
        for (int i = 0; i < a->n_ranks; i++)
                if (!a->ranks[i].exited && a->ranks[i].end_ms < a->next_end_ms)
                        a->next_end_ms = a->ranks[i].end_ms;
}

/* Applies a sync answer: starts new desired ranks, kills undesired ones, forgets
 * exited ranks the controller no longer lists. */
static void agent_apply(Agent *a, json_t *ans, int64_t now) {
        json_t *v = json_object_get(ans, "version");
        json_t *desired = json_object_get(ans, "ranks");
        if (json_is_true(json_object_get(ans, "lease_only"))) {
                n_lease_only++; /* the lease renewed, nothing else: ranks stay as they are */
                return;
        }
        if (json_is_true(json_object_get(ans, "unchanged"))) {
                n_unchanged++;
                if (json_integer_value(v) != a->version) {
                        n_http_errors++; /* not the state we applied: ask for it whole */
                        a->version = 0;
                        return;
                }
                /* The last whole answer still holds: exits reported since are let go. */
                for (int k = 0; k < a->n_ranks; k++)
                        if (a->ranks[k].exited && !a->ranks[k].listed)
                                a->ranks[k--] = a->ranks[--a->n_ranks];
                return;
        }
        if (!json_is_integer(v) || !json_is_array(desired))
                return;
        a->version = json_integer_value(v);
        bool listed[MAX_RANKS] = {0};
        size_t i;
        json_t *d;
        json_array_foreach(desired, i, d) {
                int64_t job = json_integer_value(json_object_get(d, "job"));
                int attempt = (int) json_integer_value(json_object_get(d, "attempt"));
                int rank = (int) json_integer_value(json_object_get(d, "rank"));
                int k;
                for (k = 0; k < a->n_ranks; k++)
                        if (a->ranks[k].job == job && a->ranks[k].attempt == attempt &&
                            a->ranks[k].rank == rank)
                                break;
                if (k < a->n_ranks) {
                        listed[k] = true;
                        continue;
                }
                if (a->n_ranks == MAX_RANKS)
                        continue;
                int span = opt.rank_max_ms - opt.rank_min_ms;
                int64_t run_ms = opt.rank_min_ms + (span > 0 ? rand() % span : 0);
                if (!a->started && !opt.synchronized_start)
                        run_ms = (int64_t) ((double) run_ms * job_part_left(job));
                a->ranks[a->n_ranks] = (SimRank){.job = job,
                                                 .attempt = attempt,
                                                 .rank = rank,
                                                 .start_ms = now,
                                                 .end_ms = now + run_ms};
                listed[a->n_ranks++] = true;
                n_rank_starts++;
                a->dirty = true; /* report it running */
        }
        for (int k = 0; k < a->n_ranks; k++) {
                if (listed[k])
                        continue;
                if (a->ranks[k].exited) { /* confirmed: forget it */
                        a->ranks[k] = a->ranks[--a->n_ranks];
                        listed[k] = listed[a->n_ranks];
                        k--;
                        continue;
                }
                a->ranks[k].exited = true; /* stopped by the controller */
                a->ranks[k].signal = 9;
                a->dirty = true;
        }
        for (int k = 0; k < a->n_ranks; k++)
                a->ranks[k].listed = listed[k];
        a->started |= a->n_ranks > 0;
        agent_recompute_end(a);
}

static void record_latency(Latencies *l, double ms) {
        if (l->n == l->cap) {
                l->cap = l->cap ? l->cap * 2 : 4096;
                l->ms = realloc(l->ms, l->cap * sizeof(double));
        }
        l->ms[l->n++] = ms;
}

/* The answers after the outage that ended the longest silences, for the report's
 * restart_tail: who sets the longest silence of a restart. */
typedef struct TailAgent {
        int64_t silence_ms, spent_ms, failed_ms, answered_ms; /* the last two after the outage */
        int failures;
        bool failed; /* a request of the agent failed: spent_ms and failed_ms tell when */
        const char *answer; /* "whole", "unchanged" or "lease_only" */
} TailAgent;
#define TAIL 5
static TailAgent tail[TAIL];

static void tail_note(const Agent *a, int64_t now, const char *body, size_t len) {
        TailAgent t = {.silence_ms = now - a->last_answer_ms,
                       .spent_ms = a->spent_at_failure_ms,
                       .failed_ms = a->failed_at_ms - outage_at_ms,
                       .failed = a->failed,
                       .answered_ms = now - outage_at_ms,
                       .failures = a->failures,
                       .answer = !body                                          ? "whole"
                                 : memmem(body, len, "\"unchanged\":true", 16)  ? "unchanged"
                                 : memmem(body, len, "\"lease_only\":true", 17) ? "lease_only"
                                                                                : "whole"};
        int i = TAIL;
        while (i > 0 && tail[i - 1].silence_ms < t.silence_ms) {
                if (i < TAIL)
                        tail[i] = tail[i - 1];
                i--;
        }
        if (i < TAIL)
                tail[i] = t;
}

static void agent_answer(Agent *a, int status, const char *body, size_t len, double latency,
                         double wire_latency) {
        int64_t now = util_now_ms();
        status_counts[status / 100 < 6 ? status / 100 : 0]++;
        if (status == 404) {
                n_404++;
                a->registered = false;
                a->retry_at_ms = now + RETRY_MS / 2 + rand() % RETRY_MS;
                return;
        }
        if (status == 409)
                n_409++;
        if (status != 200) {
                n_http_errors++;
                agent_failed(a);
                a->retry_at_ms = now + RETRY_MS / 2 + rand() % RETRY_MS;
                return;
        }
        if (a->failed) { /* the outage began with this failure or before it */
                record_latency(&recovery, (double) (now - outage_at_ms));
                record_latency(&silence_at_failure, (double) a->spent_at_failure_ms);
        }
        if (outage_at_ms && a->last_answer_ms)
                tail_note(a, now, body, len);
        a->failed = false;
        a->failures = 0;
        a->last_answer_ms = a->c.sent_ms;
        a->next_sync_ms = opt.no_hold ? a->c.sent_ms + 1000 : 0;
        json_error_t jerr;
        json_t *ans = json_loadb(body, len, 0, &jerr);
        if (!a->registered) {
                a->registered = true;
                n_registers++;
                if (!a->ever_registered) {
                        a->ever_registered = true;
                        n_agents_up++;
                }
                a->version = 0;
        } else {
                n_syncs++;
                if (a->c.urgent && a->c.sent_ms >= measure_from_ms) {
                        record_latency(&exit_lat, latency);
                        if (wire_latency >= 0)
                                record_latency(&exit_wire_lat, wire_latency);
                }
                if (ans)
                        agent_apply(a, ans, now);
        }
        json_decref(ans);
        a->retry_at_ms = 0;
}

static char *spec_text;

static void submit_one(Conn *c) {
        conn_request(c, "/v1/jobs", spec_text);
}

static long submits_wanted;

/* Parses a complete HTTP answer in c->in; returns its status and body, or 0 if more is
 * needed, -1 when it is malformed. */
static int http_parse(Conn *c, const char **body, size_t *len) {
        if (c->in_len == 0)
                return 0;
        c->in[c->in_len] = '\0';
        char *end = strstr(c->in, "\r\n\r\n");
        if (!end)
                return 0;
        int status = 0;
        if (sscanf(c->in, "HTTP/1.%*d %d", &status) != 1)
                return -1;
        size_t clen = 0;
        char *cl = strcasestr(c->in, "\r\nContent-Length:");
        if (cl && cl < end)
                clen = strtoul(cl + 17, NULL, 10);
        size_t head = (size_t) (end + 4 - c->in);
        if (c->in_len < head + clen)
                return 0;
        *body = end + 4;
        *len = clen;
        return status;
}

static void conn_event(Conn *c, uint32_t events) {
        if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
                goto failed;
        }
        if (events & EPOLLOUT) {
                c->connected = true;
                while (c->out && c->out_off < c->out_len) {
                        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
                        if (n < 0) {
                                if (errno == EAGAIN)
                                        break;
                                goto failed;
                        }
                        c->out_off += (size_t) n;
                        if (c->out_off == c->out_len)
                                c->written_ms = now_ms_f(CLOCK_REALTIME);
                }
                if (!c->out || c->out_off == c->out_len) {
                        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
        }
        if (events & EPOLLIN) {
                for (;;) {
                        if (c->in_cap - c->in_len < 65536) {
                                c->in_cap = c->in_cap ? c->in_cap * 2 : 131072;
                                c->in = realloc(c->in, c->in_cap + 1);
                        }
                        struct iovec iov = {c->in + c->in_len, c->in_cap - c->in_len};
                        union {
                                char buf[CMSG_SPACE(sizeof(struct timespec))];
                                struct cmsghdr align;
                        } control;
                        struct msghdr msg = {.msg_iov = &iov,
                                             .msg_iovlen = 1,
                                             .msg_control = control.buf,
                                             .msg_controllen = sizeof(control.buf)};
                        ssize_t n = recvmsg(c->fd, &msg, 0);
                        if (n == 0)
                                goto failed;
                        if (n < 0) {
                                if (errno == EAGAIN)
                                        break;
                                goto failed;
                        }
                        c->in_len += (size_t) n;
                        for (struct cmsghdr *m = CMSG_FIRSTHDR(&msg); m; m = CMSG_NXTHDR(&msg, m))
                                if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_TIMESTAMPNS)
                                        c->arrived_ms = ms_of((struct timespec *) CMSG_DATA(m));
                }
                const char *body;
                size_t len;
                int status = http_parse(c, &body, &len);
                if (status < 0)
                        goto failed;
                if (status == 0)
                        return;
                double latency = now_ms_f(CLOCK_MONOTONIC) - (double) c->sent_ms;
                c->busy = false;
                c->in_len = 0;
                if (c->kind == KIND_AGENT)
                        agent_answer(&agents[c->idx], status, body, len, latency,
                                     c->written_ms > 0 && c->arrived_ms > 0
                                             ? c->arrived_ms - c->written_ms
                                             : -1);
                else if (status == 201 || status == 200)
                        n_submits++;
                else
                        n_submit_fail++;
                return;
        }
        return;
failed:
        if (c->kind == KIND_AGENT) {
                if (!c->connected)
                        n_connect_fail++;
                else
                        n_http_errors++;
                agent_failed(&agents[c->idx]);
                agents[c->idx].retry_at_ms = util_now_ms() + RETRY_MS / 2 + rand() % RETRY_MS;
        } else
                n_submit_fail++;
        conn_close(c);
}

/*
 * A chosen agent vanishes once the controller can have all of its last request: it
 * keeps the connection open and reads nothing, as a host that lost power sends no FIN.
 */
static bool agent_vanish(Agent *a) {
        Conn *c = &a->c;
        if (!a->registered || (c->busy && (!c->out || c->out_off < c->out_len)))
                return false;
        /* The request in flight, all written; else the last one answered (one that
         * failed may never have reached the controller). */
        int64_t sent_ms = c->busy ? c->sent_ms : a->last_answer_ms;
        a->vanished = true;
        a->vanished_last_send_wall_ms = sent_ms + (util_wall_ms() - util_now_ms());
        if (c->fd >= 0)
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        return true;
}

/* Picks the --vanish agents, spread evenly over the fleet. */
static void agents_choose_vanishing(void) {
        for (int k = 0; k < opt.vanish; k++)
                agents[(int) ((2L * k + 1) * opt.nodes / (2L * opt.vanish))].vanishing = true;
}

/* Rank ends, lease fencing and due requests of every agent. */
/* Rank exits per 2 s over the measured window: how steady the churn is (exit_wave). */
#define EXIT_BIN_MS 2000
static long exit_bins[4096];
static int n_exit_bins;

static void count_exit(int64_t now) {
        int64_t b = (now - measure_from_ms) / EXIT_BIN_MS;
        if (now < measure_from_ms || b >= 4096)
                return;
        exit_bins[b]++;
        if (b >= n_exit_bins)
                n_exit_bins = (int) b + 1;
}

/* The busiest 2 s's rank exits over the mean of the whole ones. */
static double exit_wave(int64_t end) {
        int whole = (int) ((end - measure_from_ms) / EXIT_BIN_MS);
        long max = 0, sum = 0;
        for (int i = 0; i < whole && i < n_exit_bins; i++) {
                sum += exit_bins[i];
                max = exit_bins[i] > max ? exit_bins[i] : max;
        }
        return sum > 0 ? (double) max * whole / (double) sum : 0;
}

static void agents_tick(int64_t now, int active) {
        for (int i = 0; i < active; i++) {
                Agent *a = &agents[i];
                if (a->vanished || (a->vanishing && agent_vanish(a)))
                        continue;
                if (a->next_end_ms <= now) {
                        for (int k = 0; k < a->n_ranks; k++)
                                if (!a->ranks[k].exited && a->ranks[k].end_ms <= now) {
                                        a->ranks[k].exited = true;
                                        a->ranks[k].exit_code = 0;
                                        n_rank_exits++;
                                        count_exit(now);
                                        a->dirty = true;
                                }
                        agent_recompute_end(a);
                }
                if (a->registered && a->last_answer_ms) {
                        int64_t silent = now - a->last_answer_ms;
                        if (silent > max_silence_ms && now >= measure_from_ms)
                                max_silence_ms = silent;
                        if (silent > opt.lease_ms && a->n_ranks > 0) {
                                /* The supervisors fence every rank; the agent reports them. */
                                n_fences++;
                                for (int k = 0; k < a->n_ranks; k++)
                                        if (!a->ranks[k].exited) {
                                                a->ranks[k].exited = true;
                                                a->ranks[k].signal = 9;
                                        }
                                a->dirty = true;
                                a->last_answer_ms = now; /* count a fence once per lease */
                        }
                }
                if (a->c.busy) {
                        /* News drops a held long-poll while the lease is less than
                         * half spent, as axagent does. */
                        if (a->dirty && a->c.wait_ms > 0 && a->registered &&
                            now - a->last_answer_ms <= opt.lease_ms / 2) {
                                conn_close(&a->c);
                                agent_send(a);
                        }
                        continue;
                }
                if (now >= a->retry_at_ms && (now >= a->next_sync_ms || a->dirty))
                        agent_send(a);
        }
}

static double percentile(double *v, size_t n, double p) {
        if (n == 0)
                return 0;
        size_t k = (size_t) (p * (double) (n - 1));
        return v[k];
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void on_signal(int sig) {
        (void) sig;
        stop = 1;
}

static void usage(void) {
        fprintf(stderr, "usage: fleetsim --url http://HOST:PORT --nodes N [--seconds S] "
                        "[--backlog B] [--rank-min-s A] [--rank-max-s B] [--ramp-per-s R] "
                        "[--prefix P] [--lease-ms L] [--warmup-s W] [--no-unchanged] "
                        "[--no-lease-only] [--no-shared-env] "
                        "[--gang-nodes G] [--step-s T] "
                        "[--token-file PATH] [--node-token-file PATH] [--vanish N --vanish-at S] "
                        "[--no-hold]\n");
        exit(2);
}

int main(int argc, char **argv) {
        static const struct option longopts[] = {
                {"url", required_argument, NULL, 'u'},
                {"nodes", required_argument, NULL, 'n'},
                {"seconds", required_argument, NULL, 's'},
                {"backlog", required_argument, NULL, 'b'},
                {"rank-min-s", required_argument, NULL, 'a'},
                {"rank-max-s", required_argument, NULL, 'z'},
                {"ramp-per-s", required_argument, NULL, 'r'},
                {"prefix", required_argument, NULL, 'p'},
                {"lease-ms", required_argument, NULL, 'l'},
                {"warmup-s", required_argument, NULL, 'w'},
                {"no-unchanged", no_argument, NULL, 'U'},
                {"no-lease-only", no_argument, NULL, 'L'},
                {"no-shared-env", no_argument, NULL, 'E'},
                {"gang-nodes", required_argument, NULL, 'g'},
                {"token-file", required_argument, NULL, 'T'},
                {"node-token-file", required_argument, NULL, 'N'},
                {"step-s", required_argument, NULL, 'S'},
                {"vanish", required_argument, NULL, 'V'},
                {"vanish-at", required_argument, NULL, 'A'},
                {"no-hold", no_argument, NULL, 'H'},
                {"synchronized-start", no_argument, NULL, 'Y'},
                {NULL, 0, NULL, 0},
        };
        static char host[64];
        int c;
        while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (c) {
                case 'u':
                        if (sscanf(optarg, "http://%63[^:]:%d", host, &opt.port) != 2)
                                usage();
                        opt.host = host;
                        break;
                case 'n':
                        opt.nodes = atoi(optarg);
                        break;
                case 's':
                        opt.seconds = atoi(optarg);
                        break;
                case 'b':
                        opt.backlog = atoi(optarg);
                        break;
                case 'a':
                        opt.rank_min_ms = (int) (atof(optarg) * 1000);
                        break;
                case 'z':
                        opt.rank_max_ms = (int) (atof(optarg) * 1000);
                        break;
                case 'r':
                        opt.ramp_per_s = atoi(optarg);
                        break;
                case 'p':
                        opt.prefix = optarg;
                        break;
                case 'l':
                        opt.lease_ms = atoi(optarg);
                        break;
                case 'w':
                        opt.warmup_s = atoi(optarg);
                        break;
                case 'S':
                        opt.step_ms = (int) (atof(optarg) * 1000);
                        break;
                case 'V':
                        opt.vanish = atoi(optarg);
                        break;
                case 'A':
                        opt.vanish_at_s = atoi(optarg);
                        break;
                case 'H':
                        opt.no_hold = true;
                        break;
                case 'Y':
                        opt.synchronized_start = true;
                        break;
                case 'L':
                        opt.no_lease_only = true;
                        break;
                case 'U':
                        opt.whole_only = true;
                        break;
                case 'E':
                        opt.no_shared_env = true;
                        break;
                case 'g':
                        opt.gang_nodes = atoi(optarg);
                        break;
                case 'T': {
                        /* From a private file, as axagent reads its token: not on the
                         * command line, where every local user can read it. */
                        char *token = NULL, *error = NULL;
                        if (token_file_read(optarg, &token, &error) < 0) {
                                fprintf(stderr, "fleetsim: %s\n", error);
                                return 2;
                        }
                        if (asprintf((char **) &opt.auth_header, "Authorization: Bearer %s\r\n",
                                     token) < 0)
                                return 1;
                        token_free_secret(token);
                        break;
                }
                case 'N': {
                        char *error = NULL;
                        if (token_file_read(optarg, &opt.node_token_secret, &error) < 0) {
                                fprintf(stderr, "fleetsim: %s\n", error);
                                return 2;
                        }
                        break;
                }
                default:
                        usage();
                }
        }
        if (!opt.host || opt.nodes <= 0 || opt.rank_max_ms < opt.rank_min_ms ||
            opt.gang_nodes < 1 || opt.gang_nodes > opt.nodes || opt.vanish < 0 ||
            opt.vanish > opt.nodes || (opt.vanish > 0 && opt.vanish_at_s <= 0))
                usage();
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        srand((unsigned) getpid());
        ep = epoll_create1(EPOLL_CLOEXEC);
        agents = calloc((size_t) opt.nodes, sizeof(Agent));
        for (int i = 0; i < opt.nodes; i++)
                agent_init(&agents[i], i);
        for (int i = 0; i < SUBMITTERS; i++)
                submitters[i] = (Conn){.kind = KIND_SUBMIT, .idx = i, .fd = -1};
        /* gang_nodes nodes' worth: 8 ranks of one GPU each on every node. */
        asprintf(&spec_text,
                 "{\"name\":\"%s-job\",\"command\":[\"true\"],\"ranks\":%d,"
                 "\"ranks_per_node\":8,\"project\":\"%s\",\"resources\":"
                 "{\"accelerator\":\"nvidia-h100\",\"accelerators_per_rank\":1}}",
                 opt.prefix, 8 * opt.gang_nodes, opt.prefix);

        int64_t start = util_now_ms(), end = start + (int64_t) opt.seconds * 1000;
        measure_from_ms = start + (int64_t) opt.warmup_s * 1000;
        int64_t next_tick = start;
        /* Jobs: enough to fill the fleet, plus the backlog; then one per job's exits. */
        submits_wanted = opt.nodes / opt.gang_nodes + opt.backlog;
        long job_ranks = 8L * opt.gang_nodes;
        long exits_seen = 0;
        int64_t vanish_at = opt.vanish > 0 ? start + (int64_t) opt.vanish_at_s * 1000 : INT64_MAX;
        struct epoll_event evs[512];
        while (!stop && util_now_ms() < end) {
                int64_t now = util_now_ms();
                int n = epoll_wait(ep, evs, 512, (int) (next_tick > now ? next_tick - now : 0));
                for (int i = 0; i < n; i++)
                        conn_event(evs[i].data.ptr, evs[i].events);
                now = util_now_ms();
                if (now < next_tick)
                        continue;
                next_tick = now + 10;
                if (now >= vanish_at) {
                        agents_choose_vanishing();
                        vanish_at = INT64_MAX;
                }
                long active = (long) (now - start) * opt.ramp_per_s / 1000 + 1;
                agents_tick(now, (int) (active < opt.nodes ? active : opt.nodes));
                /* Each job's worth of rank exits is a job done: submit another to keep the
                 * backlog. */
                submits_wanted += (n_rank_exits - exits_seen) / job_ranks;
                exits_seen += (n_rank_exits - exits_seen) / job_ranks * job_ranks;
                /* A gang bigger than the fleet so far is refused (422): wait for all. */
                for (int i = 0; i < SUBMITTERS && (opt.gang_nodes == 1 || n_agents_up >= opt.nodes);
                     i++)
                        if (!submitters[i].busy && n_submits + n_submit_fail < submits_wanted)
                                submit_one(&submitters[i]);
        }
        qsort(exit_lat.ms, exit_lat.n, sizeof(double), cmp_double);
        qsort(exit_wire_lat.ms, exit_wire_lat.n, sizeof(double), cmp_double);
        qsort(recovery.ms, recovery.n, sizeof(double), cmp_double);
        qsort(silence_at_failure.ms, silence_at_failure.n, sizeof(double), cmp_double);
        double secs = (double) (util_now_ms() - start) / 1000.0;
        printf("{\"nodes\":%d,\"seconds\":%.1f,\"registers\":%ld,\"syncs\":%ld,"
               "\"syncs_per_s\":%.0f,\"unchanged_answers\":%ld,\"lease_only_answers\":%ld,"
               "\"rank_starts\":%ld,\"rank_exits\":%"
               "ld,\"submits\":%ld,"
               "\"submit_failures\":%ld,\"exit_syncs\":%zu,\"exit_sync_p50_ms\":%.1f,"
               "\"exit_sync_p99_ms\":%.1f,\"exit_sync_max_ms\":%.1f,\"exit_sync_wire_p50_ms\":%.1f,"
               "\"exit_sync_wire_p99_ms\":%.1f,\"exit_sync_wire_max_ms\":%.1f,\"connect_failures\":"
               "%ld,"
               "\"http_errors\":%ld,\"answers_404\":%ld,\"answers_409\":%ld,\"self_fences\":%ld,"
               "\"max_silence_ms\":%lld,\"sim_cpu\":%.2f,\"exit_wave\":%.2f,",
               opt.nodes, secs, n_registers, n_syncs, (double) n_syncs / secs, n_unchanged,
               n_lease_only, n_rank_starts, n_rank_exits, n_submits, n_submit_fail, exit_lat.n,
               percentile(exit_lat.ms, exit_lat.n, 0.5), percentile(exit_lat.ms, exit_lat.n, 0.99),
               percentile(exit_lat.ms, exit_lat.n, 1.0),
               percentile(exit_wire_lat.ms, exit_wire_lat.n, 0.5),
               percentile(exit_wire_lat.ms, exit_wire_lat.n, 0.99),
               percentile(exit_wire_lat.ms, exit_wire_lat.n, 1.0), n_connect_fail, n_http_errors,
               n_404, n_409, n_fences, (long long) max_silence_ms,
               (double) clock() / CLOCKS_PER_SEC / secs, exit_wave(util_now_ms()));
        if (recovery.n > 0)
                printf("\"recovered\":%zu,\"recovery_p50_ms\":%.0f,\"recovery_max_ms\":%.0f,"
                       "\"silence_at_failure_p50_ms\":%.0f,\"silence_at_failure_max_ms\":%.0f,",
                       recovery.n, percentile(recovery.ms, recovery.n, 0.5),
                       percentile(recovery.ms, recovery.n, 1.0),
                       percentile(silence_at_failure.ms, silence_at_failure.n, 0.5),
                       percentile(silence_at_failure.ms, silence_at_failure.n, 1.0));
        printf("\"restart_tail\":[");
        for (int i = 0; i < TAIL && tail[i].silence_ms > 0; i++)
                printf("%s{\"silence_ms\":%lld,\"answered_ms\":%lld,\"answer\":\"%s\","
                       "\"failed\":%s,\"spent_ms\":%lld,\"failed_ms\":%lld,\"failures\":%d}",
                       i ? "," : "", (long long) tail[i].silence_ms,
                       (long long) tail[i].answered_ms, tail[i].answer,
                       tail[i].failed ? "true" : "false", (long long) tail[i].spent_ms,
                       (long long) tail[i].failed_ms, tail[i].failures);
        printf("],");
        printf("\"vanished\":[");
        const char *sep = "";
        for (int i = 0; i < opt.nodes; i++)
                if (agents[i].vanished) {
                        printf("%s{\"node\":\"%s\",\"last_send_ms\":%lld}", sep, agents[i].name,
                               (long long) agents[i].vanished_last_send_wall_ms);
                        sep = ",";
                }
        printf("]}\n");
        return 0;
}
