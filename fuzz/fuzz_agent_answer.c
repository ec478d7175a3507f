/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the agent's decoders of the controller's sync and register answers
 * (common/wire-sync-answer.c, common/wire-register.c), read exactly as the agent reads
 * them, followed by what the agent does next with a desired rank that decoded without
 * error: look it up by key and build its environment (agents/rankenv.c) on a node
 * without accelerators. A compromised
 * controller controls these bytes; the agent must neither crash nor accept an entry
 * outside the limits of wire.h.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "rankenv.h"
#include "wire.h"

static void fuzz_desired(const WireSyncAnswer *a, const WireDesiredRank *d) {
        const WireDesiredRank *found = wire_sync_answer_find(a, d->key);
        FUZZ_ASSERT(found);
        FUZZ_ASSERT(found->key.job == d->key.job && found->key.attempt == d->key.attempt &&
                    found->key.rank == d->key.rank);
        FUZZ_ASSERT(d->key.job >= 0 && d->key.attempt >= 0 && d->key.rank >= 0);
        FUZZ_ASSERT(d->hang_timeout_s >= 0 && d->hang_timeout_s <= WIRE_MAX_HANG_TIMEOUT_S);
        if (d->error)
                return;
        FUZZ_ASSERT(json_array_size(d->argv) >= 1 && json_array_size(d->argv) <= WIRE_MAX_ARGS);
        FUZZ_ASSERT(!d->workdir || !*d->workdir || d->workdir[0] == '/');
        FUZZ_ASSERT(!d->checkpoint_dir || !*d->checkpoint_dir || d->checkpoint_dir[0] == '/');

        AgentInventory inv = {0};
        RankUser user = {.name = "fuzz", .home = "/home/fuzz", .shell = "/bin/sh"};
        RankEnvRequest req = {.env = d->env,
                              .shared_env = d->shared_env,
                              .devices = d->devices,
                              .accelerator = d->accelerator,
                              .progress_path = "/p",
                              .user = &user};
        char **envp = NULL;
        char *error = NULL;
        if (agent_env_build(&req, &inv, &envp, &error) < 0) {
                FUZZ_ASSERT(error);
                free(error);
                return;
        }
        for (char **e = envp; *e; e++)
                FUZZ_ASSERT(strchr(*e, '=') && **e != '=');
        agent_env_free(envp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *json = json_loadb((const char *) data, size, JSON_REJECT_DUPLICATES, NULL);
        if (!json)
                return 0;

        WireRegisterAnswer reg;
        if (wire_register_answer_parse(json, &reg) == 0)
                FUZZ_ASSERT(reg.lease_ms >= 0 && reg.sync_period_ms >= 0);

        WireSyncAnswer a;
        if (wire_sync_answer_parse(json, &a) < 0)
                return 0; /* the decoder released json */
        FUZZ_ASSERT(a.n_ranks <= WIRE_MAX_RANKS);
        /* A short answer lists nothing: the agent keeps the last whole one. */
        FUZZ_ASSERT(!a.unchanged || a.n_ranks == 0);
        FUZZ_ASSERT(!a.lease_only || (!a.unchanged && a.n_ranks == 0));
        for (size_t i = 0; i < a.n_ranks; i++)
                fuzz_desired(&a, &a.ranks[i]);
        wire_sync_answer_clear(&a);
        return 0;
}
