/* SPDX-License-Identifier: MIT */
#include "leadership.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "follower.h"
#include "log.h"
#include "util.h"

/* Renewals (and a follower's tries) come four times per lease: a renewal that fails
 * once, a database hiccup, still leaves three before the lease runs out. */
#define LEASE_TRIES 4

static int64_t try_period_ms(const Leadership *l) {
        return l->lease_ms / LEASE_TRIES > 10 ? l->lease_ms / LEASE_TRIES : 10;
}

/* One try at the lease; 1 when it leads, 0 not, -errno. Times the lease from before
 * the question, so that by this clock it never outlasts the database's. */
static int lead_once(Leadership *l, StoreLeader *ret) {
        int64_t asked = util_now_ms();
        int r = store_lead(l->store, l->holder, l->url, l->lease_ms, ret);
        if (r > 0)
                l->valid_until_ms = asked + l->lease_ms;
        l->next_renew_ms = asked + try_period_ms(l);
        return r;
}

/* Whether a signal on signal_fd asks to stop; reads them all. */
static bool stop_asked(int signal_fd) {
        struct signalfd_siginfo si;
        bool stop = false;
        while (read(signal_fd, &si, sizeof(si)) == sizeof(si))
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                        stop = true;
        return stop;
}

int leadership_await(Leadership *l, int listen_fd, int signal_fd, const char *tls_cert_pem,
                     const char *tls_key_pem) {
        StoreLeader leader;
        int r = lead_once(l, &leader);
        if (r != 0)
                return r < 0 ? r : 1;
        Follower *f = NULL;
        if ((r = follower_new(listen_fd, tls_cert_pem, tls_key_pem, &f)) < 0)
                return r;
        log_info("following: %s leads from %s", leader.holder, leader.url);
        /* Serving, as far as systemd is concerned (Type=notify): a follower is up. */
        sd_notifyf(0, "READY=1\nSTATUS=following %s", leader.url);
        char known[sizeof(leader.holder)];
        snprintf(known, sizeof(known), "%s", leader.holder);
        for (;;) {
                bool alive = leader.expires_in_ms > 0;
                follower_set_leader(f, alive ? leader.url : NULL, alive ? leader.holder : NULL);
                int64_t wait = l->next_renew_ms - util_now_ms();
                struct pollfd p = {.fd = signal_fd, .events = POLLIN};
                if (poll(&p, 1, wait > 0 ? (int) wait : 0) > 0 && stop_asked(signal_fd)) {
                        r = 0;
                        break;
                }
                /* The watchdog sees a follower stuck in the database too. */
                sd_notify(0, "WATCHDOG=1");
                r = lead_once(l, &leader);
                if (r < 0)
                        /* The database may come back: a follower has nothing to lose. */
                        log_warning("cannot read the leader's lease: %s (%s)", strerror(-r),
                                    store_last_error(l->store));
                else if (r > 0)
                        break;
                else if (strcmp(known, leader.holder) != 0) {
                        log_info("following: %s leads from %s", leader.holder, leader.url);
                        sd_notifyf(0, "STATUS=following %s", leader.url);
                        snprintf(known, sizeof(known), "%s", leader.holder);
                }
        }
        /* Requests still in progress are sent here: it serves once it has loaded. */
        if (r > 0)
                follower_set_leader(f, l->url, l->holder);
        follower_stop(f);
        if (r > 0)
                log_info("leading (fencing token %lld)", (long long) leader.token);
        return r;
}

bool leadership_keep(Leadership *l) {
        int64_t now = util_now_ms();
        if (now >= l->next_renew_ms) {
                int r = lead_once(l, NULL);
                if (r == 0 || r == -ESTALE) {
                        log_error("another controller took the lead");
                        return false;
                }
                if (r < 0)
                        log_warning("cannot renew the leader's lease: %s (%s)", strerror(-r),
                                    store_last_error(l->store));
                now = util_now_ms();
        }
        if (now < l->valid_until_ms)
                return true;
        log_error("the leader's lease ran out (%lld ms) before it could be renewed",
                  (long long) l->lease_ms);
        return false;
}

int64_t leadership_deadline_ms(const Leadership *l) {
        return l->next_renew_ms < l->valid_until_ms ? l->next_renew_ms : l->valid_until_ms;
}

void leadership_resign(Leadership *l) {
        int r = store_resign(l->store);
        if (r < 0)
                log_warning("cannot give the lead up: %s", strerror(-r));
}

struct LeadershipRenewer {
        Leadership *lead;
        Leadership own; /* the same leadership, on a Store of its own */
        int64_t max_ms, until_ms; /* no renewal after until_ms (monotonic) */
        int stop_fd; /* eventfd */
        pthread_t thread;
        atomic_bool lost;
        _Atomic int64_t valid_until_ms; /* own.valid_until_ms, for other threads; 0: lost */
};

static void renewer_lose(LeadershipRenewer *r) {
        atomic_store(&r->valid_until_ms, 0);
        atomic_store(&r->lost, true);
}

static void *renewer_run(void *userdata) {
        LeadershipRenewer *r = userdata;
        for (;;) {
                int64_t wait = leadership_deadline_ms(&r->own) - util_now_ms();
                struct pollfd p = {.fd = r->stop_fd, .events = POLLIN};
                if (poll(&p, 1, wait > 0 ? (int) wait : 0) > 0)
                        return NULL;
                if (util_now_ms() >= r->until_ms) {
                        log_error("the state did not load and serve a first turn within %lld "
                                  "ms: the leader's lease is renewed no more",
                                  (long long) r->max_ms);
                        renewer_lose(r);
                        return NULL;
                }
                if (!leadership_keep(&r->own)) {
                        renewer_lose(r);
                        return NULL;
                }
                atomic_store(&r->valid_until_ms, r->own.valid_until_ms);
        }
}

int leadership_renewer_start(Leadership *l, const char *db_target, int64_t max_ms,
                             LeadershipRenewer **ret) {
        LeadershipRenewer *r = xcalloc(1, sizeof(*r));
        r->lead = l;
        r->own = *l;
        r->max_ms = max_ms;
        r->until_ms = util_now_ms() + max_ms;
        atomic_init(&r->valid_until_ms, l->valid_until_ms);
        r->own.store = NULL;
        r->stop_fd = -1;
        int e = store_open(db_target, &r->own.store);
        if (e >= 0)
                e = store_lead_share(l->store, r->own.store);
        if (e >= 0 && (r->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0)
                e = -errno;
        if (e >= 0)
                e = -pthread_create(&r->thread, NULL, renewer_run, r);
        if (e < 0) {
                store_close(r->own.store);
                if (r->stop_fd >= 0)
                        close(r->stop_fd);
                free(r);
                return e;
        }
        *ret = r;
        return 0;
}

bool leadership_renewer_lost(LeadershipRenewer *r) {
        return atomic_load(&r->lost);
}

int64_t leadership_renewer_valid_until_ms(LeadershipRenewer *r) {
        return atomic_load(&r->valid_until_ms);
}

bool leadership_renewer_stop(LeadershipRenewer *r) {
        uint64_t one = 1;
        (void) !write(r->stop_fd, &one, sizeof(one));
        pthread_join(r->thread, NULL);
        /* Its renewals are l's: the next is due when its own would have been. */
        r->lead->valid_until_ms = r->own.valid_until_ms;
        r->lead->next_renew_ms = r->own.next_renew_ms;
        bool kept = !atomic_load(&r->lost);
        store_close(r->own.store);
        close(r->stop_fd);
        free(r);
        return kept;
}
