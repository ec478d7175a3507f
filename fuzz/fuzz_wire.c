/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the controller's decoders of agent messages (common/wire-*.c). Every input
 * goes through both wire_register_parse and wire_sync_parse, as the API would read a
 * register or sync body, because a hostile agent chooses which one it sends. Decoded
 * records must stay within the documented bounds the controller core relies on.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "wire.h"

static void fuzz_register(json_t *json) {
        WireRegister reg;
        JsonError err = {0};
        if (wire_register_parse(json, &reg, &err) < 0) {
                FUZZ_ASSERT(memchr(err.message, '\0', sizeof(err.message)));
                return;
        }
        FUZZ_ASSERT(reg.node && *reg.node);
        /* wire.h says "never NULL", but an absent labels key leaves it NULL (reported). */
        FUZZ_ASSERT(!reg.labels || json_is_object(reg.labels));
        FUZZ_ASSERT(reg.cpus >= 0 && reg.memory_mb >= 0 && reg.numa_nodes >= 0);
}

static void fuzz_sync(json_t *json) {
        WireSync sync;
        JsonError err = {0};
        if (wire_sync_parse(json, &sync, &err) < 0) {
                FUZZ_ASSERT(memchr(err.message, '\0', sizeof(err.message)));
                return;
        }
        FUZZ_ASSERT(sync.node && *sync.node);
        FUZZ_ASSERT(sync.n_ranks >= 0 && sync.n_ranks <= WIRE_MAX_RANKS);
        FUZZ_ASSERT(sync.n_checkpoints >= 0 && sync.n_checkpoints <= WIRE_MAX_CHECKPOINTS);
        FUZZ_ASSERT(sync.health_reason);
        for (int i = 0; i < sync.n_ranks; i++) {
                const WireRankReport *r = &sync.ranks[i];
                /* An exited rank has an exit code or a signal. (PROTOCOL.md says exactly
                 * one; the decoder accepts both, which is reported, not asserted.) */
                if (r->exited)
                        FUZZ_ASSERT(r->exit_code >= 0 || r->signal > 0);
                FUZZ_ASSERT(r->job >= 1 && r->attempt >= 1 && r->rank >= 0);
                FUZZ_ASSERT(r->exit_code >= -1 && r->exit_code <= 255);
        }
        for (int i = 0; i < sync.n_checkpoints; i++)
                FUZZ_ASSERT(sync.checkpoints[i].path);
        wire_sync_clear(&sync);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *json = json_loadb((const char *) data, size, JSON_REJECT_DUPLICATES, NULL);
        if (!json)
                return 0;
        fuzz_register(json);
        fuzz_sync(json);
        json_decref(json);
        return 0;
}
