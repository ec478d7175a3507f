/* SPDX-License-Identifier: MIT */
/*
 * The token functions that need SHA-256 (see token.h), apart from the rest so that a
 * program using only the file and header helpers (axctl) does not link GnuTLS: loading
 * it costs a short command more than everything else it does (docs/PERFORMANCE.md).
 */
#include "token.h"

#include <gnutls/crypto.h>

#include <errno.h>
#include <string.h>

#include "util.h"

int token_hash(const char *token, char out[TOKEN_HASH_HEX]) {
        unsigned char digest[32];
        if (gnutls_hash_fast(GNUTLS_DIG_SHA256, token, strlen(token), digest) < 0)
                return -EIO;
        token_hex(digest, sizeof(digest), out);
        return 0;
}

static int token_hmac(const char *key, const char *msg, char out[TOKEN_HASH_HEX]) {
        unsigned char mac[32];
        if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, strlen(key), msg, strlen(msg), mac) < 0)
                return -EIO;
        token_hex(mac, sizeof(mac), out);
        return 0;
}

int token_sign_path(const char *key_hex, const char *path, int64_t expires,
                    char out[TOKEN_HASH_HEX]) {
        _cleanup_free_ char *msg = xasprintf("%s %lld", path, (long long) expires);
        return token_hmac(key_hex, msg, out);
}

int token_node_log_key(const char *secret_hex, const char *node, char out[TOKEN_HASH_HEX]) {
        _cleanup_free_ char *msg = xasprintf("axctl log key of node %s", node);
        return token_hmac(secret_hex, msg, out);
}
