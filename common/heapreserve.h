/* SPDX-License-Identifier: MIT */
/*
 * Heap faulted in ahead of a burst of allocations whose size is known. A restarted
 * controller accepts its whole fleet's connections at once, and libmicrohttpd mallocs a
 * 16 KiB pool for each: at 10,000 nodes that is 40,000 pages, each faulted in on first
 * touch, one fault at a time (12-24 us each on a virtual machine), on the core that also
 * loads the state. The kernel populates the same pages in one call (MADV_POPULATE_WRITE)
 * for a fraction of that.
 *
 * The reserve is memory the main thread's malloc arena (glibc's brk heap) got and gave
 * back: chunks malloc'd and freed, while the last one stays allocated above them so that
 * they join into one free chunk that glibc does not return to the system. glibc hands it
 * out from its start to the arena's next allocations that no smaller free chunk fits
 * (best fit), so it is populated a slice at a time just ahead of them, and the thread
 * goes on with its work in between (a restarted controller accepts connections).
 * Releasing the reserve frees the last chunk: what the burst did not take may then go
 * back to the system, once the free top of the heap passes glibc's trim threshold.
 *
 * Only a hint: on a kernel or allocator that does not work so, it costs the time the
 * populate takes and changes nothing else.
 */
#pragma once

#include <stddef.h>

typedef struct HeapReserve HeapReserve;

/*
 * Takes about bytes (at most a quarter of the host's memory) of the main thread's heap,
 * which its next allocations use first; NULL when there is nothing to take, on another
 * thread, or when glibc would map the chunks apart from its heap (an mmap threshold
 * under 1 MiB: axctld sets 32 MiB). Touches one page per MiB: the rest is faulted in
 * by heap_reserve_populate.
 */
HeapReserve *heap_reserve(size_t bytes);
/* Faults in the reserve's first upto bytes, those not yet: 0 when all of it is, else 1,
 * or -errno, from then on, when the kernel cannot (before Linux 5.14; a system-call
 * filter). Keep it ahead of the arena's allocations. */
int heap_reserve_populate(HeapReserve *reserve, size_t upto);
/* Lets what the reserve still holds go. NULL is ignored. */
void heap_reserve_release(HeapReserve *reserve);
