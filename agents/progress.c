/* SPDX-License-Identifier: MIT */
/*
 * Progress files, hang detection and checkpoint discovery; see progress.h. Hang time is
 * measured on CLOCK_BOOTTIME: monotonic, so a wall-clock step cannot end an attempt as
 * hung, and one clock for every process of the host, so an agent restarted mid-run
 * carries on from the rank's recorded start instead of starting the timeout over.
 */
#include "progress.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "shim.h"
#include "util.h"

int agent_progress_parse(const char *data, int64_t *ret_step) {
        const char *p = data;
        while (isspace((unsigned char) *p))
                p++;
        if (!isdigit((unsigned char) *p))
                return -EINVAL;
        int64_t v = 0;
        for (; isdigit((unsigned char) *p); p++) {
                int d = *p - '0';
                if (v > (INT64_MAX - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        while (isspace((unsigned char) *p))
                p++;
        if (*p != '\0')
                return -EINVAL;
        *ret_step = v;
        return 0;
}

int agent_progress_read(const char *path, char *buf, size_t size) {
        if (size <= AGENT_PROGRESS_MAX)
                return -EINVAL;
        buf[0] = '\0';
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        ssize_t n;
        do
                n = read(fd, buf, AGENT_PROGRESS_MAX);
        while (n < 0 && errno == EINTR);
        int r = n < 0 ? -errno : 0;
        close(fd);
        if (r < 0)
                return r;
        buf[n] = '\0';
        return 0;
}

void agent_progress_init(ProgressTracker *t, int64_t since_ms) {
        *t = (ProgressTracker){.changed_ms = since_ms};
}

bool agent_progress_update(ProgressTracker *t, const char *content, int64_t now_ms) {
        if (strncmp(t->content, content, AGENT_PROGRESS_MAX) == 0)
                return false;
        snprintf(t->content, sizeof(t->content), "%s", content);
        t->changed_ms = now_ms;

        int64_t step;
        if (agent_progress_parse(content, &step) < 0)
                return false;
        if (t->has_step && t->step == step)
                return false;
        t->has_step = true;
        t->step = step;
        return true;
}

bool agent_progress_hung(const ProgressTracker *t, int64_t hang_timeout_s, int64_t now_ms) {
        if (hang_timeout_s <= 0)
                return false;
        return now_ms - t->changed_ms >= hang_timeout_s * 1000;
}

/* The name of dir's latest committed step directory: 1 with *ret_step and *ret_name
 * (malloc'd), 0 when there is none (or no dir), -errno. */
static int checkpoint_latest_name(const char *dir, int64_t *ret_step, char **ret_name) {
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;

        int64_t best = -1;
        char *best_name = NULL;
        struct dirent *de;
        while ((de = readdir(d))) {
                int64_t step;
                if (checkpoint_name_parse(de->d_name, &step) < 0 || step <= best)
                        continue;
                /* A step is a real directory of dir: a symlink could name any path on
                 * the node, and the controller takes the path as the resume point. */
                _cleanup_free_ char *step_dir = checkpoint_path_make(dir, de->d_name);
                _cleanup_free_ char *index = xasprintf("%s/index", step_dir);
                struct stat st;
                if (lstat(step_dir, &st) < 0 || !S_ISDIR(st.st_mode) || lstat(index, &st) < 0)
                        continue;
                best = step;
                free(best_name);
                best_name = xstrdup(de->d_name);
        }
        closedir(d);

        if (best < 0)
                return 0;
        *ret_name = best_name;
        *ret_step = best;
        return 1;
}

int agent_checkpoint_latest(const char *dir, int64_t *ret_step, char **ret_path) {
        _cleanup_free_ char *name = NULL;
        int r = checkpoint_latest_name(dir, ret_step, &name);
        if (r > 0)
                *ret_path = checkpoint_path_make(dir, name);
        return r;
}

/* In the child that has become the rank's account: writes the latest step's name. */
static int checkpoint_name_report(void *dir, int fd) {
        int64_t step;
        _cleanup_free_ char *name = NULL;
        int r = checkpoint_latest_name(dir, &step, &name);
        if (r > 0 && dprintf(fd, "%s", name) < 0)
                return -errno;
        return r;
}

int agent_checkpoint_latest_as(const RankUser *u, const char *dir, int64_t *ret_step,
                               char **ret_path) {
        if (!u || !u->do_switch)
                return agent_checkpoint_latest(dir, ret_step, ret_path);
        /* "step_" and at most 19 digits; anything longer is not a step name. */
        char name[32];
        int r = agent_shim_run_as(u, checkpoint_name_report, (void *) dir, name, sizeof(name));
        if (r < 0)
                return r;
        if (!name[0])
                return 0;
        /* The child ran as the job's user: take nothing from it but a step name. */
        if (checkpoint_name_parse(name, ret_step) < 0)
                return -EBADMSG;
        *ret_path = checkpoint_path_make(dir, name);
        return 1;
}
