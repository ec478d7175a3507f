/* SPDX-License-Identifier: MIT */
/*
 * The SQLite backend of the store (backend.h): one database file in WAL mode with
 * synchronous=FULL, so a commit is on disk when it returns; the schema version in
 * PRAGMA user_version; statements prepared once and kept; the WAL checkpointed on a
 * thread of its own. SQLite result codes become negative errno values here and go no
 * further.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "util.h"

/*
 * SQLite checkpoints a WAL of 1,000 pages into the database file inside the commit that
 * filled it: on the controller's loop, a quarter of its writes and an fsync of the
 * database file, while every answer of that turn waits. Here a thread runs them on a
 * second connection, PASSIVE (it neither waits for the loop's commits nor blocks them).
 * The thread starts at the first full WAL, so a short-lived store (a token command)
 * starts none. Should it fall behind (a writer that never pauses lets no checkpoint
 * finish before the next commit), the commit that takes the WAL past twice the threshold
 * waits for the thread's checkpoint and checkpoints the rest itself, as SQLite would.
 */
#define CHECKPOINT_PAGES 1000
#define CHECKPOINT_INLINE_PAGES (2 * CHECKPOINT_PAGES)

typedef struct Checkpointer {
        sqlite3 *db; /* NULL: none to be had, and commits checkpoint */
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake, idle;
        bool ready, started, wanted, running, stopping;
        uint64_t on_thread, on_commit; /* checkpoints that copied pages, for /metrics */
        /* Read and written by the store's thread only (the WAL hook): the WAL's length
         * after the last commit, and the pages commits wrote into it. */
        int wal_pages;
        uint64_t pages_written;
} Checkpointer;

struct StoreConn {
        sqlite3 *db;
        Checkpointer checkpointer;
        sqlite3_stmt *stmts[STORE_SLOTS];
        char *path;
        /* The file SQLite opened, held to compare with what the path names now. Closed
         * only after SQLite's own descriptor: closing any descriptor of the file drops
         * the process's POSIX locks on it, SQLite's included. */
        int file_fd;
        /* The failure a rollback followed: store_last_error's message until the next
         * statement, since ROLLBACK replaces SQLite's own. */
        char failure[256];
};

/* Maps SQLite's result codes onto errno values, so callers never see SQLite codes. */
static int errno_from_sqlite(int rc) {
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        default:
                return -EIO;
        }
}

static bool sqlite_claims(const char *target) {
        (void) target;
        return true; /* any path: the backend of last resort */
}

static const char *sqlite_last_error(StoreConn *c) {
        if (!c || !c->db)
                return "no database";
        return c->failure[0] ? c->failure : sqlite3_errmsg(c->db);
}

static int exec(StoreConn *c, const char *sql) {
        c->failure[0] = '\0';
        return errno_from_sqlite(sqlite3_exec(c->db, sql, NULL, NULL, NULL));
}

/* After a failure: its message stays. A ROLLBACK that runs says "not an error", and
 * one after SQLite rolled back itself (a COMMIT on a full disk) fails with "cannot
 * rollback - no transaction is active", so it runs only while a transaction is open. */
static int sqlite_rollback(StoreConn *c) {
        char failure[sizeof(c->failure)];
        snprintf(failure, sizeof(failure), "%s", sqlite_last_error(c));
        int r = sqlite3_get_autocommit(c->db) ? 0 : exec(c, "ROLLBACK");
        memcpy(c->failure, failure, sizeof(failure));
        return r;
}

/* Applies the migrations after the database's own, up to the first `version`. */
static int migrate(StoreConn *c, const char *const *migrations, int n_migrations,
                   int version_wanted) {
        sqlite3_stmt *st;
        int rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return errno_from_sqlite(rc);
        int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
        sqlite3_finalize(st);
        if (version > n_migrations)
                return -EPROTO; /* written by a newer axctld */
        for (int v = version; v < version_wanted; v++) {
                int r = exec(c, "BEGIN IMMEDIATE");
                if (r < 0)
                        return r;
                r = exec(c, migrations[v]);
                if (r >= 0) {
                        _cleanup_free_ char *set = xasprintf("PRAGMA user_version = %d", v + 1);
                        r = exec(c, set);
                }
                if (r < 0) {
                        sqlite_rollback(c);
                        return r;
                }
                if ((r = exec(c, "COMMIT")) < 0)
                        return r;
        }
        return 0;
}

/*
 * Narrows an existing file of path+suffix to 0600 (owner's bits only), by name: closing
 * any descriptor of a file drops every POSIX lock this process holds on it, SQLite's
 * included, when another Store of this process has the database open (a leader's lease
 * renewed while its state loads), and another process then takes the -shm for unused and
 * truncates it under our mapping. O_PATH descriptors are the exception (the identity
 * descriptor below); AT_SYMLINK_NOFOLLOW leaves a link alone.
 */
static void narrow_mode(const char *path, const char *suffix) {
        _cleanup_free_ char *name = xasprintf("%s%s", path, suffix);
        struct stat st;
        if (lstat(name, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07177) != 0)
                (void) fchmodat(AT_FDCWD, name, st.st_mode & 0600, AT_SYMLINK_NOFOLLOW);
}

/*
 * Keeps the database private to the controller's account whatever the umask: creates it
 * 0600 (SQLite would make it 0644 less the umask, and it makes the -wal and -shm files
 * with the database's own mode), and narrows a database an older axctld or an operator
 * left wider. It holds every job's environment and the token hashes. Any error is left
 * for SQLite to report.
 */
static void create_private(const char *path) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        if (fd >= 0) {
                (void) fchmod(fd, 0600);
                close(fd);
                return;
        }
        narrow_mode(path, "");
        narrow_mode(path, "-wal");
        narrow_mode(path, "-shm");
}

/* One PASSIVE checkpoint; whether it copied any page (a reader such as a backup can
 * hold it back, and then it succeeds having copied nothing). */
static bool checkpoint_passive(sqlite3 *db, const char *schema) {
        int log_frames = 0, copied_frames = 0;
        return sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
                                         &copied_frames) == SQLITE_OK &&
               copied_frames > 0;
}

static void *checkpoint_loop(void *arg) {
        Checkpointer *cp = arg;
        pthread_mutex_lock(&cp->lock);
        for (;;) {
                while (!cp->wanted && !cp->stopping)
                        pthread_cond_wait(&cp->wake, &cp->lock);
                if (cp->stopping)
                        break;
                cp->wanted = false;
                cp->running = true;
                pthread_mutex_unlock(&cp->lock);
                bool copied = checkpoint_passive(cp->db, NULL);
                pthread_mutex_lock(&cp->lock);
                cp->running = false;
                pthread_cond_signal(&cp->idle);
                cp->on_thread += copied;
        }
        pthread_mutex_unlock(&cp->lock);
        return NULL;
}

/* Where the checkpointer cannot be had: the commits checkpoint, as SQLite would. */
static void checkpointer_give_up(Checkpointer *cp, const char *missing) {
        log_warning("no %s for SQLite's checkpoints: commits run them", missing);
        sqlite3_close_v2(cp->db);
        cp->db = NULL;
}

/* Asks the thread for a checkpoint, starting it the first time; false where it cannot
 * run (then the commit checkpoints). */
static bool checkpoint_wanted(Checkpointer *cp) {
        pthread_mutex_lock(&cp->lock);
        if (!cp->started && cp->db) {
                cp->started = pthread_create(&cp->thread, NULL, checkpoint_loop, cp) == 0;
                if (!cp->started)
                        checkpointer_give_up(cp, "thread");
        }
        bool started = cp->started;
        if (started) {
                cp->wanted = true;
                pthread_cond_signal(&cp->wake);
        }
        pthread_mutex_unlock(&cp->lock);
        return started;
}

/* SQLite's WAL hook, after each commit of the store's connection (on its thread). */
static int wal_committed(void *ctx, sqlite3 *db, const char *schema, int pages) {
        Checkpointer *cp = ctx;
        /* A shorter WAL than after the last commit was restarted from its beginning (one
         * restarted and grown past the old length in one commit counts short: commits
         * are tens of pages, the WAL a thousand). */
        cp->pages_written += (uint64_t) (pages >= cp->wal_pages ? pages - cp->wal_pages : pages);
        cp->wal_pages = pages;
        if (pages < CHECKPOINT_PAGES || (pages < CHECKPOINT_INLINE_PAGES && checkpoint_wanted(cp)))
                return SQLITE_OK;
        /* Holds the lock through the checkpoint: one of the thread's would make it
         * return SQLITE_BUSY, and the WAL could not be reused at the next commit. */
        pthread_mutex_lock(&cp->lock);
        while (cp->running)
                pthread_cond_wait(&cp->idle, &cp->lock);
        cp->on_commit += checkpoint_passive(db, schema);
        pthread_mutex_unlock(&cp->lock);
        return SQLITE_OK;
}

static void checkpointer_init(Checkpointer *cp, StoreConn *c) {
        pthread_mutex_init(&cp->lock, NULL);
        pthread_cond_init(&cp->wake, NULL);
        pthread_cond_init(&cp->idle, NULL);
        /* Two connections on two threads need SQLite's own mutexes. */
        if (!sqlite3_threadsafe() ||
            sqlite3_open_v2(c->path, &cp->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
                    SQLITE_OK ||
            sqlite3_exec(cp->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK)
                checkpointer_give_up(cp, "second connection");
        sqlite3_wal_hook(c->db, wal_committed, cp);
        cp->ready = true;
}

/* Before the store's own connection closes: the last one to close checkpoints the
 * whole WAL and removes it. */
static void checkpointer_stop(Checkpointer *cp, sqlite3 *store_db) {
        if (!cp->ready)
                return;
        sqlite3_wal_hook(store_db, NULL, NULL);
        pthread_mutex_lock(&cp->lock);
        cp->stopping = true;
        pthread_cond_signal(&cp->wake);
        pthread_mutex_unlock(&cp->lock);
        if (cp->started)
                pthread_join(cp->thread, NULL);
        sqlite3_close_v2(cp->db);
        pthread_cond_destroy(&cp->wake);
        pthread_cond_destroy(&cp->idle);
        pthread_mutex_destroy(&cp->lock);
}

static void sqlite_close(StoreConn *c) {
        if (!c)
                return;
        checkpointer_stop(&c->checkpointer, c->db);
        for (int i = 0; i < STORE_SLOTS; i++)
                sqlite3_finalize(c->stmts[i]);
        sqlite3_close_v2(c->db);
        if (c->file_fd >= 0)
                close(c->file_fd);
        free(c->path);
        free(c);
}

static int sqlite_open(const char *path, const char *const *migrations, int n_migrations,
                       int version, StoreConn **ret_conn, char **ret_error) {
        create_private(path);
        StoreConn *c = xcalloc(1, sizeof(StoreConn));
        c->path = xstrdup(path);
        c->file_fd = -1;
        int rc = sqlite3_open_v2(path, &c->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 NULL);
        int r = errno_from_sqlite(rc);
        if (r < 0)
                goto fail;
        sqlite3_busy_timeout(c->db, 5000);
        /* WAL + FULL: a commit is on disk when it returns, so a 2xx means durable. */
        if ((r = exec(c, "PRAGMA journal_mode = WAL")) < 0 ||
            (r = exec(c, "PRAGMA synchronous = FULL")) < 0 ||
            (r = exec(c, "PRAGMA foreign_keys = ON")) < 0)
                goto fail;
        /* At once, so that both connections open the same file. */
        checkpointer_init(&c->checkpointer, c);
        if ((r = migrate(c, migrations, n_migrations, version)) < 0)
                goto fail;
        c->file_fd = open(path, O_PATH | O_CLOEXEC); /* see narrow_mode */
        if (c->file_fd < 0) {
                r = -errno;
                goto fail;
        }
        *ret_conn = c;
        return 0;
fail:
        if (ret_error)
                *ret_error = r == -EPROTO ? xstrdup("the database is of a newer axctld")
                             : c->db      ? xstrdup(sqlite_last_error(c))
                                          : xstrdup(strerror(-r));
        sqlite_close(c);
        return r;
}

static int sqlite_check_file(StoreConn *c) {
        struct stat open_st, path_st;
        if (fstat(c->file_fd, &open_st) < 0 || stat(c->path, &path_st) < 0)
                return -errno;
        /* A path that names the open file is one of its links, so this also covers
         * st_nlink == 0 (deleted): its path then names nothing (ENOENT) or another file. */
        if (path_st.st_dev != open_st.st_dev || path_st.st_ino != open_st.st_ino)
                return -ESTALE;
        return 0;
}

static int sqlite_begin(StoreConn *c) {
        return exec(c, "BEGIN IMMEDIATE");
}

static int sqlite_commit(StoreConn *c) {
        return exec(c, "COMMIT");
}

static int64_t row_int(const StoreRow *row, int i) {
        sqlite3_stmt *st = row->cursor;
        return sqlite3_column_type(st, i) == SQLITE_NULL ? STORE_NONE : sqlite3_column_int64(st, i);
}

static const char *row_text(const StoreRow *row, int i) {
        return (const char *) sqlite3_column_text(row->cursor, i);
}

static void bind(sqlite3_stmt *st, int i, const StoreParam *p) {
        if (p->is_text ? !p->text : p->value == STORE_NONE)
                sqlite3_bind_null(st, i);
        else if (p->is_text)
                sqlite3_bind_text(st, i, p->text, -1, SQLITE_STATIC);
        else
                sqlite3_bind_int64(st, i, p->value);
}

static int sqlite_run(StoreConn *c, int slot, const char *sql, const StoreParam *params,
                      int n_params, StoreRowCb row, void *ctx, int64_t *ret_changes) {
        sqlite3_stmt *st = slot >= 0 && slot < STORE_SLOTS ? c->stmts[slot] : NULL;
        bool keep = true;
        c->failure[0] = '\0';
        if (st && sqlite3_stmt_busy(st))
                st = NULL; /* run again from one of its own row callbacks */
        if (!st) {
                keep = slot >= 0 && slot < STORE_SLOTS && !c->stmts[slot];
                int rc = sqlite3_prepare_v3(c->db, sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0,
                                            &st, NULL);
                if (rc != SQLITE_OK)
                        return errno_from_sqlite(rc);
                if (keep)
                        c->stmts[slot] = st;
        }
        for (int i = 0; i < n_params; i++)
                bind(st, i + 1, &params[i]);
        StoreRow current = {.get_int = row_int, .get_text = row_text, .cursor = st};
        int rc, r = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (row && (r = row(&current, ctx)) != 0)
                        break;
                current.index++;
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = errno_from_sqlite(rc);
        if (r >= 0 && ret_changes)
                *ret_changes = sqlite3_changes64(c->db);
        if (keep) {
                sqlite3_reset(st);
                sqlite3_clear_bindings(st);
        } else
                sqlite3_finalize(st);
        return r;
}

static void sqlite_wal_stats(StoreConn *c, StoreWalStats *ret) {
        Checkpointer *cp = &c->checkpointer;
        if (!cp->ready) /* store_wal_stats has zeroed *ret */
                return;
        ret->pages_written = cp->pages_written;
        pthread_mutex_lock(&cp->lock);
        ret->checkpoints_on_thread = cp->on_thread;
        ret->checkpoints_on_commit = cp->on_commit;
        pthread_mutex_unlock(&cp->lock);
}

/* SQLite's own default cache size, in KiB (SQLITE_DEFAULT_CACHE_SIZE, -2000). */
#define SQLITE_CACHE_DEFAULT_KIB 2000

static int64_t sqlite_cache_hint(StoreConn *c, int64_t kib) {
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%lld",
                 (long long) (kib > SQLITE_CACHE_DEFAULT_KIB ? kib : SQLITE_CACHE_DEFAULT_KIB));
        int r = exec(c, sql);
        if (r < 0)
                return r;
        sqlite3_stmt *st;
        r = errno_from_sqlite(sqlite3_prepare_v2(c->db, "PRAGMA cache_size", -1, &st, NULL));
        if (r < 0)
                return r;
        /* Negative: KiB, as set above. */
        int rc = sqlite3_step(st);
        int64_t now = rc == SQLITE_ROW            ? -sqlite3_column_int64(st, 0)
                      : errno_from_sqlite(rc) < 0 ? errno_from_sqlite(rc)
                                                  : -EIO; /* no row */
        sqlite3_finalize(st);
        return now;
}

const StoreBackend store_sqlite_backend = {
        .claims = sqlite_claims,
        .open = sqlite_open,
        .close = sqlite_close,
        .last_error = sqlite_last_error,
        .check_file = sqlite_check_file,
        .begin = sqlite_begin,
        .commit = sqlite_commit,
        .rollback = sqlite_rollback,
        .run = sqlite_run,
        .wal_stats = sqlite_wal_stats,
        .cache_hint = sqlite_cache_hint,
        .now_ms_sql = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
        .lock_rows_sql = "",
};
