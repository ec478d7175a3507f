/* SPDX-License-Identifier: MIT */
/*
 * Space set aside for a rank's exit record. A rank can fill the disk its agent keeps
 * state on (its log, its checkpoints), and then the one write that matters most, the
 * status file saying how the rank ended, would fail: the controller would hear of a
 * SIGKILL, or of nothing. So every rank directory holds a preallocated file, "reserve",
 * made before the rank starts (a rank whose reserve cannot be made does not start); a
 * write of a record that fails for want of space gives the reserve back and is tried
 * once more.
 */
#pragma once

#include <stddef.h>

/* Bytes set aside: a status file's block on any common file system, with room to spare. */
#define AGENT_RESERVE_BYTES (64 * 1024)

/* Creates <dir>/reserve with AGENT_RESERVE_BYTES allocated. 0, or -errno (-ENOSPC). */
int agent_reserve_make(const char *dir);

/*
 * Writes <dir>/<name> atomically (util_write_file_atomic); when that fails for want of
 * space (ENOSPC, EDQUOT), removes <dir>/reserve and tries again. 0 or -errno.
 */
int agent_reserve_write(const char *dir, const char *name, const void *data, size_t len);
