/* SPDX-License-Identifier: MIT */
/*
 * Stopping a process tree without cgroups. A rank supervisor is a child subreaper
 * (PR_SET_CHILD_SUBREAPER), so whatever a rank starts stays below it even after a
 * double fork and setsid(); proctree_kill() then finds every descendant in /proc and
 * kills it, round after round, until none is left (a process forked between the scan
 * and the kill is found by the next round, reparented to the subreaper).
 */
#pragma once

#include <sys/types.h>

/*
 * Sends SIGKILL to every descendant of root (not root itself) until none is left or
 * max_rounds scans found some each time. Zombies that are children of the caller are
 * reaped when root is the caller, except keep (its exit status is the caller's to read;
 * -1: none). Returns the number of processes signalled, or -errno when /proc cannot be
 * read.
 */
int proctree_kill(pid_t root, pid_t keep, int max_rounds);

/*
 * Sends sig once to every live descendant of root (not root itself), as one scan of
 * /proc finds them. Returns the number signalled, or -errno when /proc cannot be read.
 */
int proctree_signal(pid_t root, int sig);
