/* SPDX-License-Identifier: MIT */
/*
 * Tiny helpers shared by the agent's unit tests, on top of the project's checks
 * (tests/unit/check.h): a scratch directory, a small file.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "../tests/unit/check.h"
#include "util.h"

/* meson's code for a skipped test. */
#define TEST_SKIP 77

/* A fresh scratch directory (malloc'd path). */
static inline char *test_tmpdir(void) {
        return check_tmpdir("axagent-test");
}

/* Writes a small file, creating it; exits on failure. */
static inline void test_write(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        if (!f) {
                perror(path);
                exit(1);
        }
        fputs(text, f);
        fclose(f);
}

/* A scratch root whose dev/ holds n fake NVIDIA device nodes (nvidia0..), for --dev-root. */
static inline char *test_fake_nvidia_root(int n) {
        char *root = test_tmpdir();
        char *dev = xasprintf("%s/dev", root);
        CHECK(mkdir(dev, 0755) == 0);
        for (int i = 0; i < n; i++) {
                char *node = xasprintf("%s/nvidia%d", dev, i);
                test_write(node, "");
                free(node);
        }
        free(dev);
        return root;
}
