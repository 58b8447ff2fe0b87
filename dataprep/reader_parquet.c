/*
 * dataprep/reader_parquet.c — Apache Parquet files, the `parquet` backend of reader.h.
 *
 * A Parquet file is read by offset (its footer is at the end), so this backend does not
 * read through core->src: it opens core->path itself (pread), or reads the buffer of
 * lt_reader_open_mem (core->mem), with the same decoder (dataprep/parquet.h).
 *
 * Documents: the values of the string column opts->field, row after row, of the row
 * groups [opts->rg_begin, opts->rg_end) (all by default): id = "row=N" (1-based row in
 * the file, whatever the range), name "", record = N, offset = the file offset of the
 * page holding the value. Every row is a record; a null value is a skip (null_value,
 * WHERE "PATH: row N"). reader.c repairs invalid UTF-8 (a BYTE_ARRAY column need not
 * hold UTF-8) and cuts to the cap.
 *
 * A missing, nested or non-string column is an error when the file is opened, naming the
 * columns the file has (parquet.c); damage met later ends the file with LT_ERR_INPUT after
 * every row before it.
 */
#include "dataprep/reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dataprep/parquet.h" /* lt_pq_open, lt_pq_next */

typedef struct parquet_state {
    lt_reader_core *core;
    lt_pq_reader *pq;
    char id[32];
} parquet_state;

static lt_status parquet_open(void **state, lt_reader_core *core, lt_error *err) {
    *state = NULL;
    const lt_reader_opts *o = core->opts;
    lt_pq_reader *pq;
    lt_status st = lt_pq_open(&pq, core->path, core->mem, core->mem_len, o->field ? o->field : "text", o->rg_begin,
                              o->rg_end, err);
    if (st != LT_OK) return st;
    parquet_state *p = lt_calloc_check(1, sizeof *p);
    p->core = core;
    p->pq = pq;
    *state = p;
    return LT_OK;
}

static lt_status parquet_next(void *state, lt_doc *doc, bool *eof, lt_error *err) {
    parquet_state *p = state;
    for (;;) {
        lt_pq_value v;
        lt_status st = lt_pq_next(p->pq, &v, eof, err);
        if (st != LT_OK || *eof) return st;
        p->core->stats->records++;
        if (v.is_null) {
            char where[LT_ERROR_WHERE_MAX];
            snprintf(where, sizeof where, "%s: row %" PRIu64, p->core->path, v.row + 1);
            lt_reader_skip(p->core, where, LT_SKIP_NULL_VALUE, "column '%s' is null in this row",
                           p->core->opts->field ? p->core->opts->field : "text");
            continue;
        }
        snprintf(p->id, sizeof p->id, "row=%" PRIu64, v.row + 1);
        doc->text = (const char *)v.bytes;
        doc->len = v.len;
        doc->id = p->id;
        doc->name = "";
        doc->record = v.row + 1;
        doc->offset = v.page_offset;
        return LT_OK;
    }
}

static void parquet_close(void *state) {
    parquet_state *p = state;
    if (p == NULL) return;
    lt_pq_close(p->pq);
    free(p);
}

const lt_reader_backend lt_reader_backend_parquet = {
    .name = "parquet",
    .text_is_utf8 = false,
    .open = parquet_open,
    .next = parquet_next,
    .close = parquet_close,
};

lt_status lt_parquet_row_groups(const char *path, uint32_t *n_groups, uint64_t *n_rows, lt_error *err) {
    *n_groups = 0;
    *n_rows = 0;
    lt_pq_reader *pq;
    lt_status st = lt_pq_open(&pq, path, NULL, 0, NULL, 0, 0, err);
    if (st != LT_OK) return st;
    *n_groups = lt_pq_row_groups(pq);
    *n_rows = lt_pq_rows(pq);
    lt_pq_close(pq);
    return LT_OK;
}
