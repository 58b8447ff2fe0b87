/*
 * train/model/model.h — the Llama decoder the trainer executes: parameters, the unit of work, the
 * KV context of sliced samples, and the forward/backward of a unit through a range of
 * layers (CPU fp32 reference; train/cpu/kernels.h does the arithmetic).
 *
 * Model (Llama 2/3, Hugging Face LlamaForCausalLM):
 *   x = embed(tokens)
 *   per layer:  x += o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))  n = rmsnorm(x)
 *               x += down_proj(silu(gate_proj(n)) * up_proj(n))                       n = rmsnorm(x)
 *   logits = lm_head(rmsnorm(x))          (lm_head = embed_tokens when tied)
 * GQA (kv_heads <= heads), RoPE with `rotate_half` at absolute positions (its frequencies
 * optionally scaled as Llama 3.1's), no biases — except Qwen2's (shape.family), whose q_proj,
 * k_proj and v_proj add a bias (before RoPE): q = n Wq^T + bq. Mistral without a sliding
 * window is this model too.
 *
 * Parameters live in ONE contiguous fp32 buffer in a fixed order (the tensor table below,
 * also the order of checkpoints and of the Hugging Face export); gradients and optimizer
 * moments use the same layout, so lt_llama_views() maps any such buffer to named tensors.
 *
 * The unit (the engine's work item, DESIGN.md "Trainer engine"): a list of slices
 * (sample, [begin, end)) packed into one token stream of T rows. Attention is per sample
 * (document mask) and causal; a slice that does not start at token 0 attends to the K/V of
 * its sample's earlier tokens — the KV CONTEXT (InfiniPipe 2.1, ChunkFlow 4.2), a per-sample,
 * per-layer buffer that the forward of earlier slices filled — and its backward adds dK/dV
 * into the context's gradient buffer, which the earlier slices' backward then reads. So:
 * forward units of a sample run in slice order, backward units in reverse (FILO).
 *
 * Loss (the label convention): position t of a sample of length L predicts token t+1 when
 * t+1 < L; the sample's last token predicts nothing. A slice [b, e) with e < L predicts
 * token e at its last row (the label comes from the sample, not the slice). The loss of a
 * unit is the SUM of its rows' cross-entropies; the step's loss and every gradient are
 * scaled by 1/N, N = predicted tokens of the whole global batch = sum (L_i - 1), so any
 * split of a step into units gives the same gradients.
 *
 * Memory ownership: lt_llama owns its parameter buffer; lt_kvctx and lt_acts own theirs;
 * samples' token arrays belong to the caller and must outlive the calls that read them.
 * Thread-safety: one lt_llama may be read by several threads; everything else is per caller.
 */
#ifndef LT_TRAIN_MODEL_H
#define LT_TRAIN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"      /* lt_status, lt_error */
#include "lib/model.h"      /* lt_model_shape, lt_fused_head_rows */
#include "lib/threadpool.h" /* lt_pool */

/* ---------------------------------------------------------------- parameters */

/* One named tensor of the parameter buffer: rows x cols floats at `offset` (vectors have
 * rows == 1). `name` is the Hugging Face LlamaForCausalLM name ("model.layers.3.mlp.up_proj.weight"). */
typedef struct lt_tensor_info {
    char name[64];
    int layer; /* 0..layers-1, or -1 for embedding / final norm / LM head */
    int rows, cols; /* of this rank's shard (the whole tensor when split == LT_SPLIT_NONE) */
    size_t offset; /* in floats from the start of the buffer */
    /* tensor parallelism: how the whole tensor (full_rows x full_cols) is split over the TP
     * group and where this shard starts (its first row, or first column) */
    int split; /* LT_SPLIT_NONE (replicated), LT_SPLIT_ROWS, LT_SPLIT_COLS */
    int full_rows, full_cols, first;
    int index; /* the tensor's place in the whole model's table (its init stream, lt_llama_init) */
} lt_tensor_info;

enum { LT_SPLIT_NONE = 0, LT_SPLIT_ROWS = 1, LT_SPLIT_COLS = 2 };

/* Pointers to the tensors of one buffer laid out as the parameters are. */
typedef struct lt_layer_views {
    float *attn_norm;          /* [C]           input_layernorm */
    float *wq, *wk, *wv, *wo;  /* [qd,C] [kvd,C] [kvd,C] [C,qd] */
    float *bq, *bk, *bv;       /* [qd] [kvd] [kvd] Q/K/V biases (Qwen2); NULL without */
    float *mlp_norm;           /* [C]           post_attention_layernorm */
    float *wgate, *wup, *wdown;/* [F,C] [F,C] [C,F] */
} lt_layer_views;

typedef struct lt_llama_views {
    float *embed;      /* [V,C] model.embed_tokens */
    lt_layer_views *layer; /* [layers] (owned by the lt_llama; shared by all views of it) */
    float *final_norm; /* [C] model.norm */
    float *lm_head;    /* [V,C] lm_head, or == embed when tied */
} lt_llama_views;

typedef struct lt_llama {
    lt_model_shape shape; /* dims; rope_theta / norm_eps / tie_embeddings resolved (> 0) */
    int head_dim;         /* hidden / heads */
    float *rope_inv_freq; /* [head_dim / 2] RoPE's inverse frequencies (lt_model_rope_inv_freq) */
    size_t n_params;      /* floats in the parameter buffer */
    size_t n_params_whole; /* ... of the whole model (every tensor whole: tp = 1, every stage) */
    int n_tensors;
    lt_tensor_info *tensors; /* [n_tensors], buffer order */
    float *params;           /* [n_params] */
    lt_llama_views w;        /* views into params */
    lt_layer_views *layer_store; /* [layers * 2]: w's layer views, then scratch for lt_llama_views */
    /* Tensor parallelism with sequence parallelism (Megatron-LM, Shoeybi et al. 2019 3;
     * Korthikanti et al. 2022 4.2.2): this rank is rank tp_rank of a tp-way group and holds
     * its shard of every matrix: Q/K/V and gate/up by output rows (column-parallel: heads
     * and MLP columns split; Qwen2's Q/K/V biases with their rows), O and down by input
     * columns (row-parallel), the embedding and LM head by vocabulary rows (vocab-parallel); the norms are replicated. K/V heads are
     * split, never replicated: kv_heads must be a multiple of tp. tp = 1: the whole model. */
    int tp, tp_rank;
    int heads_l, kv_heads_l, ffn_l; /* this rank's heads, K/V heads, MLP columns */
    int vocab0, vocab_l;            /* this rank's vocabulary rows [vocab0, vocab0 + vocab_l) */
    /* The part of the model this rank holds (lt_llama_create_stage): layers [l0, l1), the
     * embedding, the final norm and LM head; the whole model by default. The tensor table
     * lists the held tensors only (lt_tensor_info.index keeps each one's place in the whole
     * model's table) and the views of the others are NULL. */
    int l0, l1;
    bool has_embed, has_head;
    /* A HelixPipe part (helix_pp > 0, lt_llama_helix_part): of every layer l, the tensors of
     * the parts the helix puts on stage helix_stage of helix_pp (HelixPipe 4.2): the first
     * norm and Q/K/V (with their biases) where l mod p is the stage, the output projection,
     * the second norm and the MLP where (l + 1) mod p is (the last layer's: on stage 0, with
     * the final norm and head); l0 = 0, l1 = layers. The attention
     * part of a layer whose Q/K/V it does not hold runs on the ones its pre-attention's stage
     * sends (train/exec). 0: the layers [l0, l1) whole. */
    int helix_pp, helix_stage;
    const struct lt_tp_ops *tp_ops; /* the group's collectives (lt_tp_ops); NULL with tp = 1 */
    /* The chunked MLP (HelixPipe 4.4.2; plan.mlp_chunk): the MLP's intermediates (gate, up,
     * act and their gradients: 3 ffn per row each) are made for at most mlp_chunk rows of a
     * unit at a time, in its backward always, in its forward where they are not kept (a
     * recomputed post-attention's); 0: every row at once. The chunks' GEMMs sum the same
     * products in another order: equal to the unchunked pass within rounding. */
    int mlp_chunk;
    /* where the passes run (train/model/backend.h): NULL is the CPU fp32 reference. With another
     * backend, activations, K/V and the gradient views handed to the passes are that
     * backend's memory, and `params` stays the fp32 host copy (checkpoints, optimizer). */
    const struct lt_backend *backend;
} lt_llama;

/* Allocate a model of `shape` (validated; rope_theta/norm_eps defaults applied) with zeroed
 * parameters. Errors: LT_ERR_CONFIG (bad shape), LT_ERR_NOMEM. */
lt_status lt_llama_create(lt_llama *m, const lt_model_shape *shape, lt_error *err);
/* The same for rank `rank` of a tp-way tensor-parallel group: its shard of every tensor
 * (the table above, shapes of the shard). LT_ERR_CONFIG naming parallel.tp when tp does
 * not divide the heads, the K/V heads or the MLP width, or exceeds the vocabulary. */
lt_status lt_llama_create_tp(lt_llama *m, const lt_model_shape *shape, int tp, int rank, lt_error *err);
/* A pipeline stage's part (DESIGN.md: each rank holds its own stage only): the tensors of
 * layers [l0, l1), with `first` the embedding, with `last` the final norm and LM head (and
 * a tied embedding, which the last stage's head reads), each TP rank `rank`'s shard of
 * them. Everything else of the model is absent: its views are NULL and a pass may not run
 * it (LT_ERR_INTERNAL). l0 = 0, l1 = layers, first, last: lt_llama_create_tp. */
lt_status lt_llama_create_stage(lt_llama *m, const lt_model_shape *shape, int tp, int rank, int l0, int l1, bool first,
                                bool last, lt_error *err);
/* Which tensors of the model a rank holds: layers [l0, l1) (every tensor of them), with
 * `first` the embedding, with `last` the final norm and LM head (and a tied embedding); with
 * helix_pp > 0 HelixPipe's stage helix_stage of helix_pp instead of [l0, l1) (lt_llama
 * helix_pp). */
typedef struct lt_llama_part {
    int l0, l1;
    bool first, last;
    int helix_pp, helix_stage;
} lt_llama_part;
/* lt_llama_create_stage for any part. */
lt_status lt_llama_create_part(lt_llama *m, const lt_model_shape *shape, int tp, int rank, const lt_llama_part *part,
                               lt_error *err);
/* HelixPipe's part of stage `stage` of a pp-stage pipeline (HelixPipe 4.2): the parts' tensors
 * the helix puts there; the embedding (layer 0's pre-attention), the last layer's
 * post-attention, the final norm and head on stage 0. */
lt_llama_part lt_llama_helix_part(int layers, int stage, int pp);
/* Is tensor t (of any table of m's shape) one of a layer's pre-attention part (the first
 * norm, Q/K/V and their biases)? */
bool lt_llama_pre_attention_tensor(const lt_llama *m, const lt_tensor_info *t);
/* The stage HelixPipe's partition puts tensor t on (lt_llama_helix_part). */
int lt_llama_helix_stage(const lt_llama *m, const lt_tensor_info *t, int pp);
/* The tensor table of lt_llama_create_tp without the parameters (m->params NULL): the
 * shapes and shard extents of TP rank `rank`, to place another rank's shards. */
lt_status lt_llama_create_table(lt_llama *m, const lt_model_shape *shape, int tp, int rank, lt_error *err);
/* The tensor whose place in the whole model's table is `index`, or NULL when m does not
 * hold it. */
const lt_tensor_info *lt_llama_tensor_by_index(const lt_llama *m, int index);

/* Copy this rank's shard of every tensor of part out of src, a buffer laid out as the
 * whole model `full` (same shape, tp = 1), into dst (part's layout): how a TP rank takes
 * its part of whole parameters (a checkpoint, a test's reference). */
void lt_llama_copy_shard(const lt_llama *full, const float *src, const lt_llama *part, float *dst);
/* The extent [*first, *first + *count) along its split of tensor t's shard (t: a tensor of
 * a table of m's tp) on TP rank `rank` (the whole extent of an unsplit tensor). */
void lt_llama_shard_extent(const lt_llama *m, const lt_tensor_info *t, int rank, int *first, int *count);
/* The floats of tensor t's shard on TP rank `rank` (t of a table of m's tp). */
size_t lt_llama_shard_floats(const lt_llama *m, const lt_tensor_info *t, int rank);
/* Tensor t's shard of TP rank `rank` (t of a table of m's tp) between `shard` (its rows x
 * cols floats in order) and its place in full_buf, a buffer laid out as the whole model
 * `full` (to_full), or the other way (!to_full: from full_buf into shard). `full` may be a
 * part at tp = 1 (lt_llama_create_stage): a tensor it does not hold is skipped. */
void lt_llama_shard_io(const lt_llama *m, const lt_tensor_info *t, int rank, const lt_llama *full, float *full_buf,
                       float *shard, bool to_full);
/* The same for one tensor: `whole` holds tensor t whole (full_rows x full_cols floats). */
void lt_llama_shard_tensor(const lt_llama *m, const lt_tensor_info *t, int rank, float *whole, float *shard,
                           bool to_whole);

/*
 * The collectives of a tensor-parallel group (lt_llama.tp_ops), over the group's tp ranks
 * in rank order, blocking; buffers are memory of the model's backend. Elements of `es`
 * bytes (the backend's act_bytes; fp32 statistics pass es = 4) are summed in fp32. `whole`
 * is the bytes of the rows gathered (or reduced) without the blocks' padding: what a ring
 * moves, (tp - 1) / tp of it from each rank, and what the communicator counts.
 *   all_gather      in place: `all` holds tp blocks of `block` bytes; this rank's block
 *                   (block tp_rank) is filled, the call fills the others from their ranks;
 *   reduce_scatter  in place: `all` holds tp blocks of n elements; afterwards block
 *                   tp_rank holds the sum over the ranks of their block tp_rank (the other
 *                   blocks are left undefined);
 *   all_reduce      n fp32 elements of buf, summed (or the maximum with `max`);
 *   reduce_scatter_post, wait (optional: NULL where the ops have none) the reduce-scatter
 *                   posted, returning at once with *pending, and finished by wait(pending):
 *                   `all` is the collective's until then. The backward posts the
 *                   sequence-parallel reduce-scatter of a column-parallel GEMM's input
 *                   gradient and computes the weight gradients while it runs (Megatron-LM's
 *                   overlap of the input-gradient communication with the weight-gradient
 *                   GEMM).
 * The distributed engine implements them over its communicator (train/dist: MPI, NCCL);
 * tests in one process with threads.
 */
typedef struct lt_tp_ops {
    void *ctx;
    lt_status (*all_gather)(void *ctx, void *all, size_t block, size_t whole, lt_error *err);
    lt_status (*reduce_scatter)(void *ctx, void *all, size_t n, size_t es, size_t whole, lt_error *err);
    lt_status (*all_reduce)(void *ctx, float *buf, size_t n, bool max, lt_error *err);
    lt_status (*reduce_scatter_post)(void *ctx, void *all, size_t n, size_t es, size_t whole, void **pending,
                                     lt_error *err);
    lt_status (*wait)(void *ctx, void *pending, lt_error *err);
} lt_tp_ops;
void lt_llama_free(lt_llama *m); /* NULL-safe; m is zeroed */

/* Fill `out` with views of `buf` (n_params floats, the parameter layout). `layer_views` is
 * caller storage for shape.layers lt_layer_views. */
void lt_llama_views_of(const lt_llama *m, float *buf, lt_layer_views *layer_views, lt_llama_views *out);

/* The tensor named `name`, or NULL. */
const lt_tensor_info *lt_llama_find_tensor(const lt_llama *m, const char *name);

/* Deterministic initialization from `seed` with lib/rng (Philox): tensor i draws from the
 * stream lt_rng_split(seed, i), so the result never depends on threads. Matrices and the
 * embedding ~ N(0, 0.02^2) (GPT-2 / Llama init); the output projections o_proj and
 * down_proj scaled by 1/sqrt(2 layers) (GPT-2's residual scaling); norm weights = 1. */
void lt_llama_init(lt_llama *m, uint64_t seed);

/* ---------------------------------------------------------------- batch, slice, unit */
/* The trainer's own sample / slice / unit (lt_train_*): plans/schedule/schedule.h's lt_slice and
 * lt_unit index a schedule's tables, these point at token arrays; the executor (which
 * includes both headers) turns the first into the second. */

/* A sample of the global batch: its tokens (caller-owned), length >= 1. */
typedef struct lt_train_sample {
    const int32_t *tokens;
    int len;
} lt_train_sample;

typedef struct lt_batch {
    const lt_train_sample *samples;
    int n_samples;
} lt_batch;

/* Tokens [begin, end) of sample `sample` (an index into the batch). */
typedef struct lt_train_slice {
    int sample;
    int begin, end;
} lt_train_slice;

typedef struct lt_train_unit {
    const lt_train_slice *slices;
    int n_slices;
} lt_train_unit;

/* Tokens of the unit (sum of its slices' lengths). */
int lt_unit_tokens(const lt_train_unit *u);

/* This rank's sequence-parallel rows of the unit (lt_layer_acts: its tokens whose position
 * p has p mod tp == tp_rank; all of them with tp = 1): the rows of a stage's [*, C] input,
 * output and their gradients on this rank. */
int lt_unit_sp_rows(const lt_llama *m, const lt_train_unit *u);

/* Predicted tokens of a whole batch: sum over samples of (len - 1): the loss denominator. */
int64_t lt_batch_predicted_tokens(const lt_batch *b);

/* LT_OK when every slice names a sample of `b`, 0 <= begin < end <= len and the unit has
 * tokens; else LT_ERR_INPUT naming the slice. Token ids must be < vocab (checked too). */
lt_status lt_unit_check(const lt_train_unit *u, const lt_batch *b, int vocab, lt_error *err);

/* ---------------------------------------------------------------- counting memory */

/*
 * How a caller counts the memory a step holds as it is allocated (train/exec/state.c's measured
 * peak per stage, lt_exec_stats.stage_peak_bytes): add(bytes) right after a buffer is
 * allocated, sub(bytes) right before it is freed. A KV context with a meter reports every
 * K/V and dK/dV buffer it reserves and releases (lt_kvctx.meter); a pass with one reports
 * its working memory for as long as the call holds it (lt_pass.meter: a forward's K/V rows
 * and residual-branch buffer, a backward's gradient scratch, the head's normed input,
 * logits row block and gradient). Bookkeeping of a few bytes per slice (attention segment
 * lists) is not reported. NULL: nothing is counted.
 */
typedef struct lt_meter {
    void *ctx;
    void (*add)(void *ctx, size_t bytes);
    void (*sub)(void *ctx, size_t bytes);
} lt_meter;

/* ---------------------------------------------------------------- KV context */

/*
 * Per sample and layer: post-RoPE keys and values of every position of the sample that a
 * forward has produced, and their gradients. Buffers are allocated on first use of a
 * sample and layer, at the sample's full length or at the rows its bound says this process
 * reads and writes (lt_kvctx_bound): K and V at the first forward over the layer
 * (lt_kvctx_reserve), dK and dV at its first backward (lt_kvctx_reserve_grad); the executor
 * frees them once the sample's last backward over the layer has run (lt_kvctx_release). The forward of slice [b,e) writes
 * rows b..e-1 and reads 0..e-1; its backward adds into dK/dV rows 0..e-1 and then reads its
 * own rows b..e-1 (complete once every later slice's backward has run: the FILO order).
 */
typedef struct lt_kv_sample {
    int len;
    float **k, **v, **dk, **dv; /* [layers] -> [rows, kvd]; NULL (the arrays, or an entry)
                                   until reserved; k[l] owns v[l]'s memory, dk[l] dv[l]'s */
    int *rows; /* [layers]: the rows layer l's buffers hold, 0 = len (no bound); NULL = none */
} lt_kv_sample;

typedef struct lt_kvctx {
    int layers, kvd;
    int n_samples;
    lt_kv_sample *s; /* [n_samples] */
    bool with_grad;  /* gradients may be reserved */
    const lt_meter *meter; /* NULL (lt_kvctx_init), or told of every buffer reserved and
                              released (the bytes lt_kvctx_bytes counts) */
    const struct lt_backend *be; /* whose memory the buffers are (the model's backend); their
                                    elements are be->act_bytes wide (float * by type only) */
} lt_kvctx;

lt_status lt_kvctx_init(lt_kvctx *c, const lt_llama *m, const lt_batch *b, bool with_grad, lt_error *err);
/* Sample i's buffers of layer l hold rows [0, rows) only (rows in [1, len]): what the slices
 * this process runs read and write, their largest end (a stage where a sample's later slices
 * never attend needs none of their rows: HelixPipe's attention stages). Raises the bound of
 * earlier calls; LT_ERR_INTERNAL once the layer's buffers are reserved below it. */
lt_status lt_kvctx_bound(lt_kvctx *c, int sample, int l, int rows, lt_error *err);
/* Make sure sample i's K/V (or dK/dV) of layers [l0, l1) exist (zeroed when new). */
lt_status lt_kvctx_reserve(lt_kvctx *c, int sample, int l0, int l1, lt_error *err);
lt_status lt_kvctx_reserve_grad(lt_kvctx *c, int sample, int l0, int l1, lt_error *err);
/* Free sample i's buffers of layers [l0, l1); returns the bytes freed. */
size_t lt_kvctx_release(lt_kvctx *c, int sample, int l0, int l1);
/* Zero every gradient buffer (start of a step's backward), keep allocations. */
void lt_kvctx_zero_grad(lt_kvctx *c);
void lt_kvctx_free(lt_kvctx *c);
/* Bytes currently allocated. */
size_t lt_kvctx_bytes(const lt_kvctx *c);
/* Rows [0, rows) of sample i's layer-l keys and values (grad: their gradients) between the
 * context and buf, laid out as the K rows then the V rows (2 x rows x kvd elements of the
 * backend's act_bytes: lt_kvctx_rows_bytes): out of the context into buf (!to_ctx; they
 * must be reserved), or into it (to_ctx, reserved first): the K/V copied, the gradients
 * ADDED to what the context holds. Gradients taken out are zeroed here: their sum moves on
 * to the earlier slice's process, so a later backward on this one (a sample whose slices
 * come back to a stage: a, b, a, b) adds only what came after. How a sample's K/V reach
 * another process's attention and its dK/dV come back (train/exec/transfers.c, HelixPipe's
 * attention stages). */
lt_status lt_kvctx_rows(lt_kvctx *c, int sample, int l, int rows, bool grad, bool to_ctx, void *buf, lt_error *err);
size_t lt_kvctx_rows_bytes(const lt_kvctx *c, int rows);

/* ---------------------------------------------------------------- activations of a unit */

/* What the forward of one unit keeps for its backward (per layer of the range, then the
 * head's part). Allocated for T tokens and a layer range [l0, l1).
 *
 * Under tensor parallelism (lt_llama.tp > 1) the arrays marked SP hold only this rank's
 * SEQUENCE-PARALLEL rows (Korthikanti et al. 2022 4.2.2: the residual stream and the norms
 * on 1/tp of the tokens): the unit's rows whose token position p has p mod tp == tp_rank,
 * Tl of them, in unit order. The rule depends on the token alone, not on the unit, so a
 * row moved between units (an asymmetric backward's gather) stays on its rank. The other
 * arrays hold every row for this rank's heads / MLP columns (qd, nh, F of the shard). */
typedef struct lt_layer_acts {
    float *x;      /* SP [Tl,C] layer input (residual stream) */
    float *n1;     /* SP [Tl,C] rmsnorm(x) */
    float *rstd1;  /* SP [Tl] */
    float *q;      /* [T,qd] post-RoPE queries */
    float *att;    /* [T,qd] attention output (before o_proj) */
    float *lse;    /* [T,nh] log-sum-exp of each row's scores */
    float *x2;     /* SP [Tl,C] x + attention branch */
    float *n2;     /* SP [Tl,C] rmsnorm(x2) */
    float *rstd2;  /* SP [Tl] */
    float *gate;   /* [T,F] */
    float *up;     /* [T,F] */
    float *act;    /* [T,F] silu(gate) * up */
} lt_layer_acts;

typedef struct lt_acts {
    int T, l0, l1;
    int32_t *ids;          /* [T] token id of each row */
    int32_t *pos;          /* [T] absolute position of each row in its sample */
    int32_t *targets;      /* [T] next token, or -1 */
    /* sequence parallelism (tp > 1; with tp = 1, Tl = N = T, lrow[r] = slot[r] = r) */
    int Tl;                /* this rank's SP rows */
    int N;                 /* the most SP rows of any rank of the group (the collectives' block) */
    int32_t *lrow;         /* [T] row r's index among this rank's SP rows, or -1 */
    int32_t *slot;         /* [T] row r's place in a gathered [tp, N] block array: owner N + index */
    lt_layer_acts *layer;  /* [l1 - l0] */
    float *out;            /* SP [Tl,C] output of the last layer of the range */
    /* head (last stage): */
    float *dnf_in;         /* SP [Tl,C] gradient w.r.t. the final norm's input, from the fused head */
    double loss_sum;       /* head: summed cross-entropy of the unit's predicting rows */
    int n_predicting;      /* head: rows with a target */
    float *buf;            /* the single allocation behind the float arrays above */
    float *scratch;        /* lt_acts_part_scratch: the recomputed post-attention's arrays, while held */
    int mlp_rows;          /* rows gate, up and act hold: T, or a chunk's (lt_llama.mlp_chunk) in the
                              scratch of a recomputed post-attention */
    bool mlp_in_backward;  /* the scratch is the recompute's before a backward that remakes the
                              MLP's chunks itself: the forward stops after the MLP's norm */
    size_t scratch_bytes;
    int32_t *ibuf;         /* ... and behind ids, pos and targets */
    int32_t *ibuf_sp;      /* ... and behind lrow and slot (NULL with tp = 1) */
    size_t bytes;          /* of buf and ibuf */
    bool window;           /* lt_acts_alloc_window: one layer's storage for every layer of the range */
    unsigned parts;        /* lt_acts_alloc_parts: the layer parts whose arrays it keeps (1 << lt_layer_part
                              bits); 0: every array */
    const struct lt_backend *be; /* whose memory buf is (train/model/backend.h); the model's backend */
} lt_acts;

/* Allocate activations for unit `u` of batch `b` through layers [l0, l1); `head` adds the
 * head's buffers. Fills pos and targets. Errors: LT_ERR_NOMEM, LT_ERR_INPUT (bad unit). */
lt_status lt_acts_alloc(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0, int l1,
                        bool head, lt_error *err);
/* A WINDOW set for a backward of [l0, l1) whose activations are filled one layer at a time
 * (the lt_cp_hooks.layer_begin of lt_llama_backward_group): ids, pos, targets, the head's
 * dnf_in, and one layer's storage that every layer of the range shares; no `out`. A
 * backward reads layer l's activations only while it runs layer l, so one layer's copy is
 * all that is live of them (an asymmetric backward unit's rows, SlimPack 4.1.2, gathered
 * per layer). Not for a forward (refused). */
lt_status lt_acts_alloc_window(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0,
                               int l1, bool head, lt_error *err);
void lt_acts_free(lt_acts *a);
/* A set for HelixPipe's layer parts `parts` (bits 1 << lt_layer_part, below) of layer l in
 * one process: only the arrays those parts keep for their backward (lt_llama_forward_part),
 * the others NULL: the pre-attention its input x and the first norm's output and
 * statistics; the attention the norm's output, Q, its output and log-sum-exps (K and V live in
 * the context); the post-attention x, the attention output, the rest of the layer and `out`
 * (and with `head` the head's dnf_in). Whole-layer passes refuse such a set. */
lt_status lt_acts_alloc_parts(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l,
                              bool head, unsigned parts, lt_error *err);
/* ... with this bit in `parts`: the layer input x is not allocated; the caller points
 * layer[0].x at a buffer that outlives the set's readers of it (the layer before's output,
 * which a pre-attention part then reads in place, or a received transfer; with
 * LT_ACTS_POST_RECOMPUTED the post-attention's recompute reads it too). */
#define LT_ACTS_X_OUTSIDE 1u
/* ... with this bit: the post-attention part is recomputed (HelixPipe 4.4.1, recomputation
 * without attention): the set keeps its inputs (x and the attention output) but not the rest
 * of the layer (x2, n2, the MLP's arrays), which lt_acts_part_scratch holds while a forward
 * or the recompute before its backward needs them. */
#define LT_ACTS_POST_RECOMPUTED 16u
/* The dropped arrays of a set with LT_ACTS_POST_RECOMPUTED in a buffer of their own (alloc),
 * or that buffer freed (!alloc; NULL-safe); *bytes: the bytes held (0 after freeing). The
 * MLP's arrays hold one chunk of rows when m->mlp_chunk is below the set's rows (the
 * forward makes and drops them chunk by chunk); `for_backward` with such chunks: the
 * recompute before a backward stops after the MLP's norm, and the backward remakes each
 * chunk's gate, up and act before its gradients (the forward's GEMMs on the same rows: the
 * same values). */
lt_status lt_acts_part_scratch(lt_acts *a, const lt_llama *m, bool alloc, bool for_backward, size_t *bytes,
                               lt_error *err);

/* Moving rows between sets (how an asymmetric backward unit, SlimPack 4.1.2, whose rows
 * come from several forward units, gets its activations). A ROW of layers [l0, l1) with or
 * without the head is what the backward reads of one token: each layer's arrays, then with
 * `head` the head's dnf_in (`out` is not moved: no backward reads it); lt_acts_row_floats
 * floats. [l0, l1) must lie inside the set's range (one layer for a window set), and `head`
 * needs a set with the head's buffer (LT_ERR_INTERNAL otherwise).
 *   copy    row srow of src into row drow of dst; both rows must hold the same token at the
 *           same position (LT_ERR_INTERNAL otherwise);
 *   pack    row `row` of a into buf, unpack buf into row `row` of a: for moving it between
 *           processes (a context-parallel group's regrouped backward, train/exec/rows.c); buf is
 *           memory of a's backend (host memory on the CPU ones, device memory on the GPU:
 *           the exchange moves it where it lives). ids,
 *           pos and targets are not moved: the receiving set was allocated for the same
 *           tokens. */
lt_status lt_acts_copy_row(lt_acts *dst, int drow, const lt_acts *src, int srow, int l0, int l1, bool head,
                           const lt_llama *m, lt_error *err);
size_t lt_acts_row_floats(const lt_llama *m, int l0, int l1, bool head);
lt_status lt_acts_pack_row(const lt_acts *a, int row, int l0, int l1, bool head, const lt_llama *m, float *buf,
                           lt_error *err);
lt_status lt_acts_unpack_row(lt_acts *a, int row, int l0, int l1, bool head, const lt_llama *m, const float *buf,
                             lt_error *err);

/* Row `row`'s index among a's sequence-parallel rows (the rows of its SP arrays and of the
 * [*, C] inputs and gradients beside it), or -1 when another TP rank holds it; `row`
 * itself with tp = 1. */
int lt_acts_sp_row(const lt_acts *a, int row);

/* Keep rows rows[0..n) of a (strictly increasing, 1 <= n <= T) and drop the others: the
 * kept rows move down in place (rows[k] becomes row k of every array) and the buffers shrink
 * to the n rows' size, so a->bytes is what stays allocated. How a forward unit of an
 * asymmetric schedule stops holding the rows a backward unit has consumed (DESIGN.md
 * "Trainer engine": activations per slice, not per unit). Not for a window set. */
lt_status lt_acts_keep_rows(lt_acts *a, const int *rows, int n, const lt_llama *m, lt_error *err);

/* ---------------------------------------------------------------- forward / backward */

/* Which part of the model a call runs: layers [l0, l1); `embed` when the stage holds the
 * embedding (then `in` is ignored), `head` when it holds final norm + LM head + loss. */
typedef struct lt_pass {
    int l0, l1;
    bool embed, head;
    /* head only: scale of the loss gradient (1/N of the global batch); 0 = no gradient
     * (eval). With scale > 0 the head's backward runs fused with its forward, as llm.c
     * does: dlogits are known once the logits are, so the [T,V] logits are never stored
     * (they are computed in row blocks); the head's parameter gradients go to `grads`
     * immediately and the gradient of the final norm's input waits in acts->dnf_in. */
    float loss_scale;
    /* NULL, or told of the call's working memory while it is held (lt_meter); the
     * activations, K/V and gradients the caller passes in are the caller's to count */
    const lt_meter *meter;
} lt_pass;

/*
 * Forward of unit u. `in` is the [T,C] input of layer l0 (NULL when pass->embed);
 * `acts` were allocated for (u, l0, l1, head). K/V rows of the unit's slices go into
 * `kv`. With pass->head: *loss_sum = summed cross-entropy of the unit's predicting rows
 * (unscaled), and `logits_out` (optional, [T,V]) receives the logits. grads (views of a
 * gradient buffer) is written only by a fused head with loss_scale > 0 (+=).
 * The output of layer l1-1 is acts->out (the next stage's `in`).
 */
lt_status lt_llama_forward(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                           const float *in, lt_kvctx *kv, lt_acts *acts, const lt_llama_views *grads,
                           double *loss_sum, float *logits_out, lt_pool *pool, lt_error *err);

/*
 * Backward of unit u through the same pass. `dout` is the gradient of acts->out ([T,C]) —
 * NULL when pass->head (the fused head's acts->dnf_in is used). Parameter gradients are
 * added into `grads`; dK/dV into kv's gradient buffers. When pass->embed the embedding's
 * gradient is added too; otherwise `din` ([T,C], +=) receives the gradient of `in` (the
 * previous stage's dout).
 */
lt_status lt_llama_backward(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                            const float *dout, lt_kvctx *kv, lt_acts *acts, const lt_llama_views *grads,
                            float *din, lt_pool *pool, lt_error *err);

/*
 * A context-parallel group (DP-Merge, SlimPack 4.1.1; docs/plans-schema.md "The one CP
 * rule"): G units u[0..G) holding disjoint shards of the same slices, run through the same
 * pass in per-layer lockstep. At each layer every member's keys/values go into the shared
 * context before any member's attention reads it, and in the backward every member's
 * attention backward adds its dK/dV before any member reads its own rows' gradients: the
 * K/V exchange of ring attention, done through the context in one process. in/dout/din and
 * a hold one entry per member; the loss is the members' sum. With G = 1 these are exactly
 * lt_llama_forward / lt_llama_backward (which call them).
 */
/*
 * A group spread over processes (the distributed engine, train/exec/ring.c over train/dist/comm.h):
 * each process runs its own members (often one, or none when its shard is empty: G = 0 is
 * allowed then) and the hooks exchange the rest with the other processes, per layer:
 *   kv_ready(l)   forward, after the local members' K/V rows of layer l are in the context
 *                 and before any attention reads it: bring in the other members' rows;
 *   dkv_begin(l)  backward, before the local members' attention backward of layer l;
 *   dkv_ready(l)  backward, after it and before the local members read their own rows'
 *                 dK/dV: make the context's dK/dV the sum over every member;
 *   layer_begin(l) backward, before anything of layer l: the local members' activations of
 *                 layer l may be filled now (window sets, lt_acts_alloc_window);
 *   layer_done(l) backward, after every local member's backward of layer l: its parameter
 *                 gradients are complete for this call (the engine starts their DP
 *                 all-reduce after a stage's last backward: overlap with the layers below);
 *   weights(l)    forward and backward, before anything of layer l reads its weights: they
 *                 must be whole by its return (fsdp's per-layer all-gather, the next
 *                 layer's prefetched meanwhile).
 * NULL hooks: every member is local (the one-process executor); a NULL entry is skipped.
 */
typedef struct lt_cp_hooks {
    void *ctx;
    lt_status (*kv_ready)(void *ctx, int layer, lt_error *err);
    lt_status (*layer_begin)(void *ctx, int layer, lt_error *err);
    lt_status (*dkv_begin)(void *ctx, int layer, lt_error *err);
    lt_status (*dkv_ready)(void *ctx, int layer, lt_error *err);
    lt_status (*layer_done)(void *ctx, int layer, lt_error *err);
    lt_status (*weights)(void *ctx, int layer, lt_error *err);
} lt_cp_hooks;

lt_status lt_llama_forward_group(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                                 int G, const float *const *in, lt_kvctx *kv, lt_acts *a,
                                 const lt_llama_views *grads, const lt_cp_hooks *hooks, double *loss_sum,
                                 lt_pool *pool, lt_error *err);
lt_status lt_llama_backward_group(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                                  int G, const float *const *dout, lt_kvctx *kv, lt_acts *a,
                                  const lt_llama_views *grads, const lt_cp_hooks *hooks, float *const *din,
                                  lt_pool *pool, lt_error *err);

/*
 * HelixPipe's attention-parallel partition (HelixPipe 4.2): one part of one layer l of unit
 * u, so that the three parts of a layer can run on different pipeline stages. With the QKV
 * linear moved into the attention part, as the paper does to send the QKV input rather than
 * Q, K and V across the pre-attention / attention boundary:
 *   PRE   x = the embedding (pass->embed) or `in` (the previous layer's output), n1 =
 *         rmsnorm(x)                                   -> the attention part needs n1; x
 *                                                         passes on to the post part
 *   ATTN  q/k/v = n1 W (+ biases), RoPE, the unit's K/V rows into kv, att = attention
 *   POST  x2 = x + att Wo, out = x2 + MLP(rmsnorm(x2)) (acts->out); with pass->head the LM
 *         head (loss, fused head gradients as lt_llama_forward's)
 * Composing PRE, ATTN, POST (forward), then POST, ATTN, PRE (backward) of every layer is
 * lt_llama_forward / lt_llama_backward of the layer, the same kernels in the same order (the
 * gradients are bit-identical). pass->l1 = pass->l0 + 1 = l + 1; `a` is allocated for (u, l,
 * l + 1, head) and shared by the three parts (in one process; a stage of a distributed run
 * holds the fields its part reads). The values are numbered as the plan's lt_op_part.
 * Backward: what crosses the parts lives in `pg` (lt_part_grads_alloc for a): POST turns
 * dout (or the head's dnf_in) into dres = d x2 and datt; ATTN turns datt into dn1 (adding the
 * unit's dK/dV into kv, reading its own rows' complete gradients as lt_llama_backward does:
 * FILO over a sample's slices); PRE adds the norm's gradient to dres, the gradient of x: into
 * the embedding's gradients (pass->embed) or added into din.
 */
typedef enum lt_layer_part { LT_LAYER_PRE = 1, LT_LAYER_ATTN = 2, LT_LAYER_POST = 3 } lt_layer_part;
typedef struct lt_part_grads {
    float *dres; /* SP [Tl, C] the residual stream's gradient */
    float *dn1;  /* SP [Tl, C] the first norm's output gradient */
    float *datt; /* [T, qd] the attention output's gradient (this TP rank's heads) */
    float *buf;  /* the one allocation behind them (the backend's memory) */
    size_t bytes;
    const struct lt_backend *be;
} lt_part_grads;
size_t lt_part_grads_bytes(const lt_llama *m, const lt_acts *a);
lt_status lt_part_grads_alloc(lt_part_grads *g, const lt_llama *m, const lt_acts *a, lt_error *err);
void lt_part_grads_free(lt_part_grads *g); /* NULL-buffer-safe; g is zeroed */
lt_status lt_llama_forward_part(const lt_llama *m, const lt_pass *pass, lt_layer_part part, const lt_train_unit *u,
                                const float *in, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                                double *loss_sum, lt_pool *pool, lt_error *err);
lt_status lt_llama_backward_part(const lt_llama *m, const lt_pass *pass, lt_layer_part part, const lt_train_unit *u,
                                 const float *dout, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                                 const lt_part_grads *pg, float *din, lt_pool *pool, lt_error *err);

/* Convenience for tests, eval and the --whole trainer: forward (and with grads != NULL,
 * backward) of a whole batch split into units, through all layers in one process: forward
 * units in order, backward units in reverse order. Returns the summed loss in *loss_sum
 * (divide by lt_batch_predicted_tokens for the mean). loss_scale as in lt_pass (used only
 * with grads). */
/* kv: a context initialized for b (with gradients when grads != NULL) that the caller may
 * inspect afterwards, or NULL for a private one. */
lt_status lt_llama_step_units(const lt_llama *m, const lt_batch *b, const lt_train_unit *units, int n_units,
                              float loss_scale, const lt_llama_views *grads, lt_kvctx *kv,
                              double *loss_sum, lt_pool *pool, lt_error *err);

#endif /* LT_TRAIN_MODEL_H */
