/* SPDX-License-Identifier: MIT */
/*
 * Per-rank cgroups; see cgroup.h. Paths are built once, when a CgroupRank is made, so
 * that the shim's forked rank and the shim itself only open, read and write files of
 * known names. Files of cgroupfs are written with one write(2) each: a value split
 * over two writes would be two values.
 */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cgroup-scope.h"
#include "util.h"

/* More hierarchies than any machine mounts of the four controllers, plus v2. */
#define CGROUP_MAX_HIERARCHIES 8
/* The period of the CPU quota, µs: the kernel's default. */
#define CGROUP_CPU_PERIOD_US 100000
/* Checks, 1 ms apart, for a freezer to report the cgroup frozen. */
#define CGROUP_FREEZE_ROUNDS 100

/* The agent's cgroup in one hierarchy: rank cgroups are <path>/<prefix><name><suffix>. */
typedef struct CgroupDir {
        char *path; /* <hierarchy>/<name>, or the slice of systemd scopes */
        char *prefix; /* "" in the agent's own cgroup; for scopes, the agent's name and ':' */
        const char *suffix; /* "" or ".scope" */
        bool v2;
        unsigned controllers; /* v1: the hierarchy's; v2: those enabled for ranks */
} CgroupDir;

struct CgroupSet {
        CgroupDir dirs[CGROUP_MAX_HIERARCHIES];
        size_t n;
        sd_bus *bus; /* systemd makes each rank's cgroup, a scope (cgroup-scope.h); or NULL */
};

/* One rank's cgroup in one hierarchy, with the files used on it. */
typedef struct CgroupRankDir {
        char *dir;
        char *procs; /* cgroup.procs */
        char *freeze; /* v2 cgroup.freeze or v1 freezer.state; NULL without a freezer */
        char *kill; /* v2 cgroup.kill (kernels from 5.14 have it); NULL on v1 */
        char *oom; /* v2 memory.events or v1 memory.oom_control; NULL without memory */
        bool v2;
        unsigned controllers;
} CgroupRankDir;

struct CgroupRank {
        CgroupRankDir h[CGROUP_MAX_HIERARCHIES];
        size_t n;
        const CgroupSet *set; /* borrowed: it outlives its ranks */
        char *unit; /* the scope systemd makes for it, or NULL */
};

static const struct {
        const char *name;
        CgroupController bit;
} cgroup_controllers[] = {
        {"freezer", CGROUP_FREEZER},
        {"pids", CGROUP_PIDS},
        {"memory", CGROUP_MEMORY},
        {"cpu", CGROUP_CPU},
};

/* The controller bits named in a list of words separated by any of seps. */
static unsigned cgroup_controllers_parse(const char *list, const char *seps) {
        unsigned bits = 0;
        for (const char *p = list; *p;) {
                size_t n = strcspn(p, seps);
                for (size_t i = 0; i < ELEMENTSOF(cgroup_controllers); i++)
                        if (strlen(cgroup_controllers[i].name) == n &&
                            strncmp(p, cgroup_controllers[i].name, n) == 0)
                                bits |= cgroup_controllers[i].bit;
                p += n;
                p += strspn(p, seps);
        }
        return bits;
}

/* ---- Layout ---- */

/* Undoes mountinfo's octal escapes (\040 for a blank) in place. */
static void cgroup_unescape(char *s) {
        char *out = s;
        for (char *in = s; *in; in++) {
                if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
                    in[3] >= '0' && in[3] <= '7') {
                        *out++ = (char) ((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
                        in += 3;
                } else {
                        *out++ = *in;
                }
        }
        *out = '\0';
}

typedef struct CgroupMount {
        char *root; /* the cgroup shown at the mount point */
        char *point;
        bool v2;
        char *options; /* v1: the super options, which name the controllers */
} CgroupMount;

/* Reads the cgroup mounts of one mountinfo line; false for any other line. */
static bool cgroup_mount_parse(char *line, CgroupMount *ret) {
        char *fields[6];
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; i < 6 && tok; i++, tok = strtok_r(NULL, " ", &save))
                fields[i] = tok;
        if (!tok)
                return false;
        /* Optional fields until "-", then the type, the source and the super options. */
        while (tok && strcmp(tok, "-") != 0)
                tok = strtok_r(NULL, " ", &save);
        char *type = strtok_r(NULL, " ", &save);
        char *source = strtok_r(NULL, " ", &save);
        char *options = strtok_r(NULL, " ", &save);
        if (!type || !source || !options)
                return false;
        bool v2 = strcmp(type, "cgroup2") == 0;
        if (!v2 && strcmp(type, "cgroup") != 0)
                return false;
        cgroup_unescape(fields[3]);
        cgroup_unescape(fields[4]);
        *ret = (CgroupMount){.root = fields[3], .point = fields[4], .v2 = v2, .options = options};
        return true;
}

/* The directory of cgroup path in the mount, or NULL when the mount does not show it. */
static char *cgroup_mount_dir(const CgroupMount *m, const char *path) {
        size_t n = strlen(m->root);
        if (strcmp(m->root, "/") == 0)
                n = 0;
        else if (strncmp(path, m->root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
                return NULL;
        const char *rest = path + n;
        if (strcmp(rest, "/") == 0)
                rest = "";
        return xasprintf("%s%s", m->point, rest);
}

/* Adds the hierarchy of one /proc/self/cgroup line ("ID:CONTROLLERS:PATH"). */
static void cgroup_layout_add(CgroupLayout *l, const CgroupMount *mounts, size_t n_mounts,
                              const char *line) {
        const char *c1 = strchr(line, ':');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/' || l->n >= CGROUP_MAX_HIERARCHIES)
                return;
        _cleanup_free_ char *names = strndup(c1 + 1, (size_t) (c2 - c1 - 1));
        const char *path = c2 + 1;
        bool v2 = *names == '\0';
        unsigned bits = v2 ? 0 : cgroup_controllers_parse(names, ",");
        if (!names || (!v2 && bits == 0))
                return;
        for (size_t i = 0; i < n_mounts; i++) {
                const CgroupMount *m = &mounts[i];
                if (m->v2 != v2 ||
                    (!v2 && (cgroup_controllers_parse(m->options, ",") & bits) != bits))
                        continue;
                char *dir = cgroup_mount_dir(m, path);
                if (!dir)
                        continue;
                l->hierarchies = xrealloc(l->hierarchies, (l->n + 1) * sizeof(CgroupHierarchy));
                l->hierarchies[l->n++] = (CgroupHierarchy){.dir = dir,
                                                           .mount_point = xstrdup(m->point),
                                                           .mount_root = xstrdup(m->root),
                                                           .v2 = v2,
                                                           .controllers = bits};
                return;
        }
}

int cgroup_layout_parse(const char *mountinfo, const char *self_cgroup, CgroupLayout *ret) {
        if (!mountinfo || !self_cgroup)
                return -EINVAL;
        _cleanup_free_ char *minfo = xstrdup(mountinfo);
        _cleanup_free_ char *cgroups = xstrdup(self_cgroup);
        CgroupMount *mounts = NULL;
        size_t n_mounts = 0, cap = 0;
        char *save = NULL;
        for (char *line = strtok_r(minfo, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                CgroupMount m;
                if (!cgroup_mount_parse(line, &m))
                        continue;
                GROW(mounts, n_mounts, cap);
                mounts[n_mounts++] = m;
        }
        CgroupLayout l = {0};
        save = NULL;
        for (char *line = strtok_r(cgroups, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                cgroup_layout_add(&l, mounts, n_mounts, line);
        free(mounts);
        *ret = l;
        return 0;
}

int cgroup_layout_read(CgroupLayout *ret) {
        _cleanup_free_ char *mountinfo = NULL, *self = NULL;
        int r = util_read_file("/proc/self/mountinfo", &mountinfo, NULL);
        if (r < 0)
                return r;
        r = util_read_file("/proc/self/cgroup", &self, NULL);
        if (r < 0)
                return r;
        return cgroup_layout_parse(mountinfo, self, ret);
}

void cgroup_layout_done(CgroupLayout *l) {
        for (size_t i = 0; i < l->n; i++) {
                free(l->hierarchies[i].dir);
                free(l->hierarchies[i].mount_point);
                free(l->hierarchies[i].mount_root);
        }
        free(l->hierarchies);
        *l = (CgroupLayout){0};
}

/* ---- Small file operations, without allocation ---- */

static int cgroup_write(const char *path, const char *value) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, strlen(value));
        int r = n < 0 ? -errno : 0;
        close(fd);
        return r;
}

/* Reads up to size - 1 bytes of a small file, NUL-terminated. */
static int cgroup_read(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int r = n < 0 ? -errno : 0;
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return r;
}

static bool cgroup_exists(const char *path) {
        return path && access(path, F_OK) == 0;
}

/* The value of "key N" in a flat-keyed file (memory.events, memory.oom_control). */
static int64_t cgroup_keyed_value(const char *path, const char *key) {
        char buf[1024];
        if (cgroup_read(path, buf, sizeof(buf)) < 0)
                return -1;
        size_t n = strlen(key);
        for (const char *line = buf; *line;) {
                if (strncmp(line, key, n) == 0 && line[n] == ' ')
                        return strtoll(line + n + 1, NULL, 10);
                const char *next = strchr(line, '\n');
                if (!next)
                        break;
                line = next + 1;
        }
        return -1;
}

/* Sends sig (0: only counts) to every process listed in a cgroup.procs; the number
 * listed, or -errno. */
static int cgroup_procs_kill(const char *procs, int sig) {
        int fd = open(procs, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        char buf[4096];
        long pid = 0;
        bool digits = false;
        int listed = 0;
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] >= '0' && buf[i] <= '9') {
                                pid = pid * 10 + (buf[i] - '0');
                                digits = true;
                                continue;
                        }
                        if (digits && pid > 0) {
                                if (sig)
                                        kill((pid_t) pid, sig);
                                listed++;
                        }
                        pid = 0;
                        digits = false;
                }
        if (digits && pid > 0) {
                if (sig)
                        kill((pid_t) pid, sig);
                listed++;
        }
        close(fd);
        return listed;
}

static void cgroup_sleep_ms(int ms) {
        nanosleep(&(struct timespec){.tv_nsec = ms * 1000L * 1000L}, NULL);
}

/* ---- The agent's cgroups ---- */

/* Enables each controller of bits in a v2 cgroup's subtree_control, one at a time so
 * that one refused does not refuse the others; returns those enabled now. */
static unsigned cgroup_v2_enable(const char *dir, unsigned bits) {
        _cleanup_free_ char *control = xasprintf("%s/cgroup.subtree_control", dir);
        for (size_t i = 0; i < ELEMENTSOF(cgroup_controllers); i++) {
                if (!(bits & cgroup_controllers[i].bit))
                        continue;
                char word[32];
                snprintf(word, sizeof(word), "+%s", cgroup_controllers[i].name);
                (void) cgroup_write(control, word);
        }
        char buf[512];
        if (cgroup_read(control, buf, sizeof(buf)) < 0)
                return 0;
        return cgroup_controllers_parse(buf, " \n") & bits;
}

/* True when systemd delegated the cgroup to us (Delegate=yes sets this attribute). */
static bool cgroup_v2_delegated(const char *dir) {
        char value[8];
        ssize_t n = getxattr(dir, "trusted.delegate", value, sizeof(value));
        if (n < 0)
                n = getxattr(dir, "user.delegate", value, sizeof(value));
        return n == 1 && value[0] == '1';
}

/*
 * Where the agent makes its v2 cgroup (malloc'd): beside its own when systemd put it in
 * a subgroup of a delegated cgroup (DelegateSubgroup=, systemd 254 and later), else
 * below its own. Only the former can give ranks controllers: a cgroup with processes
 * in it cannot (the kernel's "no internal processes" rule), and an agent that moved
 * itself out of its unit's cgroup to enable them would never start again there
 * (systemd puts each new main process into that cgroup, which controllers then bar).
 */
static char *cgroup_v2_base(const char *dir) {
        _cleanup_free_ char *parent = xstrdup(dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
                *slash = '\0';
                if (cgroup_v2_delegated(parent))
                        return TAKE_PTR(parent);
        }
        return xstrdup(dir);
}

/* The controllers a v2 cgroup hands to its children, enabled where it may. */
static unsigned cgroup_v2_prepare(const char *dir) {
        _cleanup_free_ char *avail_path = xasprintf("%s/cgroup.controllers", dir);
        char avail[512];
        if (cgroup_read(avail_path, avail, sizeof(avail)) < 0)
                return 0;
        unsigned want =
                cgroup_controllers_parse(avail, " \n") & (CGROUP_MEMORY | CGROUP_CPU | CGROUP_PIDS);
        return want ? cgroup_v2_enable(dir, want) : 0;
}

/*
 * The v2 hierarchy of l when a rank's cgroup is best a systemd scope, else NULL: on a
 * cgroup v2 host (no v1 hierarchy to use) under systemd, unless the agent runs in a
 * subgroup of a delegated cgroup, where its own rank cgroups get controllers. Below a
 * cgroup that is not delegated systemd owns the tree, and below one delegated with the
 * agent's processes in it the kernel allows no controllers (systemd 252's Delegate=yes):
 * a scope has both a cgroup of systemd's making and its limits.
 */
static const CgroupHierarchy *cgroup_scope_hierarchy(const CgroupLayout *l) {
        const CgroupHierarchy *v2 = NULL;
        for (size_t i = 0; i < l->n; i++) {
                if (!l->hierarchies[i].v2)
                        return NULL;
                v2 = &l->hierarchies[i];
        }
        if (!v2 || sd_booted() <= 0)
                return NULL;
        _cleanup_free_ char *base = cgroup_v2_base(v2->dir);
        return strcmp(base, v2->dir) == 0 ? v2 : NULL;
}

/* Where systemd's cgroup path lies in the mount of h (malloc'd), or NULL. */
static char *cgroup_hierarchy_dir(const CgroupHierarchy *h, const char *path) {
        CgroupMount m = {.root = h->mount_root, .point = h->mount_point, .v2 = h->v2};
        return cgroup_mount_dir(&m, path);
}

/* The agent's cgroups as systemd scopes in CGROUP_SCOPE_SLICE. 0 or -errno. */
static int cgroup_set_open_scopes(const CgroupHierarchy *h, const char *name, CgroupSet **ret) {
        sd_bus *bus;
        int r = cgroup_scope_connect(&bus);
        if (r < 0)
                return r;
        _cleanup_free_ char *slice_path = NULL;
        r = cgroup_scope_slice_start(bus, CGROUP_SCOPE_SLICE, &slice_path);
        char *dir = r < 0 ? NULL : cgroup_hierarchy_dir(h, slice_path);
        if (!dir) {
                sd_bus_flush_close_unref(bus);
                return r < 0 ? r : -ENOENT;
        }
        /* What systemd can enable for the scopes in the slice. */
        _cleanup_free_ char *avail_path = xasprintf("%s/cgroup.controllers", dir);
        char avail[512];
        unsigned bits = cgroup_read(avail_path, avail, sizeof(avail)) == 0
                                ? cgroup_controllers_parse(avail, " \n") &
                                          (CGROUP_MEMORY | CGROUP_CPU | CGROUP_PIDS)
                                : 0;
        _cleanup_free_ char *escaped = cgroup_scope_escape(name);
        CgroupSet *s = xcalloc(1, sizeof(*s));
        s->dirs[s->n++] = (CgroupDir){.path = dir,
                                      .prefix = xasprintf("%s:", escaped),
                                      .suffix = ".scope",
                                      .v2 = true,
                                      .controllers = bits};
        s->bus = bus;
        *ret = s;
        return 0;
}

int cgroup_set_open(const CgroupLayout *l, const char *name, CgroupSet **ret) {
        if (l->n == 0)
                return -ENOENT;
        const CgroupHierarchy *scopes = cgroup_scope_hierarchy(l);
        /* Without systemd's bus the agent's own cgroup still stops ranks whole. */
        if (scopes && cgroup_set_open_scopes(scopes, name, ret) == 0)
                return 0;
        CgroupSet *s = xcalloc(1, sizeof(*s));
        unsigned v2_enabled = 0;
        int r = -ENOENT;
        /* v2 first: what it controls needs no v1 hierarchy. */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < l->n; i++) {
                        const CgroupHierarchy *h = &l->hierarchies[i];
                        if (h->v2 != (pass == 0) || s->n >= CGROUP_MAX_HIERARCHIES)
                                continue;
                        _cleanup_free_ char *base =
                                h->v2 ? cgroup_v2_base(h->dir) : xstrdup(h->dir);
                        unsigned bits =
                                h->v2 ? cgroup_v2_prepare(base) : h->controllers & ~v2_enabled;
                        if (!h->v2 && bits == 0)
                                continue;
                        _cleanup_free_ char *path = xasprintf("%s/%s", base, name);
                        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
                                r = -errno;
                                continue;
                        }
                        if (h->v2) {
                                bits = bits ? cgroup_v2_enable(path, bits) : 0;
                                v2_enabled = bits;
                        }
                        s->dirs[s->n++] = (CgroupDir){.path = TAKE_PTR(path),
                                                      .prefix = xstrdup(""),
                                                      .suffix = "",
                                                      .v2 = h->v2,
                                                      .controllers = bits};
                }
        if (s->n == 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

CgroupSet *cgroup_set_free(CgroupSet *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n; i++) {
                /* The slice of scopes is every agent's of the host, and systemd's. */
                if (!s->bus)
                        (void) rmdir(s->dirs[i].path);
                free(s->dirs[i].path);
                free(s->dirs[i].prefix);
        }
        sd_bus_flush_close_unref(s->bus);
        free(s);
        return NULL;
}

const char *cgroup_set_kind(const CgroupSet *s) {
        bool v1 = false, v2 = false;
        for (size_t i = 0; i < s->n; i++)
                *(s->dirs[i].v2 ? &v2 : &v1) = true;
        if (s->bus)
                return "cgroup-v2-scope";
        return v1 && v2 ? "cgroup-v1+v2" : v2 ? "cgroup-v2" : "cgroup-v1";
}

unsigned cgroup_set_limits(const CgroupSet *s) {
        unsigned bits = 0;
        for (size_t i = 0; i < s->n; i++)
                bits |= s->dirs[i].controllers;
        return bits & (CGROUP_MEMORY | CGROUP_CPU);
}

char *cgroup_set_describe(const CgroupSet *s) {
        bool killer = false, freezer = false;
        char *dirs = xstrdup("");
        for (size_t i = 0; i < s->n; i++) {
                const CgroupDir *d = &s->dirs[i];
                _cleanup_free_ char *kill = xasprintf("%s/cgroup.kill", d->path);
                killer |= d->v2 && cgroup_exists(kill);
                freezer |= d->v2 || (d->controllers & CGROUP_FREEZER);
                char *joined = xasprintf("%s%s%s", dirs, i ? ", " : "", d->path);
                free(dirs);
                dirs = joined;
        }
        unsigned limits = cgroup_set_limits(s);
        _cleanup_free_ char *scopes =
                s->bus ? xasprintf(" (a transient systemd scope per rank, %sjobJ-aA-rR.scope)",
                                   s->dirs[0].prefix)
                       : xstrdup("");
        char *line = xasprintf(
                "%s in %s%s; ranks killed by %s; limits: %s%s%s", cgroup_set_kind(s), dirs, scopes,
                killer    ? "cgroup.kill"
                : freezer ? "freezing their cgroup"
                          : "signalling their cgroup",
                limits & CGROUP_MEMORY ? "memory_mb " : "", limits & CGROUP_CPU ? "cpus" : "",
                limits ? "" : "none (no memory or cpu controller to use)");
        free(dirs);
        return line;
}

int cgroup_set_sweep(CgroupSet *s, bool (*keep)(const char *name, void *userdata), void *userdata) {
        char **names = NULL;
        size_t n = 0, cap = 0;
        for (size_t i = 0; i < s->n; i++) {
                DIR *d = opendir(s->dirs[i].path);
                if (!d)
                        continue;
                const CgroupDir *cd = &s->dirs[i];
                size_t lp = strlen(cd->prefix), ls = strlen(cd->suffix);
                struct dirent *de;
                while ((de = readdir(d))) {
                        size_t len = strlen(de->d_name);
                        /* Only the agent's own: other agents share a slice of scopes. */
                        if (de->d_type != DT_DIR || de->d_name[0] == '.' || len <= lp + ls ||
                            strncmp(de->d_name, cd->prefix, lp) != 0 ||
                            strcmp(de->d_name + len - ls, cd->suffix) != 0)
                                continue;
                        _cleanup_free_ char *name = strndup(de->d_name + lp, len - lp - ls);
                        if (!name || keep(name, userdata))
                                continue;
                        bool seen = false;
                        for (size_t j = 0; j < n && !seen; j++)
                                seen = strcmp(names[j], name) == 0;
                        if (seen)
                                continue;
                        GROW(names, n, cap);
                        names[n++] = TAKE_PTR(name);
                }
                closedir(d);
        }
        int removed = 0;
        for (size_t j = 0; j < n; j++) {
                CgroupRank *cg = cgroup_rank_new(s, names[j]);
                (void) cgroup_rank_kill(cg, 500);
                if (cgroup_rank_remove(cg) == 0)
                        removed++;
                cgroup_rank_free(cg);
                free(names[j]);
        }
        free(names);
        return removed;
}

/* ---- One rank ---- */

CgroupRank *cgroup_rank_new(const CgroupSet *s, const char *name) {
        CgroupRank *cg = xcalloc(1, sizeof(*cg));
        cg->set = s;
        for (size_t i = 0; i < s->n; i++) {
                const CgroupDir *d = &s->dirs[i];
                CgroupRankDir *h = &cg->h[cg->n++];
                h->dir = xasprintf("%s/%s%s%s", d->path, d->prefix, name, d->suffix);
                if (s->bus)
                        cg->unit = xasprintf("%s%s%s", d->prefix, name, d->suffix);
                h->procs = xasprintf("%s/cgroup.procs", h->dir);
                h->v2 = d->v2;
                h->controllers = d->controllers;
                if (d->v2) {
                        h->freeze = xasprintf("%s/cgroup.freeze", h->dir);
                        h->kill = xasprintf("%s/cgroup.kill", h->dir);
                } else if (d->controllers & CGROUP_FREEZER) {
                        h->freeze = xasprintf("%s/freezer.state", h->dir);
                }
                if (d->controllers & CGROUP_MEMORY)
                        h->oom = xasprintf("%s/%s", h->dir,
                                           d->v2 ? "memory.events" : "memory.oom_control");
        }
        return cg;
}

CgroupRank *cgroup_rank_free(CgroupRank *cg) {
        if (!cg)
                return NULL;
        for (size_t i = 0; i < cg->n; i++) {
                CgroupRankDir *h = &cg->h[i];
                free(h->dir);
                free(h->procs);
                free(h->freeze);
                free(h->kill);
                free(h->oom);
        }
        free(cg->unit);
        free(cg);
        return NULL;
}

/* Writes name=value in dir (name formatted into a stack buffer). */
static int cgroup_set_value(const char *dir, const char *name, const char *value) {
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        return cgroup_write(path, value);
}

/* Applies the limits of lim that h's controllers can enforce. */
static int cgroup_rank_limit(const CgroupRankDir *h, const CgroupLimits *lim) {
        char value[64];
        int r = 0;
        if ((h->controllers & CGROUP_MEMORY) && lim->memory_mb > 0) {
                snprintf(value, sizeof(value), "%" PRId64, lim->memory_mb * 1024 * 1024);
                if (h->v2) {
                        r = cgroup_set_value(h->dir, "memory.max", value);
                        /* Over the limit is over: not swapped out, and the whole rank goes. */
                        (void) cgroup_set_value(h->dir, "memory.swap.max", "0");
                        (void) cgroup_set_value(h->dir, "memory.oom.group", "1");
                } else {
                        r = cgroup_set_value(h->dir, "memory.limit_in_bytes", value);
                        (void) cgroup_set_value(h->dir, "memory.memsw.limit_in_bytes", value);
                }
                if (r < 0)
                        return r;
        }
        if ((h->controllers & CGROUP_CPU) && lim->cpus > 0) {
                int64_t quota = (int64_t) lim->cpus * CGROUP_CPU_PERIOD_US;
                if (h->v2) {
                        snprintf(value, sizeof(value), "%" PRId64 " %d", quota,
                                 CGROUP_CPU_PERIOD_US);
                        r = cgroup_set_value(h->dir, "cpu.max", value);
                } else {
                        snprintf(value, sizeof(value), "%d", CGROUP_CPU_PERIOD_US);
                        r = cgroup_set_value(h->dir, "cpu.cfs_period_us", value);
                        snprintf(value, sizeof(value), "%" PRId64, quota);
                        if (r == 0)
                                r = cgroup_set_value(h->dir, "cpu.cfs_quota_us", value);
                }
        }
        return r;
}

int cgroup_rank_create(const CgroupRank *cg, const CgroupLimits *lim) {
        bool stale = false;
        for (size_t i = 0; i < cg->n; i++)
                stale |= cgroup_exists(cg->h[i].dir);
        if (stale) {
                (void) cgroup_rank_kill(cg, 500);
                (void) cgroup_rank_remove(cg);
        }
        /* systemd makes a scope once the rank's process exists (cgroup_rank_attach). */
        if (cg->unit)
                return 0;
        int r = 0;
        for (size_t i = 0; i < cg->n && r == 0; i++) {
                const CgroupRankDir *h = &cg->h[i];
                r = mkdir(h->dir, 0755) < 0 && errno != EEXIST ? -errno : 0;
                if (r == 0)
                        r = cgroup_rank_limit(h, lim);
        }
        if (r < 0)
                (void) cgroup_rank_remove(cg);
        return r;
}

bool cgroup_rank_needs_attach(const CgroupRank *cg) {
        return cg->unit != NULL;
}

int cgroup_rank_attach(const CgroupRank *cg, pid_t pid, const CgroupLimits *lim) {
        if (!cg->unit)
                return 0;
        int r = cgroup_scope_start(cg->set->bus, cg->unit, CGROUP_SCOPE_SLICE, pid, lim->cpus,
                                   lim->memory_mb);
        if (r < 0)
                return r;
        const CgroupRankDir *h = &cg->h[0];
        /* systemd 252 has no OOMPolicy= for scopes: the whole rank goes, as elsewhere. */
        if ((h->controllers & CGROUP_MEMORY) && lim->memory_mb > 0)
                (void) cgroup_set_value(h->dir, "memory.oom.group", "1");
        return 0;
}

int cgroup_rank_enter(const CgroupRank *cg) {
        /* systemd moved the process into its scope before it was let run. */
        if (cg->unit)
                return 0;
        for (size_t i = 0; i < cg->n; i++) {
                int r = cgroup_write(cg->h[i].procs, "0");
                if (r < 0)
                        return r;
        }
        return 0;
}

/* True once the freezer of h reports the cgroup frozen. */
static bool cgroup_frozen(const CgroupRankDir *h) {
        char buf[512];
        if (!h->v2)
                return cgroup_read(h->freeze, buf, sizeof(buf)) == 0 &&
                       strncmp(buf, "FROZEN", 6) == 0;
        char events[4096];
        if (snprintf(events, sizeof(events), "%s/cgroup.events", h->dir) >= (int) sizeof(events))
                return false;
        return cgroup_keyed_value(events, "frozen") == 1;
}

/*
 * One kill of the whole cgroup at once where the kernel offers one: cgroup.kill, or a
 * freeze under which no process can fork while every listed one gets SIGKILL.
 */
static void cgroup_rank_kill_once(const CgroupRank *cg) {
        const CgroupRankDir *freezer = NULL;
        for (size_t i = 0; i < cg->n; i++) {
                const CgroupRankDir *h = &cg->h[i];
                if (h->kill && cgroup_write(h->kill, "1") == 0)
                        return;
                if (h->freeze && cgroup_exists(h->freeze) && (!freezer || !h->v2))
                        freezer = h;
        }
        if (!freezer)
                return;
        if (cgroup_write(freezer->freeze, freezer->v2 ? "1" : "FROZEN") < 0)
                return;
        for (int i = 0; i < CGROUP_FREEZE_ROUNDS && !cgroup_frozen(freezer); i++)
                cgroup_sleep_ms(1);
        (void) cgroup_procs_kill(freezer->procs, SIGKILL);
        (void) cgroup_write(freezer->freeze, freezer->v2 ? "0" : "THAWED");
}

int cgroup_rank_kill(const CgroupRank *cg, int max_rounds) {
        int found = 0;
        for (size_t i = 0; i < cg->n; i++) {
                int n = cgroup_procs_kill(cg->h[i].procs, 0);
                if (n > found)
                        found = n;
        }
        for (int round = 0;; round++) {
                cgroup_rank_kill_once(cg);
                /* Whatever a hierarchy without a kill of its own still lists. */
                int live = 0;
                for (size_t i = 0; i < cg->n; i++) {
                        int n = cgroup_procs_kill(cg->h[i].procs, SIGKILL);
                        if (n > 0)
                                live += n;
                }
                if (live == 0 || round + 1 >= max_rounds)
                        return found;
                /* SIGKILL is delivered at once; dying takes the kernel a moment. */
                cgroup_sleep_ms(2);
        }
}

int cgroup_rank_signal(const CgroupRank *cg, int sig) {
        /* Every hierarchy holds the same processes: one list, so each gets sig once. */
        int r = -ENOENT;
        for (size_t i = 0; i < cg->n && r < 0; i++)
                r = cgroup_procs_kill(cg->h[i].procs, sig);
        return r;
}

bool cgroup_rank_oom_killed(const CgroupRank *cg) {
        for (size_t i = 0; i < cg->n; i++)
                if (cg->h[i].oom && cgroup_keyed_value(cg->h[i].oom, "oom_kill") > 0)
                        return true;
        return false;
}

int cgroup_rank_remove(const CgroupRank *cg) {
        /* A scope's cgroup is systemd's: it removes it when it sees the scope empty and
         * collects the unit. Removed under it first, the emptiness may never be seen,
         * and the unit (and its name) stays. */
        if (cg->unit)
                return 0;
        int r = 0;
        for (size_t i = 0; i < cg->n; i++) {
                /* A process that just died may keep the cgroup busy for a moment. */
                int k = -EBUSY;
                for (int round = 0; round < 50 && k == -EBUSY; round++) {
                        k = rmdir(cg->h[i].dir) < 0 ? -errno : 0;
                        if (k == -EBUSY)
                                cgroup_sleep_ms(2);
                }
                if (k < 0 && k != -ENOENT)
                        r = k;
        }
        return r;
}
