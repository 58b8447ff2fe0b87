/*
 * dataprep/profile.h — the length profile of a corpus: how documents, tokens and forward
 * FLOPs are shared among length buckets (SlimPack Fig. 1 / 2.1.1: "80% of samples shorter
 * than 4K ... 1% of the longest samples contribute nearly half of the workload";
 * InfiniPipe Fig. 2: "statistics of sequences grouped by length intervals", samples and
 * tokens above, computation FLOPs below).
 *
 * Input: an array of document lengths in tokens (the caller reads them from its indexes;
 * this module knows no file format) and a model shape (lib/model.h) whose
 * lt_model_forward_flops prices each document as one causal sequence.
 *
 * Buckets (1K = 1024 tokens), LT_PROFILE_N_BUCKETS of them, each [min_tokens, max_tokens]
 * inclusive:
 *
 *     0  "<1K"        [0, 1023]            (length-0 documents count here, 0 tokens)
 *     i  "2^(i-1)K-2^iK" for i = 1..8: [1024 * 2^(i-1), 1024 * 2^i - 1]
 *        "1K-2K" [1024, 2047], "2K-4K" [2048, 4095], ..., "128K-256K" [131072, 262143]
 *     9  ">=256K"     [262144, unbounded)   (max_tokens UINT64_MAX here, null in JSON)
 *
 * Per bucket: documents, tokens, forward FLOPs, and each as a percentage of its total
 * (0 when the total is 0, never NaN). Statistics of the lengths: mean, median (the middle
 * value, or the mean of the two middle values for an even count), p90 and p99 by the
 * nearest-rank rule (the smallest length L such that at least p% of the documents are
 * <= L, i.e. the ceil(p/100 * n)-th smallest), and max.
 *
 * Renderers: an aligned text table for people, a JSON object (lib/json.h writer) for
 * scripts, and a standalone SVG chart (SlimPack Fig. 1 style: per bucket three bars,
 * % documents, % tokens, % forward FLOPs, on a log y axis 0.01% .. 100%).
 *
 * Thread-safety: no global state; an lt_profile is a plain value owned by the caller.
 */
#ifndef LT_PROFILE_H
#define LT_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/error.h" /* lt_status, lt_error */
#include "lib/json.h"  /* lt_json */
#include "lib/model.h" /* lt_model_shape, lt_model_forward_flops */

#define LT_PROFILE_N_BUCKETS 10
#define LT_PROFILE_MODEL_NAME_MAX 64

typedef struct lt_profile_bucket {
    const char *label;    /* "<1K", "1K-2K", ..., ">=256K" (static storage) */
    uint64_t min_tokens;  /* inclusive */
    uint64_t max_tokens;  /* inclusive; UINT64_MAX for the last bucket */
    uint64_t documents;   /* documents whose length falls in [min_tokens, max_tokens] */
    uint64_t tokens;      /* their tokens */
    double flops;         /* their forward FLOPs, sum of lt_model_forward_flops(len) */
    double pct_documents; /* 100 * documents / total documents (0 if none) */
    double pct_tokens;    /* 100 * tokens / total tokens (0 if none) */
    double pct_flops;     /* 100 * flops / total flops (0 if none) */
} lt_profile_bucket;

typedef struct lt_profile {
    char model[LT_PROFILE_MODEL_NAME_MAX]; /* the shape's name ("custom" when it has none) */
    lt_model_shape shape;                  /* copy of the shape (its name pointer: the caller's) */
    uint64_t documents;                    /* n */
    uint64_t tokens;                       /* sum of the lengths */
    double flops;                          /* sum over the buckets */
    lt_profile_bucket buckets[LT_PROFILE_N_BUCKETS];
    /* statistics of the lengths; all 0 when documents == 0 */
    double mean;
    double median;
    uint64_t p90, p99, max;
} lt_profile;

/* The bucket index (0 .. LT_PROFILE_N_BUCKETS-1) of a document of `length` tokens. */
size_t lt_profile_bucket_of(uint64_t length);
/* Bucket i's label ("<1K", ...), first and last length (inclusive; UINT64_MAX for the last). */
const char *lt_profile_bucket_label(size_t i);
uint64_t lt_profile_bucket_min(size_t i);
uint64_t lt_profile_bucket_max(size_t i);

/*
 * Profile lengths[0..n) for model `m` into *out (fully overwritten; nothing to free).
 * n == 0 is fine (lengths may then be NULL): an empty profile. `lengths` is not modified;
 * the percentiles need a private copy (8 bytes per document; quickselect, O(n) expected).
 * Errors: the model's lt_model_validate error (LT_ERR_CONFIG); LT_ERR_INPUT if the total
 * token count overflows 64 bits; LT_ERR_NOMEM; LT_ERR_INTERNAL for NULL arguments. On an
 * error *out is not a usable profile.
 */
lt_status lt_profile_compute(const uint64_t *lengths, size_t n, const lt_model_shape *m, lt_profile *out,
                             lt_error *err);

/* An aligned text table: a header naming the model and the totals, one row per bucket
 * (documents, %, tokens, %, forward FLOPs, %), a total row, and a statistics line; for an
 * empty profile the header says "no documents". Write errors show in ferror(out). */
void lt_profile_print_table(const lt_profile *p, FILE *out);

/*
 * Write the profile as ONE JSON object (a complete value, or a value after lt_json_key):
 *   {"model": NAME, "documents": N, "tokens": N, "flops": X,
 *    "buckets": [{"label", "min_tokens", "max_tokens" (inclusive; null for the last),
 *                 "documents", "tokens", "flops", "pct_documents", "pct_tokens",
 *                 "pct_flops"}, ... all LT_PROFILE_N_BUCKETS in order],
 *    "stats": {"mean", "median", "p90", "p99", "max"}}   (each stat null when N == 0)
 */
void lt_profile_json(const lt_profile *p, lt_json *j);
/* The same object with, when n_src > 0, a member "sources": [{"name": NAME ("" = the
 * unnamed data.input), "profile": {the profile of its documents, as above}}, ...]. */
void lt_profile_json_sources(const lt_profile *p, const lt_profile *src, const char *const *names, size_t n_src,
                             lt_json *j);
/* A "by source" table: per source its documents, tokens and forward FLOPs, each also as a
 * share of the whole corpus (`all`), and its mean and p99 length. */
void lt_profile_print_sources(const lt_profile *all, const lt_profile *src, const char *const *names, size_t n_src,
                              FILE *out);

/*
 * A standalone SVG document (900 x 520): per bucket three bars side by side — % documents,
 * % tokens, % forward FLOPs — on a log y axis from 0.01% to 100% with gridlines and labels
 * at the decades, a legend, axis titles, and `title` (NULL: "Document length profile")
 * with the model name and the totals beneath it. A bar whose value is 0 is not drawn; a
 * value below 0.01% is drawn as a 2-pixel stub. Every bar is
 *     <rect class="bar" data-metric="documents|tokens|flops" data-bucket=LABEL
 *           data-pct=VALUE ...><title>...</title></rect>
 * and nothing else carries data-metric. Text is XML-escaped; invalid UTF-8 and characters
 * XML does not allow become U+FFFD. An empty profile gives the axes and "no documents".
 * Returns LT_ERR_IO when writing to `out` failed.
 */
lt_status lt_profile_svg(const lt_profile *p, const char *title, FILE *out, lt_error *err);

/* The same chart with, below it, a "by source" panel when n_src > 0: per source (src[i],
 * the profile of source names[i]'s documents; "" = the unnamed data.input) three horizontal
 * bars, its share of the corpus's documents, tokens and forward FLOPs (0..100 %), each
 *     <rect class="srcbar" data-source=NAME data-of="documents|tokens|flops" data-share=PCT>
 * (not "bar": the chart's contract above holds). The SVG grows by 60 + 36 n_src pixels. */
lt_status lt_profile_svg_sources(const lt_profile *p, const lt_profile *src, const char *const *names, size_t n_src,
                                 const char *title, FILE *out, lt_error *err);

#endif /* LT_PROFILE_H */
