/* SPDX-License-Identifier: MIT */
/*
 * Rank supervisor; see shim.h. Everything that can fail in interesting ways (looking up
 * the user, formatting paths) happens before fork, so the forked processes only do
 * system calls and, in the shim, small allocations that glibc's fork makes safe. The
 * shim never execs itself: it is a copy of the agent that runs a few dozen lines.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "logpump.h"
#include "proctree.h"
#include "reserve.h"
#include "util.h"

extern char **environ;

/* The pair the shim reports back to the agent through a pipe. */
typedef struct ShimPids {
        pid_t shim;
        pid_t rank;
} ShimPids;

static char *shim_secrets[SHIM_SECRET_SLOTS];

void agent_shim_forget_secret(int slot, char *secret) {
        if (slot >= 0 && slot < SHIM_SECRET_SLOTS)
                shim_secrets[slot] = secret;
}

/* In a forked child: the agent's secrets are no business of a shim or a rank. */
static void shim_secrets_wipe(void) {
        for (int i = 0; i < SHIM_SECRET_SLOTS; i++)
                if (shim_secrets[i])
                        explicit_bzero(shim_secrets[i], strlen(shim_secrets[i]));
}

static void shim_signals_reset(void) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, SIG_DFL);
}

/*
 * Becomes u: supplementary groups, then gid, then uid (after setuid the other two are no
 * longer allowed), and checks that it worked and cannot be undone. 0 or -errno.
 */
static int shim_switch_user(const RankUser *u) {
        if (setgroups((size_t) u->n_groups, u->groups) < 0 || setgid(u->gid) < 0 ||
            setuid(u->uid) < 0)
                return -errno;
        if (getuid() != u->uid || geteuid() != u->uid || getgid() != u->gid || getegid() != u->gid)
                return -EPERM;
        /* A saved set-user-ID of root would let the rank take root back. */
        if (u->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
                return -EPERM;
        return 0;
}

/* Leaves only fd, as descriptor 3; returns 3 (or -1). */
static int shim_keep_only(int fd) {
        if (dup2(fd, 3) < 0)
                return -1;
        if (close_range(4, ~0U, 0) < 0)
                for (int i = 4; i < 1024; i++)
                        close(i);
        return 3;
}

/* Makes a channel (close-on-exec; a socket pair, so that the parent can answer) into
 * fds and forks: the child's 0, the parent's pid, or -errno with nothing left open. */
static pid_t shim_fork_with_pipe(int fds[2]) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(fds[0]);
                close(fds[1]);
                return r;
        }
        return pid;
}

int agent_shim_run_as(const RankUser *u, int (*fn)(void *arg, int fd), void *arg, char *buf,
                      size_t size) {
        if (size == 0)
                return -EINVAL;
        int fds[2];
        pid_t pid = shim_fork_with_pipe(fds);
        if (pid < 0)
                return pid;
        if (pid == 0) {
                shim_secrets_wipe();
                int out = shim_keep_only(fds[1]);
                if (out < 0)
                        _exit(SHIM_EXIT_LAUNCH_FAILED);
                if (shim_switch_user(u) < 0)
                        _exit(SHIM_EXIT_USER_REFUSED);
                _exit(fn(arg, out) < 0 ? 1 : 0);
        }
        close(fds[1]);
        size_t len = 0;
        while (len < size - 1) {
                ssize_t n = read(fds[0], buf + len, size - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t) n;
        }
        buf[len] = '\0';
        close(fds[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
        return WIFEXITED(st) && WEXITSTATUS(st) == SHIM_EXIT_USER_REFUSED ? -EPERM : -EIO;
}

/* In the rank's process, before exec: it cannot start. A byte on fd 3 (closed by a
 * successful exec) tells the shim so, whatever exit code a program could also exit with. */
_Noreturn static void shim_start_failed(int code) {
        (void) !write(3, "!", 1);
        _exit(code);
}

/* Runs in the rank's process: never returns. stdout/stderr already go to the log;
 * start_fd is the shim's pipe for start failures, 3 the agent's channel. */
_Noreturn static void shim_exec_rank(const ShimLaunch *l, int start_fd) {
        const RankUser *u = l->user;
        setpgid(0, 0);
        /* Nothing of the rank may run before it is in its cgroup: the agent's word that
         * systemd made it (or could not) comes on the channel the shim reported on. */
        char word = 0;
        ssize_t n = 0;
        while (l->attach && (n = read(3, &word, 1)) < 0 && errno == EINTR)
                ;
        if (l->attach && n != 1) {
                dprintf(STDERR_FILENO, "axagent: the agent went away before the rank's cgroup "
                                       "was made\n");
                _exit(SHIM_EXIT_LAUNCH_FAILED);
        }
        /* As root, before the switch: the rank cannot move itself out again. */
        int cr = l->cgroup ? cgroup_rank_enter(l->cgroup) : 0;
        if (cr < 0) {
                dprintf(STDERR_FILENO, "axagent: cannot enter the rank's cgroup: %s\n",
                        strerror(-cr));
                _exit(SHIM_EXIT_LAUNCH_FAILED);
        }
        /* Only 0, 1 and 2 reach the rank: 3 is the start-failure pipe, closed by exec,
         * and anything the agent opened without O_CLOEXEC (a library's socket) must not
         * leak either. */
        if (shim_keep_only(start_fd) < 0)
                _exit(SHIM_EXIT_LAUNCH_FAILED);
        fcntl(3, F_SETFD, FD_CLOEXEC);

        if (u && u->do_switch) {
                int r = shim_switch_user(u);
                if (r < 0) {
                        dprintf(STDERR_FILENO, "axagent: cannot switch to user %s: %s\n", u->name,
                                strerror(-r));
                        shim_start_failed(SHIM_EXIT_USER_REFUSED);
                }
        }
        umask(022);
        /* After the switch, so the user's own permissions decide what it may enter. */
        if (l->workdir && *l->workdir && chdir(l->workdir) < 0) {
                dprintf(STDERR_FILENO, "axagent: cannot change to working directory %s: %s\n",
                        l->workdir, strerror(errno));
                shim_start_failed(SHIM_EXIT_LAUNCH_FAILED);
        }
        /* execvp searches the PATH of environ, which must be the rank's own. */
        environ = (char **) l->envp;
        execvp(l->argv[0], l->argv);
        dprintf(STDERR_FILENO, "axagent: cannot execute %s: %s\n", l->argv[0], strerror(errno));
        shim_start_failed(SHIM_EXIT_LAUNCH_FAILED);
}

static int shim_write_pid(const char *dir, const char *name, pid_t pid) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%d\n", (int) pid);
        return util_write_file_atomic(path, buf, (size_t) len);
}

/* Scans of /proc before a rank's tree counts as gone (2 ms apart). */
#define SHIM_KILL_ROUNDS 500
/* The longest sleep between lease checks: poll() sleeps on CLOCK_MONOTONIC, which stops
 * while the host is suspended, and the deadline is on CLOCK_BOOTTIME, which does not. */
#define SHIM_LEASE_CHECK_MAX_MS 1000

/* Kills everything the rank started (and the rank, unless keep is its pid): its cgroup,
 * then every descendant of ours. */
static void shim_kill_all(const ShimLaunch *l, pid_t keep) {
        if (l->cgroup)
                (void) cgroup_rank_kill(l->cgroup, SHIM_KILL_ROUNDS);
        (void) proctree_kill(getpid(), keep, SHIM_KILL_ROUNDS);
}

/*
 * Kills the rank and everything it started: the node's lease has run out. Its process
 * group needs no signal of its own: a group lives in our session, so every member is
 * one of our descendants.
 */
static void shim_fence(const ShimLaunch *l, LogPump *pump, pid_t rank, int64_t late_ms) {
        logpump_note(pump,
                     "axagent: the node's lease ran out %" PRId64 " ms ago (the agent is gone, "
                     "stopped, hung or cut off from the controller): killing the rank and every "
                     "process it started\n",
                     late_ms);
        /* The rank and its group first: a rank forking as fast as it can would outrun a
         * scan of /proc, which finds its new children as they come. It is not reaped yet,
         * so its pid is still its own. */
        (void) kill(rank, SIGKILL);
        (void) kill(-rank, SIGKILL);
        shim_kill_all(l, rank);
}

/* The rank could not even be forked: records a launch failure, tells the agent, ends. */
_Noreturn static void shim_give_up(const ShimLaunch *l, LogPump *pump, const ShimPids *pids,
                                   const char *what) {
        logpump_note(pump, "axagent: cannot %s: %s\n", what, strerror(errno));
        logpump_finish(pump);
        (void) agent_shim_write_status(
                l->rank_dir, (RankExit){.signaled = false, .code = SHIM_EXIT_LAUNCH_FAILED});
        (void) !write(3, pids, sizeof(*pids));
        _exit(0);
}

/*
 * Waits for the rank, reaping the orphans that come back to us on the way, pumping its
 * output into the log, and fences it when the lease the agent keeps renewing in l->lease
 * runs out. Returns its wait status.
 */
static int shim_wait_rank(const ShimLaunch *l, LogPump *pump, pid_t rank) {
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        int output = logpump_fd(pump);
        bool fenced = false;
        for (;;) {
                int st;
                pid_t p;
                while ((p = waitpid(-1, &st, WNOHANG)) > 0)
                        if (p == rank) {
                                if (sfd >= 0)
                                        close(sfd);
                                return st;
                        }
                if (p < 0 && errno == ECHILD)
                        return SHIM_EXIT_LAUNCH_FAILED << 8;

                int64_t left = node_lease_deadline(l->lease) - util_boot_ms();
                if (left <= 0 && !fenced) {
                        shim_fence(l, pump, rank, -left);
                        fenced = true;
                }
                int timeout = left <= 0 ? 100
                                        : (int) (left < SHIM_LEASE_CHECK_MAX_MS
                                                         ? left
                                                         : SHIM_LEASE_CHECK_MAX_MS);
                /* Without a signalfd (it could not be made) exits are polled for. A
                 * negative fd is ignored by poll: the log's pipe once every writer
                 * closed it. */
                struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN},
                                        {.fd = output, .events = POLLIN}};
                if (poll(pfd, 2, sfd >= 0 ? timeout : min_int(timeout, 10)) > 0) {
                        struct signalfd_siginfo si;
                        while (sfd >= 0 && read(sfd, &si, sizeof(si)) > 0)
                                ;
                        if (pfd[1].revents && !logpump_run(pump))
                                output = -1;
                }
        }
}

/* The shim itself, in its own session: never returns. fd 3 is the pipe to the agent;
 * 1 and 2 the pipe to the log pump. */
_Noreturn static void shim_run(const ShimLaunch *l, LogPump *pump) {
        ShimPids pids = {.shim = getpid(), .rank = -1};
        const RankUser *u = l->user;

        /* The rank writes its progress file and owns its log. */
        if (u && u->do_switch && l->progress_path)
                (void) chown(l->progress_path, u->uid, u->gid);
        if (u && u->do_switch)
                logpump_set_owner(pump, u->uid, u->gid);

        (void) shim_write_pid(l->rank_dir, "shim.pid", pids.shim);
        /* Before the fork: orphans of the rank's tree must come back to us, not to init. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1);
        int start_pipe[2];
        if (pipe2(start_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                shim_give_up(l, pump, &pids, "create a pipe");
        /*
         * The rank is forked while every signal is at its default: an ignored SIGTERM
         * would survive into it (ignored dispositions outlive exec) and a kill arriving
         * before it could reset them would be lost.
         */
        pid_t rank = fork();
        if (rank == 0)
                shim_exec_rank(l, start_pipe[1]);
        close(start_pipe[1]);
        /* Only the rank's tree writes the log's pipe, so that it ends with the tree. */
        dup2(STDIN_FILENO, STDOUT_FILENO);
        dup2(STDIN_FILENO, STDERR_FILENO);
        /* Stray terminal or group signals must not cost us the rank's exit status. */
        signal(SIGHUP, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        if (rank < 0)
                shim_give_up(l, pump, &pids, "fork rank");
        /* Also set here, so the agent may signal the group as soon as it has the pid. */
        setpgid(rank, rank);
        pids.rank = rank;
        (void) shim_write_pid(l->rank_dir, "rank.pid", rank);
        (void) !write(3, &pids, sizeof(pids));
        close(3);
        /* The fence must outlive what it fences: the OOM killer picks a rank, not us. */
        int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (oom >= 0) {
                (void) !write(oom, "-1000", 5);
                close(oom);
        }
        /* ...and wake at its deadline beside a rank that keeps every CPU busy: a higher
         * priority than the rank's (the rank, forked before, keeps the agent's). Only
         * root may raise it; elsewhere the shim runs as it is. */
        (void) setpriority(PRIO_PROCESS, 0, SHIM_NICE);

        int st = shim_wait_rank(l, pump, rank);
        bool oom_killed = l->cgroup && cgroup_rank_oom_killed(l->cgroup);
        /* Whatever the rank started is stopped with it: its cgroup, its group, and what
         * left the group (setsid, double fork) but, orphaned, came back to us, the
         * subreaper. */
        shim_kill_all(l, -1);
        if (l->cgroup)
                (void) cgroup_rank_remove(l->cgroup);
        logpump_finish(pump);

        RankExit ex = WIFSIGNALED(st) ? (RankExit){.signaled = true, .code = WTERMSIG(st)}
                                      : (RankExit){.signaled = false, .code = WEXITSTATUS(st)};
        ex.oom_killed = oom_killed;
        char byte;
        ex.start_failed = !ex.signaled && read(start_pipe[0], &byte, 1) == 1;
        (void) agent_shim_write_status(l->rank_dir, ex);
        _exit(0);
}

/*
 * Sets up the shim's descriptors: 0 /dev/null, 1 and 2 the pipe to the log pump, 3 the
 * pipe to the agent, 4 and 5 the pump's, no others.
 */
static int shim_fds_setup(const ShimLaunch *l, int pipe_w, LogPump **ret_pump) {
        int out_fd, r = logpump_open(l->log_path, l->log_limits, ret_pump, &out_fd);
        if (r < 0)
                return r;
        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;
        if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
            dup2(out_fd, STDERR_FILENO) < 0)
                return -errno;
        if (pipe_w != 3 && dup2(pipe_w, 3) < 0)
                return -errno;
        /* The rank must not hold the pipe, or the agent would wait for its exit. */
        fcntl(3, F_SETFD, FD_CLOEXEC);
        /* Listening sockets and connections of the agent must not leak into ranks. */
        r = logpump_fds_move(*ret_pump, 4);
        if (r < 0)
                return r;
        close_range((unsigned) r, ~0U, 0);
        return 0;
}

int agent_shim_spawn(const ShimLaunch *l, pid_t *ret_shim_pid, pid_t *ret_rank_pid) {
        int p[2];
        pid_t mid = shim_fork_with_pipe(p);
        if (mid < 0)
                return mid;
        if (mid == 0) {
                /* The intermediate child: its only job is to orphan the shim. */
                shim_secrets_wipe();
                close(p[0]);
                pid_t shim = fork();
                if (shim != 0)
                        _exit(shim < 0 ? 1 : 0);
                setsid();
                shim_signals_reset();
                LogPump *pump;
                if (shim_fds_setup(l, p[1], &pump) < 0)
                        _exit(1);
                shim_run(l, pump);
        }

        close(p[1]);
        int st;
        while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
                ;
        ShimPids pids;
        ssize_t n;
        do
                n = read(p[0], &pids, sizeof(pids));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t) sizeof(pids) && l->attach && pids.rank > 0) {
                /* The rank waits for this word before it runs (shim_exec_rank). */
                char word = l->attach(l->attach_data, pids.rank) < 0 ? '0' : '1';
                (void) !write(p[0], &word, 1);
        }
        close(p[0]);
        if (n != (ssize_t) sizeof(pids))
                return -ECHILD;

        *ret_shim_pid = pids.shim;
        *ret_rank_pid = pids.rank;
        return 0;
}

int agent_shim_write_status(const char *rank_dir, RankExit status) {
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%s %d%s\n",
                           status.signaled       ? "signal"
                           : status.start_failed ? "start"
                                                 : "exit",
                           status.code, status.oom_killed ? " oom" : "");
        /* A full disk must not cost us the one record that says how the rank ended. */
        return agent_reserve_write(rank_dir, "status", buf, (size_t) len);
}

int agent_shim_read_status(const char *rank_dir, RankExit *ret) {
        _cleanup_free_ char *path = xasprintf("%s/status", rank_dir);
        _cleanup_free_ char *data = NULL;
        int r = util_read_file(path, &data, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        char word[16], note[16] = "";
        int code;
        if (sscanf(data, "%15s %d %15s", word, &code, note) < 2)
                return -EINVAL;
        if (strcmp(word, "exit") == 0)
                *ret = (RankExit){.signaled = false, .code = code};
        else if (strcmp(word, "signal") == 0)
                *ret = (RankExit){.signaled = true, .code = code};
        else if (strcmp(word, "start") == 0)
                *ret = (RankExit){.signaled = false, .code = code, .start_failed = true};
        else
                return -EINVAL;
        ret->oom_killed = strcmp(note, "oom") == 0;
        return 1;
}

int agent_shim_read_pid(const char *path, pid_t *ret_pid) {
        _cleanup_free_ char *data = NULL;
        int r = util_read_file(path, &data, NULL);
        if (r < 0)
                return r;
        char *end;
        long v = strtol(data, &end, 10);
        if (end == data || v <= 0 || v > INT32_MAX)
                return -EINVAL;
        *ret_pid = (pid_t) v;
        return 0;
}
