/* SPDX-License-Identifier: MIT */
/* Space set aside for exit records; see reserve.h. */
#include "reserve.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

int agent_reserve_make(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/reserve", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = posix_fallocate(fd, 0, AGENT_RESERVE_BYTES);
        if (r == EOPNOTSUPP || r == EINVAL) {
                /* A file system without fallocate: real zeros take the space too. */
                static const char zeros[4096];
                r = 0;
                for (size_t done = 0; r == 0 && done < AGENT_RESERVE_BYTES; done += sizeof(zeros)) {
                        errno = 0;
                        if (write(fd, zeros, sizeof(zeros)) != (ssize_t) sizeof(zeros))
                                r = errno ? errno : ENOSPC;
                }
        }
        if (r == 0 && fsync(fd) < 0)
                r = errno;
        close(fd);
        if (r != 0) {
                unlink(path);
                return -r;
        }
        return 0;
}

int agent_reserve_write(const char *dir, const char *name, const void *data, size_t len) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        int r = util_write_file_atomic(path, data, len);
        if (r != -ENOSPC && r != -EDQUOT)
                return r;
        _cleanup_free_ char *reserve = xasprintf("%s/reserve", dir);
        if (unlink(reserve) < 0)
                return r;
        return util_write_file_atomic(path, data, len);
}
