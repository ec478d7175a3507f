/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the agent's decoder of the controller's sync and register answers
 * (agents/protocol.c), read exactly as the agent reads them, followed by what the agent
 * does next with a desired rank that decoded without error: look it up by key and build
 * its environment (agents/rankenv.c) on a node without accelerators. A compromised
 * controller controls these bytes; the agent must neither crash nor accept an entry
 * outside the limits of protocol.h.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "protocol.h"
#include "rankenv.h"

static void fuzz_desired(const SyncAnswer *a, const DesiredRank *d) {
        const DesiredRank *found = agent_sync_answer_find(a, d->key);
        FUZZ_ASSERT(found);
        FUZZ_ASSERT(found->key.job == d->key.job && found->key.attempt == d->key.attempt &&
                    found->key.rank == d->key.rank);
        FUZZ_ASSERT(d->key.job >= 0 && d->key.attempt >= 0 && d->key.rank >= 0);
        FUZZ_ASSERT(d->hang_timeout_s >= 0 && d->hang_timeout_s <= AGENT_MAX_HANG_TIMEOUT_S);
        if (d->error)
                return;
        FUZZ_ASSERT(json_array_size(d->argv) >= 1 &&
                    json_array_size(d->argv) <= AGENT_MAX_ARGS);
        FUZZ_ASSERT(!d->workdir || !*d->workdir || d->workdir[0] == '/');
        FUZZ_ASSERT(!d->checkpoint_dir || !*d->checkpoint_dir || d->checkpoint_dir[0] == '/');

        AgentInventory inv = { 0 };
        RankUser user = { .name = "fuzz", .home = "/home/fuzz", .shell = "/bin/sh" };
        RankEnvRequest req = { .env = d->env, .devices = d->devices,
                               .accelerator = d->accelerator, .progress_path = "/p",
                               .user = &user };
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

        int64_t lease = 5000, period = 1000;
        if (agent_proto_parse_register(json, &lease, &period) == 0)
                FUZZ_ASSERT(lease > 0 && period > 0);

        SyncAnswer a;
        if (agent_proto_parse_sync(json, &a) < 0)
                return 0; /* the decoder released json */
        FUZZ_ASSERT(a.n_ranks <= AGENT_MAX_DESIRED_RANKS);
        for (size_t i = 0; i < a.n_ranks; i++)
                fuzz_desired(&a, &a.ranks[i]);
        agent_sync_answer_clear(&a);
        return 0;
}
