/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL backend of the store (backend.h), through libpq. A commit returns once
 * the server committed it, with the server's synchronous_commit (keep it on; with
 * synchronous_standby_names also on a standby). The schema version lives in the table
 * schema_version; migrations run in one transaction under an advisory lock, so two
 * controllers starting on an empty database do not both migrate.
 *
 * store.c's SQL is SQLite's; pg_translate rewrites it mechanically, migrations and
 * statements alike: ? and ?N become $N, INTEGER becomes BIGINT (ms times and ids need 64
 * bits), the reserved word user becomes "user", and event's `seq INTEGER PRIMARY KEY`
 * (SQLite's rowid) an identity column. test-store checks that both backends then hold
 * the same tables and columns. Statements run often are prepared once per connection
 * (again after a reset); results come back in text form.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "backend.h"
#include "util.h"

#define PG_MAX_PARAMS 32
/* pg_type's oids of text and bigint (catalog/pg_type.h, stable across versions). */
#define PG_TEXT_OID 25
#define PG_INT8_OID 20
/* pg_advisory_xact_lock's key for migrations: "axct" and 1. */
#define PG_MIGRATION_LOCK "7022348497584078849"

/*
 * How long one statement's answer may take. A server that stops answering without the
 * connection breaking (a network that drops everything, a hung host, a relay that
 * swallows bytes: TCP then never times out) would hang the controller's loop for good;
 * past this the connection is dropped and the statement fails with -ETIMEDOUT. It is
 * tcp_user_timeout's default below.
 */
#define PG_ANSWER_TIMEOUT_MS 10000

/*
 * libpq, loaded with dlopen when a PostgreSQL database is opened, as axctl loads GnuTLS:
 * Debian builds libpq against OpenSSL, and linked the usual way it would map libssl,
 * Kerberos and LDAP into every axctld, SQLite's included, and make libpq5 a dependency of
 * a controller that never uses it. The pointers have libpq-fe.h's types, so calls through
 * them are checked like direct ones; soname 5 is libpq's stable ABI.
 */
#define LIBPQ_SONAME "libpq.so.5"

/* X(name) for every libpq function used here. */
#define PQ_FUNCTIONS(X)         \
        X(PQclear)              \
        X(PQcmdStatus)          \
        X(PQcmdTuples)          \
        X(PQconnectdbParams)    \
        X(PQconsumeInput)       \
        X(PQerrorMessage)       \
        X(PQfinish)             \
        X(PQgetResult)          \
        X(PQgetisnull)          \
        X(PQgetvalue)           \
        X(PQisBusy)             \
        X(PQntuples)            \
        X(PQreset)              \
        X(PQresultErrorField)   \
        X(PQresultErrorMessage) \
        X(PQresultStatus)       \
        X(PQsendPrepare)        \
        X(PQsendQuery)          \
        X(PQsendQueryParams)    \
        X(PQsendQueryPrepared)  \
        X(PQsetNoticeProcessor) \
        X(PQsocket)             \
        X(PQstatus)

static struct {
#define X(f) __typeof__(f) *f;
        PQ_FUNCTIONS(X)
#undef X
} pq;
static bool pq_loaded;

/* Loads libpq once per process; -ENOTSUP with *ret_error when it cannot be. */
static int pq_load(char **ret_error) {
        if (pq_loaded)
                return 0;
        /* Never unloaded: libpq and the libraries it brings keep global state. */
        void *h = dlopen(LIBPQ_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                *ret_error = xasprintf("a PostgreSQL database needs libpq (Debian's libpq5): %s",
                                       dlerror());
                return -ENOTSUP;
        }
        bool complete = true;
#define X(f) complete &= (pq.f = (__typeof__(f) *) dlsym(h, #f)) != NULL;
        PQ_FUNCTIONS(X)
#undef X
        if (!complete) {
                *ret_error = xasprintf("%s lacks a function axctld uses", LIBPQ_SONAME);
                dlclose(h);
                return -ENOTSUP;
        }
        pq_loaded = true;
        return 0;
}

struct StoreConn {
        PGconn *pg;
        bool timed_out; /* the last statement got no answer in time: the connection is dropped */
        bool in_transaction;
        bool prepared[STORE_SLOTS];
        char error[512];
};

static bool pg_claims(const char *target) {
        static const char *const prefixes[] = {
                "postgresql://", "postgres://", "host=", "hostaddr=", "dbname=", "service="};
        for (size_t i = 0; i < ELEMENTSOF(prefixes); i++)
                if (strncmp(target, prefixes[i], strlen(prefixes[i])) == 0)
                        return true;
        return false;
}

static bool is_word_char(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_';
}

/* SQLite's dialect as store.c writes it, in PostgreSQL's (see the top of the file). */
static char *pg_translate(const char *sql) {
        size_t size = strlen(sql) * 2 + 64, n = 0;
        char *out = xmalloc(size);
        int next_param = 1;
        const char *last_word = "";
        size_t last_len = 0;
        for (const char *p = sql; *p;) {
                if (size - n < 64) {
                        size *= 2;
                        out = xrealloc(out, size);
                }
                if (*p == '\'') { /* a literal, as it is */
                        const char *end = strchr(p + 1, '\'');
                        size_t len = end ? (size_t) (end - p) + 1 : strlen(p);
                        if (size - n < len + 64) {
                                size += len + 64;
                                out = xrealloc(out, size);
                        }
                        memcpy(out + n, p, len);
                        n += len;
                        p += len;
                } else if (*p == '?') {
                        p++;
                        if (*p >= '0' && *p <= '9') {
                                out[n++] = '$';
                                while (*p >= '0' && *p <= '9')
                                        out[n++] = *p++;
                        } else
                                n += (size_t) snprintf(out + n, size - n, "$%d", next_param++);
                } else if (is_word_char(*p) && (p == sql || !is_word_char(p[-1]))) {
                        const char *start = p;
                        while (is_word_char(*p))
                                p++;
                        size_t len = (size_t) (p - start);
                        const char *word = NULL;
                        if (len == 7 && memcmp(start, "INTEGER", 7) == 0)
                                word = last_len == 3 && memcmp(last_word, "seq", 3) == 0 &&
                                                       strncmp(p, " PRIMARY KEY", 12) == 0
                                               ? "BIGINT GENERATED BY DEFAULT AS IDENTITY"
                                               : "BIGINT";
                        else if (len == 4 && memcmp(start, "user", 4) == 0)
                                word = "\"user\"";
                        if (word) {
                                size_t wlen = strlen(word);
                                memcpy(out + n, word, wlen);
                                n += wlen;
                        } else {
                                if (size - n < len + 64) {
                                        size += len + 64;
                                        out = xrealloc(out, size);
                                }
                                memcpy(out + n, start, len);
                                n += len;
                        }
                        last_word = start;
                        last_len = len;
                } else
                        out[n++] = *p++;
        }
        out[n] = '\0';
        return out;
}

/* Keeps the message of a failure for store_last_error, on one line for the logs. */
static void keep_error(StoreConn *c, const char *message) {
        if (!message || !*message)
                message = "unknown error";
        size_t n = 0;
        for (const char *p = message; *p && n + 1 < sizeof(c->error); p++) {
                if (*p != '\n' && *p != '\t')
                        c->error[n++] = *p;
                else if (n > 0 && c->error[n - 1] != ' ')
                        c->error[n++] = ' ';
        }
        while (n > 0 && c->error[n - 1] == ' ')
                n--;
        c->error[n] = '\0';
}

/* Maps a failed result's SQLSTATE (or the connection's state) onto an errno value, so
 * callers never see libpq's codes. */
static int errno_from_result(StoreConn *c, const PGresult *res) {
        if (!res && c->timed_out)
                return -ETIMEDOUT; /* answer() kept the message */
        keep_error(c, res ? pq.PQresultErrorMessage(res) : pq.PQerrorMessage(c->pg));
        const char *state = res ? pq.PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        if (!state || pq.PQstatus(c->pg) == CONNECTION_BAD)
                return pq.PQstatus(c->pg) == CONNECTION_BAD ? -ENOTCONN : -EIO;
        if (strncmp(state, "23", 2) == 0) /* integrity: unique, check, not null */
                return -EEXIST;
        if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
            strcmp(state, "55P03") == 0 || strcmp(state, "53300") == 0)
                return -EBUSY; /* serialization, deadlock, lock or connection limits */
        if (strcmp(state, "53100") == 0)
                return -ENOSPC;
        if (strcmp(state, "53200") == 0)
                return -ENOMEM;
        if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0)
                return -ENOTCONN; /* connection failures, server shutting down */
        if (strncmp(state, "28", 2) == 0 || strcmp(state, "42501") == 0)
                return -EACCES;
        if (strcmp(state, "3D000") == 0)
                return -ENOENT;
        return -EIO;
}

static bool result_ok(const PGresult *res) {
        ExecStatusType status = pq.PQresultStatus(res);
        return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

/* Gives up on a connection whose server does not answer: libpq sees it end at once. */
static void drop_connection(StoreConn *c) {
        c->timed_out = true;
        (void) shutdown(pq.PQsocket(c->pg), SHUT_RDWR);
        for (PGresult *res; (res = pq.PQgetResult(c->pg));)
                pq.PQclear(res);
        snprintf(c->error, sizeof(c->error), "the database did not answer within %d s",
                 PG_ANSWER_TIMEOUT_MS / 1000);
}

/*
 * The answer to what was just sent (sent: what PQsend* returned), waited for at most
 * PG_ANSWER_TIMEOUT_MS: PQexec's result (of several, the first failed one, else the
 * last), or NULL when none came (the connection is then dropped, c->timed_out set).
 */
static PGresult *answer(StoreConn *c, int sent) {
        c->timed_out = false;
        if (!sent)
                return NULL;
        int64_t deadline = util_now_ms() + PG_ANSWER_TIMEOUT_MS;
        PGresult *kept = NULL;
        for (;;) {
                while (pq.PQisBusy(c->pg)) {
                        int64_t left = deadline - util_now_ms();
                        struct pollfd p = {.fd = pq.PQsocket(c->pg), .events = POLLIN};
                        int n = left > 0 ? poll(&p, 1, (int) left) : 0;
                        if (n == 0) {
                                pq.PQclear(kept);
                                drop_connection(c);
                                return NULL;
                        }
                        /* A broken connection: PQgetResult reports it. */
                        if (n > 0 && !pq.PQconsumeInput(c->pg))
                                break;
                }
                PGresult *res = pq.PQgetResult(c->pg);
                if (!res)
                        return kept;
                if (kept && !result_ok(kept))
                        pq.PQclear(res);
                else {
                        pq.PQclear(kept);
                        kept = res;
                }
        }
}

/* Runs a command without parameters or rows; 0 or -errno. */
static int exec(StoreConn *c, const char *sql) {
        PGresult *res = answer(c, pq.PQsendQuery(c->pg, sql));
        ExecStatusType status = pq.PQresultStatus(res);
        int r = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK ? 0
                                                                        : errno_from_result(c, res);
        pq.PQclear(res);
        return r;
}

static const char *pg_last_error(StoreConn *c) {
        return c->error[0] ? c->error : "no error";
}

/* Notices (CREATE TABLE IF NOT EXISTS's) are not the operator's business. */
static void ignore_notice(void *arg, const char *message) {
        (void) arg, (void) message;
}

/* Reads schema_version (made here if missing): -errno or the version. */
static int schema_version(StoreConn *c) {
        int r = exec(c, "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)");
        if (r < 0)
                return r;
        PGresult *res = answer(c, pq.PQsendQuery(c->pg, "SELECT version FROM schema_version"));
        if (pq.PQresultStatus(res) != PGRES_TUPLES_OK)
                r = errno_from_result(c, res);
        else if (pq.PQntuples(res) == 0)
                r = exec(c, "INSERT INTO schema_version (version) VALUES (0)");
        else
                r = atoi(pq.PQgetvalue(res, 0, 0));
        pq.PQclear(res);
        return r;
}

static int migrate(StoreConn *c, const char *const *migrations, int n_migrations, int wanted) {
        int r = exec(c, "BEGIN");
        if (r < 0)
                return r;
        /* Held till the transaction ends: a second controller waits, then finds it done. */
        if ((r = exec(c, "SELECT pg_advisory_xact_lock(" PG_MIGRATION_LOCK ")")) < 0 ||
            (r = schema_version(c)) < 0)
                goto fail;
        int version = r;
        if (version > n_migrations) {
                r = -EPROTO; /* written by a newer axctld */
                keep_error(c, "the database is of a newer axctld");
                goto fail;
        }
        for (int v = version; v < wanted; v++) {
                _cleanup_free_ char *sql = pg_translate(migrations[v]);
                if ((r = exec(c, sql)) < 0)
                        goto fail;
        }
        if (wanted > version) {
                char set[64];
                snprintf(set, sizeof(set), "UPDATE schema_version SET version = %d", wanted);
                if ((r = exec(c, set)) < 0)
                        goto fail;
        }
        return exec(c, "COMMIT");
fail:
        exec(c, "ROLLBACK");
        return r;
}

static void pg_close(StoreConn *c) {
        if (!c)
                return;
        pq.PQfinish(c->pg);
        free(c);
}

static int pg_open(const char *target, const char *const *migrations, int n_migrations, int version,
                   StoreConn **ret_conn, char **ret_error) {
        char *load_error = NULL;
        int r = pq_load(&load_error);
        if (r < 0) {
                if (ret_error)
                        *ret_error = load_error;
                else
                        free(load_error);
                return r;
        }
        StoreConn *c = xcalloc(1, sizeof(StoreConn));
        /* Defaults a target may override: give up on a server that does not answer or
         * stops acknowledging, rather than hang the controller's loop for minutes. */
        const char *const keywords[] = {"connect_timeout",
                                        "keepalives_idle",
                                        "keepalives_interval",
                                        "keepalives_count",
                                        "tcp_user_timeout",
                                        "application_name",
                                        "dbname",
                                        NULL};
        const char *const values[] = {"10", "5", "2", "3", "10000", "axctld", target, NULL};
        c->pg = pq.PQconnectdbParams(keywords, values, 1);
        if (!c->pg) {
                r = -ENOMEM;
                keep_error(c, "out of memory");
        } else if (pq.PQstatus(c->pg) != CONNECTION_OK) {
                r = -ENOTCONN;
                keep_error(c, pq.PQerrorMessage(c->pg));
        } else {
                pq.PQsetNoticeProcessor(c->pg, ignore_notice, NULL);
                r = migrate(c, migrations, n_migrations, version);
        }
        if (r < 0) {
                if (ret_error)
                        *ret_error = xstrdup(c->error);
                pg_close(c);
                return r;
        }
        *ret_conn = c;
        return 0;
}

static int pg_check_file(StoreConn *c) {
        (void) c;
        return 0; /* no file of ours to lose */
}

/* Outside a transaction, a connection found lost is reset once (prepared statements go
 * with it). Within one, the loss is the transaction's failure, as SQLite's errors are. */
static void reconnect_if_lost(StoreConn *c) {
        if (c->in_transaction || (pq.PQstatus(c->pg) == CONNECTION_OK && !c->timed_out))
                return;
        c->timed_out = false;
        pq.PQreset(c->pg);
        memset(c->prepared, 0, sizeof(c->prepared));
        if (pq.PQstatus(c->pg) != CONNECTION_OK)
                keep_error(c, pq.PQerrorMessage(c->pg));
}

static int pg_begin(StoreConn *c) {
        reconnect_if_lost(c);
        int r = exec(c, "BEGIN");
        c->in_transaction = r >= 0;
        return r;
}

static int pg_commit(StoreConn *c) {
        PGresult *res = answer(c, pq.PQsendQuery(c->pg, "COMMIT"));
        int r = 0;
        if (pq.PQresultStatus(res) != PGRES_COMMAND_OK)
                r = errno_from_result(c, res);
        else if (strcmp(pq.PQcmdStatus(res), "COMMIT") != 0) {
                /* A transaction that failed earlier ends in ROLLBACK, reported as success. */
                keep_error(c, "the transaction was rolled back");
                r = -EIO;
        }
        pq.PQclear(res);
        c->in_transaction = false;
        return r;
}

static int pg_rollback(StoreConn *c) {
        c->in_transaction = false;
        /* A lost connection took its transaction with it; sending ROLLBACK would only
         * replace the message that says why ("did not answer", "closed"). */
        if (c->timed_out || pq.PQstatus(c->pg) != CONNECTION_OK)
                return 0;
        return exec(c, "ROLLBACK");
}

static int64_t row_int(const StoreRow *row, int i) {
        const PGresult *res = row->cursor;
        if (pq.PQgetisnull(res, row->index, i))
                return STORE_NONE;
        return strtoll(pq.PQgetvalue(res, row->index, i), NULL, 10);
}

static const char *row_text(const StoreRow *row, int i) {
        const PGresult *res = row->cursor;
        return pq.PQgetisnull(res, row->index, i) ? NULL : pq.PQgetvalue(res, row->index, i);
}

static int pg_run(StoreConn *c, int slot, const char *sql, const StoreParam *params, int n_params,
                  StoreRowCb row, void *ctx, int64_t *ret_changes) {
        if (n_params > PG_MAX_PARAMS)
                return -E2BIG;
        reconnect_if_lost(c);
        char numbers[PG_MAX_PARAMS][24];
        const char *values[PG_MAX_PARAMS];
        /* Typed, so that a parameter only tested for NULL (?2 IS NULL OR ...) has one. */
        Oid types[PG_MAX_PARAMS];
        for (int i = 0; i < n_params; i++) {
                const StoreParam *p = &params[i];
                types[i] = p->is_text ? PG_TEXT_OID : PG_INT8_OID;
                if (p->is_text)
                        values[i] = p->text;
                else if (p->value == STORE_NONE)
                        values[i] = NULL;
                else {
                        snprintf(numbers[i], sizeof(numbers[i]), "%" PRId64, p->value);
                        values[i] = numbers[i];
                }
        }
        PGresult *res;
        bool keep = slot >= 0 && slot < STORE_SLOTS;
        char name[16];
        snprintf(name, sizeof(name), "axs%d", slot);
        if (keep && !c->prepared[slot]) {
                _cleanup_free_ char *text = pg_translate(sql);
                res = answer(c, pq.PQsendPrepare(c->pg, name, text, n_params, types));
                int r = pq.PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : errno_from_result(c, res);
                pq.PQclear(res);
                if (r < 0)
                        return r;
                c->prepared[slot] = true;
        }
        if (keep)
                res = answer(c,
                             pq.PQsendQueryPrepared(c->pg, name, n_params, values, NULL, NULL, 0));
        else {
                _cleanup_free_ char *text = pg_translate(sql);
                res = answer(c, pq.PQsendQueryParams(c->pg, text, n_params, types, values, NULL,
                                                     NULL, 0));
        }
        ExecStatusType status = pq.PQresultStatus(res);
        int r = 0;
        if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
                r = errno_from_result(c, res);
        /* The whole result is here, so a row callback may run statements of its own. */
        StoreRow current = {.get_int = row_int, .get_text = row_text, .cursor = res};
        int n_rows = r == 0 ? pq.PQntuples(res) : 0;
        for (; row && current.index < n_rows; current.index++)
                if ((r = row(&current, ctx)) != 0)
                        break;
        if (r >= 0 && ret_changes)
                *ret_changes = strtoll(pq.PQcmdTuples(res), NULL, 10);
        pq.PQclear(res);
        return r;
}

const StoreBackend store_pg_backend = {
        .claims = pg_claims,
        .open = pg_open,
        .close = pg_close,
        .last_error = pg_last_error,
        .check_file = pg_check_file,
        .begin = pg_begin,
        .commit = pg_commit,
        .rollback = pg_rollback,
        .run = pg_run,
        .now_ms_sql = "(extract(epoch from clock_timestamp()) * 1000)::bigint",
        .lock_rows_sql = " FOR UPDATE",
};
