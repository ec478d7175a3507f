/* SPDX-License-Identifier: MIT */
/*
 * Node health command runner; see healthcheck.h. The command runs in its own process
 * group so that a timeout kills whatever it started too. Completion is taken from the
 * pidfd, not from end-of-file on the pipe: a command that leaves a background process
 * holding its stdout must not keep the check running forever.
 */
#include "healthcheck.h"

#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

/* Output kept for the reason; more is read and dropped. */
#define HEALTH_OUTPUT_MAX 4096

struct AgentHealthCmd {
        char *command;
        int64_t timeout_ms;
        pid_t pid; /* -1 when not running */
        int pidfd;
        int out_fd;
        int64_t deadline_ms;
        char output[HEALTH_OUTPUT_MAX];
        size_t output_len;
};

AgentHealthCmd *agent_healthcmd_new(const char *command, int64_t timeout_ms) {
        AgentHealthCmd *h = xcalloc(1, sizeof(*h));
        h->command = xstrdup(command);
        h->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
        h->pid = -1;
        h->pidfd = -1;
        h->out_fd = -1;
        return h;
}

static void healthcmd_reap(AgentHealthCmd *h, int *ret_status) {
        int st = 0;
        while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (ret_status)
                *ret_status = st;
        if (h->pidfd >= 0)
                close(h->pidfd);
        if (h->out_fd >= 0)
                close(h->out_fd);
        h->pid = -1;
        h->pidfd = -1;
        h->out_fd = -1;
}

AgentHealthCmd *agent_healthcmd_free(AgentHealthCmd *h) {
        if (!h)
                return NULL;
        if (h->pid > 0) {
                kill(-h->pid, SIGKILL);
                healthcmd_reap(h, NULL);
        }
        free(h->command);
        free(h);
        return NULL;
}

bool agent_healthcmd_running(const AgentHealthCmd *h) {
        return h->pid > 0;
}

int agent_healthcmd_start(AgentHealthCmd *h, int64_t now_ms) {
        if (h->pid > 0)
                return -EBUSY;
        int p[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                setpgid(0, 0);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_DFL);
                int null_fd = open("/dev/null", O_RDONLY);
                if (null_fd >= 0)
                        dup2(null_fd, STDIN_FILENO);
                dup2(p[1], STDOUT_FILENO);
                dup2(p[1], STDERR_FILENO);
                /* The output pipe is non-blocking for the agent only. */
                fcntl(STDOUT_FILENO, F_SETFL, 0);
                close_range(3, ~0U, 0);
                execl("/bin/sh", "sh", "-c", h->command, (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        setpgid(pid, pid);
        h->pid = pid;
        h->out_fd = p[0];
        h->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        h->deadline_ms = now_ms + h->timeout_ms;
        h->output_len = 0;
        return 0;
}

size_t agent_healthcmd_fds(const AgentHealthCmd *h, int fds[2]) {
        size_t n = 0;
        if (h->pid <= 0)
                return 0;
        if (h->out_fd >= 0)
                fds[n++] = h->out_fd;
        if (h->pidfd >= 0)
                fds[n++] = h->pidfd;
        return n;
}

int64_t agent_healthcmd_deadline(const AgentHealthCmd *h) {
        return h->pid > 0 ? h->deadline_ms : INT64_MAX;
}

/* Reads what the pipe holds now; closes it at end-of-file. */
static void healthcmd_drain(AgentHealthCmd *h) {
        char buf[4096];
        while (h->out_fd >= 0) {
                ssize_t n = read(h->out_fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return;
                if (n == 0) {
                        close(h->out_fd);
                        h->out_fd = -1;
                        return;
                }
                size_t room = sizeof(h->output) - h->output_len;
                size_t take = (size_t) n < room ? (size_t) n : room;
                memcpy(h->output + h->output_len, buf, take);
                h->output_len += take;
        }
}

char *agent_health_reason_trim(const char *output, size_t len) {
        size_t start = 0;
        while (start < len && isspace((unsigned char) output[start]))
                start++;
        while (len > start && isspace((unsigned char) output[len - 1]))
                len--;
        size_t n = len - start;
        if (n == 0)
                return NULL;
        n = util_utf8_cut(output + start, n, AGENT_HEALTH_REASON_MAX);
        char *s = xmalloc(n + 1);
        memcpy(s, output + start, n);
        s[n] = '\0';
        /* The reason is one JSON string shown on one line; NULs would cut it short. */
        for (size_t i = 0; i < n; i++)
                if (s[i] == '\0')
                        s[i] = ' ';
        return s;
}

int agent_healthcmd_process(AgentHealthCmd *h, int64_t now_ms, bool *ret_healthy,
                            char **ret_reason) {
        if (h->pid <= 0)
                return 0;
        healthcmd_drain(h);

        siginfo_t si = {0};
        bool ended = waitid(P_PID, (id_t) h->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                     si.si_pid == h->pid;
        if (!ended && now_ms < h->deadline_ms)
                return 0;

        int st;
        if (!ended) {
                kill(-h->pid, SIGKILL);
                healthcmd_reap(h, &st);
                *ret_healthy = false;
                *ret_reason =
                        xasprintf("health command timed out after %" PRId64 " ms", h->timeout_ms);
                return 1;
        }
        healthcmd_drain(h);
        healthcmd_reap(h, &st);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
                *ret_healthy = true;
                *ret_reason = NULL;
                return 1;
        }
        *ret_healthy = false;
        *ret_reason = agent_health_reason_trim(h->output, h->output_len);
        if (!*ret_reason)
                *ret_reason = WIFSIGNALED(st) ? xasprintf("health command killed by signal %d",
                                                          WTERMSIG(st))
                                              : xasprintf("health command exited with status %d",
                                                          WEXITSTATUS(st));
        return 1;
}
