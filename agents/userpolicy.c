/* SPDX-License-Identifier: MIT */
/*
 * Rank account policy; see userpolicy.h. Lookups use the reentrant NSS calls with a
 * buffer that grows on ERANGE, because directory services (LDAP, sssd) can return
 * entries far larger than a local /etc/passwd line. Everything is resolved here, before
 * the shim forks, so the forked processes only make system calls.
 */
#include "userpolicy.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

bool agent_user_name_valid(const char *name) {
        size_t n = 0;
        if (!name || !*name || *name == '-')
                return false;
        for (; *name; name++, n++) {
                char c = *name;
                if (n >= 32 || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

static char **names_free(char **names) {
        for (char **n = names; n && *n; n++)
                free(*n);
        free(names);
        return NULL;
}

int agent_user_policy_set_allow(AgentUserPolicy *p, const char *list) {
        if (strcmp(list, "*") == 0) {
                p->allow = names_free(p->allow);
                p->allow_any = true;
                return 0;
        }
        _cleanup_free_ char *copy = xstrdup(list);
        char **names = xcalloc(strlen(list) + 1, sizeof(char *));
        size_t n = 0;
        char *save = NULL;
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                w += strspn(w, " ");
                w[strcspn(w, " ")] = '\0';
                if (!agent_user_name_valid(w)) {
                        names_free(names);
                        return -EINVAL;
                }
                names[n++] = xstrdup(w);
        }
        if (n == 0) {
                names_free(names);
                return -EINVAL;
        }
        names_free(p->allow);
        p->allow = names;
        p->allow_any = false;
        return 0;
}

void agent_user_policy_done(AgentUserPolicy *p) {
        p->allow = names_free(p->allow);
        free(p->default_user);
        p->default_user = NULL;
}

void rank_user_done(RankUser *u) {
        free(u->name);
        free(u->groups);
        free(u->home);
        free(u->shell);
        *u = (RankUser){0};
}

/* A passwd entry with its string buffer; fields point into buf. */
typedef struct PwEntry {
        struct passwd pw;
        char *buf;
} PwEntry;

/* Looks up name (or uid when name is NULL): 0, -ENOENT, or -errno of the lookup. */
static int pw_lookup(const char *name, uid_t uid, PwEntry *ret) {
        size_t size = 4096;
        for (;;) {
                struct passwd *res = NULL;
                char *buf = xmalloc(size);
                int r = name ? getpwnam_r(name, &ret->pw, buf, size, &res)
                             : getpwuid_r(uid, &ret->pw, buf, size, &res);
                if (r == ERANGE && size < 1024 * 1024) {
                        free(buf);
                        size *= 4;
                        continue;
                }
                if (r != 0 || !res) {
                        free(buf);
                        return r != 0 ? -r : -ENOENT;
                }
                ret->buf = buf;
                return 0;
        }
}

/* Copies the account, and its groups when the rank will switch to it. */
static int user_fill(const struct passwd *pw, bool do_switch, RankUser *ret, char **ret_error) {
        RankUser u = {
                .do_switch = do_switch,
                .name = xstrdup(pw->pw_name),
                .uid = pw->pw_uid,
                .gid = pw->pw_gid,
                .home = pw->pw_dir && *pw->pw_dir ? xstrdup(pw->pw_dir) : NULL,
                .shell = pw->pw_shell && *pw->pw_shell ? xstrdup(pw->pw_shell) : NULL,
        };
        if (do_switch) {
                int n = 32;
                for (;;) {
                        u.groups = xrealloc(u.groups, (size_t) n * sizeof(gid_t));
                        int want = n;
                        if (getgrouplist(pw->pw_name, pw->pw_gid, u.groups, &want) >= 0) {
                                u.n_groups = want;
                                break;
                        }
                        /* glibc sets want to the size needed; guard against a loop. */
                        if (want <= n || want > 65536) {
                                *ret_error =
                                        xasprintf("cannot read the groups of user %s", pw->pw_name);
                                rank_user_done(&u);
                                return -EIO;
                        }
                        n = want;
                }
        }
        *ret = u;
        return 0;
}

static bool policy_allows(const AgentUserPolicy *p, const struct passwd *pw) {
        if (pw->pw_uid == 0)
                return p->allow_root;
        if (p->allow_any)
                return true;
        if (!p->allow)
                return pw->pw_uid >= AGENT_USER_UID_MIN;
        for (char **n = p->allow; *n; n++)
                if (strcmp(*n, pw->pw_name) == 0)
                        return true;
        return false;
}

/* A non-root agent: ranks run as the agent's own account. */
static int resolve_self(const AgentUserPolicy *p, const char *job_user, RankUser *ret,
                        char **ret_error) {
        PwEntry self = {0};
        int r = pw_lookup(NULL, geteuid(), &self);
        const char *self_name = r == 0 ? self.pw.pw_name : NULL;
        if (p->strict && job_user && !util_streq_ptr(job_user, self_name)) {
                *ret_error = xasprintf("the job's user %s is not this agent's user %s, and an "
                                       "agent that is not root can only run ranks as itself "
                                       "(--strict-user)",
                                       job_user, self_name ? self_name : "(unknown)");
                free(self.buf);
                return -EPERM;
        }
        if (r < 0) {
                /* No passwd entry (a container with an arbitrary uid): run as it. */
                *ret = (RankUser){.uid = geteuid(), .gid = getegid()};
                return 0;
        }
        r = user_fill(&self.pw, false, ret, ret_error);
        free(self.buf);
        return r;
}

int agent_user_resolve(const AgentUserPolicy *p, const char *job_user, RankUser *ret,
                       char **ret_error) {
        if (job_user && !*job_user)
                job_user = NULL;
        if (geteuid() != 0)
                return resolve_self(p, job_user, ret, ret_error);

        PwEntry e = {0};
        int r = -ENOENT;
        /* A name that is no account name must not reach NSS (LDAP filters, files). */
        if (job_user && agent_user_name_valid(job_user))
                r = pw_lookup(job_user, 0, &e);
        if (r == -ENOENT && p->default_user) {
                r = pw_lookup(p->default_user, 0, &e);
                if (r == -ENOENT) {
                        *ret_error = xasprintf("the default user %s does not exist on this node",
                                               p->default_user);
                        return -ENOENT;
                }
        }
        if (r == -ENOENT) {
                if (job_user)
                        *ret_error = xasprintf("user %s does not exist on this node and the "
                                               "agent has no --default-user",
                                               job_user);
                else
                        *ret_error = xstrdup("the job names no user and the agent has no "
                                             "--default-user");
                return -ENOENT;
        }
        if (r < 0) {
                *ret_error = xasprintf("cannot look up user %s: %s",
                                       job_user ? job_user : p->default_user, strerror(-r));
                return r;
        }
        if (!policy_allows(p, &e.pw)) {
                if (e.pw.pw_uid == 0)
                        *ret_error = xasprintf("user %s is root, which this agent refuses "
                                               "(see axagent --allow-root)",
                                               e.pw.pw_name);
                else
                        *ret_error = xasprintf("user %s (uid %u) is not allowed on this node "
                                               "(see axagent --allow-users)",
                                               e.pw.pw_name, (unsigned) e.pw.pw_uid);
                free(e.buf);
                return -EPERM;
        }
        r = user_fill(&e.pw, true, ret, ret_error);
        free(e.buf);
        return r;
}
