/*
 * tests/testutil.h — helpers shared by the unit tests.
 */
#ifndef LT_TESTUTIL_H
#define LT_TESTUTIL_H

#include <stddef.h>

/*
 * Run fn(arg) in a child process with its stderr captured into `err` (NUL-terminated,
 * truncated to err_size; may be NULL). Returns the child's exit status, 128 + the signal
 * number if it was killed, or 0 if fn returned. For checks that a misuse or an
 * unrecoverable failure reports "PROGRAM: error: ... (file.c:line)" and exits 1.
 */
int lt_test_in_child(void (*fn)(void *arg), void *arg, char *err, size_t err_size);

/*
 * A private scratch directory for a test group: lt_test_tmpdir_create fills `dir` (size
 * >= 64) with a new /tmp/lt-test-NAME-XXXXXX; lt_test_tmpdir_remove deletes it and all
 * below. Both return 0 on success, -1 on failure (cmocka group setup/teardown style).
 */
int lt_test_tmpdir_create(char *dir, size_t size, const char *name);
int lt_test_tmpdir_remove(const char *dir);

/* An error's WHERE "line L, column C" (lib/json.h document errors) -> the byte offset it
 * names in text[0..n], or SIZE_MAX if it names no position there (a column may point just
 * past a line's last byte). */
size_t lt_test_where_to_offset(const char *where, const char *text, size_t n);

/* The benchmark modes' clocks, in milliseconds: wall (CLOCK_MONOTONIC) and this process's
 * CPU time (CLOCK_PROCESS_CPUTIME_ID); and a qsort comparator of doubles (medians). */
double lt_test_now_ms(void);
double lt_test_cpu_ms(void);
int lt_test_cmp_double(const void *a, const void *b);

#endif /* LT_TESTUTIL_H */
