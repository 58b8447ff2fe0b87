/*
 * train/io/docs.c — documents of a dataprep output in order, truncated (train/io/docs.h).
 */
#include "train/io/docs.h"

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

/* The token ids of document `doc` of task t (the shard opened on first use). */
static lt_status doc_ids(lt_docs *d, uint32_t t, uint64_t doc, const uint32_t **ids, size_t *n, lt_error *err) {
    lt_dataset_task *task = &d->ds->tasks[t];
    if (!d->shards[t]) {
        lt_status st = lt_shard_open(&d->shards[t], task->shard_path, task->index, err);
        if (st != LT_OK) return st;
    }
    return lt_shard_doc(d->shards[t], doc, ids, n, err);
}

/* ids[0..n) as int32 into a new array. */
static lt_status to_int32(const uint32_t *ids, size_t n, const char *where, uint64_t doc, int32_t **tokens,
                          lt_error *err) {
    int32_t *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) return lt_fail(err, LT_ERR_NOMEM, where, "out of memory for a %zu-token document", n);
    for (size_t k = 0; k < n; k++) {
        if (ids[k] > (uint32_t)INT32_MAX) {
            free(out);
            return lt_fail(err, LT_ERR_INPUT, where, "document %llu token %zu has id %u", (unsigned long long)doc, k,
                           ids[k]);
        }
        out[k] = (int32_t)ids[k];
    }
    *tokens = out;
    return LT_OK;
}

lt_status lt_docs_get_piece(lt_docs *d, uint32_t task, uint64_t doc, int64_t offset, int64_t length,
                            int32_t **tokens, lt_error *err) {
    *tokens = NULL;
    if (task >= d->ds->num_tasks)
        return lt_fail(err, LT_ERR_INPUT, d->ds->dir, "task %u: the output has %u tasks", task, d->ds->num_tasks);
    if (doc >= d->first[task + 1] - d->first[task])
        return lt_fail(err, LT_ERR_INPUT, d->ds->tasks[task].shard_path, "document %llu: task %u has %llu documents",
                       (unsigned long long)doc, task, (unsigned long long)(d->first[task + 1] - d->first[task]));
    const uint32_t *ids;
    size_t n;
    lt_status st = doc_ids(d, task, doc, &ids, &n, err);
    if (st != LT_OK) return st;
    if (offset < 0 || length < 1 || (uint64_t)offset > n || (uint64_t)length > n - (uint64_t)offset)
        return lt_fail(err, LT_ERR_INPUT, d->ds->tasks[task].shard_path,
                       "document %llu has %zu tokens, not tokens [%lld, %lld)", (unsigned long long)doc, n,
                       (long long)offset, (long long)(offset + length));
    return to_int32(ids + offset, (size_t)length, d->ds->tasks[task].shard_path, doc, tokens, err);
}

lt_status lt_docs_get(lt_docs *d, uint64_t i, int32_t **tokens, int *len, lt_error *err) {
    *tokens = NULL;
    *len = 0;
    if (i >= d->count) return lt_fail(err, LT_ERR_INTERNAL, d->ds->dir, "document %llu of %llu", (unsigned long long)i,
                                      (unsigned long long)d->count);
    uint32_t t = 0;
    while (d->first[t + 1] <= i) t++;
    const uint32_t *ids;
    size_t n;
    lt_status st = doc_ids(d, t, i - d->first[t], &ids, &n, err);
    if (st != LT_OK) return st;
    if (d->max_len > 0 && n > (size_t)d->max_len) n = (size_t)d->max_len;
    if (n > (size_t)INT32_MAX) n = (size_t)INT32_MAX;
    st = to_int32(ids, n, d->ds->tasks[t].shard_path, i - d->first[t], tokens, err);
    if (st == LT_OK) *len = (int)n;
    return st;
}
