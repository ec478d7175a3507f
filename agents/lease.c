/* SPDX-License-Identifier: MIT */
/* The node lease record shared with rank supervisors; see lease.h. */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define LEASE_MAGIC "AXLEASE1"

/* The file's layout. The deadline is 8-byte aligned, so loads and stores are atomic. */
typedef struct LeaseRecord {
        char magic[8];
        int64_t deadline_boot_ms;
} LeaseRecord;

struct NodeLease {
        LeaseRecord *record; /* MAP_SHARED: every shim forked from us sees each store */
};

/* Gives the file a valid record: written, not extended sparse, so later stores into the
 * mapping never need a block the disk may no longer have. */
static int lease_file_init(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        LeaseRecord rec;
        if (st.st_size == (off_t) sizeof(rec) &&
            pread(fd, &rec, sizeof(rec), 0) == (ssize_t) sizeof(rec) &&
            memcmp(rec.magic, LEASE_MAGIC, sizeof(rec.magic)) == 0)
                return 0;
        memcpy(rec.magic, LEASE_MAGIC, sizeof(rec.magic));
        rec.deadline_boot_ms = 0;
        /* Written before cut to size: a shim mapping a damaged file never faults. */
        if (pwrite(fd, &rec, sizeof(rec), 0) != (ssize_t) sizeof(rec) ||
            ftruncate(fd, sizeof(rec)) < 0 || fsync(fd) < 0)
                return errno ? -errno : -EIO;
        return 0;
}

int node_lease_open(const char *state_dir, NodeLease **ret) {
        _cleanup_free_ char *path = xasprintf("%s/lease", state_dir);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        int r = lease_file_init(fd);
        if (r < 0)
                return r;
        void *m = mmap(NULL, sizeof(LeaseRecord), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
                return -errno;
        NodeLease *l = xcalloc(1, sizeof(*l));
        l->record = m;
        *ret = l;
        return 0;
}

NodeLease *node_lease_close(NodeLease *l) {
        if (!l)
                return NULL;
        munmap(l->record, sizeof(LeaseRecord));
        free(l);
        return NULL;
}

void node_lease_renew(NodeLease *l, int64_t deadline_boot_ms) {
        __atomic_store_n(&l->record->deadline_boot_ms, deadline_boot_ms, __ATOMIC_RELEASE);
}

int64_t node_lease_deadline(const NodeLease *l) {
        return __atomic_load_n(&l->record->deadline_boot_ms, __ATOMIC_ACQUIRE);
}
