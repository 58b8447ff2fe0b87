/*
 * tests/train/test_safetensors.c — the safetensors reader and writer (train/io/safetensors.h).
 *
 * Writer -> reader round trip (matrices, a vector, a scalar, an empty tensor, metadata),
 * the exact bytes the writer produces for a small case (compact JSON, "__metadata__" first,
 * space padding to 8 bytes, as the reference implementation writes), F16 and BF16 widening
 * (every one of the 65536 F16 bit patterns against ldexp), and every malformed input —
 * short file, header length past the file or above 100 MB, not UTF-8, not JSON, not an
 * object, missing or mistyped fields, unknown or unsupported dtype, negative or non-integer
 * dimensions, a shape whose product overflows, a size that does not match the shape,
 * integers written as 2.0 or 8e0, a field given twice in an entry, offsets past the data,
 * reversed offsets, overlap, gap, trailing bytes, a duplicate name,
 * a NUL in a name, a non-string metadata value, a truncated file — gives LT_ERR_INPUT with
 * a message naming the problem.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/testutil.h"

#include "lib/bf16.h" /* lt_bf16_to_f32 */
#include "lib/files.h"
#include "train/io/safetensors.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "safetensors");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

/* A file image: 8-byte length, the header text, `data_len` bytes of data (0x11 each). */
static uint8_t *image(const char *header, size_t data_len, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + data_len;
    uint8_t *b = malloc(*n + 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, 0x11, data_len);
    return b;
}

/* Parse header + data_len bytes; expect LT_ERR_INPUT with every listed string in WHAT. */
static void expect_bad(const char *header, size_t data_len, ...) {
    size_t n;
    uint8_t *b = image(header, data_len, &n);
    lt_safetensors st;
    lt_error err;
    lt_status s = lt_safetensors_parse(&st, b, n, "bad.safetensors", &err);
    if (s != LT_ERR_INPUT) fail_msg("status %d for header %s: %s", s, header, s ? err.what : "accepted");
    assert_string_equal(err.where, "bad.safetensors");
    assert_true(err.hint[0] != '\0');
    assert_int_equal(st.n_tensors, 0);
    assert_null(st.doc);
    va_list ap;
    va_start(ap, data_len);
    for (const char *s2; (s2 = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err.what, s2)) fail_msg("'%s' not in '%s' (header %s)", s2, err.what, header);
    va_end(ap);
    free(b);
}

static void expect_good(const char *header, size_t data_len, size_t n_tensors) {
    size_t n;
    uint8_t *b = image(header, data_len, &n);
    lt_safetensors st;
    lt_error err;
    lt_status s = lt_safetensors_parse(&st, b, n, NULL, &err);
    if (s != LT_OK) fail_msg("rejected %s: %s", header, err.what);
    assert_int_equal(st.n_tensors, n_tensors);
    lt_safetensors_close(&st);
    free(b);
}

/* ------------------------------------------------------------------ round trip */

static void test_roundtrip(void **state) {
    (void)state;
    float a[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 65504};
    float v[4] = {0.25f, 0.5f, 0.75f, 1};
    float s = 42;
    lt_safetensors_out outs[4] = {
        {"model.a", 2, {2, 3}, a},
        {"vec", 1, {4}, v},
        {"scalar", 0, {0}, &s},
        {"empty", 2, {0, 5}, NULL},
    };
    const char *meta[] = {"format", "pt", "note", "h\u00e9llo \"quoted\""};
    char path[320];
    snprintf(path, sizeof path, "%s/rt.safetensors", root);
    lt_error err;
    assert_int_equal(lt_safetensors_write(path, outs, 4, meta, 2, &err), LT_OK);

    lt_safetensors st;
    assert_int_equal(lt_safetensors_open(&st, path, &err), LT_OK);
    assert_int_equal(st.n_tensors, 4);
    assert_string_equal(lt_safetensors_meta(&st, "format"), "pt");
    assert_string_equal(lt_safetensors_meta(&st, "note"), "h\u00e9llo \"quoted\"");
    assert_null(lt_safetensors_meta(&st, "absent"));
    /* header order = given order, offsets consecutive */
    assert_string_equal(st.tensors[0].name, "model.a");
    assert_string_equal(st.tensors[3].name, "empty");
    const lt_safetensors_tensor *t = lt_safetensors_find(&st, "model.a");
    assert_non_null(t);
    assert_int_equal(t->dtype, LT_SAFETENSORS_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->n_elems, 6);
    assert_int_equal(t->begin, 0);
    assert_int_equal(t->end, 24);
    float back[6];
    lt_safetensors_to_f32(t, back);
    assert_memory_equal(back, a, sizeof a);
    t = lt_safetensors_find(&st, "vec");
    assert_int_equal(t->begin, 24);
    lt_safetensors_to_f32(t, back);
    assert_memory_equal(back, v, sizeof v);
    t = lt_safetensors_find(&st, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->n_elems, 1);
    lt_safetensors_to_f32(t, back);
    assert_true(back[0] == 42);
    t = lt_safetensors_find(&st, "empty");
    assert_int_equal(t->n_elems, 0);
    assert_int_equal(t->begin, t->end);
    assert_null(lt_safetensors_find(&st, "nope"));
    lt_safetensors_close(&st);
    lt_safetensors_close(&st); /* idempotent */

    /* header length a multiple of 8, padded with spaces */
    char *bytes;
    size_t len;
    assert_int_equal(lt_read_file(path, &bytes, &len, &err), LT_OK);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = (h << 8) | (uint8_t)bytes[i];
    assert_int_equal(h % 8, 0);
    assert_int_equal(len, 8 + h + 24 + 16 + 4);
    assert_memory_equal(bytes + 8, "{\"__metadata__\":{\"format\":\"pt\"", 30);
    free(bytes);
}

/* The exact bytes of a one-tensor file, as safetensors' Rust serializer writes them. */
static void test_writer_bytes(void **state) {
    (void)state;
    float x[2] = {1.0f, -2.0f};
    lt_safetensors_out o = {"w", 1, {2}, x};
    char path[320];
    snprintf(path, sizeof path, "%s/bytes.safetensors", root);
    lt_error err;
    assert_int_equal(lt_safetensors_write(path, &o, 1, NULL, 0, &err), LT_OK);
    /* {"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 54 bytes: 2 spaces of padding */
    const char *json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ";
    uint8_t want[8 + 56 + 8] = {56, 0, 0, 0, 0, 0, 0, 0};
    memcpy(want + 8, json, 56);
    const uint8_t data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    memcpy(want + 64, data, 8);
    char *bytes;
    size_t len;
    assert_int_equal(lt_read_file(path, &bytes, &len, &err), LT_OK);
    assert_int_equal(len, sizeof want);
    assert_memory_equal(bytes, want, sizeof want);
    free(bytes);
    /* no tensors: "{}" and 6 spaces, no data */
    assert_int_equal(lt_safetensors_write(path, NULL, 0, NULL, 0, &err), LT_OK);
    assert_int_equal(lt_read_file(path, &bytes, &len, &err), LT_OK);
    assert_int_equal(len, 16);
    assert_memory_equal(bytes + 8, "{}      ", 8);
    free(bytes);
    lt_safetensors st;
    assert_int_equal(lt_safetensors_open(&st, path, &err), LT_OK);
    assert_int_equal(st.n_tensors, 0);
    lt_safetensors_close(&st);
}

/* ------------------------------------------------------------------ conversion */

static void test_f16_bf16(void **state) {
    (void)state;
    /* every F16 bit pattern against its value computed from the fields */
    for (uint32_t h = 0; h < 65536; h++) {
        int sign = (h >> 15) & 1, e = (h >> 10) & 0x1f, mant = h & 0x3ff;
        float got = lt_f16_to_f32((uint16_t)h);
        if (e == 0x1f) {
            if (mant == 0) assert_true(isinf(got) && (signbit(got) != 0) == sign);
            else assert_true(isnan(got));
            continue;
        }
        double want = e == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, e - 25);
        if (sign) want = -want;
        if ((double)got != want || (signbit(got) != 0) != sign) fail_msg("f16 %#06x: %a, want %a", h, got, want);
    }
    /* BF16 is the top half of the F32 bits */
    assert_true(lt_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(lt_bf16_to_f32(0xc049) == -3.140625f);
    assert_true(lt_bf16_to_f32(0x0001) == ldexpf(1.0f, -133));
    assert_true(isinf(lt_bf16_to_f32(0xff80)) && lt_bf16_to_f32(0xff80) < 0);

    /* through a file: F16 [1, -2, 2^-24, 65504], BF16 [1, -3.140625] */
    const char *hdr = "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}";
    size_t n;
    uint8_t *b = image(hdr, 12, &n);
    const uint8_t data[12] = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b, 0x80, 0x3f, 0x49, 0xc0};
    memcpy(b + n - 12, data, 12);
    lt_safetensors st;
    lt_error err;
    assert_int_equal(lt_safetensors_parse(&st, b, n, NULL, &err), LT_OK);
    float out[4];
    const lt_safetensors_tensor *t = lt_safetensors_find(&st, "h");
    assert_int_equal(t->dtype, LT_SAFETENSORS_F16);
    lt_safetensors_to_f32(t, out);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == ldexpf(1.0f, -24) && out[3] == 65504.0f);
    t = lt_safetensors_find(&st, "b");
    assert_int_equal(t->dtype, LT_SAFETENSORS_BF16);
    lt_safetensors_to_f32(t, out);
    assert_true(out[0] == 1.0f && out[1] == -3.140625f);
    assert_string_equal(lt_safetensors_dtype_name(t->dtype), "BF16");
    lt_safetensors_close(&st);
    free(b);
}

/* ------------------------------------------------------------------ malformed */

#define T1 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static void test_malformed(void **state) {
    (void)state;
    expect_good("{" T1 "}", 8, 1);
    expect_good("{" T1 "}   ", 8, 1);                                  /* padding */
    expect_good("{\"__metadata__\":{\"k\":\"v\"}," T1 ",\"extra\":{\"dtype\":\"F16\",\"shape\":[],"
                "\"data_offsets\":[8,10],\"ignored\":1}}", 10, 2);     /* unknown entry member ignored */

    /* the length prefix and the header as text */
    lt_safetensors st;
    lt_error err;
    const uint8_t tiny[5] = {1, 0, 0, 0, 0};
    assert_int_equal(lt_safetensors_parse(&st, tiny, 5, "t", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "too short"));
    assert_int_equal(lt_safetensors_parse(&st, NULL, 0, "t", &err), LT_ERR_INPUT);
    size_t n;
    uint8_t *b = image("{" T1 "}", 8, &n);
    b[0] = 0xff; /* header length 255 + ... beyond the file */
    assert_int_equal(lt_safetensors_parse(&st, b, n, "t", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "reaches past the end of the file"));
    b[7] = 0x80; /* 2^63 + ...: no overflow in the check */
    assert_int_equal(lt_safetensors_parse(&st, b, n, "t", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "reaches past the end of the file"));
    free(b);
    /* truncated: a good file cut inside its data */
    b = image("{" T1 "}", 8, &n);
    assert_int_equal(lt_safetensors_parse(&st, b, n - 3, "t", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "reach past the data area"));
    /* ... and inside its header */
    assert_int_equal(lt_safetensors_parse(&st, b, 20, "t", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "reaches past the end of the file"));
    free(b);

    /* a header length above 100 MB inside a file large enough (untouched zero pages) */
    size_t big = (size_t)LT_SAFETENSORS_MAX_HEADER + 64;
    uint8_t *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    uint64_t hl = (uint64_t)LT_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) m[i] = (uint8_t)(hl >> (8 * i));
    assert_int_equal(lt_safetensors_parse(&st, m, big, "t", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "above the limit"));
    munmap(m, big);

    expect_bad("{\"a\xff\":1}", 0, "not valid UTF-8", NULL);
    expect_bad("", 0, "does not start with '{'", NULL);
    expect_bad("[1,2]", 0, "does not start with '{'", NULL);
    expect_bad(" {}", 0, "does not start with '{'", NULL);
    expect_bad("{\"a\":", 0, "not valid JSON", NULL);
    expect_bad("{} x", 0, "not valid JSON", NULL);
    expect_bad("{\"a\":[1]}", 0, "'a'", "expected an object", NULL);
    expect_bad("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'a' has no \"dtype\"", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "no \"shape\"", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "no \"data_offsets\"", NULL);
    expect_bad("{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "\"dtype\" is a number", NULL);
    expect_bad("{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype 'Q7'",
               "not a safetensors dtype", NULL);
    expect_bad("{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "dtype 'I64'",
               "does not read", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "\"shape\" is a number", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]",
               "non-negative integer", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,8]}}", 8, "shape[1]", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               "17 dimensions", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
               "overflows", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952,2],\"data_offsets\":[0,8]}}", 8,
               "overflows", NULL); /* 2^62 elements fit, 2^64 bytes do not */
    expect_good("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", 0, 1);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "'a'", "8 bytes",
               "make 12", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "shape[0]", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8e0]}}", 8, "two non-negative", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               "\"shape\" 2 times", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "[BEGIN, END]", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}}", 8, "two non-negative", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "two non-negative", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before they begin", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 8, "reach past the data area",
               NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}", 8,
               "two non-negative", NULL); /* beyond int64 */
    expect_bad("{" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlaps", NULL);
    expect_bad("{" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, "overlaps", NULL);
    expect_bad("{" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16, "gap of 4 bytes",
               "'b'", NULL);
    expect_bad("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "gap of 4 bytes", NULL);
    expect_bad("{" T1 "}", 12, "4 bytes unaccounted for", NULL);
    expect_bad("{}", 4, "no tensors but 4 bytes", NULL);
    expect_bad("{" T1 "," T1 "}", 16, "'a' is described twice", NULL);
    expect_bad("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "NUL", NULL);
    expect_bad("{\"__metadata__\":{\"k\":1}," T1 "}", 8, "'k' is a number", NULL);
    expect_bad("{\"__metadata__\":[]," T1 "}", 8, "\"__metadata__\" is an array", NULL);
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}," T1 "}", 8, "appears 2 times", NULL);
}

static void test_open_errors(void **state) {
    (void)state;
    lt_safetensors st;
    lt_error err;
    char path[320];
    snprintf(path, sizeof path, "%s/missing.safetensors", root);
    assert_int_equal(lt_safetensors_open(&st, path, &err), LT_ERR_IO);
    assert_string_equal(err.where, path);
    assert_int_equal(lt_safetensors_open(&st, root, &err), LT_ERR_IO); /* a directory */
    snprintf(path, sizeof path, "%s/empty.safetensors", root);
    assert_int_equal(lt_write_file_atomic(path, "", 0, &err), LT_OK);
    assert_int_equal(lt_safetensors_open(&st, path, &err), LT_ERR_INPUT);
    assert_string_equal(err.where, path);
    assert_non_null(strstr(err.what, "too short"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_writer_bytes), cmocka_unit_test(test_f16_bf16),
        cmocka_unit_test(test_malformed), cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
