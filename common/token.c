/* SPDX-License-Identifier: MIT */
/*
 * Client credentials; see token.h. Files are checked with fstat on the open descriptor,
 * so the file that was checked is the file that was read: a file or symlink swapped in
 * between a stat and an open cannot redirect the read. Symlinks are followed on purpose
 * (dotfile managers and Kubernetes secrets use them); the owner and mode checks apply
 * to the file they lead to.
 */
#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

bool token_valid(const char *s) {
        if (!s || !*s)
                return false;
        size_t n = 0;
        for (; *s; s++, n++)
                if (*s < 0x21 || *s > 0x7e || n >= TOKEN_MAX_LEN)
                        return false;
        return true;
}

int token_check_private(const char *path, const struct stat *st, char **ret_error) {
        if (!S_ISREG(st->st_mode)) {
                *ret_error = xasprintf("%s is not a regular file", path);
                return -EINVAL;
        }
        if (st->st_mode & (S_IRWXG | S_IRWXO)) {
                *ret_error = xasprintf("%s is %s by group or others: run chmod 600 %s", path,
                                       st->st_mode & (S_IRGRP | S_IROTH) ? "readable" : "writable",
                                       path);
                return -EPERM;
        }
        /* Someone else's file could be rewritten by its owner to point us elsewhere. */
        if (st->st_uid != geteuid() && st->st_uid != 0) {
                *ret_error = xasprintf("%s belongs to uid %u, not to this user or root", path,
                                       (unsigned) st->st_uid);
                return -EPERM;
        }
        return 0;
}

/* Wipes the whole read buffer: it may hold a secret without a terminating NUL. */
static void buffer_free(char *buf) {
        explicit_bzero(buf, TOKEN_FILE_MAX + 1);
        free(buf);
}

int token_file_load(const char *path, char **ret_data, struct stat *ret_st, char **ret_error) {
        /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it is refused
         * below like every other file that is not a regular one. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                int r = -errno;
                *ret_error = xasprintf("cannot open %s: %s", path,
                                       r == -ELOOP ? "it is a symbolic link" : strerror(-r));
                return r;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                *ret_error = xasprintf("cannot read %s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                *ret_error = xasprintf("%s is not a regular file", path);
                return -EINVAL;
        }
        if (st.st_size > TOKEN_FILE_MAX) {
                *ret_error = xasprintf("%s is larger than %d bytes", path, TOKEN_FILE_MAX);
                return -EFBIG;
        }
        char *buf = xmalloc(TOKEN_FILE_MAX + 1);
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, TOKEN_FILE_MAX + 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;
                        buffer_free(buf);
                        *ret_error = xasprintf("cannot read %s: %s", path, strerror(-r));
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > TOKEN_FILE_MAX) {
                        buffer_free(buf);
                        *ret_error = xasprintf("%s is larger than %d bytes", path, TOKEN_FILE_MAX);
                        return -EFBIG;
                }
        }
        buf[len] = '\0';
        if (strlen(buf) != len) {
                buffer_free(buf);
                *ret_error = xasprintf("%s contains a NUL byte", path);
                return -EINVAL;
        }
        *ret_data = buf;
        if (ret_st)
                *ret_st = st;
        return 0;
}

int token_file_read(const char *path, char **ret_token, char **ret_error) {
        char *data;
        struct stat st;
        int r = token_file_load(path, &data, &st, ret_error);
        if (r < 0)
                return r;
        r = token_check_private(path, &st, ret_error);
        if (r < 0) {
                token_free_secret(data);
                return r;
        }
        char *start = data + strspn(data, " \t\r\n");
        size_t n = strlen(start);
        while (n > 0 && strchr(" \t\r\n", start[n - 1]))
                start[--n] = '\0';
        if (!token_valid(start)) {
                token_free_secret(data);
                *ret_error = xasprintf("%s does not hold a token (one line of at most %d "
                                       "visible ASCII characters)",
                                       path, TOKEN_MAX_LEN);
                return -EINVAL;
        }
        *ret_token = xstrdup(start);
        token_free_secret(data);
        return 0;
}

char *token_auth_header(const char *token) {
        return xasprintf("Authorization: Bearer %s", token);
}

void token_free_secret(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

void token_hex(const unsigned char *in, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = '\0';
}

bool token_hex_valid(const char *s) {
        return s && strlen(s) == TOKEN_HASH_HEX - 1 &&
               strspn(s, "0123456789abcdef") == TOKEN_HASH_HEX - 1;
}
