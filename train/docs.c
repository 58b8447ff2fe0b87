/*
 * train/docs.c — documents of a dataprep output in order, truncated (train/docs.h).
 */
#include "train/docs.h"

#include <stdlib.h>

#include "dataprep/dataset.h" /* lt_dataset_open */
#include "dataprep/shard.h"   /* lt_shard_open, lt_shard_doc, lt_index_n_docs */

struct lt_docs {
    lt_dataset *ds;
    lt_shard **shards; /* per task, opened on first use */
    uint64_t *first;   /* per task: the global number of its first document */
    uint64_t count;
    int64_t max_len;
};

lt_status lt_docs_open(lt_docs **out, const char *dir, int64_t max_len, lt_error *err) {
    *out = NULL;
    lt_docs *d = calloc(1, sizeof *d);
    if (!d) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    lt_status st = lt_dataset_open(&d->ds, dir, -1, err);
    if (st != LT_OK) {
        free(d);
        return st;
    }
    d->max_len = max_len;
    d->shards = calloc(d->ds->num_tasks + 1, sizeof *d->shards);
    d->first = calloc(d->ds->num_tasks + 1, sizeof *d->first);
    if (!d->shards || !d->first) {
        lt_docs_close(d);
        return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    }
    for (uint32_t t = 0; t < d->ds->num_tasks; t++) {
        d->first[t] = d->count;
        d->count += lt_index_n_docs(d->ds->tasks[t].index);
    }
    d->first[d->ds->num_tasks] = d->count;
    *out = d;
    return LT_OK;
}

void lt_docs_close(lt_docs *d) {
    if (!d) return;
    for (uint32_t t = 0; d->ds && d->shards && t < d->ds->num_tasks; t++) lt_shard_close(d->shards[t]);
    free(d->shards);
    free(d->first);
    lt_dataset_close(d->ds);
    free(d);
}

uint64_t lt_docs_count(const lt_docs *d) { return d->count; }

lt_status lt_docs_get(lt_docs *d, uint64_t i, int32_t **tokens, int *len, lt_error *err) {
    *tokens = NULL;
    *len = 0;
    if (i >= d->count) return lt_fail(err, LT_ERR_INTERNAL, d->ds->dir, "document %llu of %llu", (unsigned long long)i,
                                      (unsigned long long)d->count);
    uint32_t t = 0;
    while (d->first[t + 1] <= i) t++;
    lt_dataset_task *task = &d->ds->tasks[t];
    if (!d->shards[t]) {
        lt_status st = lt_shard_open(&d->shards[t], task->shard_path, task->index, err);
        if (st != LT_OK) return st;
    }
    const uint32_t *ids;
    size_t n;
    lt_status st = lt_shard_doc(d->shards[t], i - d->first[t], &ids, &n, err);
    if (st != LT_OK) return st;
    if (d->max_len > 0 && n > (size_t)d->max_len) n = (size_t)d->max_len;
    if (n > (size_t)INT32_MAX) n = (size_t)INT32_MAX;
    int32_t *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) return lt_fail(err, LT_ERR_NOMEM, task->shard_path, "out of memory for a %zu-token document", n);
    for (size_t k = 0; k < n; k++) {
        if (ids[k] > (uint32_t)INT32_MAX) {
            free(out);
            return lt_fail(err, LT_ERR_INPUT, task->shard_path, "document %llu token %zu has id %u",
                           (unsigned long long)(i - d->first[t]), k, ids[k]);
        }
        out[k] = (int32_t)ids[k];
    }
    *tokens = out;
    *len = (int)n;
    return LT_OK;
}
