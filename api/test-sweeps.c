/* SPDX-License-Identifier: MIT */
/*
 * The sweeps of held syncs when every turn is long: this test drives the server's loop
 * itself (api_run, the controller's turn, api_after_commit) over real HTTP on loopback,
 * with agents' syncs from sockets of its own, and sleeps past API_SWEEP_MS between
 * turns, so that every shard is due in every turn. At most API_SWEEPS_PER_TURN shards
 * sweep a turn; the rotation must still reach every shard within a few turns, or the
 * syncs held by the shards past the first three wait as long as those have syncs due.
 * Lateness is counted in turns, so a loaded machine's long turns do not widen the bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../daemon/test-fixture.h"
#include "../tests/unit/check.h"
#include "api-internal.h"
#include "log.h"
#include "util.h"

#define AGENTS 128
/* Each agent's hold, spread so that holds end in every turn, not in waves. */
#define WAIT_MS(i) (200 + 37 * (i) % 200)
#define TURN_SLEEP_MS (API_SWEEP_MS + 10) /* every shard due in every turn */
#define RUN_MS 3000

typedef struct Agent {
        int fd;
        char name[16];
        uint64_t version;
        int wait_ms;
        int64_t sent_ms;
        char buf[4096];
        size_t len;
        int held_answers; /* answers to syncs that were held for their time */
        int late_turns; /* turns that ended since its hold did, while it waits */
} Agent;

static int listen_loopback(int *port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        CHECK(bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0);
        CHECK(listen(fd, 256) == 0);
        CHECK(getsockname(fd, (struct sockaddr *) &a, &len) == 0);
        *port = ntohs(a.sin_port);
        return fd;
}

static void agent_connect(Agent *ag, int port) {
        ag->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(ag->fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(connect(ag->fd, (struct sockaddr *) &a, sizeof(a)) == 0);
        CHECK(fcntl(ag->fd, F_SETFL, O_NONBLOCK) == 0);
}

static void agent_sync(Agent *ag) {
        char body[256], req[768];
        int n = snprintf(body, sizeof(body),
                         "{\"node\":\"%s\",\"boot_id\":\"boot-1\",\"agent_id\":\"agent-1\","
                         "\"ranks\":[],\"health\":{\"healthy\":true,\"reason\":\"\"}}",
                         ag->name);
        int m = snprintf(req, sizeof(req),
                         "POST /v1/agent/sync?wait_ms=%d&version=%llu&accept=unchanged "
                         "HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         "Content-Length: %d\r\n\r\n%s",
                         ag->wait_ms, (unsigned long long) ag->version, n, body);
        CHECK(write(ag->fd, req, (size_t) m) == m);
        ag->sent_ms = util_now_ms();
        ag->late_turns = 0;
        ag->len = 0;
}

/* Reads what arrived; true once a whole answer did (its version kept). */
static bool agent_answered(Agent *ag) {
        ssize_t n = read(ag->fd, ag->buf + ag->len, sizeof(ag->buf) - 1 - ag->len);
        if (n < 0 && errno == EAGAIN)
                return false;
        CHECK(n > 0); /* the server never closes an agent's connection here */
        ag->len += (size_t) n;
        ag->buf[ag->len] = '\0';
        char *end = strstr(ag->buf, "\r\n\r\n");
        const char *cl = strcasestr(ag->buf, "Content-Length:");
        if (!end || !cl)
                return false;
        size_t body_len = strtoul(cl + 15, NULL, 10);
        if (ag->len < (size_t) (end + 4 - ag->buf) + body_len)
                return false;
        CHECK(strncmp(ag->buf, "HTTP/1.1 200", 12) == 0);
        json_t *answer = json_loadb(end + 4, body_len, 0, NULL);
        CHECK(answer && json_is_integer(json_object_get(answer, "version")));
        ag->version = (uint64_t) json_integer_value(json_object_get(answer, "version"));
        json_decref(answer);
        return true;
}

static size_t shards_holding(Api *api) {
        size_t n = 0;
        for (unsigned i = 0; i < API_SHARDS; i++)
                n += longpolls_count(&api->shard[i].polls) > 0;
        return n;
}

int main(void) {
        log_setup("test-sweeps", LOG_LEVEL_WARNING); /* not a line per node registered */
        tmpdir = check_tmpdir("axctl-test-sweeps");
        Controller *ctl = controller("sweeps");
        int port, listen_fd = listen_loopback(&port);
        Api *api = NULL;
        CHECK(api_new(listen_fd, &(ApiOptions){0}, &api) == 0);
        api_serve(api, ctl);

        static Agent agents[AGENTS];
        for (int i = 0; i < AGENTS; i++) {
                snprintf(agents[i].name, sizeof(agents[i].name), "n%d", i);
                agents[i].wait_ms = WAIT_MS(i);
                node_register(ctl, agents[i].name);
                agent_connect(&agents[i], port);
        }
        CHECK(ctl_end_turn(ctl) == 0);
        for (int i = 0; i < AGENTS; i++)
                agent_sync(&agents[i]);

        /* Turns that end after a hold, counted from its sending, up to the one that
         * answers it: one may end before the server's hold does (the sync is read in the
         * turn after it was sent), one may have checked before the hold ended, and the
         * shard sweeps in the first turn that finds it due or up to
         * ceil((shards - 1) / sweeps per turn) - 1 turns later: five here. A sixth for
         * slack. Without the rotation, syncs on the later shards wait as long as the
         * first three have syncs due: ten turns and more here. */
        const int bound_turns =
                2 + (API_SHARDS - 1 + API_SWEEPS_PER_TURN - 1) / API_SWEEPS_PER_TURN;
        int most_late = 0;
        size_t most_shards = 0;
        int64_t end = util_now_ms() + RUN_MS;
        while (util_now_ms() < end) {
                usleep(TURN_SLEEP_MS * 1000);
                api_run(api);
                if (util_now_ms() >= ctl_next_deadline_ms(ctl))
                        ctl_tick(ctl);
                CHECK(ctl_end_turn(ctl) >= 0);
                size_t holding = shards_holding(api);
                if (holding > most_shards)
                        most_shards = holding;
                api_after_commit(api);
                int64_t now = util_now_ms();
                for (int i = 0; i < AGENTS; i++) {
                        Agent *ag = &agents[i];
                        if (now >= ag->sent_ms + ag->wait_ms)
                                ag->late_turns++;
                        if (!agent_answered(ag))
                                continue;
                        if (now - ag->sent_ms >= ag->wait_ms) {
                                ag->held_answers++;
                                if (ag->late_turns > most_late)
                                        most_late = ag->late_turns;
                        }
                        agent_sync(ag);
                }
        }
        /* The test can fail only while more shards hold syncs than sweep in a turn. */
        CHECK(most_shards > API_SWEEPS_PER_TURN);
        printf("sweeps: held syncs on up to %zu shards, answered up to %d turns after their "
               "hold (bound %d)\n",
               most_shards, most_late, bound_turns + 1);
        CHECK(most_late <= bound_turns + 1);
        for (int i = 0; i < AGENTS; i++) {
                CHECK(agents[i].held_answers > 0);
                CHECK(agents[i].late_turns <= bound_turns + 1); /* the one still held */
                close(agents[i].fd);
        }

        api_free(api);
        ctl_free(ctl);
        CHECK_INT(util_rm_rf(tmpdir), 0);
        free(tmpdir);
        printf("sweeps: ok\n");
        return 0;
}
