/* SPDX-License-Identifier: MIT */
/*
 * Per-rank cgroups: the layout found from mountinfo and /proc/self/cgroup text of the
 * machines the agent meets (cgroup v2 under systemd, the v1+v2 hybrid, v1 in a
 * container, none); then, where this machine lets us write cgroupfs, real cgroups: a
 * rank's processes that ignore SIGTERM, leave its process group and double-fork into a
 * new session all die in one kill, by cgroup.kill and by the v1 freezer alike; limits
 * land in the controllers' files and memory_mb is enforced by the OOM killer; a sweep
 * after a lost state directory kills the ranks nobody claims and only those, even
 * through a restart of the agent's cgroups; under a delegated unit cgroup the agent's
 * cgroup goes beside the agent's subgroup.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgroup-scope.h"
#include "cgroup.h"
#include "test-util.h"

/* ---- Layout from text ---- */

/* This machine's kind: v1 hierarchies, a v2 one without controllers, the agent in a
 * memory cgroup of its container. */
static const char hybrid_mountinfo[] =
        "22 1 0:21 / / rw - overlay overlay rw\n"
        "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
        "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "35 30 0:32 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
        "36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime shared:9 - cgroup cgroup rw,freezer\n"
        "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char hybrid_cgroup[] = "9:name=systemd:/\n"
                                    "8:pids:/\n"
                                    "6:freezer:/\n"
                                    "5:devices:/\n"
                                    "4:memory:/process_api/abc\n"
                                    "2:cpuacct:/\n"
                                    "1:cpu:/\n"
                                    "0::/\n";

static const CgroupHierarchy *find_dir(const CgroupLayout *l, const char *dir) {
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->hierarchies[i].dir, dir) == 0)
                        return &l->hierarchies[i];
        return NULL;
}

static void test_layout_hybrid(void) {
        CgroupLayout l;
        CHECK_INT(cgroup_layout_parse(hybrid_mountinfo, hybrid_cgroup, &l), 0);
        CHECK_INT((int) l.n, 5);
        const CgroupHierarchy *h = find_dir(&l, "/sys/fs/cgroup/unified");
        CHECK(h && h->v2 && h->controllers == 0);
        h = find_dir(&l, "/sys/fs/cgroup/memory/process_api/abc");
        CHECK(h && !h->v2 && h->controllers == CGROUP_MEMORY);
        h = find_dir(&l, "/sys/fs/cgroup/cpu");
        CHECK(h && h->controllers == CGROUP_CPU);
        h = find_dir(&l, "/sys/fs/cgroup/freezer");
        CHECK(h && h->controllers == CGROUP_FREEZER);
        h = find_dir(&l, "/sys/fs/cgroup/pids");
        CHECK(h && h->controllers == CGROUP_PIDS);
        /* Hierarchies the agent has no use for, systemd's own included. */
        CHECK(!find_dir(&l, "/sys/fs/cgroup/systemd") && !find_dir(&l, "/sys/fs/cgroup/devices"));
        cgroup_layout_done(&l);
}

static void test_layout_v2_systemd(void) {
        CgroupLayout l;
        CHECK_INT(cgroup_layout_parse("25 22 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - "
                                      "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
                                      "0::/system.slice/axagent.service\n", &l),
                  0);
        CHECK_INT((int) l.n, 1);
        CHECK_STR(l.hierarchies[0].dir, "/sys/fs/cgroup/system.slice/axagent.service");
        CHECK(l.hierarchies[0].v2);
        cgroup_layout_done(&l);
}

/* A container that sees only its own part of each hierarchy, controllers mounted
 * together, a mount point with a blank, and a mount that does not show our cgroup. */
static void test_layout_container(void) {
        CgroupLayout l;
        CHECK_INT(cgroup_layout_parse(
                          "40 30 0:40 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup "
                          "rw,cpu,cpuacct\n"
                          "41 30 0:41 /docker/abc /mnt/my\\040cg rw - cgroup cgroup rw,freezer\n"
                          "42 30 0:42 /docker/other /sys/fs/cgroup/memory rw - cgroup cgroup "
                          "rw,memory\n",
                          "4:cpu,cpuacct:/docker/abc/inner\n"
                          "3:freezer:/docker/abc\n"
                          "2:memory:/docker/abc\n",
                          &l),
                  0);
        CHECK_INT((int) l.n, 2);
        const CgroupHierarchy *h = find_dir(&l, "/sys/fs/cgroup/cpu,cpuacct/inner");
        CHECK(h && h->controllers == CGROUP_CPU);
        h = find_dir(&l, "/mnt/my cg");
        CHECK(h && h->controllers == CGROUP_FREEZER);
        cgroup_layout_done(&l);
}

/* Scope names: the agent's name escaped so that its ':' separator stays unique. */
static void test_scope_escape(void) {
        static const char *const cases[][2] = {
                {"axagent-n1", "axagent-n1"},
                {"node_7.rack-3", "node_7.rack-3"},
                {"a:b/c d", "a\\x3ab\\x2fc\\x20d"},
                {".hidden", "\\x2ehidden"},
                {"a\\b", "a\\x5cb"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *e = cgroup_scope_escape(cases[i][0]);
                CHECK_STR(e, cases[i][1]);
                free(e);
        }
}

static void test_layout_none(void) {
        CgroupLayout l;
        CHECK_INT(cgroup_layout_parse("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n", "0::/\n", &l), 0);
        CHECK_INT((int) l.n, 0);
        cgroup_layout_done(&l);
        CHECK_INT(cgroup_layout_parse("garbage\n1 2\n\n- - -\n", "x\n::\n7:memory\n", &l), 0);
        CHECK_INT((int) l.n, 0);
        cgroup_layout_done(&l);
        CHECK(cgroup_layout_parse(NULL, "", &l) == -EINVAL);
        CgroupSet *s;
        CHECK(cgroup_set_open(&l, "x", &s) == -ENOENT);
}

/* ---- Real cgroups ---- */

static bool pid_gone(pid_t pid) {
        return kill(pid, 0) < 0 && errno == ESRCH;
}

static bool wait_gone(pid_t pid) {
        for (int i = 0; i < 200 && !pid_gone(pid); i++)
                usleep(10 * 1000);
        return pid_gone(pid);
}

/* True when pid's /proc/PID/cgroup names the cgroup called name. */
static bool in_cgroup(pid_t pid, const char *name) {
        _cleanup_free_ char *path = xasprintf("/proc/%d/cgroup", (int) pid);
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ char *needle = xasprintf("/%s\n", name);
        return util_read_file(path, &text, NULL) == 0 && strstr(text, needle);
}

/*
 * A rank that escapes every way a process can short of cgroups: it enters cg, ignores
 * SIGTERM, double-forks a grandchild into a new session and joins our process group.
 * Returns the rank (our child) and sets *ret_escapee.
 */
static pid_t spawn_escaper(const CgroupRank *cg, pid_t *ret_escapee) {
        int p[2];
        CHECK(pipe(p) == 0);
        pid_t leader = getpgrp();
        pid_t rank = fork();
        CHECK(rank >= 0);
        if (rank == 0) {
                if (cgroup_rank_enter(cg) < 0)
                        _exit(1);
                signal(SIGTERM, SIG_IGN);
                pid_t mid = fork();
                if (mid == 0) {
                        pid_t esc = fork();
                        if (esc == 0) {
                                setsid();
                                for (;;)
                                        pause();
                        }
                        (void) !write(p[1], &esc, sizeof(esc));
                        _exit(0);
                }
                waitpid(mid, NULL, 0);
                setpgid(0, leader);
                for (;;)
                        pause();
        }
        close(p[1]);
        pid_t esc = -1;
        CHECK(read(p[0], &esc, sizeof(esc)) == (ssize_t) sizeof(esc));
        close(p[0]);
        *ret_escapee = esc;
        return rank;
}

static bool is_dir(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The rank cgroup's directories, one per hierarchy the set uses, in layout order. */
static size_t rank_dirs(const CgroupLayout *l, const char *set, const char *rank, char **dirs) {
        size_t n = 0;
        for (size_t i = 0; i < l->n; i++) {
                char *d = xasprintf("%s/%s/%s", l->hierarchies[i].dir, set, rank);
                if (is_dir(d))
                        dirs[n++] = d;
                else
                        free(d);
        }
        return n;
}

static void free_dirs(char **dirs, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(dirs[i]);
}

/* Escapees of every kind die in one kill; the cgroups are removed after. */
static void check_kill_escapers(const CgroupLayout *l, CgroupSet *s, const char *set_name) {
        CgroupRank *cg = cgroup_rank_new(s, "job1-a1-r0");
        CgroupLimits none = {0};
        CHECK_INT(cgroup_rank_create(cg, &none), 0);
        pid_t escapee, rank = spawn_escaper(cg, &escapee);
        CHECK(in_cgroup(rank, "job1-a1-r0") && in_cgroup(escapee, "job1-a1-r0"));
        for (int i = 0; i < 2000 && (getpgid(rank) != getpgrp() || getsid(escapee) != escapee); i++)
                usleep(5 * 1000);
        CHECK(getsid(escapee) == escapee && getpgid(rank) == getpgrp());
        /* SIGTERM to the group changes nothing: both ignore or never see it. */
        kill(rank, SIGTERM);
        usleep(20 * 1000);
        CHECK(!pid_gone(rank) && !pid_gone(escapee));

        CHECK(cgroup_rank_kill(cg, 500) >= 2);
        int st;
        CHECK(waitpid(rank, &st, 0) == rank && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        CHECK(wait_gone(escapee));
        CHECK(!cgroup_rank_oom_killed(cg));
        CHECK_INT(cgroup_rank_remove(cg), 0);
        char *dirs[8];
        CHECK_INT((int) rank_dirs(l, set_name, "job1-a1-r0", dirs), 0);
        /* Killing what is gone is no error. */
        CHECK_INT(cgroup_rank_kill(cg, 5), 0);
        cgroup_rank_free(cg);
}

static int64_t read_int(const char *dir, const char *file) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        _cleanup_free_ char *text = NULL;
        if (util_read_file(path, &text, NULL) < 0)
                return -1;
        return strtoll(text, NULL, 10);
}

/* cpus and memory_mb land in the controllers' files; over memory_mb is an OOM kill. */
static void check_limits(const CgroupLayout *l, CgroupSet *s, const char *set_name) {
        unsigned limits = cgroup_set_limits(s);
        CgroupRank *cg = cgroup_rank_new(s, "job2-a1-r0");
        CgroupLimits lim = {.cpus = 2, .memory_mb = 32};
        CHECK_INT(cgroup_rank_create(cg, &lim), 0);
        char *dirs[8];
        size_t n = rank_dirs(l, set_name, "job2-a1-r0", dirs);
        bool memory_seen = false, cpu_seen = false;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *cpu_max = xasprintf("%s/cpu.max", dirs[i]);
                _cleanup_free_ char *text = NULL;
                if (read_int(dirs[i], "memory.limit_in_bytes") == 32 << 20 ||
                    read_int(dirs[i], "memory.max") == 32 << 20)
                        memory_seen = true;
                if (read_int(dirs[i], "cpu.cfs_quota_us") == 200000 ||
                    (util_read_file(cpu_max, &text, NULL) == 0 &&
                     strcmp(text, "200000 100000\n") == 0))
                        cpu_seen = true;
        }
        free_dirs(dirs, n);
        CHECK(memory_seen == !!(limits & CGROUP_MEMORY));
        CHECK(cpu_seen == !!(limits & CGROUP_CPU));

        if (limits & CGROUP_MEMORY) {
                pid_t pid = fork();
                CHECK(pid >= 0);
                if (pid == 0) {
                        if (cgroup_rank_enter(cg) < 0)
                                _exit(1);
                        size_t size = 256 << 20;
                        char *big = malloc(size);
                        for (size_t i = 0; big && i < size; i += 4096)
                                big[i] = 1;
                        _exit(0);
                }
                int st;
                CHECK(waitpid(pid, &st, 0) == pid);
                CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
                CHECK(cgroup_rank_oom_killed(cg));
        } else {
                printf("SKIP: no memory controller here: memory_mb is not enforced\n");
        }
        (void) cgroup_rank_kill(cg, 500);
        CHECK_INT(cgroup_rank_remove(cg), 0);
        cgroup_rank_free(cg);
}

static pid_t spawn_sleeper(const CgroupRank *cg) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                if (cgroup_rank_enter(cg) < 0)
                        _exit(1);
                for (;;)
                        pause();
        }
        return pid;
}

static bool keep_job3(const char *name, void *userdata) {
        (*(int *) userdata)++;
        return strcmp(name, "job3-a1-r0") == 0;
}

/*
 * An agent restart reopens the same cgroups without touching the ranks in them; a
 * sweep then kills exactly the ranks not kept, and the agent's cgroup goes once empty.
 */
static CgroupSet *check_restart_and_sweep(const CgroupLayout *l, CgroupSet *s,
                                          const char *set_name) {
        CgroupRank *kept = cgroup_rank_new(s, "job3-a1-r0");
        CgroupRank *orphan = cgroup_rank_new(s, "job4-a1-r0");
        CgroupLimits none = {0};
        CHECK_INT(cgroup_rank_create(kept, &none), 0);
        CHECK_INT(cgroup_rank_create(orphan, &none), 0);
        pid_t kept_pid = spawn_sleeper(kept), orphan_pid = spawn_sleeper(orphan);
        /* Each child moves itself: wait for both (slow under the sanitizers). */
        for (int i = 0; i < 2000 &&
                        !(in_cgroup(kept_pid, "job3-a1-r0") && in_cgroup(orphan_pid, "job4-a1-r0"));
             i++)
                usleep(5 * 1000);

        cgroup_set_free(s);
        s = NULL;
        CHECK_INT(cgroup_set_open(l, set_name, &s), 0);
        CHECK(in_cgroup(kept_pid, "job3-a1-r0") && in_cgroup(orphan_pid, "job4-a1-r0"));

        int asked = 0;
        CHECK_INT(cgroup_set_sweep(s, keep_job3, &asked), 1);
        CHECK(asked >= 2);
        int st;
        CHECK(waitpid(orphan_pid, &st, 0) == orphan_pid && WIFSIGNALED(st));
        CHECK(!pid_gone(kept_pid) && in_cgroup(kept_pid, "job3-a1-r0"));
        char *dirs[8];
        CHECK_INT((int) rank_dirs(l, set_name, "job4-a1-r0", dirs), 0);

        CHECK(cgroup_rank_kill(kept, 500) >= 1);
        CHECK(waitpid(kept_pid, &st, 0) == kept_pid);
        CHECK_INT(cgroup_rank_remove(kept), 0);
        cgroup_rank_free(kept);
        cgroup_rank_free(orphan);
        return s;
}

/* A layout of l's v1 hierarchies only, borrowing their strings. */
static CgroupLayout v1_only(const CgroupLayout *l) {
        CgroupLayout v1 = {.hierarchies = xcalloc(l->n + 1, sizeof(CgroupHierarchy))};
        for (size_t i = 0; i < l->n; i++)
                if (!l->hierarchies[i].v2)
                        v1.hierarchies[v1.n++] = l->hierarchies[i];
        return v1;
}

/* Under systemd's DelegateSubgroup= the agent sits in a subgroup of its delegated unit
 * cgroup: its own cgroup goes beside it, where controllers can be enabled. */
static void check_v2_beside_delegated_subgroup(const CgroupLayout *l) {
        const CgroupHierarchy *v2 = NULL;
        for (size_t i = 0; i < l->n; i++)
                if (l->hierarchies[i].v2)
                        v2 = &l->hierarchies[i];
        if (!v2)
                return;
        _cleanup_free_ char *unit = xasprintf("%s/axtest-unit-%d.service", v2->dir, (int) getpid());
        _cleanup_free_ char *sub = xasprintf("%s/agent", unit);
        _cleanup_free_ char *beside = xasprintf("%s/axagent-x", unit);
        _cleanup_free_ char *below = xasprintf("%s/axagent-x", sub);
        CHECK(mkdir(unit, 0755) == 0 && mkdir(sub, 0755) == 0);
        if (setxattr(unit, "trusted.delegate", "1", 1, 0) == 0) {
                CgroupHierarchy h = {.dir = sub, .v2 = true};
                CgroupLayout one = {.hierarchies = &h, .n = 1};
                CgroupSet *s;
                CHECK_INT(cgroup_set_open(&one, "axagent-x", &s), 0);
                CHECK(is_dir(beside) && !is_dir(below));
                cgroup_set_free(s);
                CHECK(!is_dir(beside));
        } else {
                printf("SKIP: cannot mark a cgroup delegated here (%s)\n", strerror(errno));
        }
        CHECK(rmdir(sub) == 0 && rmdir(unit) == 0);
}

static int test_real(void) {
        CgroupLayout l;
        if (cgroup_layout_read(&l) < 0 || l.n == 0) {
                printf("SKIP: no cgroup hierarchy mounted here\n");
                return 0;
        }
        _cleanup_free_ char *name = xasprintf("axtest-unit-%d", (int) getpid());
        CgroupSet *s;
        int r = cgroup_set_open(&l, name, &s);
        if (r < 0) {
                printf("SKIP: cannot create cgroups here (%s)\n", strerror(-r));
                cgroup_layout_done(&l);
                return 0;
        }
        _cleanup_free_ char *line = cgroup_set_describe(s);
        printf("%s\n", line);

        check_kill_escapers(&l, s, name);
        check_limits(&l, s, name);
        s = check_restart_and_sweep(&l, s, name);
        cgroup_set_free(s);
        check_v2_beside_delegated_subgroup(&l);
        for (size_t i = 0; i < l.n; i++) {
                _cleanup_free_ char *d = xasprintf("%s/%s", l.hierarchies[i].dir, name);
                CHECK(!is_dir(d));
        }

        /* Where v1 has a freezer, it alone stops the escapers too. */
        CgroupLayout v1 = v1_only(&l);
        bool freezer = false;
        for (size_t i = 0; i < v1.n; i++)
                freezer |= v1.hierarchies[i].controllers & CGROUP_FREEZER;
        if (freezer && cgroup_set_open(&v1, name, &s) == 0) {
                CHECK_STR(cgroup_set_kind(s), "cgroup-v1");
                check_kill_escapers(&v1, s, name);
                cgroup_set_free(s);
        } else {
                printf("SKIP: no v1 freezer here\n");
        }
        free(v1.hierarchies);
        cgroup_layout_done(&l);
        return 0;
}

int main(void) {
        test_scope_escape();
        test_layout_hybrid();
        test_layout_v2_systemd();
        test_layout_container();
        test_layout_none();
        test_real();
        return 0;
}
