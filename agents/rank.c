/* SPDX-License-Identifier: MIT */
/*
 * Rank table and per-rank state directories; see rank.h. A rank's exit is known from
 * two sources that agree: the status file its shim writes before exiting, and a pidfd
 * on the shim that becomes readable when the shim is gone. The status file is the one
 * that counts; the pidfd only says when to look. When a shim vanishes without writing
 * one (killed with SIGKILL, node rebooted) the rank is recorded as killed by SIGKILL, the
 * most likely cause, so that every exit has exactly one of exit code and signal.
 */
#include "rank.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "failrules.h"
#include "proctree.h"
#include "reserve.h"
#include "util.h"

struct RankTable {
        char *state_dir;
        char *ranks_dir;
        char *boot_id;
        NodeLease *lease;
        CgroupSet *cgroups; /* borrowed; NULL: ranks are contained by their shims alone */
        LogPumpLimits log_limits;
        Rank **ranks;
        size_t n_ranks;
};

static const RankExit rank_exit_lost = {.signaled = true, .code = SIGKILL};

static int rank_pidfd_open(pid_t pid) {
        if (pid <= 0)
                return -ESRCH;
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? -errno : fd;
}

static bool rank_pid_alive(pid_t pid) {
        return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* The rank's cgroup below the agent's (NULL without cgroups). */
static CgroupRank *rank_cgroup_new(const RankTable *t, RankKey key) {
        if (!t->cgroups)
                return NULL;
        char name[96];
        snprintf(name, sizeof(name), "job%" PRId64 "-a%" PRId64 "-r%" PRId64, key.job, key.attempt,
                 key.rank);
        return cgroup_rank_new(t->cgroups, name);
}

/* Kills what is left in the rank's cgroup (its shim is gone) and removes it. */
static void rank_cgroup_clear(const Rank *r) {
        if (!r->cgroup)
                return;
        (void) cgroup_rank_kill(r->cgroup, 50);
        (void) cgroup_rank_remove(r->cgroup);
}

static char *rank_key_dir(const RankTable *t, RankKey key) {
        return xasprintf("%s/%" PRId64 "-%" PRId64 "-%" PRId64, t->ranks_dir, key.job, key.attempt,
                         key.rank);
}

char *rank_table_progress_path(const RankTable *t, RankKey key) {
        _cleanup_free_ char *dir = rank_key_dir(t, key);
        return xasprintf("%s/progress", dir);
}

char *rank_log_path(const char *state_dir, RankKey key) {
        return xasprintf("%s/logs/%" PRId64 "/%" PRId64 "/rank-%" PRId64 ".log", state_dir, key.job,
                         key.attempt, key.rank);
}

char *rank_table_log_path(const RankTable *t, RankKey key) {
        return rank_log_path(t->state_dir, key);
}

bool rank_finished_on_disk(const char *state_dir, RankKey key) {
        _cleanup_free_ char *status =
                xasprintf("%s/ranks/%" PRId64 "-%" PRId64 "-%" PRId64 "/status", state_dir, key.job,
                          key.attempt, key.rank);
        _cleanup_free_ char *dir = xstrdup(status);
        *strrchr(dir, '/') = '\0';
        struct stat st;
        return stat(dir, &st) < 0 || stat(status, &st) == 0;
}

int rank_table_new(const char *state_dir, const char *boot_id, RankTable **ret) {
        _cleanup_free_ char *ranks_dir = xasprintf("%s/ranks", state_dir);
        _cleanup_free_ char *logs_dir = xasprintf("%s/logs", state_dir);
        int r = util_mkdir_p(ranks_dir, 0755);
        if (r < 0)
                return r;
        r = util_mkdir_p(logs_dir, 0755);
        if (r < 0)
                return r;
        NodeLease *lease;
        r = node_lease_open(state_dir, &lease);
        if (r < 0)
                return r;
        RankTable *t = xcalloc(1, sizeof(*t));
        t->lease = lease;
        t->log_limits = (LogPumpLimits){.max_bytes = LOGPUMP_DEFAULT_MAX_MB * 1024LL * 1024,
                                        .keep = LOGPUMP_DEFAULT_KEEP};
        t->state_dir = xstrdup(state_dir);
        t->ranks_dir = TAKE_PTR(ranks_dir);
        t->boot_id = xstrdup(boot_id);
        *ret = t;
        return 0;
}

static Rank *rank_free(Rank *r) {
        if (!r)
                return NULL;
        if (r->pidfd >= 0)
                close(r->pidfd);
        cgroup_rank_free(r->cgroup);
        free(r->dir);
        free(r->checkpoint_dir);
        free(r->log_tail);
        rank_user_done(&r->run_as);
        free(r);
        return NULL;
}

RankTable *rank_table_free(RankTable *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_ranks; i++)
                rank_free(t->ranks[i]);
        free(t->ranks);
        node_lease_close(t->lease);
        free(t->state_dir);
        free(t->ranks_dir);
        free(t->boot_id);
        free(t);
        return NULL;
}

void rank_table_use_cgroups(RankTable *t, CgroupSet *cgroups) {
        t->cgroups = cgroups;
}

/* Whether the cgroup called name is that of a running rank of the table. */
static bool rank_cgroup_claimed(const char *name, void *userdata) {
        const RankTable *t = userdata;
        RankKey key;
        char tail;
        if (sscanf(name, "job%" SCNd64 "-a%" SCNd64 "-r%" SCNd64 "%c", &key.job, &key.attempt,
                   &key.rank, &tail) != 3)
                return false;
        const Rank *r = rank_table_find(t, key);
        return r && r->state == AGENT_RANK_RUNNING;
}

int rank_table_sweep_cgroups(RankTable *t) {
        return t->cgroups ? cgroup_set_sweep(t->cgroups, rank_cgroup_claimed, t) : 0;
}

void rank_table_set_log_limits(RankTable *t, LogPumpLimits limits) {
        t->log_limits = limits;
}

void rank_table_renew_lease(RankTable *t, int64_t deadline_boot_ms) {
        node_lease_renew(t->lease, deadline_boot_ms);
}

size_t rank_table_count(const RankTable *t) {
        return t->n_ranks;
}

Rank *rank_table_at(const RankTable *t, size_t i) {
        return i < t->n_ranks ? t->ranks[i] : NULL;
}

Rank *rank_table_find(const RankTable *t, RankKey key) {
        for (size_t i = 0; i < t->n_ranks; i++) {
                RankKey k = t->ranks[i]->key;
                if (k.job == key.job && k.attempt == key.attempt && k.rank == key.rank)
                        return t->ranks[i];
        }
        return NULL;
}

static Rank *rank_table_add(RankTable *t, RankKey key, char *dir) {
        Rank *r = xcalloc(1, sizeof(*r));
        r->key = key;
        r->dir = dir;
        r->pidfd = -1;
        r->shim_pid = -1;
        r->rank_pid = -1;
        r->watched_pid = -1;
        t->ranks = xrealloc(t->ranks, (t->n_ranks + 1) * sizeof(Rank *));
        t->ranks[t->n_ranks++] = r;
        return r;
}

static void rank_set_exited(Rank *r, RankExit ex) {
        r->state = AGENT_RANK_EXITED;
        r->exit = ex;
        r->hung = false;
        r->kill_deadline_ms = 0;
        if (r->pidfd >= 0)
                close(r->pidfd);
        r->pidfd = -1;
        r->watched_pid = -1;
}

/* Watches pid; false when it is already gone. */
static bool rank_watch(Rank *r, pid_t pid) {
        if (r->pidfd >= 0)
                close(r->pidfd);
        r->pidfd = -1;
        r->watched_pid = -1;
        int fd = rank_pidfd_open(pid);
        if (fd < 0)
                return false;
        r->pidfd = fd;
        r->watched_pid = pid;
        return true;
}

bool rank_check_exit(Rank *r) {
        if (r->state != AGENT_RANK_RUNNING)
                return false;
        RankExit ex;
        if (agent_shim_read_status(r->dir, &ex) > 0) {
                rank_set_exited(r, ex);
                return true;
        }
        if (r->pidfd >= 0) {
                struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
                if (poll(&p, 1, 0) == 0)
                        return false;
        } else if (rank_pid_alive(r->shim_pid) || rank_pid_alive(r->rank_pid)) {
                return false;
        }

        /* The shim ended; it writes status before exiting, so look once more. */
        if (agent_shim_read_status(r->dir, &ex) > 0) {
                rank_set_exited(r, ex);
                return true;
        }
        /* Shim gone without a word: follow the rank itself while it still runs. */
        if (r->watched_pid != r->rank_pid && rank_watch(r, r->rank_pid))
                return false;
        rank_cgroup_clear(r);
        (void) agent_shim_write_status(r->dir, rank_exit_lost);
        rank_set_exited(r, rank_exit_lost);
        return true;
}

/* The credentials a rank runs as, kept in desired.json for the agent that adopts it:
 * {"uid", "gid", "groups"}; NULL when the rank runs as the agent's own account. */
static json_t *rank_run_as_to_json(const RankUser *u) {
        if (!u || !u->do_switch)
                return NULL;
        json_t *groups = json_array();
        for (int i = 0; i < u->n_groups; i++)
                json_array_append_new(groups, json_integer(u->groups[i]));
        return json_pack("{s:I, s:I, s:o}", "uid", (json_int_t) u->uid, "gid", (json_int_t) u->gid,
                         "groups", groups);
}

static void rank_run_as_from_json(json_t *j, RankUser *ret) {
        json_t *uid = json_object_get(j, "uid"), *gid = json_object_get(j, "gid"),
               *groups = json_object_get(j, "groups");
        if (!json_is_integer(uid) || !json_is_integer(gid) || !json_is_array(groups))
                return;
        *ret = (RankUser){.do_switch = true,
                          .uid = (uid_t) json_integer_value(uid),
                          .gid = (gid_t) json_integer_value(gid),
                          .groups = xcalloc(json_array_size(groups) + 1, sizeof(gid_t)),
                          .n_groups = (int) json_array_size(groups)};
        for (int i = 0; i < ret->n_groups; i++)
                ret->groups[i] = (gid_t) json_integer_value(json_array_get(groups, (size_t) i));
}

static void rank_run_as_copy(const RankUser *u, RankUser *ret) {
        if (!u || !u->do_switch)
                return;
        *ret = (RankUser){.do_switch = true,
                          .uid = u->uid,
                          .gid = u->gid,
                          .groups = xcalloc((size_t) u->n_groups + 1, sizeof(gid_t)),
                          .n_groups = u->n_groups};
        memcpy(ret->groups, u->groups, (size_t) u->n_groups * sizeof(gid_t));
}

static int rank_write_desired(const char *dir, const RankLaunch *l, const char *boot_id,
                              int64_t started_wall_ms, int64_t started_boot_ms) {
        json_t *argv = json_array();
        for (char *const *a = l->argv; a && *a; a++)
                json_array_append_new(argv, json_string(*a));
        json_t *o = json_pack("{s:I, s:I, s:I, s:o, s:s?, s:s?, s:s?, s:I, s:s, s:I}", "job",
                              (json_int_t) l->key.job, "attempt", (json_int_t) l->key.attempt,
                              "rank", (json_int_t) l->key.rank, "argv", argv, "workdir", l->workdir,
                              "user", l->user, "checkpoint_dir", l->checkpoint_dir,
                              "hang_timeout_s", (json_int_t) l->hang_timeout_s, "boot_id", boot_id,
                              "started_at_ms", (json_int_t) started_wall_ms);
        if (!o)
                return -EINVAL;
        json_object_set_new(o, "started_at_boot_ms", json_integer(started_boot_ms));
        json_object_set_new(o, "hang_signal", json_integer(l->hang_signal));
        json_object_set_new(o, "hang_signal_grace_s", json_integer(l->hang_signal_grace_s));
        json_t *run_as = rank_run_as_to_json(l->error ? NULL : l->run_as);
        if (run_as)
                json_object_set_new(o, "run_as", run_as);
        _cleanup_free_ char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(o);
        if (!text)
                return -ENOMEM;
        _cleanup_free_ char *path = xasprintf("%s/desired.json", dir);
        return util_write_file_atomic(path, text, strlen(text));
}

/* Appends one line of the agent's to the rank's log. */
static int rank_log_append(const char *log_path, const char *line) {
        FILE *f = fopen(log_path, "ae");
        if (!f)
                return -errno;
        fputs(line, f);
        return fclose(f) < 0 ? -errno : 0;
}

/* Appends the environment block (and a launch error, if any) to the rank's log. */
static int rank_log_header(const char *log_path, char *const *envp, const char *error) {
        _cleanup_free_ char *log_dir = xstrdup(log_path);
        *strrchr(log_dir, '/') = '\0';
        int r = util_mkdir_p(log_dir, 0755);
        if (r < 0)
                return r;
        FILE *f = fopen(log_path, "ae");
        if (!f)
                return -errno;
        fputs("--- axctl environment ---\n", f);
        for (char *const *e = envp; e && *e; e++)
                fprintf(f, "%s\n", *e);
        fputs("--- end environment ---\n", f);
        if (error)
                fprintf(f, "axagent: cannot start rank: %s\n", error);
        return fclose(f) < 0 ? -errno : 0;
}

/* Creates a rank's directory with its exit reserve, desired.json and progress file, and
 * starts its log. 0 or -errno. */
static int rank_dir_prepare(RankTable *t, const RankLaunch *l, const char *dir,
                            const char *log_path, const char *error, int64_t started_wall_ms,
                            int64_t started_boot_ms) {
        /* A directory left by an earlier agent that could not adopt it is stale. */
        (void) util_rm_rf(dir);
        int r = util_mkdir_p(dir, 0755);
        if (r < 0)
                return r;
        /* First: a rank starts only if its exit can be recorded. */
        r = agent_reserve_make(dir);
        if (r < 0)
                return r;
        r = rank_write_desired(dir, l, t->boot_id, started_wall_ms, started_boot_ms);
        if (r < 0)
                return r;
        _cleanup_free_ char *progress = xasprintf("%s/progress", dir);
        int fd = open(progress, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        close(fd);
        return rank_log_header(log_path, l->envp, error);
}

typedef struct RankAttach {
        Rank *rank;
        const CgroupLimits *limits;
        const char *log_path;
} RankAttach;

/* ShimLaunch.attach: has systemd make the rank's scope around its waiting process. */
static int rank_cgroup_attach(void *userdata, pid_t pid) {
        RankAttach *a = userdata;
        int r = cgroup_rank_attach(a->rank->cgroup, pid, a->limits);
        if (r < 0) {
                /* Its shim still stops all it starts; only its limits are lost. */
                _cleanup_free_ char *msg =
                        xasprintf("axagent: systemd did not make the rank's scope (%s): no cpus "
                                  "or memory_mb limit applies\n",
                                  strerror(-r));
                (void) rank_log_append(a->log_path, msg);
                a->rank->cgroup = cgroup_rank_free(a->rank->cgroup);
        }
        return r;
}

int rank_table_start(RankTable *t, const RankLaunch *l, Rank **ret) {
        if (rank_table_find(t, l->key))
                return -EEXIST;

        _cleanup_free_ char *dir = rank_key_dir(t, l->key);
        _cleanup_free_ char *progress = xasprintf("%s/progress", dir);
        _cleanup_free_ char *log_path = rank_table_log_path(t, l->key);
        const char *error = l->error;
        if (!error && (!l->argv || !l->argv[0]))
                error = "empty argv";
        int64_t started = util_wall_ms(), started_boot = util_boot_ms();
        int r = rank_dir_prepare(t, l, dir, log_path, error, started, started_boot);
        if (r < 0) {
                /* Nothing of it is on disk to find again: it lives in memory until the
                 * controller has seen the failure, which is the node's. */
                (void) util_rm_rf(dir);
                Rank *failed = rank_table_add(t, l->key, TAKE_PTR(dir));
                failed->node_error = r;
                rank_set_exited(failed,
                                (RankExit){.code = SHIM_EXIT_LAUNCH_FAILED, .start_failed = true});
                *ret = failed;
                return 0;
        }

        Rank *rank = rank_table_add(t, l->key, TAKE_PTR(dir));
        rank->checkpoint_dir =
                l->checkpoint_dir && *l->checkpoint_dir ? xstrdup(l->checkpoint_dir) : NULL;
        if (!l->error)
                rank_run_as_copy(l->run_as, &rank->run_as);
        rank->hang_timeout_s = l->hang_timeout_s;
        rank->hang_signal = l->hang_signal;
        rank->hang_signal_grace_s = l->hang_signal_grace_s;
        rank->started_wall_ms = started;
        rank->started_boot_ms = started_boot;
        rank->state = AGENT_RANK_RUNNING;
        agent_progress_init(&rank->progress, started_boot);
        *ret = rank;

        RankExit failed = {.signaled = false, .code = SHIM_EXIT_LAUNCH_FAILED};
        if (error) {
                /* A refused account is the job's: the same spec fails the same way
                 * anywhere. Other launch errors are the node's or the controller's. */
                RankExit refused = {
                        .signaled = false,
                        .code = l->error && l->error_exit > 0 ? l->error_exit : failed.code,
                        .start_failed = l->error && l->error_exit == SHIM_EXIT_USER_REFUSED};
                (void) agent_shim_write_status(rank->dir, refused);
                rank_set_exited(rank, refused);
                return 0;
        }

        rank->cgroup = rank_cgroup_new(t, l->key);
        CgroupLimits limits = {.cpus = l->cpus, .memory_mb = l->memory_mb};
        r = rank->cgroup ? cgroup_rank_create(rank->cgroup, &limits) : 0;
        if (r < 0) {
                /* Its shim still stops all it starts; only its limits are lost. */
                _cleanup_free_ char *msg = xasprintf(
                        "axagent: cannot create the rank's cgroup (%s): no cpus or memory_mb "
                        "limit applies\n",
                        strerror(-r));
                (void) rank_log_append(log_path, msg);
                rank->cgroup = cgroup_rank_free(rank->cgroup);
        }

        ShimLaunch sl = {
                .rank_dir = rank->dir,
                .log_path = log_path,
                .log_limits = &t->log_limits,
                .workdir = l->workdir,
                .argv = l->argv,
                .envp = l->envp,
                .user = l->run_as,
                .progress_path = progress,
                .lease = t->lease,
                .cgroup = rank->cgroup,
        };
        RankAttach attach = {.rank = rank, .limits = &limits, .log_path = log_path};
        if (rank->cgroup && cgroup_rank_needs_attach(rank->cgroup)) {
                sl.attach = rank_cgroup_attach;
                sl.attach_data = &attach;
        }
        r = agent_shim_spawn(&sl, &rank->shim_pid, &rank->rank_pid);
        if (r < 0) {
                _cleanup_free_ char *msg = xasprintf("cannot start supervisor: %s", strerror(-r));
                (void) rank_log_header(log_path, NULL, msg);
                (void) agent_shim_write_status(rank->dir, failed);
                rank_set_exited(rank, failed);
                return 0;
        }
        /* A shim that is already gone has written its status: rank_check_exit finds it. */
        rank_watch(rank, rank->shim_pid);
        return 0;
}

/* Signals the rank's process group, and the rank itself in case it left the group: once
 * it ends, its shim kills whatever else it started. */
void rank_signal(const Rank *r, int sig) {
        if (r->rank_pid <= 0)
                return;
        kill(-r->rank_pid, sig);
        if (getpgid(r->rank_pid) != r->rank_pid)
                kill(r->rank_pid, sig);
}

/*
 * Sends sig to every process of the rank, those that left its process group and session
 * included: the members of its cgroup, else the descendants of its shim (a subreaper,
 * so they stay below it), else, with its shim gone, its group and the rank itself.
 */
static void rank_signal_all(const Rank *r, int sig) {
        if (r->cgroup && cgroup_rank_signal(r->cgroup, sig) > 0)
                return;
        if (r->shim_pid > 0 && rank_pid_alive(r->shim_pid) && proctree_signal(r->shim_pid, sig) > 0)
                return;
        rank_signal(r, sig);
}

void rank_kill(Rank *r, int64_t now_ms, int64_t grace_ms) {
        if (r->state != AGENT_RANK_RUNNING || r->stopping)
                return;
        r->stopping = true;
        rank_signal_all(r, SIGTERM);
        r->kill_deadline_ms = now_ms + (grace_ms > 0 ? grace_ms : 0);
}

void rank_table_tick(RankTable *t, int64_t now_ms) {
        for (size_t i = 0; i < t->n_ranks; i++) {
                Rank *r = t->ranks[i];
                if (r->state != AGENT_RANK_RUNNING || r->kill_deadline_ms == 0 ||
                    now_ms < r->kill_deadline_ms)
                        continue;
                rank_signal_all(r, SIGKILL);
                /* At once where the kernel can: what forks between a list and its kills. */
                if (r->cgroup)
                        (void) cgroup_rank_kill(r->cgroup, 0);
                r->kill_deadline_ms = 0;
        }
}

int64_t rank_table_next_deadline(const RankTable *t) {
        int64_t next = INT64_MAX;
        for (size_t i = 0; i < t->n_ranks; i++) {
                const Rank *r = t->ranks[i];
                if (r->state == AGENT_RANK_RUNNING && r->kill_deadline_ms > 0 &&
                    r->kill_deadline_ms < next)
                        next = r->kill_deadline_ms;
        }
        return next;
}

void rank_table_remove(RankTable *t, Rank *r) {
        for (size_t i = 0; i < t->n_ranks; i++) {
                if (t->ranks[i] != r)
                        continue;
                rank_cgroup_clear(r);
                (void) util_rm_rf(r->dir);
                rank_free(r);
                memmove(t->ranks + i, t->ranks + i + 1, (t->n_ranks - i - 1) * sizeof(Rank *));
                t->n_ranks--;
                return;
        }
}

/* Rebuilds one rank from its directory; -errno when the directory is not a rank's. */
static int rank_adopt_one(RankTable *t, const char *name) {
        RankKey key;
        char tail;
        if (sscanf(name, "%" SCNd64 "-%" SCNd64 "-%" SCNd64 "%c", &key.job, &key.attempt, &key.rank,
                   &tail) != 3)
                return -EINVAL;
        if (rank_table_find(t, key))
                return -EEXIST;

        _cleanup_free_ char *dir = rank_key_dir(t, key);
        _cleanup_free_ char *desired_path = xasprintf("%s/desired.json", dir);
        json_t *desired = json_load_file(desired_path, 0, NULL);
        if (!desired) {
                /* Created but never started: the agent died before spawning. */
                (void) util_rm_rf(dir);
                return -ENOENT;
        }

        Rank *r = rank_table_add(t, key, TAKE_PTR(dir));
        r->cgroup = rank_cgroup_new(t, key);
        const char *ckpt = json_string_value(json_object_get(desired, "checkpoint_dir"));
        r->checkpoint_dir = ckpt && *ckpt ? xstrdup(ckpt) : NULL;
        rank_run_as_from_json(json_object_get(desired, "run_as"), &r->run_as);
        r->hang_timeout_s = json_integer_value(json_object_get(desired, "hang_timeout_s"));
        r->hang_signal = (int) json_integer_value(json_object_get(desired, "hang_signal"));
        r->hang_signal_grace_s =
                json_integer_value(json_object_get(desired, "hang_signal_grace_s"));
        r->started_wall_ms = json_integer_value(json_object_get(desired, "started_at_ms"));
        r->started_boot_ms = json_integer_value(json_object_get(desired, "started_at_boot_ms"));
        bool same_boot =
                util_streq_ptr(json_string_value(json_object_get(desired, "boot_id")), t->boot_id);
        json_decref(desired);

        _cleanup_free_ char *shim_path = xasprintf("%s/shim.pid", r->dir);
        _cleanup_free_ char *rank_path = xasprintf("%s/rank.pid", r->dir);
        (void) agent_shim_read_pid(shim_path, &r->shim_pid);
        (void) agent_shim_read_pid(rank_path, &r->rank_pid);
        r->state = AGENT_RANK_RUNNING;

        RankExit ex;
        if (agent_shim_read_status(r->dir, &ex) > 0) {
                rank_set_exited(r, ex);
                return 0;
        }
        /* Pids recorded before a reboot name unrelated processes now. */
        if (!same_boot) {
                (void) agent_shim_write_status(r->dir, rank_exit_lost);
                rank_set_exited(r, rank_exit_lost);
                return 0;
        }
        if (!rank_watch(r, r->shim_pid))
                rank_watch(r, r->rank_pid);
        if (rank_check_exit(r))
                return 0;

        /* Carry the hang clock over from the file, not from this agent's start: the
         * file's age, a wall-clock difference, is taken once onto the boot clock. */
        _cleanup_free_ char *progress = xasprintf("%s/progress", r->dir);
        char content[AGENT_PROGRESS_MAX + 1];
        struct stat st;
        int64_t now_boot = util_boot_ms(), since = r->started_boot_ms;
        if (since <= 0 || since > now_boot)
                since = now_boot;
        if (stat(progress, &st) == 0) {
                int64_t mtime = (int64_t) st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
                int64_t age = util_wall_ms() - mtime;
                int64_t changed = now_boot - (age > 0 ? age : 0);
                if (changed > since)
                        since = changed;
        }
        agent_progress_init(&r->progress, since);
        if (agent_progress_read(progress, content, sizeof(content)) == 0)
                agent_progress_update(&r->progress, content, since);
        r->progress.changed_ms = since;
        return 0;
}

int rank_table_adopt(RankTable *t) {
        DIR *d = opendir(t->ranks_dir);
        if (!d)
                return -errno;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (rank_adopt_one(t, de->d_name) == 0)
                        n++;
        }
        closedir(d);
        return n;
}

char *rank_table_log_tail(const RankTable *t, RankKey key) {
        _cleanup_free_ char *path = rank_table_log_path(t, key);
        _cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
                return NULL;
        off_t from = st.st_size > FAILRULES_LOG_TAIL ? st.st_size - FAILRULES_LOG_TAIL : 0;
        char *buf = xmalloc(FAILRULES_LOG_TAIL + 1);
        ssize_t n = pread(fd, buf, FAILRULES_LOG_TAIL, from);
        if (n <= 0) {
                free(buf);
                return NULL;
        }
        /* Start on a character, then make the rest valid for JSON. */
        size_t skip = 0;
        while (from > 0 && skip < (size_t) n && ((unsigned char) buf[skip] & 0xC0) == 0x80)
                skip++;
        memmove(buf, buf + skip, (size_t) n - skip);
        n -= (ssize_t) skip;
        buf[n] = '\0';
        util_utf8_sanitize(buf, (size_t) n);
        if (n == 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
