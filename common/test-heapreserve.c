/* SPDX-License-Identifier: MIT */
/*
 * The heap reserve against the kernel's fault counter: a burst of 16 KiB allocations,
 * libmicrohttpd's connection pools, takes next to no page faults from a reserve, the
 * reserve's memory goes back to the system once it and the burst are freed, and no
 * request takes more than a quarter of the host's memory.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../tests/unit/check.h"
#include "heapreserve.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

#define BLOCK (16 * 1024)
#define BLOCKS 2000

static long thread_faults(void) {
        struct rusage ru;
        CHECK(getrusage(RUSAGE_THREAD, &ru) == 0);
        return ru.ru_minflt;
}

/* Page faults this thread takes to malloc BLOCKS blocks and write every byte of them. */
static long burst_faults(void **blocks) {
        long before = thread_faults();
        for (size_t i = 0; i < BLOCKS; i++) {
                CHECK(blocks[i] = malloc(BLOCK));
                memset(blocks[i], 1, BLOCK);
        }
        return thread_faults() - before;
}

static void burst_free(void **blocks) {
        for (size_t i = 0; i < BLOCKS; i++)
                free(blocks[i]);
}

int main(void) {
        CHECK(!heap_reserve(0));
        heap_reserve_release(NULL);
        if (UNDER_ASAN) {
                /* Its allocator quarantines freed memory: a reserve cannot be reused. */
                heap_reserve_release(heap_reserve((size_t) BLOCKS * BLOCK));
                printf("heapreserve: skipped under ASan\n");
                return 77;
        }
        static void *blocks[BLOCKS];
        /* meson sets MALLOC_PERTURB_, which has glibc write every byte it hands out or
         * takes back; what is measured here is which pages get touched. */
        mallopt(M_PERTURB, 0);
        /* As axctld (daemon/main.c): else glibc maps the reserve's chunks on their own. */
        CHECK(!heap_reserve((size_t) BLOCKS * BLOCK));
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        /* Under axctld's 64 MiB, so that glibc gives back what nothing pins. */
        mallopt(M_TRIM_THRESHOLD, 1 << 20);
        size_t heap_before = mallinfo2().arena;
        HeapReserve *reserve = heap_reserve((size_t) BLOCKS * (BLOCK + 1024));
        CHECK(reserve);
        /* In slices, as a controller between its accepts. */
        int r, slices = 0;
        while ((r = heap_reserve_populate(reserve, (size_t) ++slices << 22)) > 0)
                CHECK_INT(heap_reserve_populate(reserve, (size_t) slices << 22), 1);
        if (r == -EINVAL || r == -ENOSYS || r == -EPERM) {
                printf("heapreserve: the kernel cannot populate memory (MADV_POPULATE_WRITE)\n");
                heap_reserve_release(reserve);
                return 77;
        }
        CHECK_INT(r, 0);
        CHECK(slices >= 8);
        CHECK_INT(heap_reserve_populate(reserve, SIZE_MAX), 0);
        long reserved = burst_faults(blocks);
        heap_reserve_release(reserve);
        burst_free(blocks);
        /* The reserve and the burst went back to the system. */
        CHECK(mallinfo2().arena < heap_before + BLOCKS * BLOCK / 4);

        /* The same burst without a reserve, which also shows that faults are counted. */
        long unreserved = burst_faults(blocks);
        burst_free(blocks);
        printf("heapreserve: %ld page faults with a reserve, %ld without\n", reserved, unreserved);
        CHECK(unreserved >= BLOCKS * (BLOCK / 4096) * 3 / 4);
        CHECK(reserved < BLOCKS / 20);

        /* However many nodes the database holds (a careless or hostile count), the reserve
         * is at most a quarter of the host's memory, and taking it touches only a page or
         * so per MiB: the rest is address space until populated. */
        size_t quarter = (size_t) sysconf(_SC_PHYS_PAGES) / 4 * (size_t) sysconf(_SC_PAGESIZE);
        size_t arena = mallinfo2().arena;
        long faults = thread_faults();
        HeapReserve *huge = heap_reserve(SIZE_MAX / 2);
        CHECK(huge);
        CHECK(mallinfo2().arena - arena <= quarter + (2 << 20));
        CHECK(thread_faults() - faults < (long) (quarter >> 20) * 3 + 100);
        heap_reserve_release(huge);
        printf("heapreserve: ok\n");
        return 0;
}
