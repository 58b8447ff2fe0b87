/*
 * lib/db.c — SQLite open/identify/migrate helpers (see db.h).
 */
#include "lib/db.h"

#include <string.h>

lt_status lt_db_fail(sqlite3 *db, lt_error *err, const char *what) {
    const char *file = db ? sqlite3_db_filename(db, "main") : NULL;
    int code = db ? sqlite3_extended_errcode(db) : SQLITE_ERROR;
    lt_status st = (code & 0xff) == SQLITE_NOTADB ? LT_ERR_INPUT : LT_ERR_IO;
    return lt_fail(err, st, file && file[0] ? file : NULL, "%s: %s", what,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(code));
}

lt_status lt_db_exec(sqlite3 *db, const char *sql, lt_error *err) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        const char *file = sqlite3_db_filename(db, "main");
        int code = sqlite3_extended_errcode(db);
        lt_status st = lt_fail(err, (code & 0xff) == SQLITE_NOTADB ? LT_ERR_INPUT : LT_ERR_IO,
                               file && file[0] ? file : NULL, "SQL failed: %s",
                               msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return st;
    }
    return LT_OK;
}

lt_status lt_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **stmt, lt_error *err) {
    if (sqlite3_prepare_v2(db, sql, -1, stmt, NULL) != SQLITE_OK) {
        *stmt = NULL;
        return lt_db_fail(db, err, "cannot prepare statement");
    }
    return LT_OK;
}

static lt_status pragma_int(sqlite3 *db, const char *pragma, int *value, lt_error *err) {
    sqlite3_stmt *stmt;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA %s", pragma);
    lt_status st = lt_db_prepare(db, sql, &stmt, err);
    if (st != LT_OK) return st;
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        *value = sqlite3_column_int(stmt, 0);
    } else {
        st = lt_db_fail(db, err, "cannot read database header");
    }
    sqlite3_finalize(stmt);
    return st;
}

lt_status lt_db_user_version(sqlite3 *db, int *version, lt_error *err) {
    return pragma_int(db, "user_version", version, err);
}

static lt_status count_objects(sqlite3 *db, int *count, lt_error *err) {
    sqlite3_stmt *stmt;
    lt_status st = lt_db_prepare(db, "SELECT count(*) FROM sqlite_schema", &stmt, err);
    if (st != LT_OK) return st;
    if (sqlite3_step(stmt) == SQLITE_ROW)
        *count = sqlite3_column_int(stmt, 0);
    else
        st = lt_db_fail(db, err, "cannot read database schema");
    sqlite3_finalize(stmt);
    return st;
}

static lt_status migrate(sqlite3 *db, const lt_db_schema *schema, int from, lt_error *err) {
    for (int v = from; v < schema->count; v++) {
        lt_status st = lt_db_exec(db, "BEGIN IMMEDIATE", err);
        if (st != LT_OK) return st;
        char bump[128];
        snprintf(bump, sizeof bump, "PRAGMA application_id = %ld; PRAGMA user_version = %d;",
                 (long)schema->application_id, v + 1);
        st = lt_db_exec(db, schema->migrations[v], err);
        if (st == LT_OK) st = lt_db_exec(db, bump, err);
        if (st != LT_OK) {
            lt_error_prefix(err, "migrating %s to schema version %d: ", schema->name, v + 1);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return st;
        }
        st = lt_db_exec(db, "COMMIT", err);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

int lt_db_has_table(sqlite3 *db, const char *name) {
    sqlite3_stmt *q = NULL;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_schema WHERE name = ?1", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
        yes = sqlite3_step(q) == SQLITE_ROW;
    }
    sqlite3_finalize(q);
    return yes;
}

lt_status lt_db_open(sqlite3 **out, const char *path, const lt_db_schema *schema, int flags,
                     lt_error *err) {
    *out = NULL;
    int readonly = (flags & LT_DB_READONLY) != 0;
    int oflags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
    if (!readonly && (flags & LT_DB_CREATE)) oflags |= SQLITE_OPEN_CREATE;
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, oflags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        lt_status st = lt_fail(err, LT_ERR_IO, path, "cannot open %s: %s", schema->name,
                               db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        if (rc == SQLITE_CANTOPEN && !(flags & LT_DB_CREATE))
            lt_error_hint(err, "check the path; the file must already exist");
        sqlite3_close(db);
        return st;
    }
    lt_status st = lt_db_exec(db,
                              "PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000; "
                              "PRAGMA temp_store = MEMORY;",
                              err);
    if (st == LT_OK && !readonly) st = lt_db_exec(db, "PRAGMA synchronous = FULL;", err);
    if (st == LT_OK && !readonly && (flags & LT_DB_WAL))
        st = lt_db_exec(db, "PRAGMA journal_mode = WAL;", err);

    int app_id = 0, version = 0, objects = 0;
    if (st == LT_OK) st = pragma_int(db, "application_id", &app_id, err);
    if (st == LT_OK) st = pragma_int(db, "user_version", &version, err);
    if (st == LT_OK) st = count_objects(db, &objects, err);
    if (st != LT_OK) {
        if (err && err->status == LT_ERR_INPUT) {
            lt_fail(err, LT_ERR_INPUT, path, "not a %s (not an SQLite database)", schema->name);
        }
        sqlite3_close(db);
        return st;
    }

    int fresh = app_id == 0 && version == 0 && objects == 0;
    if (!fresh && app_id != schema->application_id) {
        st = lt_fail(err, LT_ERR_VERSION, path, "not a %s (application_id 0x%08x, expected 0x%08x)",
                     schema->name, (unsigned)app_id, (unsigned)schema->application_id);
    } else if (version > schema->count) {
        st = lt_fail(err, LT_ERR_VERSION, path,
                     "%s has schema version %d, newer than this program's %d", schema->name,
                     version, schema->count);
        lt_error_hint(err, "it was written by a newer longtail; upgrade to read it");
    } else if (version < schema->count && readonly && !fresh && schema->min_read > 0 && version >= schema->min_read) {
        st = LT_OK; /* read as it is: the reader checks for the later tables (lt_db_has_table) */
    } else if (version < schema->count && readonly) {
        st = lt_fail(err, LT_ERR_VERSION, path,
                     "%s has schema version %d and needs migrating to %d", schema->name,
                     fresh ? 0 : version, schema->count);
        lt_error_hint(err, fresh ? "the file is empty; create it first"
                                 : "open it once read-write (e.g. rerun the build) to migrate");
    } else if (version < schema->count) {
        st = migrate(db, schema, version, err);
    }
    if (st != LT_OK) {
        sqlite3_close(db);
        return st;
    }
    *out = db;
    return LT_OK;
}

void lt_db_close(sqlite3 *db) {
    if (db) sqlite3_close(db);
}
