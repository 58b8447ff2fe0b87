/*
 * lib/error.c — the one error-reporting style (see error.h).
 */
#include "lib/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *program_name = "longtail";

void lt_set_program(const char *name) {
    if (name == NULL || name[0] == '\0') return;
    /* basename, so "./dataprep/dataprep" reports as "dataprep" */
    const char *slash = strrchr(name, '/');
    program_name = slash ? slash + 1 : name;
    /* libtool-style wrappers name the real binary "lt-NAME" */
    if (strncmp(program_name, "lt-", 3) == 0 && program_name[3] != '\0') program_name += 3;
}

const char *lt_program(void) { return program_name; }

void lt_error_clear(lt_error *err) {
    if (err == NULL) return;
    err->status = LT_OK;
    err->what[0] = err->where[0] = err->hint[0] = '\0';
}

lt_status lt_fail(lt_error *err, lt_status status, const char *where, const char *fmt, ...) {
    if (err == NULL) return status;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->what, sizeof err->what, fmt, ap);
    va_end(ap);
    if (snprintf(err->where, sizeof err->where, "%s", where ? where : "") < 0) err->where[0] = '\0';
    err->hint[0] = '\0';
    return status;
}

void lt_error_hint(lt_error *err, const char *fmt, ...) {
    if (err == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof err->hint, fmt, ap);
    va_end(ap);
}

void lt_error_prefix(lt_error *err, const char *fmt, ...) {
    if (err == NULL) return;
    char prefix[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char joined[LT_ERROR_WHAT_MAX];
    if (snprintf(joined, sizeof joined, "%s%s", prefix, err->what) < 0) return;
    memcpy(err->what, joined, sizeof err->what); /* truncated if too long, by design */
}

int lt_exit_code(lt_status status) {
    switch (status) {
    case LT_OK: return LT_EXIT_OK;
    case LT_ERR_USAGE:
    case LT_ERR_CONFIG: return LT_EXIT_USAGE;
    default: return LT_EXIT_FAILURE;
    }
}

const char *lt_status_name(lt_status status) {
    switch (status) {
    case LT_OK: return "ok";
    case LT_ERR_USAGE: return "usage";
    case LT_ERR_CONFIG: return "config";
    case LT_ERR_IO: return "io";
    case LT_ERR_INPUT: return "input";
    case LT_ERR_NOMEM: return "nomem";
    case LT_ERR_VERSION: return "version";
    case LT_ERR_INTERNAL: return "internal";
    }
    return "unknown";
}

static void print_report(FILE *out, const char *what, const char *where, const char *hint) {
    if (out == NULL) out = stderr;
    if (where != NULL && where[0] != '\0')
        fprintf(out, "%s: error: %s (%s)\n", program_name, what, where);
    else
        fprintf(out, "%s: error: %s\n", program_name, what);
    if (hint != NULL && hint[0] != '\0') fprintf(out, "hint: %s\n", hint);
    fflush(out);
}

void lt_error_print(const lt_error *err, FILE *out) {
    if (err == NULL) return;
    print_report(out, err->what[0] ? err->what : lt_status_name(err->status), err->where,
                 err->hint);
}

void lt_report(const char *where, const char *hint, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    print_report(stderr, what, where, hint);
}

int lt_error_exit(const lt_error *err) {
    if (err == NULL || err->status == LT_OK) return LT_EXIT_OK;
    lt_error_print(err, stderr);
    return lt_exit_code(err->status);
}

_Noreturn void lt_die_at(const char *file, int line, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char where[LT_ERROR_WHERE_MAX];
    if (snprintf(where, sizeof where, "%s:%d", file, line) < 0) where[0] = '\0';
    print_report(stderr, what, where, NULL);
    exit(LT_EXIT_FAILURE);
}

void *lt_malloc_at(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (p == NULL) lt_die_at(file, line, "out of memory allocating %zu bytes", size);
    return p;
}

void *lt_calloc_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) lt_die_at(file, line, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *lt_realloc_at(void *p, size_t size, const char *file, int line) {
    void *q = realloc(p, size ? size : 1);
    if (q == NULL) lt_die_at(file, line, "out of memory reallocating to %zu bytes", size);
    return q;
}

char *lt_strdup_at(const char *s, const char *file, int line) {
    char *p = strdup(s ? s : "");
    if (p == NULL) lt_die_at(file, line, "out of memory duplicating a string");
    return p;
}

void lt_fread_at(void *p, size_t size, size_t n, FILE *f, const char *file, int line) {
    size_t got = fread(p, size, n, f);
    if (got != n) {
        if (feof(f))
            lt_die_at(file, line, "unexpected end of file: read %zu of %zu items", got, n);
        lt_die_at(file, line, "read failed: %s", strerror(errno));
    }
}

void lt_fwrite_at(const void *p, size_t size, size_t n, FILE *f, const char *file, int line) {
    if (fwrite(p, size, n, f) != n) lt_die_at(file, line, "write failed: %s", strerror(errno));
}

void lt_fclose_at(FILE *f, const char *file, int line) {
    if (fclose(f) != 0) lt_die_at(file, line, "close failed: %s", strerror(errno));
}
