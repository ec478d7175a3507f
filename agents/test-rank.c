/* SPDX-License-Identifier: MIT */
/*
 * Rank supervision through the real shim: a `sleep` started by one table is found
 * running by a second table built from disk (an agent restart), is killed by it, and its
 * exit is then read back by a third. Also exit codes, launch failures and the log.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rank.h"
#include "test-util.h"

static const char boot_id[] = "test-boot";

/* A table whose node lease lasts longer than any test: test-lease.c tests fencing. */
static void table_open(const char *state, const char *boot, RankTable **t) {
        CHECK(rank_table_new(state, boot, t) == 0);
        rank_table_renew_lease(*t, util_boot_ms() + 600 * 1000);
}

/* Waits up to 10 s for r to end. */
static void wait_exit(Rank *r) {
        for (int i = 0; i < 100; i++) {
                if (r->pidfd >= 0) {
                        struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
                        poll(&p, 1, 100);
                } else {
                        usleep(100 * 1000);
                }
                if (rank_check_exit(r))
                        return;
        }
        fprintf(stderr, "rank %ld-%ld-%ld (pid %d) still running\n", (long) r->key.job,
                (long) r->key.attempt, (long) r->key.rank, (int) r->rank_pid);
        CHECK(!"rank did not exit in time");
}

static char *read_all(const char *path) {
        char *data = NULL;
        CHECK(util_read_file(path, &data, NULL) == 0);
        return data;
}

static void test_adopt_and_kill(const char *state) {
        char *argv[] = {"sleep", "30", NULL};
        char *envp[] = {"AXCTL_RANK=0", "PATH=/usr/bin:/bin", NULL};
        RankKey key = {7, 1, 0};
        RankTable *t;
        table_open(state, boot_id, &t);
        RankLaunch l = {.key = key,
                        .argv = argv,
                        .envp = envp,
                        .checkpoint_dir = "/ckpt/x",
                        .hang_timeout_s = 60};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_RUNNING);
        CHECK(r->rank_pid > 0 && r->shim_pid > 0 && r->pidfd >= 0);
        CHECK(kill(r->rank_pid, 0) == 0);
        /* The shim is not our child: it must survive us. */
        CHECK(getpgid(r->rank_pid) == r->rank_pid);
        CHECK(getsid(r->shim_pid) == r->shim_pid);
        CHECK(rank_table_start(t, &l, &r) == -EEXIST);
        pid_t pid = r->rank_pid;

        _cleanup_free_ char *log_path = rank_table_log_path(t, key);
        _cleanup_free_ char *log = read_all(log_path);
        CHECK(strstr(log, "--- axctl environment ---\nAXCTL_RANK=0\nPATH=/usr/bin:/bin\n"
                          "--- end environment ---\n") == log);
        _cleanup_free_ char *progress = rank_table_progress_path(t, key);
        struct stat st;
        CHECK(stat(progress, &st) == 0 && st.st_size == 0);
        test_write(progress, "12\n");
        t = rank_table_free(t);

        /* "Agent restart": the rank is still there and is adopted, not restarted. */
        CHECK(kill(pid, 0) == 0);
        table_open(state, boot_id, &t);
        CHECK(rank_table_adopt(t) == 1);
        r = rank_table_find(t, key);
        CHECK(r && r->state == AGENT_RANK_RUNNING && r->rank_pid == pid);
        CHECK(r->pidfd >= 0);
        CHECK(r->hang_timeout_s == 60 && strcmp(r->checkpoint_dir, "/ckpt/x") == 0);
        CHECK(r->progress.has_step && r->progress.step == 12);
        CHECK(!rank_check_exit(r));

        rank_kill(r, util_now_ms(), 3000);
        wait_exit(r);
        CHECK(r->state == AGENT_RANK_EXITED && r->exit.signaled && r->exit.code == SIGTERM);
        CHECK(kill(pid, 0) < 0);
        t = rank_table_free(t);

        /* A third agent reads the recorded status. */
        table_open(state, boot_id, &t);
        CHECK(rank_table_adopt(t) == 1);
        r = rank_table_find(t, key);
        CHECK(r && r->state == AGENT_RANK_EXITED && r->exit.signaled && r->exit.code == SIGTERM);
        rank_table_remove(t, r);
        CHECK(rank_table_count(t) == 0);
        _cleanup_free_ char *dir = xasprintf("%s/ranks/7-1-0", state);
        CHECK(stat(dir, &st) < 0 && errno == ENOENT);
        /* Logs outlive the state directory. */
        CHECK(stat(log_path, &st) == 0);
        rank_table_free(t);
}

static void test_kill_escalates(const char *state) {
        /* A rank that ignores SIGTERM is killed when the grace period ends. */
        char *argv[] = {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankTable *t;
        table_open(state, boot_id, &t);
        RankLaunch l = {.key = {8, 2, 1}, .argv = argv, .envp = envp};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        _cleanup_free_ char *log_path = rank_table_log_path(t, l.key);
        for (int i = 0; i < 100; i++) {
                _cleanup_free_ char *log = read_all(log_path);
                if (strstr(log, "ready\n"))
                        break;
                usleep(50 * 1000);
        }
        int64_t now = util_now_ms();
        rank_kill(r, now, 200);
        CHECK(rank_table_next_deadline(t) == now + 200);
        usleep(400 * 1000);
        CHECK(!rank_check_exit(r));
        rank_table_tick(t, util_now_ms());
        wait_exit(r);
        CHECK(r->exit.signaled && r->exit.code == SIGKILL);
        rank_table_free(t);
}

static void test_exits(const char *state) {
        RankTable *t;
        table_open(state, boot_id, &t);
        char *envp[] = {"PATH=/usr/bin:/bin", "GREETING=hello from the env", NULL};
        Rank *r;

        char *code3[] = {"sh", "-c", "echo \"$GREETING\"; pwd; echo oops >&2; exit 3", NULL};
        RankLaunch l = {.key = {9, 1, 0}, .argv = code3, .envp = envp, .workdir = "/"};
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(!r->exit.signaled && r->exit.code == 3 && !r->exit.start_failed);
        _cleanup_free_ char *p1 = rank_table_log_path(t, l.key);
        _cleanup_free_ char *log1 = read_all(p1);
        CHECK(strstr(log1, "--- end environment ---\nhello from the env\n/\noops\n"));

        l = (RankLaunch){
                .key = {9, 1, 1}, .argv = code3, .envp = envp, .workdir = "/nonexistent/dir"};
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(!r->exit.signaled && r->exit.code == SHIM_EXIT_LAUNCH_FAILED);
        _cleanup_free_ char *p2 = rank_table_log_path(t, l.key);
        _cleanup_free_ char *log2 = read_all(p2);
        CHECK(strstr(log2, "cannot change to working directory /nonexistent/dir"));
        CHECK(r->exit.start_failed);
        /* A program that itself exits 127 started: it is not a start failure. */
        char *own127[] = {"sh", "-c", "exit 127", NULL};
        l = (RankLaunch){.key = {9, 1, 5}, .argv = own127, .envp = envp};
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(r->exit.code == 127 && !r->exit.start_failed);
        /* The status file says which, for an agent that adopts the rank later. */
        RankExit read_back;
        CHECK(agent_shim_write_status(r->dir, (RankExit){.code = 126, .start_failed = true}) == 0);
        CHECK(agent_shim_read_status(r->dir, &read_back) == 1);
        CHECK(read_back.start_failed && read_back.code == 126 && !read_back.signaled);

        char *missing[] = {"no-such-program-axagent", NULL};
        l = (RankLaunch){.key = {9, 1, 2}, .argv = missing, .envp = envp};
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(!r->exit.signaled && r->exit.code == SHIM_EXIT_LAUNCH_FAILED);
        CHECK(r->exit.start_failed);
        _cleanup_free_ char *p3 = rank_table_log_path(t, l.key);
        _cleanup_free_ char *log3 = read_all(p3);
        CHECK(strstr(log3, "cannot execute no-such-program-axagent"));

        /* A launch error never forks anything and is recorded at once. */
        l = (RankLaunch){.key = {9, 1, 3},
                         .argv = code3,
                         .envp = envp,
                         .error = "device 9 is not in this node's inventory"};
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_EXITED && r->exit.code == SHIM_EXIT_LAUNCH_FAILED);
        _cleanup_free_ char *p4 = rank_table_log_path(t, l.key);
        _cleanup_free_ char *log4 = read_all(p4);
        CHECK(strstr(log4, "cannot start rank: device 9 is not in this node's inventory"));

        /* The rank gets exactly the environment it was given. */
        char *printenv[] = {"/usr/bin/env", NULL};
        l = (RankLaunch){.key = {9, 1, 4}, .argv = printenv, .envp = envp};
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(!r->exit.signaled && r->exit.code == 0);
        _cleanup_free_ char *p5 = rank_table_log_path(t, l.key);
        _cleanup_free_ char *log5 = read_all(p5);
        const char *out = strstr(log5, "--- end environment ---\n");
        CHECK(out);
        out += strlen("--- end environment ---\n");
        CHECK(strcmp(out, "PATH=/usr/bin:/bin\nGREETING=hello from the env\n") == 0);
        rank_table_free(t);
}

static void test_other_boot(const char *state) {
        /* Pids recorded before a reboot are not trusted. */
        char *argv[] = {"sleep", "30", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankTable *t;
        table_open(state, "old-boot", &t);
        RankLaunch l = {.key = {10, 1, 0}, .argv = argv, .envp = envp};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        pid_t pid = r->rank_pid;
        rank_table_free(t);

        table_open(state, boot_id, &t);
        CHECK(rank_table_adopt(t) >= 1);
        r = rank_table_find(t, l.key);
        CHECK(r && r->state == AGENT_RANK_EXITED && r->exit.signaled);
        rank_table_free(t);
        kill(-pid, SIGKILL);
}

/* Runs argv as a rank (as run_as, NULL: as we are) and returns its output after the
 * environment block; *ret_exit gets its exit code. */
static char *run_rank(RankTable *t, RankKey key, char **argv, const RankUser *run_as,
                      int *ret_exit) {
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankLaunch l = {.key = key, .argv = argv, .envp = envp, .run_as = run_as};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(!r->exit.signaled);
        *ret_exit = r->exit.code;
        _cleanup_free_ char *path = rank_table_log_path(t, key);
        _cleanup_free_ char *log = read_all(path);
        const char *out = strstr(log, "--- end environment ---\n");
        CHECK(out);
        return xstrdup(out + strlen("--- end environment ---\n"));
}

static void test_isolation(const char *state) {
        RankTable *t;
        table_open(state, boot_id, &t);
        int code;

        /* Descriptors the agent holds, even without O_CLOEXEC, never reach a rank. */
        int leak = open("/dev/null", O_RDONLY);
        int leak_high = fcntl(leak, F_DUPFD, 100);
        CHECK(leak >= 3 && leak_high >= 100);
        /* No pipeline: the shell holds a pipe's ends until it has started both sides,
         * and ls saw them there now and then. */
        char *fds[] = {"sh", "-c", "ls /proc/$$/fd; umask", NULL};
        _cleanup_free_ char *out = run_rank(t, (RankKey){11, 1, 0}, fds, NULL, &code);
        CHECK(code == 0);
        if (strcmp(out, "0\n1\n2\n0022\n") != 0)
                fprintf(stderr, "rank saw: '%s'\n", out);
        CHECK(strcmp(out, "0\n1\n2\n0022\n") == 0);
        close(leak);
        close(leak_high);

        /* A refused user: never started, exit 126, the reason in its log. */
        char *never[] = {"touch", "/tmp/axagent-test-must-not-exist", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        RankLaunch l = {.key = {11, 1, 1},
                        .argv = never,
                        .envp = envp,
                        .error = "user root is root, which this agent refuses",
                        .error_exit = SHIM_EXIT_USER_REFUSED};
        Rank *r;
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_EXITED && r->exit.code == 126);
        _cleanup_free_ char *p = rank_table_log_path(t, l.key);
        _cleanup_free_ char *log = read_all(p);
        CHECK(strstr(log, "axagent: cannot start rank: user root is root, which this agent "
                          "refuses\n"));
        CHECK(access("/tmp/axagent-test-must-not-exist", F_OK) < 0);

        if (geteuid() != 0) {
                rank_table_free(t);
                return;
        }

        /* As root: the rank runs as the resolved account, owns its log, and the shim
         * does not keep the agent's secret in its memory. */
        AgentUserPolicy policy = {0};
        RankUser nobody;
        char *error = NULL;
        CHECK(agent_user_resolve(&policy, "nobody", &nobody, &error) == 0);
        char secret[] = "axt_secret_token_for_the_test";
        agent_shim_forget_secret(0, secret);
        char *ids[] = {"sh", "-c", "id -u; id -g; sleep 30", NULL};
        char *envp2[] = {"PATH=/usr/bin:/bin", NULL};
        l = (RankLaunch){.key = {11, 1, 2}, .argv = ids, .envp = envp2, .run_as = &nobody};
        CHECK(rank_table_start(t, &l, &r) == 0);
        CHECK(r->state == AGENT_RANK_RUNNING);
        _cleanup_free_ char *mem_path = xasprintf("/proc/%d/mem", (int) r->shim_pid);
        int mem = open(mem_path, O_RDONLY | O_CLOEXEC);
        CHECK(mem >= 0);
        char copy[sizeof(secret)];
        CHECK(pread(mem, copy, sizeof(copy), (off_t) (uintptr_t) secret) == (ssize_t) sizeof(copy));
        close(mem);
        CHECK(memcmp(copy, secret, sizeof(copy)) != 0);
        CHECK(strcmp(secret, "axt_secret_token_for_the_test") == 0);
        agent_shim_forget_secret(0, NULL);

        _cleanup_free_ char *want =
                xasprintf("%u\n%u\n", (unsigned) nobody.uid, (unsigned) nobody.gid);
        _cleanup_free_ char *p2 = rank_table_log_path(t, l.key);
        for (int i = 0; i < 100; i++) {
                _cleanup_free_ char *log2 = read_all(p2);
                if (strstr(log2, want))
                        break;
                CHECK(i < 99);
                usleep(50 * 1000);
        }
        struct stat st;
        CHECK(stat(p2, &st) == 0 && st.st_uid == nobody.uid);
        rank_kill(r, util_now_ms(), 0);
        rank_table_tick(t, util_now_ms());
        wait_exit(r);

        /* The rank cannot take root back, and enters its workdir as itself. */
        char *setuid_back[] = {"sh", "-c", "id -u; cat /proc/self/status | grep -i '^Uid'", NULL};
        _cleanup_free_ char *out2 = run_rank(t, (RankKey){11, 1, 3}, setuid_back, &nobody, &code);
        _cleanup_free_ char *uid_line =
                xasprintf("Uid:\t%u\t%u\t%u\t%u\n", nobody.uid, nobody.uid, nobody.uid, nobody.uid);
        CHECK(code == 0 && strstr(out2, uid_line));
        _cleanup_free_ char *private_dir = xasprintf("%s/root-only", state);
        CHECK(mkdir(private_dir, 0700) == 0);
        char *pwd[] = {"pwd", NULL};
        l = (RankLaunch){.key = {11, 1, 4},
                         .argv = pwd,
                         .envp = envp2,
                         .run_as = &nobody,
                         .workdir = private_dir};
        CHECK(rank_table_start(t, &l, &r) == 0);
        wait_exit(r);
        CHECK(!r->exit.signaled && r->exit.code == SHIM_EXIT_LAUNCH_FAILED);
        rank_user_done(&nobody);
        rank_table_free(t);
}

int main(void) {
        _cleanup_free_ char *state = test_tmpdir();
        _cleanup_free_ char *isolated = test_tmpdir();
        test_isolation(isolated);
        util_rm_rf(isolated);
        test_adopt_and_kill(state);
        test_kill_escalates(state);
        test_exits(state);
        test_other_boot(state);
        util_rm_rf(state);
        return 0;
}
