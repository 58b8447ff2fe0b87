/*
 * tests/dataprep/parquet_dump.c — the documents the reader makes of one file, as JSON
 * lines, for tests/dataprep/parquet_reference.py (which checks them against pyarrow).
 *
 *   parquet_dump FILE [--field F] [--rg BEGIN END] [--mem] [--max-doc N] [--format F]
 *   parquet_dump FILE --row-groups
 *
 * One line per document {"id", "record", "truncated", "orig_bytes", "repl", "text"}, one per
 * skip {"skip": REASON, "where": WHERE}, then {"stats": {...}}. --rg sets lt_reader_opts
 * rg_begin/rg_end; --mem reads the file into memory first (lt_reader_open_mem, the path
 * fuzzers and tests take); --row-groups prints "GROUPS ROWS" (lt_parquet_row_groups).
 * An error is reported in the usual style (lib/error.h) with its exit status.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/reader.h" /* lt_reader_*, lt_parquet_row_groups */
#include "lib/json.h"        /* lt_json */

static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    (void)ctx;
    (void)message;
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    lt_json_key(&j, "skip");
    lt_json_string(&j, lt_skip_reason_key(reason));
    lt_json_key(&j, "where");
    lt_json_string(&j, where);
    lt_json_object_end(&j);
    puts(lt_json_cstr(&j));
    lt_json_free(&j);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = lt_malloc_check(cap);
    size_t k;
    while ((k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) b = lt_realloc_check(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

int main(int argc, char **argv) {
    lt_set_program("parquet_dump");
    if (argc < 2) {
        fprintf(stderr, "usage: parquet_dump FILE [--field F] [--rg B E] [--mem] [--max-doc N] | FILE --row-groups\n");
        return 2;
    }
    const char *path = argv[1];
    lt_reader_opts o = {.format = LT_FMT_PARQUET, .on_skip = on_skip};
    bool mem = false;
    lt_error err;
    lt_error_clear(&err);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--field") == 0 && i + 1 < argc) {
            o.field = argv[++i];
        } else if (strcmp(argv[i], "--rg") == 0 && i + 2 < argc) {
            o.rg_begin = (uint32_t)strtoul(argv[++i], NULL, 10);
            o.rg_end = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--mem") == 0) {
            mem = true;
        } else if (strcmp(argv[i], "--max-doc") == 0 && i + 1 < argc) {
            o.max_doc_bytes = (size_t)strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            if (lt_format_parse(argv[++i], &o.format) != LT_OK) return 2;
        } else if (strcmp(argv[i], "--row-groups") == 0) {
            uint32_t g;
            uint64_t rows;
            lt_status st = lt_parquet_row_groups(path, &g, &rows, &err);
            if (st != LT_OK) return lt_error_exit(&err);
            printf("%" PRIu32 " %" PRIu64 "\n", g, rows);
            return 0;
        } else {
            fprintf(stderr, "parquet_dump: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char *data = NULL;
    size_t n = 0;
    lt_reader *r;
    lt_status st;
    if (mem) {
        if ((data = slurp(path, &n)) == NULL) {
            perror(path);
            return 1;
        }
        st = lt_reader_open_mem(&r, data, n, path, &o, &err);
    } else {
        st = lt_reader_open(&r, path, &o, &err);
    }
    if (st != LT_OK) {
        free(data);
        return lt_error_exit(&err);
    }
    lt_json j;
    lt_json_init(&j);
    for (;;) {
        lt_doc d;
        bool eof;
        st = lt_reader_next(r, &d, &eof, &err);
        if (st != LT_OK || eof) break;
        lt_json_reset(&j);
        lt_json_object_begin(&j);
        lt_json_key(&j, "id");
        lt_json_string(&j, d.id);
        lt_json_key(&j, "record");
        lt_json_uint(&j, d.record);
        lt_json_key(&j, "truncated");
        lt_json_bool(&j, d.truncated);
        lt_json_key(&j, "orig_bytes");
        lt_json_uint(&j, d.orig_bytes);
        lt_json_key(&j, "repl");
        lt_json_uint(&j, d.utf8_replacements);
        lt_json_key(&j, "text");
        lt_json_string_n(&j, d.text, d.len);
        lt_json_object_end(&j);
        puts(lt_json_cstr(&j));
    }
    const lt_reader_stats *s = lt_reader_get_stats(r);
    printf("{\"stats\": {\"records\": %" PRIu64 ", \"docs\": %" PRIu64 ", \"null_value\": %" PRIu64
           ", \"format\": \"%s\"}}\n",
           s->records, s->docs, s->skipped[LT_SKIP_NULL_VALUE], lt_format_name(lt_reader_format(r)));
    lt_json_free(&j);
    lt_reader_close(r);
    free(data);
    if (fflush(stdout) != 0) return 1;
    if (st != LT_OK) return lt_error_exit(&err);
    return 0;
}
