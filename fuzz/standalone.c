/* SPDX-License-Identifier: MIT */
/*
 * A driver for the fuzz targets in builds without libFuzzer (gcc, the default): runs
 * every file named on the command line, and every file in every directory named, through
 * LLVMFuzzerTestOneInput once. It does not search for new inputs; it keeps the
 * checked-in corpus, including the reproducers of bugs found earlier, running in every
 * CI build. A broken invariant aborts, which meson reports as a failed test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "util.h"

static int run_file(const char *path) {
        char *data = NULL;
        size_t len = 0;
        int r = util_read_file(path, &data, &len);
        if (r < 0) {
                fprintf(stderr, "cannot read %s: %s\n", path, strerror(-r));
                return r;
        }
        /* A heap copy of exactly len bytes, so a read past the end is caught by tools. */
        uint8_t *exact = xmalloc(len ? len : 1);
        memcpy(exact, data, len);
        free(data);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
        return 0;
}

static int name_compare(const struct dirent **a, const struct dirent **b) {
        return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs the files of dir in name order; returns how many, or -errno. */
static int run_dir(const char *dir) {
        struct dirent **names;
        int n = scandir(dir, &names, NULL, name_compare);
        if (n < 0)
                return -errno;
        int done = 0, r = 0;
        for (int i = 0; i < n; i++) {
                if (names[i]->d_name[0] != '.' && r >= 0) {
                        _cleanup_free_ char *path = xasprintf("%s/%s", dir, names[i]->d_name);
                        r = run_file(path);
                        done++;
                }
                free(names[i]);
        }
        free(names);
        return r < 0 ? r : done;
}

int main(int argc, char **argv) {
        int total = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        return 1;
                }
                int r = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) == 0 ? 1 : -1;
                if (r < 0)
                        return 1;
                total += r;
        }
        if (total == 0) {
                fprintf(stderr, "no inputs\n");
                return 1;
        }
        printf("%s: %d inputs ran\n", argv[0], total);
        return 0;
}
