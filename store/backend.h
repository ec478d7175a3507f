/* SPDX-License-Identifier: MIT */
/*
 * What store.c asks of a database engine: a connection that migrates itself, runs
 * transactions, and runs one statement with bound parameters, calling back once per
 * result row. store.c holds every statement's SQL (in SQLite's dialect) and turns rows
 * into records; a backend is one file implementing a StoreBackend, plus its line in
 * store.c's registry. Backends see nothing of store.c, so the dependency runs one way.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

typedef struct StoreConn StoreConn; /* a backend's own connection state */

/* One bound parameter: text when is_text (NULL text: SQL NULL), else an integer
 * (STORE_NONE: SQL NULL). */
typedef struct StoreParam {
        bool is_text;
        const char *text;
        int64_t value;
} StoreParam;

#define STORE_TEXT(s) ((StoreParam){.is_text = true, .text = (s)})
#define STORE_INT(v) ((StoreParam){.value = (v)})

/* The current row of a statement, read through its backend (columns from 0). */
typedef struct StoreRow {
        int64_t (*get_int)(const struct StoreRow *row, int column); /* STORE_NONE: NULL */
        const char *(*get_text)(const struct StoreRow *row, int column); /* NULL: NULL */
        void *cursor;
        int index;
} StoreRow;

/* Called for each row; non-zero stops: -errno fails, > 0 is "enough" (returned). */
typedef int (*StoreRowCb)(const StoreRow *row, void *ctx);

#define STORE_SLOTS 32 /* statements a connection may keep prepared (slot numbers) */

typedef struct StoreBackend {
        /* Whether target (what --db names) is this backend's. */
        bool (*claims)(const char *target);
        /* Connects and applies migrations[have..version) in order, each as one text of
         * statements in SQLite's dialect; -EPROTO when the database has more than
         * n_migrations (a newer axctld's). On failure *ret_error (may be NULL) gets a
         * malloc'd message for the operator. */
        int (*open)(const char *target, const char *const *migrations, int n_migrations,
                    int version, StoreConn **ret_conn, char **ret_error);
        void (*close)(StoreConn *conn);
        const char *(*last_error)(StoreConn *conn);
        /* 0 where the database is what was opened (store_check_file). */
        int (*check_file)(StoreConn *conn);
        int (*begin)(StoreConn *conn);
        int (*commit)(StoreConn *conn);
        int (*rollback)(StoreConn *conn);
        /*
         * Runs sql (SQLite's dialect: ? and ?N parameters) with params, calling row for
         * each result row (row may be NULL). slot >= 0 keeps it prepared under that
         * number, for statements run often; -1 prepares it for this call only. The row
         * callback may run other statements. *ret_changes (may be NULL): rows written.
         */
        int (*run)(StoreConn *conn, int slot, const char *sql, const StoreParam *params,
                   int n_params, StoreRowCb row, void *ctx, int64_t *ret_changes);
        /* The WAL's figures so far (store_wal_stats; *ret is zeroed when called); NULL
         * where the engine keeps its log out of the process's sight. */
        void (*wal_stats)(StoreConn *conn, StoreWalStats *ret);
        /* Keep up to kib KiB of pages in this process (store_cache_hint); NULL where the
         * database server keeps the cache. */
        int64_t (*cache_hint)(StoreConn *conn, int64_t kib);
        /* SQL for the database's clock in wall ms (leases are timed by it), and what makes
         * a SELECT lock its rows until the transaction ends ("" where BEGIN does). */
        const char *now_ms_sql;
        const char *lock_rows_sql;
} StoreBackend;

extern const StoreBackend store_sqlite_backend;
extern const StoreBackend store_pg_backend;
