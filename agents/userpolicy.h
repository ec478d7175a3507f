/* SPDX-License-Identifier: MIT */
/*
 * Which Unix account a rank runs as. The controller names a user per job; the agent's
 * operator decides which local accounts that may map to. When the agent runs as root a
 * rank runs as the job's user if that is a local account, else as --default-user, and
 * only when the policy allows the account: --allow-users (a list, or "*" for any
 * account), by default any regular account (uid >= 1000), and root only with
 * --allow-root. When the agent is not root it cannot switch users, so ranks run as the
 * agent's own account; with --strict-user a job naming another user is refused instead.
 *
 * A refused rank is not started: it ends with SHIM_EXIT_USER_REFUSED (126) and a line in
 * its log saying why, which the controller sees as a failed rank.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Accounts with uids below this are system accounts, refused unless listed. */
#define AGENT_USER_UID_MIN 1000

typedef struct AgentUserPolicy {
        char **allow; /* NULL-terminated account names; NULL: regular accounts only */
        bool allow_any; /* "*": every account except root */
        bool allow_root;
        char *default_user; /* for job users that are not local accounts; NULL: refuse */
        bool strict; /* non-root agent: refuse a job user that is not the agent's */
} AgentUserPolicy;

/* The account resolved for one rank, with what the shim needs after fork. */
typedef struct RankUser {
        bool do_switch; /* the agent is root: switch to uid, gid and groups */
        char *name; /* account name, NULL when the agent's uid has no passwd entry */
        uid_t uid;
        gid_t gid;
        gid_t *groups; /* supplementary groups (initgroups' list) */
        int n_groups;
        char *home; /* from the passwd entry; NULL when unknown */
        char *shell;
} RankUser;

/*
 * Parses --allow-users: a comma-separated list of account names, or "*". Returns 0 or
 * -EINVAL for an empty list or a name that is not a valid account name.
 */
int agent_user_policy_set_allow(AgentUserPolicy *p, const char *list);
void agent_user_policy_done(AgentUserPolicy *p);

/* True for a plausible account name: 1-32 of [A-Za-z0-9._-], not starting with '-'. */
bool agent_user_name_valid(const char *name);

/*
 * Resolves the account a rank of a job of job_user (NULL or "" when the job names none)
 * runs as under p. Returns 0 with *ret, or -EPERM (the policy refuses) or -ENOENT (no
 * such account) with *ret_error (malloc'd, one line for the rank's log).
 */
int agent_user_resolve(const AgentUserPolicy *p, const char *job_user, RankUser *ret,
                       char **ret_error);
void rank_user_done(RankUser *u);
