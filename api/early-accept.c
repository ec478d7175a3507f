/* SPDX-License-Identifier: MIT */
/* See early-accept.h. */
#include "early-accept.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

struct EarlyAccept {
        int listen_fd, stop_fd, max;
        EarlyAcceptFn fn;
        void *userdata;
        pthread_t thread;
        int n_conns; /* the thread's until joined */
};

static void *accept_loop(void *p) {
        EarlyAccept *ea = p;
        struct pollfd fds[2] = {{.fd = ea->listen_fd, .events = POLLIN},
                                {.fd = ea->stop_fd, .events = POLLIN}};
        while (ea->n_conns < ea->max) {
                if (poll(fds, 2, -1) < 0 && errno != EINTR)
                        break;
                if (fds[1].revents)
                        break;
                for (;;) {
                        struct sockaddr_storage addr;
                        socklen_t len = sizeof(addr);
                        int fd = accept4(ea->listen_fd, (struct sockaddr *) &addr, &len,
                                         SOCK_NONBLOCK | SOCK_CLOEXEC);
                        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
                                continue;
                        if (fd < 0 && errno == EAGAIN)
                                break;
                        if (fd < 0)
                                return NULL; /* out of descriptors: the rest wait in the backlog */
                        ea->fn(ea->userdata, fd, (struct sockaddr *) &addr, len);
                        if (++ea->n_conns >= ea->max)
                                break;
                }
        }
        return NULL;
}

int early_accept_start(int listen_fd, int max, EarlyAcceptFn fn, void *userdata,
                       EarlyAccept **ret) {
        EarlyAccept *ea = xcalloc(1, sizeof(EarlyAccept));
        ea->listen_fd = listen_fd;
        ea->max = max;
        ea->fn = fn;
        ea->userdata = userdata;
        ea->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (ea->stop_fd < 0) {
                free(ea);
                return -errno;
        }
        int r = pthread_create(&ea->thread, NULL, accept_loop, ea);
        if (r != 0) {
                close(ea->stop_fd);
                free(ea);
                return -r;
        }
        *ret = ea;
        return 0;
}

void early_accept_finish(EarlyAccept *ea) {
        if (!ea)
                return;
        uint64_t one = 1;
        (void) !write(ea->stop_fd, &one, sizeof(one));
        pthread_join(ea->thread, NULL);
        close(ea->stop_fd);
        if (ea->n_conns > 0)
                log_info("%d connections came while the state loaded", ea->n_conns);
        free(ea);
}
