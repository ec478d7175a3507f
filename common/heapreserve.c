/* SPDX-License-Identifier: MIT */
#include "heapreserve.h"

#include <errno.h>
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
        Run runs[];
};

HeapReserve *heap_reserve(size_t bytes) {
        /* Only a hint: never more than half the memory the system has free. */
        long free_pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (free_pages > 0 && page > 0 && bytes > (size_t) free_pages / 2 * (size_t) page)
                bytes = (size_t) free_pages / 2 * (size_t) page;
        size_t n = bytes / RESERVE_CHUNK;
        if (n < 2)
                return NULL;
        /* Allocated before the chunks, below them: nothing may lie above the fence, or
         * the heap could not shrink after the release. */
        HeapReserve *r = xcalloc(1, sizeof(HeapReserve) + n * sizeof(Run));
        void **chunks = xcalloc(n, sizeof(void *));
        size_t got = 0;
        for (; got < n; got++) {
                uintptr_t c = (uintptr_t) (chunks[got] = malloc(RESERVE_CHUNK));
                /* One that glibc mapped on its own would be unmapped when freed. */
                if (!c || c + RESERVE_CHUNK > (uintptr_t) sbrk(0)) {
                        free(chunks[got]);
                        break;
                }
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
        while (r->run < r->n_runs && r->done < upto) {
                const Run *run = &r->runs[r->run];
                uintptr_t start = (r->at + page - 1) & ~(page - 1);
                uintptr_t end = run->end & ~(page - 1);
                if (end <= start) { /* this run is done */
                        r->done += run->end - r->at;
                        if (++r->run < r->n_runs)
                                r->at = r->runs[r->run].start;
                        continue;
                }
                if (upto - r->done < end - start)
                        end = (start + (upto - r->done) + page - 1) & ~(page - 1);
                if (madvise((void *) start, end - start, MADV_POPULATE_WRITE) < 0) {
                        r->run = r->n_runs; /* before Linux 5.14, or a filter: never mind */
                        return -errno;
                }
                r->done += end - r->at;
                r->at = end;
        }
        return r->run < r->n_runs;
}

void heap_reserve_release(HeapReserve *r) {
        if (!r)
                return;
        free(r->fence);
        free(r);
}
