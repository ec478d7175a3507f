/* SPDX-License-Identifier: MIT */
/* A connection's last sync body and its decoding; see syncmemo.h. */
#include "syncmemo.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct SyncMemo {
        WireSync sync; /* its arrays and strings point into this allocation */
        ReportMark mark;
        size_t len;
        char *body; /* len bytes */
};

const WireSync *sync_memo_get(const SyncMemo *m, const char *body, size_t len) {
        if (!m || !body || m->len != len || memcmp(m->body, body, len) != 0)
                return NULL;
        return &m->sync;
}

static size_t str_size(const char *s) {
        return s ? strlen(s) + 1 : 0;
}

/* Copies s (NULL stays NULL) to *at and moves *at past it. */
static const char *str_copy(char **at, const char *s) {
        if (!s)
                return NULL;
        size_t n = strlen(s) + 1;
        char *copy = memcpy(*at, s, n);
        *at += n;
        return copy;
}

SyncMemo *sync_memo_new(const char *body, size_t len, const WireSync *sync) {
        if (len > SYNC_MEMO_MAX_BODY)
                return NULL;
        /* Layout: the memo, the rank reports, the checkpoints, then bytes: body and strings. */
        size_t ranks = (size_t) sync->n_ranks * sizeof(WireRankReport);
        size_t ckpts = (size_t) sync->n_checkpoints * sizeof(WireCheckpoint);
        size_t bytes = len + str_size(sync->node) + str_size(sync->boot_id) +
                       str_size(sync->agent_id) + str_size(sync->health_reason);
        for (int i = 0; i < sync->n_ranks; i++)
                bytes += str_size(sync->ranks[i].log_tail);
        for (int i = 0; i < sync->n_checkpoints; i++)
                bytes += str_size(sync->checkpoints[i].path);
        _Static_assert(sizeof(SyncMemo) % alignof(WireRankReport) == 0 &&
                               sizeof(SyncMemo) % alignof(WireCheckpoint) == 0 &&
                               sizeof(WireRankReport) % alignof(WireCheckpoint) == 0,
                       "the arrays follow the memo aligned");
        /* The copies below start from the structs and replace their pointers: a pointer
         * added to them must be copied here too, or it would point into the freed JSON.
         * The sizes are those of 64-bit builds, where CI checks them. */
#if defined(__LP64__)
        _Static_assert(sizeof(WireSync) == 64 && sizeof(WireRankReport) == 64 &&
                               sizeof(WireCheckpoint) == 32,
                       "a sync struct changed: update sync_memo_new");
#endif
        SyncMemo *m = xmalloc(sizeof(SyncMemo) + ranks + ckpts + bytes);
        WireRankReport *rank_reports = (WireRankReport *) (m + 1);
        WireCheckpoint *checkpoints = (WireCheckpoint *) ((char *) rank_reports + ranks);
        char *at = (char *) checkpoints + ckpts;
        m->mark = (ReportMark){0};
        m->len = len;
        m->body = memcpy(at, body, len);
        at += len;
        m->sync = *sync;
        m->sync.node = str_copy(&at, sync->node);
        m->sync.boot_id = str_copy(&at, sync->boot_id);
        m->sync.agent_id = str_copy(&at, sync->agent_id);
        m->sync.health_reason = str_copy(&at, sync->health_reason);
        m->sync.ranks = rank_reports;
        m->sync.checkpoints = checkpoints;
        for (int i = 0; i < sync->n_ranks; i++) {
                rank_reports[i] = sync->ranks[i];
                rank_reports[i].log_tail = str_copy(&at, sync->ranks[i].log_tail);
        }
        for (int i = 0; i < sync->n_checkpoints; i++) {
                checkpoints[i] = sync->checkpoints[i];
                checkpoints[i].path = str_copy(&at, sync->checkpoints[i].path);
        }
        return m;
}

ReportMark *sync_memo_mark(SyncMemo *m) {
        return m ? &m->mark : NULL;
}

void sync_memo_free(SyncMemo *m) {
        free(m);
}
