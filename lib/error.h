/*
 * lib/error.h — errors as values, one reporting style, check macros with file:line.
 *
 * Library code never prints and never exits: a function that can fail returns an
 * lt_status (0 = ok) and, when given a non-NULL `lt_error *`, fills it with WHAT went
 * wrong, WHERE (a file, "file:line", "record 12", ...) and an optional HINT for the user.
 * Programs report it once, in the one style of CONTRACTS.md:
 *
 *     PROGRAM: error: WHAT (WHERE)
 *     hint: HINT
 *
 * and exit with lt_exit_code(): 0 success, 1 run-time failure, 2 bad usage/config.
 *
 * The check macros (LT_CHECK_ALLOC, lt_malloc_check, lt_fread_check, ...) are for the
 * failures a program cannot recover from (out of memory, an internal invariant): they
 * report with the source file:line and exit 1.
 *
 * Thread-safety: lt_error values are plain structs owned by the caller; the program
 * name is set once at start-up (lt_set_program) before threads exist.
 */
#ifndef LT_ERROR_H
#define LT_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
#define LT_NORETURN [[noreturn]]
extern "C" {
#else
#define LT_NORETURN _Noreturn
#endif

/* Exit status everywhere (CONTRACTS.md). */
enum {
    LT_EXIT_OK = 0,
    LT_EXIT_FAILURE = 1, /* run-time failure: bad input that cannot be skipped, I/O, solver */
    LT_EXIT_USAGE = 2,   /* bad usage or configuration */
};

/* Status codes returned by library functions. 0 is success; each maps to an exit code. */
typedef enum lt_status {
    LT_OK = 0,
    LT_ERR_USAGE,    /* bad command line                       -> exit 2 */
    LT_ERR_CONFIG,   /* bad or unknown config section/key/value -> exit 2 */
    LT_ERR_IO,       /* open/read/write/fsync/rename failed    -> exit 1 */
    LT_ERR_INPUT,    /* malformed input data                   -> exit 1 */
    LT_ERR_NOMEM,    /* allocation failed                      -> exit 1 */
    LT_ERR_VERSION,  /* file written by a newer/other program  -> exit 1 */
    LT_ERR_INTERNAL, /* a broken invariant or library failure  -> exit 1 */
} lt_status;

#define LT_ERROR_WHAT_MAX 512
#define LT_ERROR_WHERE_MAX 512
#define LT_ERROR_HINT_MAX 512

typedef struct lt_error {
    lt_status status;
    char what[LT_ERROR_WHAT_MAX];   /* e.g. "unknown key 'contxt_len' in section [plan]" */
    char where[LT_ERROR_WHERE_MAX]; /* e.g. "etc/demo.ini:12"; empty if not meaningful */
    char hint[LT_ERROR_HINT_MAX];   /* e.g. "did you mean 'context_len'?"; may be empty */
} lt_error;

/* Program name used as the prefix of every report ("dataprep", "planner", ...). */
void lt_set_program(const char *name);
const char *lt_program(void);

/* Reset an error to "no error". Safe on NULL. */
void lt_error_clear(lt_error *err);

/*
 * Fill `err` (if non-NULL) and return `status`, so a failing path reads
 *     return lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
 * `where` may be NULL. WHAT is printf-formatted; overlong text is truncated.
 */
lt_status lt_fail(lt_error *err, lt_status status, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set or replace the hint of an error already filled (printf-formatted). Safe on NULL. */
void lt_error_hint(lt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Prefix WHAT with context, keeping WHERE and HINT: "reading config: " + old WHAT.
 * Useful when a lower layer's error is passed up.
 */
void lt_error_prefix(lt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Exit code for a status (LT_OK -> 0, usage/config -> 2, everything else -> 1). */
int lt_exit_code(lt_status status);

/* Short stable name of a status ("io", "config", ...). */
const char *lt_status_name(lt_status status);

/* Print `err` in the canonical style to `out` (stderr when NULL). */
void lt_error_print(const lt_error *err, FILE *out);

/* Print a report built on the spot (for program code): WHERE and HINT may be NULL. */
void lt_report(const char *where, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Report `err` to stderr and return its exit code: `return lt_error_exit(&err);` */
int lt_error_exit(const lt_error *err);

/* ---- unrecoverable failures: report "PROGRAM: error: WHAT (file.c:line)" and exit 1 ---- */

LT_NORETURN void lt_die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void *lt_malloc_at(size_t size, const char *file, int line);
void *lt_calloc_at(size_t n, size_t size, const char *file, int line);
void *lt_realloc_at(void *p, size_t size, const char *file, int line);
char *lt_strdup_at(const char *s, const char *file, int line);
void lt_fread_at(void *p, size_t size, size_t n, FILE *f, const char *file, int line);
void lt_fwrite_at(const void *p, size_t size, size_t n, FILE *f, const char *file, int line);
void lt_fclose_at(FILE *f, const char *file, int line);

#define lt_die(...) lt_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define lt_malloc_check(size) lt_malloc_at((size), __FILE__, __LINE__)
#define lt_calloc_check(n, size) lt_calloc_at((n), (size), __FILE__, __LINE__)
#define lt_realloc_check(p, size) lt_realloc_at((p), (size), __FILE__, __LINE__)
#define lt_strdup_check(s) lt_strdup_at((s), __FILE__, __LINE__)
#define lt_fread_check(p, size, n, f) lt_fread_at((p), (size), (n), (f), __FILE__, __LINE__)
#define lt_fwrite_check(p, size, n, f) lt_fwrite_at((p), (size), (n), (f), __FILE__, __LINE__)
#define lt_fclose_check(f) lt_fclose_at((f), __FILE__, __LINE__)

/* An internal invariant: on failure report the condition with file:line and exit 1. */
#define LT_CHECK(cond)                                                                 \
    do {                                                                               \
        if (!(cond)) lt_die_at(__FILE__, __LINE__, "internal check failed: %s", #cond); \
    } while (0)

/* A pointer that must not be NULL after an allocation done elsewhere (e.g. by a library). */
#define LT_CHECK_ALLOC(p)                                                  \
    do {                                                                   \
        if ((p) == NULL) lt_die_at(__FILE__, __LINE__, "out of memory");   \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* LT_ERROR_H */
