/*
 * tests/dataprep/test_parquet.c — the parts of the Parquet reader that need no pyarrow
 * (tests/dataprep/parquet_reference.py checks real files against pyarrow):
 *   - the Thrift compact protocol reader (dataprep/parquet_thrift.h) on bytes written by
 *     hand from the spec's encoding rules (Apache Thrift thrift-compact-protocol.md): zigzag
 *     varints, field id deltas and long-form ids, bool fields, binary, lists with the short
 *     and the long size, skipping nested structs, lists and maps; refusals: data that ends
 *     inside a value (marked short_input), a list longer than the data, a varint over 64
 *     bits, nesting past the depth limit, an unknown type;
 *   - files too damaged to have a footer (empty, short, wrong magic at either end, a footer
 *     length that does not fit, an encrypted footer): LT_ERR_INPUT with WHERE "NAME:
 *     footer", through lt_reader_open_mem with format parquet and auto;
 *   - lt_parquet_row_groups on a missing file (LT_ERR_IO) and a damaged one (LT_ERR_INPUT).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/testutil.h" /* lt_test_tmpdir_create */

#include "dataprep/parquet_thrift.h"
#include "dataprep/reader.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "parquet");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

/* ------------------------------------------------------------------ Thrift */

static void test_thrift_fields(void **state) {
    (void)state;
    /* struct { 1: i32 150, 2: bool true, 4: binary "ab", 20: i64 -2, 21: list<i32> [1, -1],
     *          22: list<byte> of 16 (long size form) }
     * 0x15 = delta 1, type 5 (i32); 150 zigzag = 300 = 0xAC 0x02; 0x11 = delta 1, TRUE;
     * 0x28 = delta 2, BINARY; 0x06 then id zigzag(20) = 40 = 0x28 (long form, I64), value
     * zigzag(-2) = 3; 0x19 = delta 1, LIST: 0x25 = 2 elements of I32 (zigzag 2, 1);
     * 0x19 LIST 0xF3 = long size, BYTE, then varint 16 */
    uint8_t b[64] = {0x15, 0xAC, 0x02, 0x11, 0x28, 0x02, 'a',  'b',  0x06,
                     0x28, 0x03, 0x19, 0x25, 0x02, 0x01, 0x19, 0xF3, 0x10};
    size_t n = 18;
    for (int i = 0; i < 16; i++) b[n++] = (uint8_t)i;
    b[n++] = 0x00; /* STOP */
    lt_thrift t;
    lt_thrift_init(&t, b, n);
    int16_t last = 0, id;
    int ty;
    assert_true(lt_thrift_field(&t, &last, &id, &ty));
    assert_int_equal(id, 1);
    assert_int_equal(lt_thrift_int(&t, ty), 150);
    assert_true(lt_thrift_field(&t, &last, &id, &ty));
    assert_int_equal(id, 2);
    assert_true(lt_thrift_bool(&t, ty));
    assert_true(lt_thrift_field(&t, &last, &id, &ty));
    assert_int_equal(id, 4);
    const uint8_t *p;
    size_t len;
    lt_thrift_binary(&t, ty, &p, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(p, "ab", 2);
    assert_true(lt_thrift_field(&t, &last, &id, &ty));
    assert_int_equal(id, 20);
    assert_int_equal(ty, LT_TT_I64);
    assert_int_equal(lt_thrift_int(&t, ty), -2);
    assert_true(lt_thrift_field(&t, &last, &id, &ty));
    assert_int_equal(id, 21);
    int ety;
    uint32_t cnt;
    lt_thrift_list(&t, ty, &ety, &cnt);
    assert_int_equal(ety, LT_TT_I32);
    assert_int_equal(cnt, 2);
    assert_int_equal(lt_thrift_int(&t, ety), 1);
    assert_int_equal(lt_thrift_int(&t, ety), -1);
    assert_true(lt_thrift_field(&t, &last, &id, &ty));
    assert_int_equal(id, 22);
    lt_thrift_skip(&t, ty, false); /* the long-form list, skipped */
    assert_false(lt_thrift_field(&t, &last, &id, &ty));
    assert_false(t.failed);
    assert_ptr_equal(t.p, b + n);
}

static void test_thrift_skip_nested(void **state) {
    (void)state;
    /* struct { 1: struct { 1: map<binary,i32> {"k": 7}, 2: set<bool> [true, false] },
     *          2: double, 3: bool false }, then i32 9 after the outer STOP.
     * map: varint size 1, then 0x85 = key BINARY, value I32; set: 0x21 = 2 elements of
     * the bool type (1), one byte each */
    const uint8_t b[] = {0x1C,                                       /* field 1, STRUCT */
                         0x1B, 0x01, 0x85, 0x01, 'k', 0x0E,          /* field 1, MAP {"k": 7} */
                         0x1A, 0x21, 0x01, 0x02,                     /* field 2, SET of 2 bools */
                         0x00,                                       /* end of the inner struct */
                         0x17, 1,    2,    3,    4,   5,    6, 7, 8, /* field 2, DOUBLE */
                         0x12,                                       /* field 3, FALSE */
                         0x00,                                       /* STOP */
                         0x12};                                      /* zigzag(9) = 18 */
    lt_thrift t;
    lt_thrift_init(&t, b, sizeof b);
    lt_thrift_skip(&t, LT_TT_STRUCT, false);
    assert_false(t.failed);
    assert_int_equal(lt_thrift_int(&t, LT_TT_I32), 9);
    assert_false(t.failed);
}

static void test_thrift_refusals(void **state) {
    (void)state;
    lt_thrift t;
    /* a binary whose length runs past the data: short input */
    const uint8_t bin[] = {0x05, 'a', 'b'};
    const uint8_t *p;
    size_t n;
    lt_thrift_init(&t, bin, sizeof bin);
    lt_thrift_binary(&t, LT_TT_BINARY, &p, &n);
    assert_true(t.failed);
    assert_true(t.short_input);
    assert_null(p);
    /* a list of 1000 elements in 3 bytes */
    const uint8_t list[] = {0xF5, 0xE8, 0x07};
    int ety;
    uint32_t cnt;
    lt_thrift_init(&t, list, sizeof list);
    lt_thrift_list(&t, LT_TT_LIST, &ety, &cnt);
    assert_true(t.failed);
    assert_int_equal(cnt, 0);
    /* a varint of 11 bytes */
    const uint8_t vi[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    lt_thrift_init(&t, vi, sizeof vi);
    lt_thrift_int(&t, LT_TT_I64);
    assert_true(t.failed);
    assert_false(t.short_input);
    /* an i32 out of range (zigzag 2^32) */
    const uint8_t big[] = {0x80, 0x80, 0x80, 0x80, 0x10};
    lt_thrift_init(&t, big, sizeof big);
    lt_thrift_int(&t, LT_TT_I32);
    assert_true(t.failed);
    /* structs nested past the depth limit: each 0x1C opens field 1 of type STRUCT */
    uint8_t deep[2 * LT_THRIFT_MAX_DEPTH + 8];
    memset(deep, 0x1C, sizeof deep);
    lt_thrift_init(&t, deep, sizeof deep);
    lt_thrift_skip(&t, LT_TT_STRUCT, false);
    assert_true(t.failed);
    assert_false(t.short_input);
    assert_non_null(strstr(t.why, "nested too deep"));
    /* an unknown field type (14) */
    const uint8_t unk[] = {0x1E, 0x00};
    int16_t last = 0, id;
    int ty;
    lt_thrift_init(&t, unk, sizeof unk);
    assert_false(lt_thrift_field(&t, &last, &id, &ty));
    assert_true(t.failed);
    /* after a failure every read gives zero */
    assert_int_equal(lt_thrift_int(&t, LT_TT_I32), 0);
}

/* ------------------------------------------------------------------ damaged files */

static void expect_footer_damage(const void *data, size_t len, lt_format fmt, const char *what) {
    lt_reader_opts o = {.format = fmt};
    lt_reader *r = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_reader_open_mem(&r, data, len, "bad.parquet", &o, &err);
    assert_int_equal(st, LT_ERR_INPUT);
    assert_null(r);
    assert_string_equal(err.where, "bad.parquet: footer");
    if (strstr(err.what, what) == NULL) fail_msg("'%s' does not say '%s'", err.what, what);
}

static void test_damaged_footers(void **state) {
    (void)state;
    uint8_t f[64];
    memset(f, 0, sizeof f);
    memcpy(f, "PAR1", 4);
    memcpy(f + 60, "PAR1", 4);
    f[56] = 10; /* footer length 10: bytes 46..55, all zero: a struct with no fields */
    expect_footer_damage("", 0, LT_FMT_PARQUET, "too short");
    expect_footer_damage("PAR1PAR1", 8, LT_FMT_PARQUET, "too short");
    expect_footer_damage(f, sizeof f, LT_FMT_PARQUET, "the footer lacks the schema");
    expect_footer_damage(f, sizeof f, LT_FMT_AUTO, "the footer lacks the schema"); /* detected by PAR1 */
    uint8_t g[64];
    memcpy(g, f, sizeof g);
    memcpy(g, "PAR2", 4);
    expect_footer_damage(g, sizeof g, LT_FMT_PARQUET, "does not start with the Parquet magic");
    memcpy(g, f, sizeof g);
    memcpy(g + 60, "PARE", 4);
    expect_footer_damage(g, sizeof g, LT_FMT_PARQUET, "encrypted");
    memcpy(g, f, sizeof g);
    g[63] = '0';
    expect_footer_damage(g, sizeof g, LT_FMT_PARQUET, "does not end with the Parquet magic");
    memcpy(g, f, sizeof g);
    g[56] = 53; /* 53 > 64 - 12 */
    expect_footer_damage(g, sizeof g, LT_FMT_PARQUET, "does not fit");
    memcpy(g, f, sizeof g);
    g[56] = 0;
    expect_footer_damage(g, sizeof g, LT_FMT_PARQUET, "does not fit");
    memcpy(g, f, sizeof g);
    g[46] = 0x1F; /* field 1 of type 15: unknown */
    expect_footer_damage(g, sizeof g, LT_FMT_PARQUET, "bad Thrift in the footer");
}

static void test_row_groups_errors(void **state) {
    (void)state;
    uint32_t groups = 7;
    uint64_t rows = 7;
    lt_error err;
    char path[512];
    snprintf(path, sizeof path, "%s/missing.parquet", root);
    assert_int_equal(lt_parquet_row_groups(path, &groups, &rows, &err), LT_ERR_IO);
    assert_int_equal(groups, 0);
    assert_int_equal(rows, 0);
    snprintf(path, sizeof path, "%s/short.parquet", root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("PAR1 not parquet PAR1", f);
    fclose(f);
    assert_int_equal(lt_parquet_row_groups(path, &groups, &rows, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.where, "short.parquet: footer"));
    assert_int_equal(lt_parquet_row_groups(root, &groups, &rows, &err), LT_ERR_IO); /* a directory */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thrift_fields),     cmocka_unit_test(test_thrift_skip_nested),
        cmocka_unit_test(test_thrift_refusals),   cmocka_unit_test(test_damaged_footers),
        cmocka_unit_test(test_row_groups_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
