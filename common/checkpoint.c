/* SPDX-License-Identifier: MIT */
/* Checkpoint directory names; see checkpoint.h. */
#include "checkpoint.h"

#include <errno.h>
#include <string.h>

#include "util.h"

int checkpoint_name_parse(const char *name, int64_t *ret_step) {
        if (strncmp(name, "step_", 5) != 0)
                return -EINVAL;
        const char *digits = name + 5;
        size_t n = strspn(digits, "0123456789");
        if (n == 0 || n > 19 || digits[n] != '\0')
                return -EINVAL;
        int64_t v = 0;
        for (size_t i = 0; i < n; i++) {
                int d = digits[i] - '0';
                if (v > (INT64_MAX - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        *ret_step = v;
        return 0;
}

char *checkpoint_path_make(const char *dir, const char *name) {
        size_t len = strlen(dir);
        while (len > 1 && dir[len - 1] == '/')
                len--;
        return xasprintf("%.*s/%s", (int) len, dir, name);
}

bool checkpoint_path_in_dir(const char *dir, const char *path, int64_t step) {
        if (!dir || !*dir || !path)
                return false;
        const char *name = strrchr(path, '/');
        int64_t named;
        if (!name || checkpoint_name_parse(name + 1, &named) < 0 || named != step)
                return false;
        _cleanup_free_ char *want = checkpoint_path_make(dir, name + 1);
        return strcmp(path, want) == 0;
}
