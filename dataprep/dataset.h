/*
 * dataprep/dataset.h — a dataprep output directory as a whole: the tasks of one
 * `dataprep run` (task-IIIII.{tokens.zst,index,stats.json,done}), for the tools that
 * read it (cat, lengths, profile, verify, export) and for the planner.
 *
 * A task counts only when its completion marker exists; the number of tasks N comes from
 * the markers (all must agree). lt_dataset_open() with want_task < 0 wants all N tasks
 * finished and names the missing ones otherwise; with want_task = I it wants task I only.
 * Indexes are opened (validated, mmap'ed) for the wanted tasks.
 */
#ifndef LT_DATAPREP_DATASET_H
#define LT_DATAPREP_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "dataprep/shard.h" /* lt_index */
#include "lib/error.h"      /* lt_status, lt_error */

typedef struct lt_dataset_task {
    uint32_t task;
    char *index_path, *shard_path, *stats_path, *done_path;
    lt_index *index; /* NULL for a task not wanted */
} lt_dataset_task;

typedef struct lt_dataset {
    char *dir;
    uint32_t num_tasks;
    lt_dataset_task *tasks; /* num_tasks entries, in task order */
} lt_dataset;

lt_status lt_dataset_open(lt_dataset **out, const char *dir, int64_t want_task, lt_error *err);

/* The tokenizer task `task` (opened) was made with: `tokenizer_json` when given (--tokenizer,
 * data.tokenizer), else the tokenizer.json its stats record (settings.tokenizer, a run made
 * with data.tokenizer), else its encoding found in vocab_dir or the vocab search path; it
 * must be the vocabulary the shards record (SHA-256), else LT_ERR_INPUT with a hint. */
struct lt_tokenizer;
lt_status lt_dataset_tokenizer(const lt_dataset *ds, uint32_t task, const char *vocab_dir, const char *tokenizer_json,
                               struct lt_tokenizer **out, lt_error *err);
/* The same for one task's files (its index's meta m, read from index_path, and its
 * stats_path), without opening the directory as a whole (`dataprep export`, which skips
 * incomplete tasks). */
lt_status lt_task_tokenizer(const lt_shard_meta *m, const char *index_path, const char *stats_path,
                            const char *vocab_dir, const char *tokenizer_json, struct lt_tokenizer **out,
                            lt_error *err);
void lt_dataset_close(lt_dataset *ds); /* NULL-safe */

#endif /* LT_DATAPREP_DATASET_H */
