/*
 * tests/lib/test_db.c — SQLite helpers: a fresh file gets every migration and the
 * application id; reopening migrates only what is missing; files from newer code, from
 * other programs, and non-SQLite files are refused with a clear error; a failing
 * migration leaves the file at its previous version.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/db.h"

#define APP_ID 0x4C545453 /* "LTTS": a test file kind */

static const char *const migrations[] = {
    "CREATE TABLE step (step INTEGER PRIMARY KEY, n INTEGER NOT NULL) STRICT;",
    "ALTER TABLE step ADD COLUMN note TEXT;",
    "CREATE VIEW step_view AS SELECT step, n, note FROM step;",
};

static const lt_db_schema schema_v2 = {APP_ID, "test database", migrations, 2, 0};
static const lt_db_schema schema_v3 = {APP_ID, "test database", migrations, 3, 0};

static char path[64];

static int setup(void **state) {
    (void)state;
    snprintf(path, sizeof path, "/tmp/lt-test-db-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    unlink(path); /* lt_db_open creates it */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(path);
    return 0;
}

static int query_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void test_fresh_file_runs_all_migrations(void **state) {
    (void)state;
    sqlite3 *db;
    lt_error err;
    assert_int_equal(lt_db_open(&db, path, &schema_v2, LT_DB_CREATE, &err), LT_OK);
    assert_int_equal(query_int(db, "PRAGMA application_id"), APP_ID);
    assert_int_equal(query_int(db, "PRAGMA user_version"), 2);
    assert_int_equal(query_int(db, "PRAGMA foreign_keys"), 1);
    assert_int_equal(lt_db_exec(db, "INSERT INTO step VALUES (1, 10, 'a');", &err), LT_OK);
    /* STRICT: a wrong type is refused by SQLite itself */
    assert_int_equal(lt_db_exec(db, "INSERT INTO step VALUES (2, 'ten', 'b');", &err), LT_ERR_IO);
    assert_non_null(strstr(err.what, "cannot store TEXT value in INTEGER column"));
    lt_db_close(db);
}

static void test_old_file_is_migrated_forward(void **state) {
    (void)state;
    sqlite3 *db;
    lt_error err;
    int v = 0;
    assert_int_equal(lt_db_open(&db, path, &schema_v3, 0, &err), LT_OK);
    assert_int_equal(lt_db_user_version(db, &v, &err), LT_OK);
    assert_int_equal(v, 3);
    assert_int_equal(query_int(db, "SELECT n FROM step_view WHERE step = 1"), 10);
    lt_db_close(db);
    /* read-only open of a current file works */
    assert_int_equal(lt_db_open(&db, path, &schema_v3, LT_DB_READONLY, &err), LT_OK);
    lt_db_close(db);
}

static void test_newer_file_is_refused(void **state) {
    (void)state;
    sqlite3 *db = (sqlite3 *)1;
    lt_error err;
    assert_int_equal(lt_db_open(&db, path, &schema_v2, 0, &err), LT_ERR_VERSION);
    assert_null(db);
    assert_string_equal(err.where, path);
    assert_string_equal(err.what, "test database has schema version 3, newer than this program's 2");
    assert_non_null(strstr(err.hint, "upgrade"));
}

static void test_readonly_open_of_old_file_is_refused(void **state) {
    (void)state;
    char old[80];
    snprintf(old, sizeof old, "%s-old", path);
    sqlite3 *db;
    lt_error err;
    assert_int_equal(lt_db_open(&db, old, &schema_v2, LT_DB_CREATE, &err), LT_OK);
    lt_db_close(db);
    assert_int_equal(lt_db_open(&db, old, &schema_v3, LT_DB_READONLY, &err), LT_ERR_VERSION);
    assert_non_null(strstr(err.what, "needs migrating to 3"));
    /* a schema whose readers accept version 2 as it is: opened, not migrated */
    static const lt_db_schema lenient = {APP_ID, "test database", migrations, 3, 2};
    assert_int_equal(lt_db_open(&db, old, &lenient, LT_DB_READONLY, &err), LT_OK);
    assert_int_equal(query_int(db, "PRAGMA user_version"), 2);
    assert_true(lt_db_has_table(db, "step"));
    assert_false(lt_db_has_table(db, "step_view"));
    lt_db_close(db);
    /* ... but not an older one */
    static const lt_db_schema strict3 = {APP_ID, "test database", migrations, 3, 3};
    assert_int_equal(lt_db_open(&db, old, &strict3, LT_DB_READONLY, &err), LT_ERR_VERSION);
    unlink(old);
}

static void test_other_application_is_refused(void **state) {
    (void)state;
    char other[80];
    snprintf(other, sizeof other, "%s-other", path);
    sqlite3 *raw;
    assert_int_equal(sqlite3_open(other, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "PRAGMA application_id = 42; CREATE TABLE t(x);", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(raw);
    sqlite3 *db;
    lt_error err;
    assert_int_equal(lt_db_open(&db, other, &schema_v3, 0, &err), LT_ERR_VERSION);
    assert_non_null(strstr(err.what, "not a test database (application_id 0x0000002a"));
    /* an unrelated SQLite file without application id but with tables: also refused */
    assert_int_equal(sqlite3_open(other, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "PRAGMA application_id = 0;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(lt_db_open(&db, other, &schema_v3, 0, &err), LT_ERR_VERSION);
    unlink(other);
}

static void test_non_sqlite_file_is_refused(void **state) {
    (void)state;
    char junk[80];
    snprintf(junk, sizeof junk, "%s-junk", path);
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++) fputs("this is not a database at all. ", f);
    fclose(f);
    sqlite3 *db;
    lt_error err;
    assert_int_equal(lt_db_open(&db, junk, &schema_v3, 0, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "not a test database"));
    unlink(junk);
}

static void test_missing_file_without_create(void **state) {
    (void)state;
    sqlite3 *db;
    lt_error err;
    assert_int_equal(lt_db_open(&db, "/nonexistent/dir/x.db", &schema_v3, 0, &err), LT_ERR_IO);
    assert_string_equal(err.where, "/nonexistent/dir/x.db");
}

static void test_failing_migration_rolls_back(void **state) {
    (void)state;
    static const char *const bad[] = {
        "CREATE TABLE a (x INTEGER) STRICT;",
        "CREATE TABLE b (y INTEGER) STRICT; INSERT INTO no_such_table VALUES (1);",
    };
    static const lt_db_schema bad_schema = {APP_ID, "test database", bad, 2, 0};
    char p2[80];
    snprintf(p2, sizeof p2, "%s-bad", path);
    sqlite3 *db;
    lt_error err;
    assert_int_equal(lt_db_open(&db, p2, &bad_schema, LT_DB_CREATE, &err), LT_ERR_IO);
    assert_non_null(strstr(err.what, "migrating test database to schema version 2"));
    sqlite3 *raw;
    assert_int_equal(sqlite3_open(p2, &raw), SQLITE_OK);
    assert_int_equal(query_int(raw, "PRAGMA user_version"), 1);
    assert_int_equal(query_int(raw, "SELECT count(*) FROM sqlite_schema WHERE name = 'b'"), 0);
    sqlite3_close(raw);
    unlink(p2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_file_runs_all_migrations),
        cmocka_unit_test(test_old_file_is_migrated_forward),
        cmocka_unit_test(test_newer_file_is_refused),
        cmocka_unit_test(test_readonly_open_of_old_file_is_refused),
        cmocka_unit_test(test_other_application_is_refused),
        cmocka_unit_test(test_non_sqlite_file_is_refused),
        cmocka_unit_test(test_missing_file_without_create),
        cmocka_unit_test(test_failing_migration_rolls_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
