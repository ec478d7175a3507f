/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/log.c: the journal entries it sends (received here on a socket
 * that stands in for journald), the $JOURNAL_STREAM check, and the stderr fallback.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "../tests/unit/check.h"
#include "log.h"
#include "util.h"

/* Receives one datagram and returns field key's value (binary or text form), or NULL. */
static char *entry_field(const char *buf, size_t len, const char *key) {
        size_t klen = strlen(key);
        const char *p = buf, *end = buf + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *eq = memchr(p, '=', (size_t) (end - p));
                CHECK(nl);
                if (eq && eq < nl) {
                        bool match = (size_t) (eq - p) == klen && memcmp(p, key, klen) == 0;
                        if (match)
                                return strndup(eq + 1, (size_t) (nl - eq - 1));
                        p = nl + 1;
                        continue;
                }
                /* Binary form: KEY\n, 64-bit little-endian length, value, \n. */
                bool match = (size_t) (nl - p) == klen && memcmp(p, key, klen) == 0;
                const unsigned char *l = (const unsigned char *) nl + 1;
                CHECK(l + 8 <= (const unsigned char *) end);
                uint64_t n = 0;
                for (int i = 7; i >= 0; i--)
                        n = (n << 8) | l[i];
                const char *v = (const char *) l + 8;
                CHECK(v + n + 1 <= end && v[n] == '\n');
                if (match)
                        return strndup(v, n);
                p = v + n + 1;
        }
        return NULL;
}

static void test_journal(void) {
        _cleanup_free_ char *dir = check_tmpdir("axctl-test-log");
        _cleanup_free_ char *path = xasprintf("%s/journal.sock", dir);
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        CHECK(bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);

        log_setup("test-log", LOG_LEVEL_INFO);
        CHECK_INT(log_open_journal(path), 0);

        char buf[16384];
        log_job(LOG_LEVEL_WARNING, 42, "node-a", 3, "job %d: rank %d hung", 42, 1);
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        CHECK(n > 0);
        _cleanup_free_ char *msg = entry_field(buf, (size_t) n, "MESSAGE");
        _cleanup_free_ char *prio = entry_field(buf, (size_t) n, "PRIORITY");
        _cleanup_free_ char *ident = entry_field(buf, (size_t) n, "SYSLOG_IDENTIFIER");
        _cleanup_free_ char *job = entry_field(buf, (size_t) n, "JOB_ID");
        _cleanup_free_ char *node = entry_field(buf, (size_t) n, "NODE");
        _cleanup_free_ char *attempt = entry_field(buf, (size_t) n, "ATTEMPT");
        _cleanup_free_ char *func = entry_field(buf, (size_t) n, "CODE_FUNC");
        CHECK_STR(msg, "job 42: rank 1 hung");
        CHECK_STR(prio, "4");
        CHECK_STR(ident, "test-log");
        CHECK_STR(job, "42");
        CHECK_STR(node, "node-a");
        CHECK_STR(attempt, "3");
        CHECK_STR(func, "test_journal");

        /* Plain macros carry no job fields; a newline in the message uses the binary form. */
        log_error("two\nlines");
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        CHECK(n > 0);
        _cleanup_free_ char *msg2 = entry_field(buf, (size_t) n, "MESSAGE");
        _cleanup_free_ char *prio2 = entry_field(buf, (size_t) n, "PRIORITY");
        CHECK_STR(msg2, "two\nlines");
        CHECK_STR(prio2, "3");
        CHECK(!entry_field(buf, (size_t) n, "JOB_ID"));
        CHECK(!entry_field(buf, (size_t) n, "NODE"));
        CHECK(!entry_field(buf, (size_t) n, "ATTEMPT"));

        /* Below the level: nothing is sent. */
        log_debug("hidden");
        CHECK(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN);
        log_msg(LOG_LEVEL_INFO, "no location");
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        CHECK(n > 0);
        CHECK(!entry_field(buf, (size_t) n, "CODE_FILE"));

        /* journald gone: the entry falls back to a stderr line instead of vanishing. */
        close(fd);
        unlink(path);
        log_info("after journald went away");
        CHECK_INT(log_open_journal(path), -ENOENT);
        CHECK_INT(log_open_journal(NULL), 0);
        CHECK_INT(util_rm_rf(dir), 0);
}

static void test_journal_stream(void) {
        struct stat st;
        CHECK(fstat(STDERR_FILENO, &st) == 0);
        unsetenv("JOURNAL_STREAM");
        CHECK(!log_stderr_is_journal());
        char value[64];
        snprintf(value, sizeof(value), "%ju:%ju", (uintmax_t) st.st_dev, (uintmax_t) st.st_ino);
        setenv("JOURNAL_STREAM", value, 1);
        CHECK(log_stderr_is_journal());
        /* Inherited from a parent whose stderr was another stream. */
        snprintf(value, sizeof(value), "%ju:%ju", (uintmax_t) st.st_dev, (uintmax_t) st.st_ino + 1);
        setenv("JOURNAL_STREAM", value, 1);
        CHECK(!log_stderr_is_journal());
        setenv("JOURNAL_STREAM", "garbage", 1);
        CHECK(!log_stderr_is_journal());
        unsetenv("JOURNAL_STREAM");
}

static void test_levels(void) {
        CHECK_INT(log_level_from_string("debug"), LOG_LEVEL_DEBUG);
        CHECK_INT(log_level_from_string("warning"), LOG_LEVEL_WARNING);
        CHECK_INT(log_level_from_string("verbose"), _LOG_LEVEL_INVALID);
        CHECK_INT(log_level_from_string(NULL), _LOG_LEVEL_INVALID);
        CHECK_STR(log_level_to_string(LOG_LEVEL_ERROR), "error");
        CHECK(!log_level_to_string(_LOG_LEVEL_MAX));
}

int main(void) {
        test_levels();
        test_journal_stream();
        test_journal();
        printf("log: all tests passed\n");
        return 0;
}
