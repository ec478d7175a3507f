/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the job spec parser (common/spec.c) over any bytes, read as the API reads
 * a POST /v1/jobs body. Besides surviving the input, a spec that parses must come back
 * from its normalised form (spec_to_json, what the controller stores and shows) as the
 * same normalised form: the stored spec of a job is parsed again after every restart.
 */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "spec.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *json = json_loadb((const char *) data, size, JSON_REJECT_DUPLICATES, NULL);
        if (!json)
                return 0;
        JobSpec *spec = NULL;
        JsonError err = {0};
        int r = spec_parse(json, &spec, &err);
        json_decref(json);
        if (r < 0) {
                /* A refusal always names what is wrong, in bounded strings. */
                FUZZ_ASSERT(!spec);
                FUZZ_ASSERT(memchr(err.message, '\0', sizeof(err.message)));
                FUZZ_ASSERT(memchr(err.field, '\0', sizeof(err.field)));
                FUZZ_ASSERT(err.message[0] != '\0');
                return 0;
        }
        FUZZ_ASSERT(spec && spec->n_command > 0 && spec->ranks > 0);

        json_t *normal = spec_to_json(spec);
        FUZZ_ASSERT(normal);
        JobSpec *again = NULL;
        r = spec_parse(normal, &again, &err);
        if (r < 0)
                fprintf(stderr, "normalised spec refused: %s: %s\n", err.field, err.message);
        FUZZ_ASSERT(r == 0);
        json_t *normal_again = spec_to_json(again);
        FUZZ_ASSERT(json_equal(normal, normal_again));

        json_decref(normal_again);
        json_decref(normal);
        spec_free(again);
        spec_free(spec);
        return 0;
}
