/*
 * dataprep/shard.h — token shards and their index (the output of one dataprep task).
 *
 * One task I writes, in its output directory (docs/formats.md has the byte layouts):
 *   task-IIIII.tokens.zst   token ids, little-endian, width 2 or 4 bytes (from the
 *                           vocabulary size), in document order, zstd-compressed in
 *                           document-aligned frames of about `frame_bytes` uncompressed
 *                           bytes (a frame closes at the first document end past it; one
 *                           document larger than that is one frame), ending in zstd's
 *                           seekable-format seek table (a skippable frame: `zstd -d` and
 *                           any zstd decoder read the file as the plain concatenation).
 *   task-IIIII.index        mmap-friendly: a fixed header (magic "LTIDX\0v1", version,
 *                           token width, vocabulary SHA-256 and name, EOS policy, counts,
 *                           task I of N), then 8-byte aligned sections: document token
 *                           offsets (u64, n_docs + 1), per-document source (file index,
 *                           flags, id and name in a string table), input files (path,
 *                           size), frame table (compressed offset/size, first document,
 *                           first token, tokens), string table; and a trailing SHA-256 of
 *                           everything before it.
 * (plus task-IIIII.stats.json and the completion marker task-IIIII.done, run.c's business.)
 *
 * Both files are written atomically (lib/files.h): nothing is visible under the final
 * names until lt_shard_writer_finish() succeeds. The same documents and meta give byte-
 * identical files (no timestamps, deterministic compression).
 *
 * Readers validate everything before use: magic, version, sizes of every section against
 * the file size, monotone offsets, string references in bounds, the trailing hash; a bad
 * index is LT_ERR_INPUT (or LT_ERR_VERSION for a newer version) naming the file and the
 * field. Thread-safety: a writer belongs to one thread; an lt_index is read-only after
 * open and may be shared; an lt_shard (decompression state) belongs to one thread.
 */
#ifndef LT_DATAPREP_SHARD_H
#define LT_DATAPREP_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

#define LT_INDEX_VERSION 2 /* 2: each input file records its named source; 1 is still read */
#define LT_SHARD_FRAME_BYTES_DEFAULT (1u << 20)

typedef enum lt_eos_policy { LT_EOS_NONE = 0, LT_EOS_APPEND = 1 } lt_eos_policy;

/* Per-document flags in the index. */
enum { LT_DOC_TRUNCATED = 1u, LT_DOC_REPAIRED = 2u };

typedef struct lt_shard_meta {
    uint32_t token_width;       /* 2 if n_vocab <= 65536, else 4 */
    uint32_t n_vocab;
    uint8_t vocab_sha256[32];   /* of the rank file (lt_tokenizer_vocab_sha256) */
    char encoding[32];          /* e.g. "cl100k_base" */
    lt_eos_policy eos;          /* LT_EOS_APPEND: eos_id is appended to every document */
    uint32_t eos_id;
    uint32_t task_id, num_tasks;
    int zstd_level;             /* 0 = 1 */
    size_t frame_bytes;         /* 0 = LT_SHARD_FRAME_BYTES_DEFAULT */
} lt_shard_meta;

/* Path of a task's file: "DIR/task-00003.SUFFIX" (malloc'd, caller frees). */
char *lt_task_path(const char *dir, uint32_t task, const char *suffix);

/* ---- writing ---------------------------------------------------------------------- */

typedef struct lt_shard_writer lt_shard_writer;

typedef struct lt_shard_summary {
    uint64_t n_docs, n_tokens, n_frames;
    uint64_t shard_bytes, index_bytes;
    uint8_t shard_sha256[32], index_sha256[32];
    double compress_cpu_s; /* CPU seconds spent compressing frames (and their checksums), all threads */
    double hash_cpu_s;     /* CPU seconds of the shard's SHA-256 when its own thread computed it */
} lt_shard_summary;

lt_status lt_shard_writer_open(lt_shard_writer **out, const char *dir, const lt_shard_meta *meta, lt_error *err);
/* Compress frames on n threads of the writer's own, and hash the shard on one more (0,
 * the default: both on the caller's thread). The caller's thread still decides the frames
 * and appends them in order, so the files are byte-identical for any n; up to 2n + 1
 * frames (raw and compressed) are held in flight. Call before the first document. */
lt_status lt_shard_writer_set_threads(lt_shard_writer *w, int n, lt_error *err);
/* Register an input file (in task order); returns its index for add_doc. */
lt_status lt_shard_writer_add_file(lt_shard_writer *w, const char *path, uint64_t size, uint32_t *file_idx,
                                   lt_error *err);
/* The same for a file of named source `source` ([source.NAME]; "" = the unnamed data.input):
 * every document of the file belongs to it (lt_index_file_source). */
lt_status lt_shard_writer_add_source_file(lt_shard_writer *w, const char *path, uint64_t size, const char *source,
                                          uint32_t *file_idx, lt_error *err);
/* Append one document's ids (the EOS id is appended here when meta->eos says so). */
lt_status lt_shard_writer_add_doc(lt_shard_writer *w, uint32_t file_idx, const char *id, const char *name,
                                  uint32_t flags, const uint32_t *ids, size_t n, lt_error *err);
/* Write the seek table and the index, commit both files (shard first, then index). */
lt_status lt_shard_writer_finish(lt_shard_writer *w, lt_shard_summary *sum, lt_error *err);
/* Drop everything written (temp files removed); NULL-safe; frees w. Also frees after finish. */
void lt_shard_writer_free(lt_shard_writer *w);

/* ---- reading ---------------------------------------------------------------------- */

typedef struct lt_index lt_index;

typedef struct lt_index_frame {
    uint64_t offset, size;          /* compressed bytes in the shard */
    uint64_t first_doc, n_docs;
    uint64_t first_token, n_tokens;
} lt_index_frame;

typedef struct lt_index_source {
    uint32_t file;                  /* index into the input file list */
    uint32_t flags;                 /* LT_DOC_* */
    const char *id;                 /* NUL-terminated, inside the mapping */
    const char *name;
} lt_index_source;

lt_status lt_index_open(lt_index **out, const char *path, lt_error *err);
void lt_index_close(lt_index *ix); /* NULL-safe */

const lt_shard_meta *lt_index_meta(const lt_index *ix);
uint64_t lt_index_n_docs(const lt_index *ix);
uint64_t lt_index_n_tokens(const lt_index *ix);
uint64_t lt_index_doc_offset(const lt_index *ix, uint64_t doc); /* first token; doc <= n_docs */
uint64_t lt_index_doc_len(const lt_index *ix, uint64_t doc);    /* tokens incl. EOS if appended */
void lt_index_doc_source(const lt_index *ix, uint64_t doc, lt_index_source *out);
uint32_t lt_index_n_files(const lt_index *ix);
const char *lt_index_file_path(const lt_index *ix, uint32_t file);
uint64_t lt_index_file_size(const lt_index *ix, uint32_t file);
/* The named source of input file `file` ("" for the unnamed data.input, and for every file
 * of a version 1 index). A document's source is its file's. */
const char *lt_index_file_source(const lt_index *ix, uint32_t file);
uint64_t lt_index_n_frames(const lt_index *ix);
void lt_index_frame_get(const lt_index *ix, uint64_t frame, lt_index_frame *out);
uint64_t lt_index_frame_of_doc(const lt_index *ix, uint64_t doc); /* binary search */

typedef struct lt_shard lt_shard;

/* Open the shard that belongs to `ix` (its path: the index path with .index -> .tokens.zst). */
lt_status lt_shard_open(lt_shard **out, const char *path, const lt_index *ix, lt_error *err);
void lt_shard_close(lt_shard *sh); /* NULL-safe */
/* The ids of one document (decompresses its frame; the last frame is cached). *ids points
 * into the shard's buffer, valid until the next call. */
lt_status lt_shard_doc(lt_shard *sh, uint64_t doc, const uint32_t **ids, size_t *n, lt_error *err);

/* Check a shard against its index: every frame decompresses to its recorded size, frame
 * table and seek table agree, frames tile the file, the token count matches, every id
 * < n_vocab. */
lt_status lt_shard_verify(const char *shard_path, const lt_index *ix, lt_error *err);

#endif /* LT_DATAPREP_SHARD_H */
