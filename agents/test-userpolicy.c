/* SPDX-License-Identifier: MIT */
/*
 * The rank account policy against the accounts every Debian system has (root, daemon
 * uid 1, nobody uid 65534): who is allowed by default, by a list, by "*", root only with
 * --allow-root, unknown job users through --default-user, and an agent that is not root
 * (a forked child that became nobody) running ranks as itself. Parts that need root are
 * skipped without it.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-util.h"
#include "userpolicy.h"

static void test_names(void) {
        CHECK(agent_user_name_valid("alice"));
        CHECK(agent_user_name_valid("svc_train-01.x"));
        CHECK(!agent_user_name_valid(""));
        CHECK(!agent_user_name_valid(NULL));
        CHECK(!agent_user_name_valid("-rf"));
        CHECK(!agent_user_name_valid("a/b"));
        CHECK(!agent_user_name_valid("alice@corp"));
        CHECK(!agent_user_name_valid("a b"));
        CHECK(!agent_user_name_valid("abcdefghijklmnopqrstuvwxyz0123456789"));

        AgentUserPolicy p = {0};
        CHECK(agent_user_policy_set_allow(&p, "alice, bob,carol") == 0);
        CHECK(p.allow && strcmp(p.allow[0], "alice") == 0 && strcmp(p.allow[1], "bob") == 0 &&
              strcmp(p.allow[2], "carol") == 0 && !p.allow[3] && !p.allow_any);
        CHECK(agent_user_policy_set_allow(&p, "*") == 0);
        CHECK(p.allow_any && !p.allow);
        CHECK(agent_user_policy_set_allow(&p, ",") == -EINVAL);
        CHECK(agent_user_policy_set_allow(&p, "ok,bad/name") == -EINVAL);
        CHECK(p.allow_any);
        agent_user_policy_done(&p);
}

/* Resolves user under p; checks the outcome and returns the uid (or -1 on refusal). */
static long resolve(const AgentUserPolicy *p, const char *user, int want, const char *needle) {
        RankUser u;
        char *error = NULL;
        int r = agent_user_resolve(p, user, &u, &error);
        if (r != want || (needle && (!error || !strstr(error, needle))))
                fprintf(stderr, "user %s: %d (want %d), error '%s' (want '%s')\n",
                        user ? user : "(none)", r, want, error ? error : "", needle ? needle : "");
        CHECK(r == want);
        if (needle)
                CHECK(error && strstr(error, needle));
        free(error);
        if (r < 0)
                return -1;
        long uid = (long) u.uid;
        rank_user_done(&u);
        return uid;
}

static void test_root_policy(void) {
        /* getpwnam's result is overwritten by the next call: copy at once. */
        struct passwd *pw = getpwnam("nobody");
        CHECK(pw);
        uid_t nobody_uid = pw->pw_uid;
        gid_t nobody_gid = pw->pw_gid;
        pw = getpwnam("daemon");
        CHECK(pw);
        uid_t daemon_uid = pw->pw_uid;

        /* Default: regular accounts only; root and system accounts refused. */
        AgentUserPolicy p = {0};
        CHECK(resolve(&p, "nobody", 0, NULL) == (long) nobody_uid);
        CHECK(resolve(&p, "daemon", -EPERM, "not allowed on this node") == -1);
        CHECK(resolve(&p, "root", -EPERM, "--allow-root") == -1);
        CHECK(resolve(&p, "no-such-user-axtest", -ENOENT, "does not exist") == -1);
        CHECK(resolve(&p, NULL, -ENOENT, "names no user") == -1);
        CHECK(resolve(&p, "", -ENOENT, "names no user") == -1);
        /* A name that is no account name never reaches the lookup. */
        CHECK(resolve(&p, "../../root", -ENOENT, "does not exist") == -1);

        /* What the shim needs: uid, gid, groups, home. */
        RankUser u;
        char *error = NULL;
        CHECK(agent_user_resolve(&p, "nobody", &u, &error) == 0);
        CHECK(u.do_switch && u.gid == nobody_gid && strcmp(u.name, "nobody") == 0);
        CHECK(u.n_groups >= 1 && u.groups);
        bool has_gid = false;
        for (int i = 0; i < u.n_groups; i++)
                has_gid = has_gid || u.groups[i] == nobody_gid;
        CHECK(has_gid);
        CHECK(u.home && u.shell);
        rank_user_done(&u);

        /* A list: exactly those. */
        CHECK(agent_user_policy_set_allow(&p, "daemon") == 0);
        CHECK(resolve(&p, "daemon", 0, NULL) == (long) daemon_uid);
        CHECK(resolve(&p, "nobody", -EPERM, "--allow-users") == -1);
        CHECK(resolve(&p, "root", -EPERM, "--allow-root") == -1);

        /* "*": anyone but root; root needs --allow-root. */
        CHECK(agent_user_policy_set_allow(&p, "*") == 0);
        CHECK(resolve(&p, "daemon", 0, NULL) == (long) daemon_uid);
        CHECK(resolve(&p, "root", -EPERM, "--allow-root") == -1);
        p.allow_root = true;
        CHECK(resolve(&p, "root", 0, NULL) == 0);
        p.allow_root = false;

        /* --default-user for users this node does not have, and for none; the policy
         * still applies to it. */
        p.default_user = xstrdup("nobody");
        CHECK(resolve(&p, "no-such-user-axtest", 0, NULL) == (long) nobody_uid);
        CHECK(resolve(&p, NULL, 0, NULL) == (long) nobody_uid);
        CHECK(resolve(&p, "alice@corp", 0, NULL) == (long) nobody_uid);
        CHECK(resolve(&p, "daemon", 0, NULL) == (long) daemon_uid);
        free(p.default_user);
        p.default_user = xstrdup("root");
        CHECK(resolve(&p, "no-such-user-axtest", -EPERM, "--allow-root") == -1);
        free(p.default_user);
        p.default_user = xstrdup("no-such-default-axtest");
        CHECK(resolve(&p, "no-such-user-axtest", -ENOENT, "default user") == -1);
        agent_user_policy_done(&p);
}

/* In a child that became nobody: the agent cannot switch, so ranks run as itself. */
static void test_unprivileged(void) {
        struct passwd *nobody = getpwnam("nobody");
        CHECK(nobody);
        uid_t uid = nobody->pw_uid;
        gid_t gid = nobody->pw_gid;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                CHECK(setgroups(0, NULL) == 0 && setgid(gid) == 0 && setuid(uid) == 0);
                AgentUserPolicy p = {0};
                RankUser u;
                char *error = NULL;
                CHECK(agent_user_resolve(&p, "alice", &u, &error) == 0);
                CHECK(!u.do_switch && u.uid == uid && strcmp(u.name, "nobody") == 0);
                rank_user_done(&u);
                p.strict = true;
                CHECK(resolve(&p, "alice", -EPERM, "can only run ranks as itself") == -1);
                CHECK(resolve(&p, "nobody", 0, NULL) == (long) uid);
                CHECK(resolve(&p, NULL, 0, NULL) == (long) uid);
                _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void) {
        test_names();
        if (geteuid() != 0) {
                /* As an ordinary user: the agent runs ranks as itself. */
                AgentUserPolicy p = {0};
                CHECK(resolve(&p, "someone-else", 0, NULL) == (long) geteuid());
                fprintf(stderr, "not root: skipping the account switching cases\n");
                return TEST_SKIP;
        }
        test_root_policy();
        test_unprivileged();
        return 0;
}
