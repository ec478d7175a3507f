/* SPDX-License-Identifier: MIT */
/*
 * The node lease and rank containment through the real shim (issue 18): a rank is
 * killed, with every process it started, when its node's lease runs out and only then;
 * renewals by the agent, and by a restarted agent, keep it alive; an agent that lost
 * its state directory cannot keep alive ranks it does not know; whatever a rank starts,
 * even in a new session or outside its process group, ends when the rank ends.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lease.h"
#include "proctree.h"
#include "rank.h"
#include "shim.h"
#include "test-util.h"

static const char boot_id[] = "test-boot";

static bool pid_gone(pid_t pid) {
        return kill(pid, 0) < 0 && errno == ESRCH;
}

/* Waits up to timeout_ms for r to end; false when it is still running. */
static bool wait_exit_ms(Rank *r, int timeout_ms) {
        int64_t end = util_now_ms() + timeout_ms;
        while (util_now_ms() < end) {
                if (rank_check_exit(r))
                        return true;
                struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
                poll(&p, r->pidfd >= 0 ? 1 : 0, 20);
        }
        return rank_check_exit(r);
}

/* Waits up to 5 s for the pid written to path and returns it. */
static pid_t wait_pid_file(const char *path) {
        for (int i = 0; i < 250; i++) {
                pid_t pid;
                if (agent_shim_read_pid(path, &pid) == 0)
                        return pid;
                usleep(20 * 1000);
        }
        CHECK(!"pid file written in time");
        return -1;
}

/* Waits up to 2 s for pid to be gone (reaped, not just a zombie). */
static bool wait_gone(pid_t pid) {
        for (int i = 0; i < 100 && !pid_gone(pid); i++)
                usleep(20 * 1000);
        return pid_gone(pid);
}

/* Opens a table on state with a lease of lease_ms from now and starts `sleep 60` as key. */
static Rank *start_sleeper(const char *state, int64_t lease_ms, RankKey key, RankTable **t) {
        CHECK(rank_table_new(state, boot_id, t) == 0);
        rank_table_renew_lease(*t, util_boot_ms() + lease_ms);
        char *argv[] = {"sleep", "60", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankLaunch l = {.key = key, .argv = argv, .envp = envp};
        Rank *r;
        CHECK(rank_table_start(*t, &l, &r) == 0);
        return r;
}

/* Renews t's lease to lease_ms ahead every 100 ms, rounds times, as an agent would. */
static void renew_for(RankTable *t, int64_t lease_ms, int rounds) {
        for (int i = 0; i < rounds; i++) {
                rank_table_renew_lease(t, util_boot_ms() + lease_ms);
                usleep(100 * 1000);
        }
}

/* A rank that starts an escapee (new session, pid in esc) and then runs until killed,
 * ignoring SIGTERM. */
static Rank *start_escaping_rank(RankTable *t, RankKey key, const char *esc) {
        _cleanup_free_ char *script = xasprintf(
                "trap '' TERM; setsid sh -c 'echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 60' & "
                "while :; do sleep 1; done",
                esc, esc, esc);
        char *argv[] = {"sh", "-c", script, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankLaunch l = {.key = key, .argv = argv, .envp = envp};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_RUNNING);
        return r;
}

static void test_fenced_when_lease_runs_out(const char *state) {
        RankTable *t;
        CHECK(rank_table_new(state, boot_id, &t) == 0);
        int64_t deadline = util_boot_ms() + 1500;
        rank_table_renew_lease(t, deadline);
        _cleanup_free_ char *esc = xasprintf("%s/escapee-1", state);
        Rank *r = start_escaping_rank(t, (RankKey){1, 1, 0}, esc);
        pid_t escapee = wait_pid_file(esc);
        CHECK(getsid(escapee) == escapee); /* it did leave the rank's session */

        /* Nobody renews: the shim kills the rank and the escapee at the deadline. */
        CHECK(wait_exit_ms(r, 4000));
        int64_t at = util_boot_ms();
        fprintf(stderr, "rank fenced %lld ms after the deadline\n", (long long) (at - deadline));
        CHECK(at >= deadline);
        CHECK(at - deadline < 800);
        CHECK(r->exit.signaled && r->exit.code == SIGKILL);
        CHECK(wait_gone(escapee));
        _cleanup_free_ char *log_path = rank_table_log_path(t, r->key);
        _cleanup_free_ char *log = NULL;
        CHECK(util_read_file(log_path, &log, NULL) == 0);
        CHECK(strstr(log, "axagent: the node's lease ran out"));
        rank_table_remove(t, r);
        rank_table_free(t);
}

static void test_renewals_keep_ranks_across_agents(const char *state) {
        RankTable *t;
        RankKey key = {2, 1, 0};
        Rank *r = start_sleeper(state, 400, key, &t);
        pid_t pid = r->rank_pid;
        /* The agent renews: the rank lives well past the first deadline. */
        renew_for(t, 400, 10);
        CHECK(!rank_check_exit(r));
        /* The agent dies; a new one opens the same lease within it and renews. */
        rank_table_free(t);
        CHECK(rank_table_new(state, boot_id, &t) == 0);
        CHECK(rank_table_adopt(t) == 1);
        r = rank_table_find(t, key);
        CHECK(r && r->state == AGENT_RANK_RUNNING && r->rank_pid == pid);
        renew_for(t, 400, 8);
        CHECK(!rank_check_exit(r));
        /* It stops renewing: fenced. */
        CHECK(wait_exit_ms(r, 3000));
        CHECK(r->exit.signaled && r->exit.code == SIGKILL);
        CHECK(pid_gone(pid) || wait_gone(pid));
        rank_table_remove(t, r);
        rank_table_free(t);
}

static void test_lost_state_dir_cannot_keep_orphans(const char *state) {
        _cleanup_free_ char *dir = xasprintf("%s/lost", state);
        RankTable *t;
        pid_t pid = start_sleeper(dir, 1000, (RankKey){3, 1, 0}, &t)->rank_pid;
        rank_table_free(t);

        /* The state directory is wiped and a new agent starts there, renewing its own
         * lease: it has no record of the rank, whose shim still watches the old one. */
        CHECK(util_rm_rf(dir) == 0);
        CHECK(rank_table_new(dir, boot_id, &t) == 0);
        CHECK(rank_table_adopt(t) == 0);
        renew_for(t, 1000, 25);
        CHECK(wait_gone(pid));
        rank_table_free(t);
}

/* The number of live processes whose command line holds word as an argument. */
static int count_with_arg(const char *word) {
        DIR *d = opendir("/proc");
        CHECK(d);
        int found = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!isdigit((unsigned char) de->d_name[0]))
                        continue;
                _cleanup_free_ char *path = xasprintf("/proc/%s/cmdline", de->d_name);
                char buf[256];
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                for (ssize_t i = 0; i < n; i += (ssize_t) strlen(buf + i) + 1) {
                        buf[n] = '\0';
                        if (strcmp(buf + i, word) == 0)
                                found++;
                }
        }
        closedir(d);
        return found;
}

static void test_fork_storm_is_fenced(const char *state) {
        /* A rank that detaches children into new sessions as fast as it can. */
        RankTable *t;
        CHECK(rank_table_new(state, boot_id, &t) == 0);
        rank_table_renew_lease(t, util_boot_ms() + 1000);
        char *argv[] = {"sh", "-c", "while :; do setsid sleep 61.7 & done", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankLaunch l = {.key = {6, 1, 0}, .argv = argv, .envp = envp};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        usleep(300 * 1000);
        CHECK(count_with_arg("61.7") > 0);
        /* As root, the shim outranks the storm it fences; the rank keeps our priority. */
        if (geteuid() == 0)
                CHECK(getpriority(PRIO_PROCESS, (id_t) r->shim_pid) == SHIM_NICE);
        CHECK(getpriority(PRIO_PROCESS, (id_t) r->rank_pid) == getpriority(PRIO_PROCESS, 0));
        CHECK(wait_exit_ms(r, 5000));
        CHECK(r->exit.signaled && r->exit.code == SIGKILL);
        for (int i = 0; i < 100 && count_with_arg("61.7") > 0; i++)
                usleep(20 * 1000);
        CHECK(count_with_arg("61.7") == 0);
        rank_table_remove(t, r);
        rank_table_free(t);
}

static void test_tree_ends_with_the_rank(const char *state) {
        RankTable *t;
        CHECK(rank_table_new(state, boot_id, &t) == 0);
        rank_table_renew_lease(t, util_boot_ms() + 600 * 1000);
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};

        /* The rank exits on its own, leaving an escapee in a new session behind. */
        _cleanup_free_ char *esc = xasprintf("%s/escapee-4", state);
        _cleanup_free_ char *script =
                xasprintf("setsid sh -c 'echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 60' & "
                          "while [ ! -s %s ]; do sleep 0.05; done; exit 3",
                          esc, esc, esc, esc);
        char *argv[] = {"sh", "-c", script, NULL};
        RankLaunch l = {.key = {4, 1, 0}, .argv = argv, .envp = envp};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(wait_exit_ms(r, 5000));
        CHECK(!r->exit.signaled && r->exit.code == 3);
        pid_t escapee;
        CHECK(agent_shim_read_pid(esc, &escapee) == 0);
        CHECK(wait_gone(escapee));

        /* Cancel of a rank that ignores SIGTERM and left its process group for its
         * shim's, after starting an escapee: all of it is gone after the grace. */
        _cleanup_free_ char *esc2 = xasprintf("%s/escapee-5", state);
        _cleanup_free_ char *script2 = xasprintf(
                "import os, signal, subprocess, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "subprocess.Popen(['setsid', 'sh', '-c', 'echo $$ > %s.tmp; mv %s.tmp %s; "
                "exec sleep 60'])\n"
                "os.setpgid(0, os.getsid(0))\n"
                "time.sleep(60)\n",
                esc2, esc2, esc2);
        char *argv2[] = {"python3", "-c", script2, NULL};
        l = (RankLaunch){.key = {4, 1, 1}, .argv = argv2, .envp = envp};
        CHECK(rank_table_start(t, &l, &r) == 0);
        pid_t escapee2 = wait_pid_file(esc2);
        for (int i = 0; i < 100 && getpgid(r->rank_pid) == r->rank_pid; i++)
                usleep(20 * 1000);
        CHECK(getpgid(r->rank_pid) != r->rank_pid);
        rank_kill(r, util_now_ms(), 200);
        usleep(400 * 1000);
        rank_table_tick(t, util_now_ms());
        CHECK(wait_exit_ms(r, 5000));
        CHECK(r->exit.signaled && r->exit.code == SIGKILL);
        CHECK(wait_gone(escapee2));
        rank_table_free(t);
}

static void test_lease_file(const char *state) {
        _cleanup_free_ char *dir = xasprintf("%s/leasefile", state);
        CHECK(util_mkdir_p(dir, 0755) == 0);
        NodeLease *a, *b;
        CHECK(node_lease_open(dir, &a) == 0);
        CHECK(node_lease_deadline(a) == 0); /* new: already expired */
        node_lease_renew(a, 12345);
        CHECK(node_lease_open(dir, &b) == 0);
        CHECK(node_lease_deadline(b) == 12345); /* reopened: kept, and shared */
        node_lease_renew(b, 67890);
        CHECK(node_lease_deadline(a) == 67890);
        node_lease_close(a);
        node_lease_close(b);
        /* A damaged record is replaced by an expired one. */
        _cleanup_free_ char *path = xasprintf("%s/lease", dir);
        test_write(path, "garbage that is not a lease record");
        CHECK(node_lease_open(dir, &a) == 0);
        CHECK(node_lease_deadline(a) == 0);
        node_lease_close(a);
        struct stat st;
        CHECK(stat(path, &st) == 0 && st.st_size == 16);
        /* A rank, another user, must not be able to extend its own lease. */
        CHECK((st.st_mode & 0022) == 0);
}

/* Fills the filesystem holding dir until a write fails with ENOSPC. */
static void fill_disk(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/fill", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        char block[4096] = {0};
        ssize_t n;
        while ((n = write(fd, block, sizeof(block))) > 0)
                ;
        CHECK(n < 0 && errno == ENOSPC);
        while (write(fd, block, 1) > 0) /* the last bytes of a partial block */
                ;
        close(fd);
}

/* A full disk: an existing lease is reopened and renewed without a byte of new space; a
 * new one cannot be created and says why. Needs root for a small tmpfs. */
static void test_lease_on_full_disk(const char *state) {
        _cleanup_free_ char *mnt = xasprintf("%s/full", state);
        CHECK(mkdir(mnt, 0755) == 0);
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") < 0) {
                fprintf(stderr, "full-disk case not run: cannot mount a tmpfs (%s)\n",
                        strerror(errno));
                CHECK(geteuid() != 0); /* root can: CI runs it */
                return;
        }
        _cleanup_free_ char *fresh = xasprintf("%s/fresh", mnt);
        CHECK(mkdir(fresh, 0755) == 0);
        NodeLease *l;
        CHECK(node_lease_open(mnt, &l) == 0);
        node_lease_renew(l, 111);
        fill_disk(mnt);
        node_lease_renew(l, 222);
        NodeLease *again;
        CHECK(node_lease_open(mnt, &again) == 0);
        CHECK(node_lease_deadline(again) == 222);
        node_lease_renew(again, 333);
        CHECK(node_lease_deadline(l) == 333);
        node_lease_close(again);
        node_lease_close(l);
        CHECK(node_lease_open(fresh, &l) == -ENOSPC);
        CHECK(umount2(mnt, MNT_DETACH) == 0);
}

int main(void) {
        _cleanup_free_ char *state = test_tmpdir();
        test_lease_file(state);
        test_lease_on_full_disk(state);
        test_fenced_when_lease_runs_out(state);
        test_renewals_keep_ranks_across_agents(state);
        test_lost_state_dir_cannot_keep_orphans(state);
        test_tree_ends_with_the_rank(state);
        test_fork_storm_is_fenced(state);
        /* Nothing any rank started is left below this test: nothing to kill. */
        CHECK(proctree_kill(getpid(), -1, 1) == 0);
        util_rm_rf(state);
        return 0;
}
