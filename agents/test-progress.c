/* SPDX-License-Identifier: MIT */
/* Progress parsing, hang detection and the AXLearn checkpoint layout scan. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "progress.h"
#include "test-util.h"

static void test_parse(void) {
        int64_t s = -1;
        CHECK(agent_progress_parse("42", &s) == 0 && s == 42);
        CHECK(agent_progress_parse("  17\n", &s) == 0 && s == 17);
        CHECK(agent_progress_parse("0", &s) == 0 && s == 0);
        CHECK(agent_progress_parse("9223372036854775807", &s) == 0 && s == INT64_MAX);
        s = 5;
        CHECK(agent_progress_parse("9223372036854775808", &s) == -EINVAL && s == 5);
        CHECK(agent_progress_parse("", &s) == -EINVAL);
        CHECK(agent_progress_parse("\n", &s) == -EINVAL);
        CHECK(agent_progress_parse("-3", &s) == -EINVAL);
        CHECK(agent_progress_parse("12abc", &s) == -EINVAL);
        CHECK(agent_progress_parse("1 2", &s) == -EINVAL);
        CHECK(agent_progress_parse("0x10", &s) == -EINVAL);
        CHECK(agent_progress_parse("step 4", &s) == -EINVAL);
}

static void test_tracker(void) {
        ProgressTracker t;
        agent_progress_init(&t, 1000);
        CHECK(!t.has_step);
        /* An empty file is no news and does not restart the hang clock. */
        CHECK(!agent_progress_update(&t, "", 2000));
        CHECK(t.changed_ms == 1000);
        CHECK(!agent_progress_hung(&t, 0, 1000000));
        CHECK(!agent_progress_hung(&t, 5, 5999));
        CHECK(agent_progress_hung(&t, 5, 6000));

        CHECK(agent_progress_update(&t, "10\n", 7000));
        CHECK(t.has_step && t.step == 10 && t.changed_ms == 7000);
        CHECK(!agent_progress_hung(&t, 5, 11000));
        /* Same content: nothing new, clock keeps running. */
        CHECK(!agent_progress_update(&t, "10\n", 9000));
        CHECK(t.changed_ms == 7000);
        /* Garbage is a change of content but keeps the last good step. */
        CHECK(!agent_progress_update(&t, "garbage", 9500));
        CHECK(t.step == 10 && t.changed_ms == 9500);
        CHECK(agent_progress_update(&t, "11", 10000));
        CHECK(t.step == 11);
        /* The same step written differently is not a new step. */
        CHECK(!agent_progress_update(&t, " 11 ", 10500));
}

static void test_read(void) {
        _cleanup_free_ char *dir = test_tmpdir();
        _cleanup_free_ char *path = xasprintf("%s/progress", dir);
        char buf[AGENT_PROGRESS_MAX + 1];
        CHECK(agent_progress_read(path, buf, sizeof(buf)) == 0 && buf[0] == '\0');
        test_write(path, "123\n");
        CHECK(agent_progress_read(path, buf, sizeof(buf)) == 0 && strcmp(buf, "123\n") == 0);
        char big[200];
        memset(big, '7', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        test_write(path, big);
        CHECK(agent_progress_read(path, buf, sizeof(buf)) == 0 &&
              strlen(buf) == AGENT_PROGRESS_MAX);
        CHECK(agent_progress_read(path, buf, 10) == -EINVAL);
        util_rm_rf(dir);
}

static void make_step(const char *dir, const char *name, bool committed) {
        _cleanup_free_ char *d = xasprintf("%s/%s", dir, name);
        CHECK(mkdir(d, 0755) == 0);
        if (committed) {
                _cleanup_free_ char *index = xasprintf("%s/index", d);
                test_write(index, "{}");
        }
}

static void test_checkpoints(void) {
        _cleanup_free_ char *dir = test_tmpdir();
        int64_t step = -1;
        char *path = NULL;

        _cleanup_free_ char *missing = xasprintf("%s/none", dir);
        CHECK(agent_checkpoint_latest(missing, &step, &path) == 0);
        CHECK(agent_checkpoint_latest(dir, &step, &path) == 0);

        make_step(dir, "step_00000010", true);
        make_step(dir, "step_00000005", true);
        make_step(dir, "step_00000020", false); /* being written */
        make_step(dir, "step_abc", true);
        make_step(dir, "step_", true);
        make_step(dir, "tmp_step_00000090", true);
        _cleanup_free_ char *file = xasprintf("%s/step_00000050", dir);
        test_write(file, "not a directory");

        CHECK(agent_checkpoint_latest(dir, &step, &path) == 1);
        CHECK(step == 10);
        _cleanup_free_ char *want = xasprintf("%s/step_00000010", dir);
        CHECK(strcmp(path, want) == 0);
        free(path);

        /* The writer commits step 20: it becomes the latest. */
        _cleanup_free_ char *index = xasprintf("%s/step_00000020/index", dir);
        test_write(index, "{}");
        make_step(dir, "step_123456789", true); /* wider than %08d */
        _cleanup_free_ char *slash = xasprintf("%s/", dir);
        CHECK(agent_checkpoint_latest(slash, &step, &path) == 1);
        CHECK(step == 123456789);
        _cleanup_free_ char *want2 = xasprintf("%s/step_123456789", dir);
        CHECK(strcmp(path, want2) == 0);
        free(path);
        util_rm_rf(dir);
}

int main(void) {
        test_parse();
        test_tracker();
        test_read();
        test_checkpoints();
        return 0;
}
