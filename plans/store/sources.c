/*
 * plans/store/sources.c — the named sources of a plan file's documents: the ranges of
 * documents of each source written at build time (table source_ranges, schema version 5)
 * and, read back, the source of each sample of a step (planner show). Uses store.c's
 * helpers only.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "plans/store/internal.h" /* lt_store, RUN_ID, lt_db_prepare, lt_db_fail */

lt_status lt_store_put_sources(lt_store *st, const lt_store_source_range *r, size_t n, lt_error *err) {
    if (!st || !st->tmp) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_store_put_sources on a store opened for reading");
    sqlite3_stmt *q = NULL;
    lt_status s = lt_db_prepare(st->db,
                                "INSERT OR REPLACE INTO source_ranges (run_id, task, doc_begin, doc_end, source) "
                                "VALUES (?1, ?2, ?3, ?4, ?5)",
                                &q, err);
    for (size_t i = 0; s == LT_OK && i < n; i++) {
        if (r[i].doc_end <= r[i].doc_begin || r[i].doc_end > (uint64_t)INT64_MAX) {
            s = lt_fail(err, LT_ERR_INTERNAL, st->path, "source range %zu: documents [%" PRIu64 ", %" PRIu64 ")", i,
                        r[i].doc_begin, r[i].doc_end);
            break;
        }
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, st->run_id);
        sqlite3_bind_int64(q, 2, r[i].task);
        sqlite3_bind_int64(q, 3, (int64_t)r[i].doc_begin);
        sqlite3_bind_int64(q, 4, (int64_t)r[i].doc_end);
        sqlite3_bind_text(q, 5, r[i].source, -1, SQLITE_STATIC);
        if (sqlite3_step(q) != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot write table source_ranges");
    }
    sqlite3_finalize(q);
    if (s != LT_OK) st->failed = true;
    return s;
}

lt_status lt_store_sample_sources(lt_store *st, uint64_t step, char ***names, size_t *n_names, uint32_t **src,
                                  size_t *n_samples, lt_error *err) {
    *names = NULL;
    *src = NULL;
    *n_names = *n_samples = 0;
    if (!lt_db_has_table(st->db, "sample_sources")) return LT_OK; /* a version-4 file: no sources */
    sqlite3_stmt *q = NULL;
    lt_status s = lt_db_prepare(st->db,
                                "SELECT idx, coalesce(source, '') FROM sample_sources WHERE run_id = ?1 AND step = ?2 "
                                "ORDER BY idx",
                                &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_int64(q, 1, st->run_id);
    sqlite3_bind_int64(q, 2, (int64_t)step);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(q, 1);
        if (!name) name = "";
        size_t k = 0;
        while (k < *n_names && strcmp((*names)[k], name) != 0) k++;
        if (k == *n_names) {
            *names = lt_realloc_check(*names, (*n_names + 1) * sizeof **names);
            (*names)[(*n_names)++] = lt_strdup_check(name);
        }
        if (*n_samples == cap) {
            cap = cap ? 2 * cap : 64;
            *src = lt_realloc_check(*src, cap * sizeof **src);
        }
        (*src)[(*n_samples)++] = (uint32_t)k;
    }
    if (rc != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot read view sample_sources");
    sqlite3_finalize(q);
    if (s != LT_OK) {
        for (size_t i = 0; i < *n_names; i++) free((*names)[i]);
        free(*names);
        free(*src);
        *names = NULL;
        *src = NULL;
        *n_names = *n_samples = 0;
    }
    return s;
}
