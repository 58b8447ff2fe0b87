/*
 * lib/db.h — SQLite helpers: open with the project's pragmas, identify files by
 * `application_id`, migrate them forward by `user_version`, refuse files newer than
 * the code.
 *
 * A schema is an application id (a 32-bit tag such as 0x4C54504C "LTPL" for plan
 * files), a human name used in errors, and an ordered list of migrations: migration i
 * (0-based) takes a file from user_version i to i+1, so a fresh file runs them all and
 * an old file runs the rest. Each migration runs in its own transaction together with
 * the user_version bump, so a crash leaves a file at a consistent version.
 *
 * Refusals (LT_ERR_VERSION, naming the path):
 *   - application_id is another program's (or another longtail file kind's);
 *   - user_version is newer than this code knows (hint: upgrade longtail);
 *   - a read-only open of a file that needs migrating (hint: open it read-write once), unless
 *     the schema's min_read accepts its version as it is.
 * A non-SQLite file is LT_ERR_INPUT; open/IO failures LT_ERR_IO.
 *
 * Pragmas on every open: foreign_keys=ON, busy_timeout=10 s, synchronous=FULL (our plan
 * files are built in a temp file and renamed: the data must be on disk before the
 * rename), temp_store=MEMORY; journal_mode=WAL only with LT_DB_WAL (local disks only —
 * WAL needs shared memory and does not work on network file systems).
 *
 * Thread-safety: one sqlite3 handle per thread (SQLite's own rule in multi-thread mode).
 */
#ifndef LT_DB_H
#define LT_DB_H

#include <sqlite3.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

typedef struct lt_db_schema {
    int32_t application_id;        /* PRAGMA application_id of this kind of file */
    const char *name;              /* e.g. "longtail plan database" */
    const char *const *migrations; /* migrations[i]: SQL taking version i to i+1 */
    int count;                     /* number of migrations = current schema version */
    int min_read;                  /* a read-only open accepts files of versions min_read..count - 1
                                      as they are (0: only the current version); the reader then
                                      checks for what the later migrations add (lt_db_has_table) */
} lt_db_schema;

enum {
    LT_DB_READONLY = 1 << 0, /* open existing, read-only */
    LT_DB_CREATE = 1 << 1,   /* create when missing (read-write) */
    LT_DB_WAL = 1 << 2,      /* journal_mode=WAL (local disks only) */
};

/* Open `path`, check and migrate it against `schema`. On error *out is NULL. */
lt_status lt_db_open(sqlite3 **out, const char *path, const lt_db_schema *schema, int flags,
                     lt_error *err);

/* Whether the database has a table or view named `name` (a file of an older version,
 * opened as it is, may lack what later migrations add). */
int lt_db_has_table(sqlite3 *db, const char *name);
/* Close; NULL-safe. Reports nothing (statements must be finalized first). */
void lt_db_close(sqlite3 *db);

/* The file's user_version (its schema version). */
lt_status lt_db_user_version(sqlite3 *db, int *version, lt_error *err);

/* Run SQL without results (may hold several statements). */
lt_status lt_db_exec(sqlite3 *db, const char *sql, lt_error *err);

/* Prepare one statement. */
lt_status lt_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **stmt, lt_error *err);

/* Fill `err` from SQLite's last error on `db`, prefixed with `what`. Returns LT_ERR_IO. */
lt_status lt_db_fail(sqlite3 *db, lt_error *err, const char *what);

#endif /* LT_DB_H */
