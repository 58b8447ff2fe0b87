/*
 * train/io/hf.h — the model as a Hugging Face model directory (transformers'
 * LlamaForCausalLM, MistralForCausalLM without a sliding window, Qwen2ForCausalLM): export
 * for use elsewhere, import to start training from published weights. The family
 * (model_type) and Llama 3.1's "llama3" RoPE scaling are read into the model's shape and
 * written back by export.
 *
 * A directory holds config.json (the architecture) and the weights as model.safetensors,
 * or as shards listed by model.safetensors.index.json ({"weight_map": {tensor: file}}).
 * Tensor names and shapes are those of train/model/model.h's tensor table: matrices [rows, cols],
 * norm weights 1-D [hidden]; with tied embeddings there is no lm_head.weight (transformers
 * ties it to model.embed_tokens.weight on load).
 *
 * Export writes F32 (exact). Import reads F32, F16 and BF16 (widened exactly) and refuses
 * what the trainer's model does not implement, naming it: another model_type, RoPE scaling
 * other than llama3 (rope_scaling / rope_parameters with a rope_type other than "default"
 * and "llama3"), sliding-window attention (a sliding_window below max_position_embeddings),
 * Llama's attention or MLP biases, an activation other than SiLU, a head_dim other than hidden / heads. Every tensor
 * of the table must be there with its shape (the first missing or misshaped one is named)
 * and finite; others (e.g. rotary_emb.inv_freq of old exports, a tied lm_head.weight) are
 * ignored and reported in lt_hf_import_info.
 *
 * Errors: LT_ERR_IO (cannot read or write; WHERE the file), LT_ERR_INPUT (a file that does
 * not describe a model the trainer can load; WHERE the file, a hint says what to do),
 * LT_ERR_NOMEM.
 */
#ifndef LT_TRAIN_HF_H
#define LT_TRAIN_HF_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"         /* lt_status, lt_error */
#include "train/model/model.h" /* lt_llama */

#define LT_HF_DEFAULT_MAX_POSITIONS 131072

/* Write DIR/config.json and DIR/model.safetensors for `m` (DIR is created if needed).
 * max_position_embeddings goes into config.json (the model has no such limit; 0 writes
 * LT_HF_DEFAULT_MAX_POSITIONS): pass plan.context_len when known. */
lt_status lt_hf_export(const lt_llama *m, const char *dir, int64_t max_position_embeddings, lt_error *err);

/* What an import found besides the model (for the command's notes). */
typedef struct lt_hf_import_info {
    size_t n_files;          /* safetensors files read */
    size_t n_ignored;        /* tensors of the files that are not parameters of the model */
    char first_ignored[128]; /* the first of them ("" when none) */
    unsigned dtypes;         /* bit (1 << lt_safetensors_dtype) for every dtype converted */
    int64_t max_position_embeddings; /* from config.json, 0 when absent */
} lt_hf_import_info;

/* Read the model in DIR into `m` (created here; zeroed on error). `info` may be NULL. */
lt_status lt_hf_import(const char *dir, lt_llama *m, lt_hf_import_info *info, lt_error *err);

#endif /* LT_TRAIN_HF_H */
