/*
 * train/io/ckpt.h — training checkpoints: one binary file holding the model's dimensions,
 * where training stands (step, random stream, data position) and the parameters, with or
 * without the AdamW moments, so a run resumes bit-exact.
 *
 * File layout (versions 1 and 2; every number little-endian; docs/trainer.md "Checkpoint format"):
 *
 *   offset size
 *        0    8  magic "LTCKPT01"
 *        8    4  u32 version (1, or 2: see below)
 *       12    4  u32 header bytes (256, version 2: 320; the parameters start there)
 *       16   32  model name, NUL-padded ("nano", "custom", ...)
 *       48   32  i32 layers, hidden, heads, kv_heads, ffn, vocab, tie_embeddings, gated_ffn
 *       80    8  f64 rope_theta
 *       88    8  f64 norm_eps
 *       96    8  i64 step (optimizer steps done)
 *      104   16  u64 rng key[2]        \
 *      120   32  u64 rng ctr[4]         | lib/rng.h lt_rng, exactly
 *      152   32  u64 rng buf[4]         |
 *      184    4  i32 rng pos           /
 *      188    4  u32 has_optimizer (0 or 1)
 *      192    8  u64 data position (documents consumed)
 *      200    8  u64 data epoch
 *      208    8  u64 n_params
 *      216    8  i64 AdamW t
 *      224    8  u64 XXH64 (seed 0) of the parameter bytes
 *      232    8  u64 XXH64 (seed 0) of the moment bytes (m then v; 0 without optimizer)
 *      240    8  reserved, 0
 *      248    8  u64 XXH64 (seed 0) of header bytes [0, 248)
 *      256       params[n_params] f32, then (has_optimizer) m[n_params] f32, v[n_params] f32
 *
 * Version 2 (written only for a model of another family than Llama or with RoPE scaling, so
 * a plain Llama checkpoint stays version 1, readable by older trainers) has 64 more header
 * bytes, the parameters starting at 320:
 *      256    4  u32 family (lib/model.h LT_FAMILY_*: 0 llama, 1 mistral, 2 qwen2)
 *      260    4  u32 rope_scaling (0 none, 1 llama3)
 *      264    8  f64 rope_factor           \
 *      272    8  f64 rope_low_freq_factor   | llama3 scaling (0 without)
 *      280    8  f64 rope_high_freq_factor  |
 *      288    4  i32 rope_original_max_pos /
 *      292   20  reserved, 0
 *      312    8  u64 XXH64 (seed 0) of header bytes [256, 312)
 * A version 1 file reads as family llama without RoPE scaling.
 *
 * The parameters come in the tensor table's order (train/model/model.h), the file's size is
 * exactly header bytes + 4 n_params (1 + 2 has_optimizer). Two payload checksums, not one, so that
 * eval and generate read the parameters without reading (and hashing) the moments.
 *
 * Writing goes to a hidden temporary, fsync'ed and renamed (lib/files.h): a checkpoint is
 * complete or absent. Reading checks everything and says what is wrong (WHERE is the
 * path): not a checkpoint (magic), written by a newer version (LT_ERR_VERSION), truncated
 * (expected N bytes, the file has M), damaged (checksum), invalid dimensions, a parameter
 * count that does not match the dimensions, NaN/Inf in the parameters (naming the tensor
 * and the index); every one LT_ERR_INPUT unless said otherwise.
 *
 * Thread-safety: functions are reentrant; nothing global.
 */
#ifndef LT_TRAIN_CKPT_H
#define LT_TRAIN_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"         /* lt_status, lt_error */
#include "lib/model.h"         /* lt_model_shape */
#include "lib/rng.h"           /* lt_rng */
#include "train/model/model.h" /* lt_llama */
#include "train/model/optim.h" /* lt_adamw */

#define LT_CKPT_MAGIC "LTCKPT01"
#define LT_CKPT_VERSION 2
#define LT_CKPT_HEADER_BYTES 256    /* version 1's header (and version 2's first part) */
#define LT_CKPT_HEADER_BYTES_V2 320 /* version 2's */

/* Where training stands, besides parameters and moments. */
typedef struct lt_ckpt_state {
    int64_t step;        /* optimizer steps done */
    lt_rng rng;          /* the training loop's random stream, as it is now */
    uint64_t data_pos;   /* documents consumed in the current epoch */
    uint64_t data_epoch; /* passes over the data completed */
} lt_ckpt_state;

/* What the header says (lt_ckpt_peek). */
typedef struct lt_ckpt_info {
    lt_model_shape shape; /* name: the preset's static name, or "custom" */
    lt_ckpt_state state;
    uint64_t n_params;
    int has_optimizer;
    int64_t adam_t;
} lt_ckpt_info;

/* Write `m`'s parameters, the moments of `opt` (NULL: parameters only) and `st` to `path`
 * atomically. opt->n must equal m->n_params. Errors: LT_ERR_IO naming the path. */
lt_status lt_ckpt_write(const char *path, const lt_llama *m, const lt_adamw *opt, const lt_ckpt_state *st,
                        lt_error *err);

/* Read `path`: `m` is created here from the header's dimensions (lt_llama_create) and
 * filled; `opt` NULL skips the moments, else it is initialized here with the file's moments
 * (zeros and t = 0 when the file has none); `st` (may be NULL) receives the state. On error
 * nothing is left allocated (m and opt zeroed). */
lt_status lt_ckpt_read(const char *path, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st, lt_error *err);

/* Read and check only the header (magic, version, header checksum, dimensions, file size). */
lt_status lt_ckpt_peek(const char *path, lt_ckpt_info *info, lt_error *err);

/* LT_OK when a checkpoint's model `ckpt` has the dimensions of `want` (the config's);
 * else LT_ERR_CONFIG naming the first dimension that differs, WHERE = path, with a hint
 * to set it (--set model.X=V) or to start over with `trainer init`. */
lt_status lt_ckpt_check_shape(const lt_model_shape *ckpt, const lt_model_shape *want, const char *path,
                              lt_error *err);

/* "DIR/ckpt-%08lld.bin" (malloc'd; NULL when out of memory). */
char *lt_ckpt_path(const char *dir, int64_t step);

/* The checkpoint of DIR with the highest step (ckpt-NNNNNNNN.bin; temporaries and other
 * names ignored): *path_out malloc'd, or NULL when there is none (or DIR does not exist).
 * Errors: LT_ERR_IO when DIR cannot be read. */
lt_status lt_ckpt_latest(const char *dir, char **path_out, lt_error *err);

/* Delete all but the newest `keep` (>= 1) checkpoints of DIR. Errors: LT_ERR_IO. */
lt_status lt_ckpt_prune(const char *dir, int keep, lt_error *err);

/* ---------------------------------------------------------------- checkpoints in parts
 * The distributed engine writes DIR/ckpt-NNNNNNNN.d/: one part per pipeline stage
 * (stage-S.bin, its tensors' parameters and moments, written by the stage's DP rank 0) and
 * manifest.txt, written by rank 0 once every part is on disk: it names the parts with
 * their sizes and checksums, the model's dimensions and the training state. Without a
 * complete manifest the directory is not a checkpoint (lt_ckpt_latest skips it,
 * lt_ckpt_prune removes it). lt_ckpt_read and lt_ckpt_peek take such a directory as they
 * take a file, and assemble the whole model from every part: any layout, or one process,
 * resumes from it (train/io/ckpt_dist.c has the byte layout). */

struct lt_dist; /* train/dist/dist.h */
/* Collective (every rank): write the checkpoint of st->step in parts under dir. */
lt_status lt_ckpt_dist_write(const struct lt_dist *d, const char *dir, const lt_llama *m, const lt_adamw *opt,
                             const lt_ckpt_state *st, lt_error *err);
/* "DIR/ckpt-%08lld.d" (malloc'd). */
char *lt_ckpt_dist_path(const char *dir, int64_t step);
/* A directory (a checkpoint in parts, complete or not)? With a manifest? */
bool lt_ckpt_is_dist(const char *path);
bool lt_ckpt_dist_complete(const char *path);
lt_status lt_ckpt_dist_read(const char *path, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st, lt_error *err);
/* One rank's part of such a checkpoint (lt_llama_create_part's arguments; held->l1 < 0:
 * every layer): only the part files holding one of its tensors are read (a file's index list
 * is read first), one at a time, and of each tensor only its TP shard is kept; m (and opt, if
 * not NULL) are created. lt_ckpt_dist_read is this with the whole model (tp 1, every layer). */
lt_status lt_ckpt_dist_read_stage(const char *path, int tp, int tp_rank, const lt_llama_part *held, lt_llama *m,
                                  lt_adamw *opt, lt_ckpt_state *st, lt_error *err);
lt_status lt_ckpt_dist_peek(const char *path, lt_ckpt_info *info, lt_error *err);
/* The static name of preset `stored`, or "custom" (train/io/ckpt_dist.c; both formats use it). */
const char *lt_ckpt_model_name(const char *stored);

#endif /* LT_TRAIN_CKPT_H */
