/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint layout axctl understands (AXLearn's, DESIGN §6): <dir>/step_<digits>/ is
 * committed once it holds an `index` file. The agent finds step directories by these
 * names; the controller accepts a reported path only when it is one of them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Parses a step directory's name, "step_" and 1 to 19 digits: 0 with *ret_step, or
 * -EINVAL. */
int checkpoint_name_parse(const char *name, int64_t *ret_step);

/* "<dir>/<name>", with dir's trailing slashes dropped (malloc'd). */
char *checkpoint_path_make(const char *dir, const char *name);

/* True when path is a step directory of dir ("<dir>/step_<digits>") naming step. */
bool checkpoint_path_in_dir(const char *dir, const char *path, int64_t step);
