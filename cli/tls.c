/* SPDX-License-Identifier: MIT */
/*
 * TLS for axctl's https URLs: GnuTLS, loaded with dlopen the first time a command talks
 * to an https URL. Linked the usual way, GnuTLS and the eight libraries it pulls in are
 * mapped and relocated at every start, about 9 ms of CPU on the CI machine: more than
 * all the rest of an `axctl submit` over http (docs/PERFORMANCE.md). The pointers have
 * the types GnuTLS's own header declares, so a call through them is checked like a
 * direct one; soname 30 is GnuTLS's stable ABI.
 *
 * Certificates are always verified, host name included, against the CA file when one
 * is given and the system's trust store otherwise.
 */
#include "cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <string.h>

#include <arpa/inet.h>

#define GNUTLS_SONAME "libgnutls.so.30"

/* X(name) for every GnuTLS function used here. */
#define TLS_FUNCTIONS(X)                                \
        X(gnutls_certificate_allocate_credentials)      \
        X(gnutls_certificate_free_credentials)          \
        X(gnutls_certificate_set_x509_trust_file)       \
        X(gnutls_certificate_set_x509_system_trust)     \
        X(gnutls_certificate_verification_status_print) \
        X(gnutls_credentials_set)                       \
        X(gnutls_deinit)                                \
        X(gnutls_error_is_fatal)                        \
        X(gnutls_handshake)                             \
        X(gnutls_init)                                  \
        X(gnutls_record_get_direction)                  \
        X(gnutls_record_recv)                           \
        X(gnutls_record_send)                           \
        X(gnutls_server_name_set)                       \
        X(gnutls_session_get_verify_cert_status)        \
        X(gnutls_session_set_verify_cert)               \
        X(gnutls_set_default_priority)                  \
        X(gnutls_strerror)                              \
        X(gnutls_transport_set_int2)

typedef struct TlsApi {
#define X(f) __typeof__(f) *f;
        TLS_FUNCTIONS(X)
#undef X
        gnutls_free_function *free_fn; /* gnutls_free is a variable holding a function */
} TlsApi;

static TlsApi api;
static bool api_loaded;

struct CliTls {
        gnutls_session_t session;
        gnutls_certificate_credentials_t cred;
};

/* Loads GnuTLS once per process; -ENOTSUP with *ret_error when it cannot be. */
static int api_load(char **ret_error) {
        if (api_loaded)
                return 0;
        /* Never unloaded: GnuTLS keeps global state for the life of the process. */
        void *h = dlopen(GNUTLS_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                *ret_error = xasprintf("https needs GnuTLS: %s", dlerror());
                return -ENOTSUP;
        }
        TlsApi loaded = {};
        bool complete = true;
#define X(f) complete &= (loaded.f = (__typeof__(f) *) dlsym(h, #f)) != NULL;
        TLS_FUNCTIONS(X)
#undef X
        loaded.free_fn = dlsym(h, "gnutls_free");
        if (!complete || !loaded.free_fn) {
                *ret_error = xasprintf("https needs GnuTLS: %s lacks a function axctl uses",
                                       GNUTLS_SONAME);
                dlclose(h);
                return -ENOTSUP;
        }
        api = loaded;
        api_loaded = true;
        return 0;
}

CliTls *cli_tls_free(CliTls *t) {
        if (!t)
                return NULL;
        if (t->session)
                api.gnutls_deinit(t->session);
        if (t->cred)
                api.gnutls_certificate_free_credentials(t->cred);
        free(t);
        return NULL;
}

static bool is_ip_literal(const char *host) {
        unsigned char addr[sizeof(struct in6_addr)];
        return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

static int setup_failed(CliTls *t, int r, char **ret_error) {
        *ret_error = xasprintf("cannot set up TLS: %s", api.gnutls_strerror(r));
        cli_tls_free(t);
        return -EIO;
}

int cli_tls_new(int fd, const char *host, const char *ca_file, CliTls **ret, char **ret_error) {
        int r = api_load(ret_error);
        if (r < 0)
                return r;
        CliTls *t = xcalloc(1, sizeof(*t));
        r = api.gnutls_certificate_allocate_credentials(&t->cred);
        if (r < 0)
                return setup_failed(t, r, ret_error);
        r = ca_file ? api.gnutls_certificate_set_x509_trust_file(t->cred, ca_file,
                                                                 GNUTLS_X509_FMT_PEM)
                    : api.gnutls_certificate_set_x509_system_trust(t->cred);
        /* No certificate at all would make every server untrusted: say why. */
        if (r <= 0) {
                const char *why = r < 0 ? api.gnutls_strerror(r) : "no certificate in it";
                if (ca_file)
                        *ret_error = xasprintf("cannot load CA file %s: %s", ca_file, why);
                else
                        *ret_error = xasprintf("cannot load the system's CA certificates: %s "
                                               "(give --ca-file)",
                                               why);
                cli_tls_free(t);
                return -EIO;
        }
        r = api.gnutls_init(&t->session, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL);
        if (r >= 0)
                r = api.gnutls_set_default_priority(t->session);
        if (r >= 0)
                r = api.gnutls_credentials_set(t->session, GNUTLS_CRD_CERTIFICATE, t->cred);
        /* Server name indication is for names; RFC 6066 forbids it for addresses. */
        if (r >= 0 && !is_ip_literal(host))
                r = api.gnutls_server_name_set(t->session, GNUTLS_NAME_DNS, host, strlen(host));
        if (r < 0)
                return setup_failed(t, r, ret_error);
        /* The handshake fails unless the chain leads to a trusted CA and the certificate
         * names host (a DNS name, or an IP address for an address). */
        api.gnutls_session_set_verify_cert(t->session, host, 0);
        api.gnutls_transport_set_int2(t->session, fd, fd);
        *ret = t;
        return 0;
}

short cli_tls_wanted_events(CliTls *t) {
        return api.gnutls_record_get_direction(t->session) ? POLLOUT : POLLIN;
}

/* -EAGAIN for "try again when the socket is ready", else -EIO with *ret_error (which
 * replaces an earlier one). */
static int tls_error(CliTls *t, int r, char **ret_error) {
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED || !api.gnutls_error_is_fatal(r))
                return -EAGAIN;
        free(*ret_error);
        *ret_error = NULL;
        if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                unsigned status = api.gnutls_session_get_verify_cert_status(t->session);
                gnutls_datum_t text = {};
                if (api.gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text,
                                                                     0) >= 0) {
                        *ret_error = xasprintf("TLS: %s", (const char *) text.data);
                        (*api.free_fn)(text.data);
                        /* GnuTLS ends each sentence with a space, the last one too. */
                        size_t n = strlen(*ret_error);
                        while (n > 0 && (*ret_error)[n - 1] == ' ')
                                (*ret_error)[--n] = '\0';
                        return -EIO;
                }
        }
        *ret_error = xasprintf("TLS: %s", api.gnutls_strerror(r));
        return -EIO;
}

int cli_tls_handshake(CliTls *t, char **ret_error) {
        int r = api.gnutls_handshake(t->session);
        return r < 0 ? tls_error(t, r, ret_error) : 0;
}

ssize_t cli_tls_recv(CliTls *t, void *buf, size_t n, char **ret_error) {
        ssize_t r = api.gnutls_record_recv(t->session, buf, n);
        /* A server that closes without close_notify has still said all it meant to when
         * the answer's length or last chunk came; the HTTP layer checks that. */
        if (r == GNUTLS_E_PREMATURE_TERMINATION)
                return 0;
        return r < 0 ? tls_error(t, (int) r, ret_error) : r;
}

ssize_t cli_tls_send(CliTls *t, const void *buf, size_t n, char **ret_error) {
        ssize_t r = api.gnutls_record_send(t->session, buf, n);
        return r < 0 ? tls_error(t, (int) r, ret_error) : r;
}
