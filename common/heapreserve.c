/* SPDX-License-Identifier: MIT */
#include "heapreserve.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

/* Few chunks, so that few of their headers fault in one at a time; under the mmap
 * threshold axctld sets (daemon/main.c), so that they come from the heap, where freed
 * memory stays for the next allocations. */
#define RESERVE_CHUNK (1 << 20)

typedef struct Run {
        uintptr_t start, end;
} Run;

struct HeapReserve {
        void *fence; /* the last chunk, kept allocated so that the others stay in the heap */
        size_t n_runs; /* of chunks end to end */
        size_t run; /* the run being populated, from at */
        uintptr_t at;
        size_t done; /* bytes of the runs before at */
        int error; /* of the populate that failed, which ends it */
        Run runs[];
};

HeapReserve *heap_reserve(size_t bytes) {
        /* Only a hint: never more than a quarter of the host's memory. Pages are faulted
         * in only as far as heap_reserve_populate is asked, the rest is address space. */
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0 && bytes > (size_t) pages / 4 * (size_t) page)
                bytes = (size_t) pages / 4 * (size_t) page;
        size_t n = bytes / RESERVE_CHUNK;
        if (n < 2)
                return NULL;
        /* Allocated before the chunks, below them: nothing may lie above the fence, or
         * the heap could not shrink after the release. */
        HeapReserve *r = xcalloc(1, sizeof(HeapReserve) + n * sizeof(Run));
        void **chunks = xcalloc(n, sizeof(void *));
        size_t got = 0, mapped = mallinfo2().hblks;
        for (; got < n; got++) {
                uintptr_t c = (uintptr_t) (chunks[got] = malloc(RESERVE_CHUNK));
                /* One that glibc mapped apart from its heap (an mmap threshold under the
                 * chunk, or another thread's arena) would be unmapped when freed. */
                if (!c || c + RESERVE_CHUNK > (uintptr_t) sbrk(0) ||
                    (got == 0 && mallinfo2().hblks != mapped)) {
                        free(chunks[got]);
                        break;
                }
                /* Chunks from the top of the heap lie end to end, 16 bytes of header
                 * apart: one run, populated without a gap. */
                Run *last = r->n_runs > 0 ? &r->runs[r->n_runs - 1] : NULL;
                if (last && c >= last->end && c - last->end < 64)
                        last->end = c + RESERVE_CHUNK;
                else
                        r->runs[r->n_runs++] = (Run){c, c + RESERVE_CHUNK};
        }
        if (got >= 2)
                r->fence = chunks[--got];
        for (size_t i = 0; i < got; i++)
                free(chunks[i]);
        free(chunks);
        if (!r->fence) {
                free(r);
                return NULL;
        }
        /* The fence is no part of what is populated. */
        r->runs[r->n_runs - 1].end = (uintptr_t) r->fence;
        r->at = r->runs[0].start;
        return r;
}

int heap_reserve_populate(HeapReserve *r, size_t upto) {
        uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
        if (r->error < 0)
                return r->error;
        for (;;) {
                if (r->run == r->n_runs)
                        return 0;
                const Run *run = &r->runs[r->run];
                uintptr_t start = (r->at + page - 1) & ~(page - 1);
                uintptr_t end = run->end & ~(page - 1);
                if (end <= start) { /* this run is done */
                        r->done += run->end - r->at;
                        if (++r->run < r->n_runs)
                                r->at = r->runs[r->run].start;
                        continue;
                }
                if (r->done >= upto)
                        return 1;
                if (upto - r->done < end - start)
                        end = (start + (upto - r->done) + page - 1) & ~(page - 1);
                if (madvise((void *) start, end - start, MADV_POPULATE_WRITE) < 0)
                        return (r->error = -errno); /* before Linux 5.14, a filter: a hint */
                r->done += end - r->at;
                r->at = end;
        }
}

void heap_reserve_release(HeapReserve *r) {
        if (!r)
                return;
        free(r->fence);
        free(r);
}
