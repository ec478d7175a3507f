/* SPDX-License-Identifier: MIT */
/*
 * The last sync body an agent's connection carried, with its decoding. An agent whose
 * ranks did not change (or made no new step) sends the same bytes every sync period,
 * and equal bytes decode to the same report: that one is used again instead of parsing
 * the JSON, the largest single cost of a sync on the loop. The checks and the node's
 * part of the report run for every sync as before; its ranks are looked at again only
 * when the memo's ReportMark (controller.h) says something they depend on moved.
 */
#pragma once

#include <stddef.h>

#include "controller.h"
#include "wire.h"

/* Bodies larger than this are not kept: a memo costs at most about 2.3 times its body
 * (a decoded rank is 64 bytes, its JSON at least 49) per admitted agent connection. A
 * node's report is about 110 bytes per rank; log tails (up to 4 KiB) ride only on exited
 * ranks, which repeat until the controller stops listing them. */
#define SYNC_MEMO_MAX_BODY (8 * 1024)

typedef struct SyncMemo SyncMemo;

/* The decoded sync when body holds the same bytes as the memo's; else NULL. */
const WireSync *sync_memo_get(const SyncMemo *m, const char *body, size_t len);
/* A memo of body and its decoding (copied, one allocation), with no mark set; NULL when
 * body is too large. */
SyncMemo *sync_memo_new(const char *body, size_t len, const WireSync *sync);
/* Where the memo's report was last applied, for ctl_node_sync; NULL when m is. It lives
 * and dies with the memo, so a new body always starts unmarked. */
ReportMark *sync_memo_mark(SyncMemo *m);
void sync_memo_free(SyncMemo *m);
