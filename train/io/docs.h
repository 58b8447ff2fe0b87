/*
 * train/io/docs.h — the documents of a dataprep output, in `dataprep cat` order (task by task,
 * document by document), each truncated to a maximum length: what `trainer eval` scores
 * and `trainer train --whole` trains on. A thin layer over dataprep/dataset.h and
 * dataprep/shard.h.
 */
#ifndef LT_TRAIN_DOCS_H
#define LT_TRAIN_DOCS_H

#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

typedef struct lt_docs lt_docs;

/* Open DIR (every task must be finished). max_len > 0 truncates documents to it. */
lt_status lt_docs_open(lt_docs **out, const char *dir, int64_t max_len, lt_error *err);
void lt_docs_close(lt_docs *d); /* NULL-safe */

/* Documents in the output. */
uint64_t lt_docs_count(const lt_docs *d);

/* Document i (0 <= i < count) as int32 token ids: *tokens is malloc'd (caller frees), *len
 * its (truncated) length. Errors name the shard and document. */
lt_status lt_docs_get(lt_docs *d, uint64_t i, int32_t **tokens, int *len, lt_error *err);

/* Tokens [offset, offset + length) of document `doc` of task `task` (a plan's sample:
 * plans/batches/sampler.h's source "task=T,doc=D,tok=O" and its length), not truncated: *tokens is
 * malloc'd. LT_ERR_INPUT naming the shard when the task, the document or the range does not
 * exist (a plan built from other data). */
lt_status lt_docs_get_piece(lt_docs *d, uint32_t task, uint64_t doc, int64_t offset, int64_t length,
                            int32_t **tokens, lt_error *err);

#endif /* LT_TRAIN_DOCS_H */
