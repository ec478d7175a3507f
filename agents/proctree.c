/* SPDX-License-Identifier: MIT */
/* Killing a process tree found through /proc; see proctree.h. */
#include "proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

typedef struct ProcEntry {
        pid_t pid;
        pid_t ppid;
        bool zombie;
        bool below; /* a descendant of the root */
} ProcEntry;

/* Parent and state from /proc/<pid>/stat; the name may hold spaces and parentheses. */
static bool proc_entry_read(pid_t pid, ProcEntry *e) {
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        char *tail = strrchr(buf, ')');
        char state;
        int ppid;
        if (!tail || sscanf(tail + 1, " %c %d", &state, &ppid) != 2)
                return false;
        *e = (ProcEntry){.pid = pid, .ppid = (pid_t) ppid, .zombie = state == 'Z'};
        return true;
}

static int proc_entry_cmp(const void *a, const void *b) {
        pid_t x = ((const ProcEntry *) a)->pid, y = ((const ProcEntry *) b)->pid;
        return (x > y) - (x < y);
}

/* Every process of the system, with the descendants of root marked. */
static int proc_scan(pid_t root, ProcEntry **ret, size_t *ret_n) {
        DIR *d = opendir("/proc");
        if (!d)
                return -errno;
        ProcEntry *all = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0)
                        continue;
                GROW(all, n, cap);
                if (proc_entry_read((pid_t) pid, &all[n]))
                        n++;
        }
        closedir(d);
        /* Marks children of marked processes until nothing changes: a few passes (the
         * tree's depth) of n binary searches for parents. */
        qsort(all, n, sizeof(*all), proc_entry_cmp);
        for (bool changed = true; changed;) {
                changed = false;
                for (size_t i = 0; i < n; i++) {
                        if (all[i].below)
                                continue;
                        ProcEntry key = {.pid = all[i].ppid};
                        const ProcEntry *parent =
                                all[i].ppid == root
                                        ? NULL
                                        : bsearch(&key, all, n, sizeof(*all), proc_entry_cmp);
                        if (all[i].ppid == root || (parent && parent->below))
                                all[i].below = changed = true;
                }
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

/*
 * Sends sig to every live descendant of root, as one scan finds them, reaping on the way
 * the zombie children of root but keep when reap is set. Returns how many were live, or
 * -errno.
 */
static int proctree_signal_once(pid_t root, int sig, bool reap, pid_t keep) {
        ProcEntry *all = NULL;
        size_t n = 0;
        int r = proc_scan(root, &all, &n);
        if (r < 0)
                return r;
        int live = 0;
        for (size_t i = 0; i < n; i++) {
                if (!all[i].below)
                        continue;
                if (reap && all[i].zombie && all[i].ppid == root && all[i].pid != keep)
                        (void) waitpid(all[i].pid, NULL, WNOHANG);
                if (all[i].zombie)
                        continue;
                kill(all[i].pid, sig);
                live++;
        }
        free(all);
        return live;
}

int proctree_kill(pid_t root, pid_t keep, int max_rounds) {
        bool reap = root == getpid();
        int signalled = 0;
        for (int round = 0; round < max_rounds; round++) {
                int live = proctree_signal_once(root, SIGKILL, reap, keep);
                if (live < 0)
                        return live;
                if (round == 0)
                        signalled = live;
                if (live == 0)
                        return signalled;
                /* SIGKILL is delivered at once; dying takes the kernel a moment. */
                nanosleep(&(struct timespec){.tv_nsec = 2 * 1000 * 1000}, NULL);
        }
        return signalled;
}

int proctree_signal(pid_t root, int sig) {
        return proctree_signal_once(root, sig, false, -1);
}
