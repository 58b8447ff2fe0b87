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

#endif /* LT_TESTUTIL_H */
