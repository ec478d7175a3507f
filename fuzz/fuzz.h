/* SPDX-License-Identifier: MIT */
/*
 * The one entry point every fuzz target defines, in libFuzzer's form, so a target builds
 * unchanged against libFuzzer (clang, -fsanitize=fuzzer) and against standalone.c, the
 * driver that replays the checked-in corpus in builds without libFuzzer. A target
 * returns 0 and aborts on a broken invariant, which both drivers report as a failure.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the run on a broken invariant: the fuzzer saves the input as a crash. */
#define FUZZ_ASSERT(expr)                                                                    \
        do {                                                                                 \
                if (!(expr)) {                                                               \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
                                #expr);                                                      \
                        abort();                                                             \
                }                                                                            \
        } while (0)
