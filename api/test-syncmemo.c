/* SPDX-License-Identifier: MIT */
/* The sync memo: only the very same bytes give the kept report, and the report it gives
 * is a copy that outlives the JSON and body it came from. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/check.h"
#include "syncmemo.h"

static const char BODY[] =
        "{\"node\":\"n1\",\"boot_id\":\"b\",\"agent_id\":\"a\",\"ranks\":["
        "{\"job\":7,\"attempt\":2,\"rank\":0,\"state\":\"running\",\"pid\":11,\"step\":5},"
        "{\"job\":7,\"attempt\":2,\"rank\":1,\"state\":\"exited\",\"exit_code\":3,"
        "\"log_tail\":\"CUDA error\"}],"
        "\"checkpoints\":[{\"job\":7,\"attempt\":2,\"step\":4,\"path\":\"/c/step_00000004\"}],"
        "\"health\":{\"healthy\":false,\"reason\":\"ECC\"}}";

/* A memo of body, made as the API makes it: from a parse whose JSON is then freed. */
static SyncMemo *memo_of(const char *body, size_t len) {
        char *copy = malloc(len);
        memcpy(copy, body, len);
        json_t *j = json_loadb(copy, len, 0, NULL);
        CHECK(j);
        WireSync parsed;
        JsonError err = {0};
        CHECK(wire_sync_parse(j, &parsed, &err) == 0);
        SyncMemo *m = sync_memo_new(copy, len, &parsed);
        wire_sync_clear(&parsed);
        json_decref(j);
        memset(copy, 'x', len);
        free(copy);
        return m;
}

int main(void) {
        size_t len = strlen(BODY);
        SyncMemo *m = memo_of(BODY, len);
        CHECK(m);
        const WireSync *s = sync_memo_get(m, BODY, len);
        CHECK(s);
        CHECK(strcmp(s->node, "n1") == 0 && strcmp(s->boot_id, "b") == 0 &&
              strcmp(s->agent_id, "a") == 0);
        CHECK(!s->healthy && strcmp(s->health_reason, "ECC") == 0);
        CHECK(s->n_ranks == 2);
        CHECK(s->ranks[0].job == 7 && s->ranks[0].attempt == 2 && s->ranks[0].rank == 0 &&
              !s->ranks[0].exited && s->ranks[0].pid == 11 && s->ranks[0].step == 5 &&
              s->ranks[0].log_tail == NULL && s->ranks[0].exit_code == -1);
        CHECK(s->ranks[1].exited && s->ranks[1].exit_code == 3 && s->ranks[1].step == -1 &&
              strcmp(s->ranks[1].log_tail, "CUDA error") == 0);
        CHECK(s->n_checkpoints == 1 && s->checkpoints[0].job == 7 && s->checkpoints[0].step == 4 &&
              strcmp(s->checkpoints[0].path, "/c/step_00000004") == 0);

        /* Any other bytes, even one, or a prefix, or more: no report. */
        char other[sizeof(BODY)];
        memcpy(other, BODY, sizeof(BODY));
        other[len - 3] = 'X';
        CHECK(!sync_memo_get(m, other, len));
        CHECK(!sync_memo_get(m, BODY, len - 1));
        char longer[sizeof(BODY) + 1];
        memcpy(longer, BODY, len);
        longer[len] = ' ';
        CHECK(!sync_memo_get(m, longer, len + 1));
        CHECK(!sync_memo_get(m, NULL, 0));
        CHECK(!sync_memo_get(NULL, BODY, len));

        /* A memo starts unmarked and keeps the mark it is given; no memo, no mark. */
        ReportMark *mark = sync_memo_mark(m);
        CHECK(mark && !mark->set);
        *mark = (ReportMark){.set = true, .node_syncs = 3};
        CHECK(sync_memo_mark(m)->set && sync_memo_mark(m)->node_syncs == 3);
        CHECK(!sync_memo_mark(NULL));
        sync_memo_free(m);

        /* A report with no strings besides the node, and no checkpoints. */
        static const char BARE[] = "{\"node\":\"n2\"}";
        m = memo_of(BARE, strlen(BARE));
        s = sync_memo_get(m, BARE, strlen(BARE));
        CHECK(s && strcmp(s->node, "n2") == 0 && !s->boot_id && s->n_ranks == 0 &&
              s->n_checkpoints == 0 && s->healthy && strcmp(s->health_reason, "") == 0);
        sync_memo_free(m);

        /* Bodies over the bound are not kept: what an agent's connection may hold. */
        for (size_t size = SYNC_MEMO_MAX_BODY; size <= SYNC_MEMO_MAX_BODY + 1; size++) {
                char *padded = malloc(size);
                int head = snprintf(padded, size, "{\"node\":\"n3\"");
                memset(padded + head, ' ', size - (size_t) head - 1);
                padded[size - 1] = '}';
                m = memo_of(padded, size);
                CHECK((m != NULL) == (size <= SYNC_MEMO_MAX_BODY));
                CHECK(!m || sync_memo_get(m, padded, size));
                sync_memo_free(m);
                free(padded);
        }
        printf("ok\n");
        return 0;
}
