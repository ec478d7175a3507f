/* SPDX-License-Identifier: MIT */
/*
 * What the agent learns about a rank's work without talking to it: the step it last
 * wrote to its progress file (AXCTL_PROGRESS_FILE), whether that has stopped changing for
 * longer than the job's hang timeout, and the latest committed checkpoint in the job's
 * checkpoint directory (AXLearn layout: <dir>/step_%08d/ is committed once it holds an
 * `index` file), looked for with the rank's own permissions. Pure functions plus small
 * file readers; no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "userpolicy.h"

/* Longest progress file content that is looked at; a step needs far fewer bytes. */
#define AGENT_PROGRESS_MAX 64

typedef struct ProgressTracker {
        char content[AGENT_PROGRESS_MAX + 1]; /* last raw content read */
        bool has_step;
        int64_t step; /* last valid step, kept when the file later holds garbage */
        int64_t changed_ms; /* CLOCK_BOOTTIME: when content last changed, or the rank started */
} ProgressTracker;

/*
 * Parses a progress file's content: a non-negative decimal number, optionally surrounded
 * by whitespace (writers commonly add a newline). Returns 0 with *ret_step, or -EINVAL.
 */
int agent_progress_parse(const char *data, int64_t *ret_step);

/*
 * Reads at most AGENT_PROGRESS_MAX bytes of path into buf (size > AGENT_PROGRESS_MAX),
 * NUL-terminated. A missing file reads as empty. Returns 0 or -errno.
 */
int agent_progress_read(const char *path, char *buf, size_t size);

/* Starts tracking a rank whose progress clock starts at since_ms (CLOCK_BOOTTIME: a clock
 * step must not make a rank look hung). */
void agent_progress_init(ProgressTracker *t, int64_t since_ms);

/*
 * Feeds freshly read content. Returns true when the reported step changed (a new valid
 * number), which is worth telling the controller at once.
 */
bool agent_progress_update(ProgressTracker *t, const char *content, int64_t now_ms);

/* True when hang_timeout_s > 0 and the content has not changed for that long. */
bool agent_progress_hung(const ProgressTracker *t, int64_t hang_timeout_s, int64_t now_ms);

/*
 * Finds the latest committed checkpoint in dir. Returns 1 with *ret_step and *ret_path
 * ("<dir>/step_00000040", malloc'd), 0 when there is none (or dir does not exist yet),
 * -errno on other errors.
 */
int agent_checkpoint_latest(const char *dir, int64_t *ret_step, char **ret_path);

/*
 * The same, looking as the account u when the agent switches to it (u->do_switch): a
 * forked child becomes u and lists dir, so a job learns nothing of a directory its user
 * may not read, and the agent takes back only a step name. Without a switch, the agent
 * looks itself (it runs as the rank's account then). -errno also when u may not read
 * dir.
 */
int agent_checkpoint_latest_as(const RankUser *u, const char *dir, int64_t *ret_step,
                               char **ret_path);
