/*
 * plans/batches/sampler.h — the planner's batch sampler: documents -> samples -> global batches.
 *
 * Three layers, each a pure function of what comes before it (docs/sampler.md has the
 * why and worked examples):
 *
 *   corpus   the documents' token counts in the canonical order: tasks ascending, each
 *            task's documents in index order (the order of `dataprep cat` and `dataprep
 *            lengths`). Loaded from a lengths file (one task, task 0, doc = the count's
 *            position among the file's counts) or from a dataprep output directory.
 *   samples  what one training sequence is (DESIGN.md: at most context_len tokens). Policy
 *            `truncate` (the papers' setting: SlimPack 5.1, InfiniPipe 5.1, ChunkFlow 5):
 *            each document gives one sample, its first min(len, C) tokens. Policy `split`:
 *            a document of len tokens gives ceil(len / C) samples, the pieces
 *            [k*C, min((k+1)*C, len)). A document of 0 tokens gives no sample. Sample ids
 *            number the samples in corpus order (documents in order, pieces in order), so
 *            an id is stable for a given (corpus, policy, context_len).
 *   batches  epoch e is a permutation of all N samples (Fisher-Yates driven by lib/rng.h,
 *            see "Stream layout"); the epochs laid end to end form one sequence of
 *            positions, and step t (B = global_batch) takes positions [t*B, (t+1)*B).
 *            A step may straddle an epoch boundary (when B does not divide N); the
 *            boundary rule below keeps the samples of every step distinct.
 *
 * Invariants (tests/plans/test_sampler.c checks each):
 *   - every epoch's positions hold every sample exactly once;
 *   - the B samples of a step are distinct (B <= N is required);
 *   - deterministic: the same corpus lengths, policy, context_len, global_batch and seed
 *     give the same steps on every machine (Philox and the integer arithmetic are
 *     bit-exact), whatever order the steps are asked for in;
 *   - nothing is dropped: with truncate each document's first C tokens are trained once
 *     per epoch; with split every token is.
 *
 * Epoch boundary rule. Let a step hold the last r samples of epoch e (0 < r < B) and
 * h = B - r positions of epoch e+1. Epoch e+1's shuffled order is adjusted in its head
 * only: its first h samples are the first h of its shuffled order that are NOT among
 * those r; the samples passed over keep their order and follow right after (they open
 * the next step). Epoch e+1 stays a permutation; only when N < B + r' (r' the part of
 * epoch e+1 in ITS last straddling step; at most possible when N < 2B - 1) can that
 * adjustment reach the tail of epoch e+1, and then epochs are computed in sequence from
 * the last epoch whose tail is untouched (a chain of at most B / gcd(N, B) small epochs).
 *
 * Stream layout (a contract: stored plans depend on it):
 *   root = lt_rng_seed(seed); sampler = lt_rng_split(root, LT_SAMPLER_STREAM);
 *   epoch e shuffles the identity [0, N) with lt_rng_shuffle(lt_rng_split(sampler, e)).
 * The sampler's stream is split off a domain id so that other users of plan.seed
 * (strategies, tests) draw streams that do not overlap it.
 *
 * Ownership: a sampler borrows its corpus (keep the corpus alive until the sampler is
 * freed). Errors: functions that can fail return lt_status and fill `err` (lib/error.h):
 * LT_ERR_USAGE for a bad config value or argument, LT_ERR_INPUT for unusable data,
 * LT_ERR_IO when a file cannot be read; out of memory exits (lt_malloc_check).
 * Thread-safety: a corpus is read-only after loading and may be shared. A sampler caches
 * the permutations of two epochs, so lt_sampler_step / lt_sampler_step_lengths modify it:
 * one thread at a time per sampler (give each thread its own sampler over the shared
 * corpus; they produce identical steps). The other sampler functions only read.
 */
#ifndef LT_SAMPLER_H
#define LT_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"  /* lt_status, lt_error */
#include "lib/sha256.h" /* LT_SHA256_HEX_LEN */

/* Split-stream id of the sampler under root = lt_rng_seed(seed): "sampler" in ASCII. */
#define LT_SAMPLER_STREAM UINT64_C(0x73616d706c6572)

/* ---- corpus ------------------------------------------------------------------------ */

typedef struct lt_corpus lt_corpus;

/* A corpus from n document lengths (one task, task 0). Each length must be >= 0 (0 = an
 * empty document: kept for the document numbering and the fingerprint, gives no sample).
 * LT_ERR_INPUT naming `where` (may be NULL) for n == 0, a negative length, or a total that
 * overflows. The lengths are copied. */
lt_status lt_corpus_from_lengths(lt_corpus **out, const int64_t *lengths, size_t n, const char *where,
                                 lt_error *err);

/* A corpus from a lengths file (plans/batches/lengths.h: one positive count per line, "-" = stdin). */
lt_status lt_corpus_load_lengths(lt_corpus **out, const char *path, lt_error *err);

/* A corpus from a dataprep output directory: every task must be finished (dataprep/
 * dataset.h); a document's length is its token count in the shards, EOS included when the
 * run appended one (lt_index_doc_len). LT_ERR_INPUT for an unfinished or bad directory or
 * one without documents. The directory is not kept open. */
lt_status lt_corpus_load_dataset(lt_corpus **out, const char *dir, lt_error *err);

void lt_corpus_free(lt_corpus *c); /* NULL-safe */

uint32_t lt_corpus_n_tasks(const lt_corpus *c);
uint64_t lt_corpus_n_docs(const lt_corpus *c);    /* all tasks */
uint64_t lt_corpus_n_tokens(const lt_corpus *c);  /* sum of the lengths */
/* Named sources: a dataprep directory made with [source.NAME] sections records each
 * document's (its input file's, dataprep/shard.h); "" is the unnamed data.input, the only
 * source of a lengths file or of an older directory. Sources are numbered in the order
 * first met (tasks ascending, files in index order). */
uint32_t lt_corpus_n_sources(const lt_corpus *c);
const char *lt_corpus_source_name(const lt_corpus *c, uint32_t src); /* "" = unnamed */
uint32_t lt_corpus_doc_source(const lt_corpus *c, uint64_t doc);
/* Give the documents sources (tests; a lengths corpus): src[n_docs] indexes names[n_names].
 * LT_ERR_INPUT for an index out of range. */
lt_status lt_corpus_set_sources(lt_corpus *c, const uint32_t *src, const char *const *names, uint32_t n_names,
                                lt_error *err);
int64_t lt_corpus_doc_len(const lt_corpus *c, uint64_t doc); /* doc: corpus index, < n_docs */
/* The task and the document within the task of corpus document `doc` (< n_docs). */
void lt_corpus_doc_ref(const lt_corpus *c, uint64_t doc, uint32_t *task, uint64_t *task_doc);

/* The corpus fingerprint (the plan store's "fingerprint of the input index"): SHA-256, as
 * 64 lowercase hex digits, of the lengths printed one per line in decimal, each followed
 * by "\n" — exactly the bytes `dataprep lengths DIR` prints, so
 * `dataprep lengths DIR | sha256sum` gives the same digest. Task boundaries are not part
 * of it: they do not change the samples or the batches. */
void lt_corpus_fingerprint(const lt_corpus *c, char hex[LT_SHA256_HEX_LEN + 1]);

/* ---- samples and batches ----------------------------------------------------------- */

typedef enum lt_sample_policy {
    LT_SAMPLE_TRUNCATE = 0, /* one sample per document: its first context_len tokens */
    LT_SAMPLE_SPLIT = 1,    /* a long document becomes consecutive pieces of context_len */
} lt_sample_policy;

/* "truncate" | "split" -> policy; LT_ERR_USAGE naming `where` (e.g. "plan.sample_policy")
 * with a hint listing the names otherwise. */
lt_status lt_sample_policy_parse(const char *name, const char *where, lt_sample_policy *out, lt_error *err);
const char *lt_sample_policy_name(lt_sample_policy p); /* "truncate", "split", "?" */

/* One [source.NAME] of the config: its mixture weight and held-out share. */
typedef struct lt_source_weight {
    const char *name;
    double weight;  /* >= 0; 0 = never sampled */
    double holdout; /* share of its documents held out; < 0 = the config's holdout */
} lt_source_weight;

typedef struct lt_sampler_config {
    int64_t context_len;     /* plan.context_len: tokens per sample, >= 1 */
    int64_t global_batch;    /* plan.global_batch: samples per step, 1 <= B <= n_samples */
    uint64_t seed;           /* plan.seed */
    lt_sample_policy policy; /* plan.sample_policy */
    double holdout;          /* data.holdout: share of each source's documents held out (0 = none) */
    /* [source.NAME] weights (read by lt_sampler_create only, not kept). With n_sources > 0
     * and a corpus whose documents record named sources, the sampler MIXES the sources
     * (see "Mixtures" below); otherwise one stream runs over all samples as described
     * above. The unnamed source "" (data.input), when the corpus has one, weighs 1. */
    const lt_source_weight *sources;
    size_t n_sources;
    /* plan.global_batch_tokens: > 0 fills each step to at most that many tokens instead of
     * global_batch samples ("Token budget" below); global_batch is then the most samples a
     * step may hold, and min_step_samples (e.g. parallel.dp) the fewest */
    int64_t global_batch_tokens;
    int64_t min_step_samples;
} lt_sampler_config;

/* One sample: a token range of one document. */
typedef struct lt_sample {
    uint64_t id;         /* index in the sample table (the plan DB's sample_id) */
    uint64_t corpus_doc; /* document, corpus index */
    uint32_t task;       /* ... its dataprep task */
    uint64_t doc;        /* ... and its index within that task (`dataprep cat --task --doc`) */
    int64_t offset;      /* first token within the document (0 unless a split piece k > 0) */
    int64_t length;      /* tokens, 1..context_len */
} lt_sample;

typedef struct lt_sampler lt_sampler;

/* Build the sample table of `corpus` under cfg. LT_ERR_USAGE for context_len < 1,
 * global_batch < 1, global_batch > the number of samples (with a hint), or an unknown
 * policy; LT_ERR_INPUT for a corpus without samples (all documents empty). */
lt_status lt_sampler_create(lt_sampler **out, const lt_corpus *corpus, const lt_sampler_config *cfg,
                            lt_error *err);
void lt_sampler_free(lt_sampler *s); /* NULL-safe */

uint64_t lt_sampler_n_samples(const lt_sampler *s);
uint64_t lt_sampler_n_tokens(const lt_sampler *s); /* tokens of all samples: one epoch's */
const lt_sampler_config *lt_sampler_config_of(const lt_sampler *s);

/* Sample `id` (< n_samples) of the sample table. */
void lt_sampler_sample(const lt_sampler *s, uint64_t id, lt_sample *out);

/* The B = global_batch samples of step t, in position order, into out[B]. LT_ERR_USAGE
 * when t is so large that its positions overflow 64 bits. */
lt_status lt_sampler_step(lt_sampler *s, uint64_t t, lt_sample *out, lt_error *err);

/* Step t with a token budget (or without: then n = B): its *n samples into out[B].
 * Token budget: the samples are drawn one at a time (as a mixture draws them, below, one
 * pooled source without named sources) until the step holds global_batch_tokens tokens;
 * the sample that would pass the budget is not taken (it opens the next step) once the
 * step holds min_step_samples (>= 1) samples, and a step holds at most global_batch. So a
 * step's tokens lie within (budget - context_len, budget] unless a sample alone exceeds it.
 * lt_sampler_step and lt_sampler_step_lengths refuse a sampler with a budget. */
lt_status lt_sampler_step_n(lt_sampler *s, uint64_t t, lt_sample *out, size_t *n, lt_error *err);

/* The lengths of step t's samples, in the same order, into lengths[B] (what the
 * strategies consume). */
lt_status lt_sampler_step_lengths(lt_sampler *s, uint64_t t, int64_t *lengths, lt_error *err);

/* The epochs step t draws from: out[0 .. n_first) belong to epoch *first, the rest (if
 * n_first < B) to epoch *last = *first + 1; *last == *first when the step lies inside one
 * epoch. Pure arithmetic (no shuffling); same overflow rule as lt_sampler_step. */
lt_status lt_sampler_step_epochs(const lt_sampler *s, uint64_t t, uint64_t *first, uint64_t *last,
                                 size_t *n_first, lt_error *err);

/* ---- held-out documents ------------------------------------------------------------
 * Document d (not empty) is held out, for validation, when u_d < h, its source's holdout
 * share (lt_source_weight.holdout, else cfg.holdout), with u_d uniform in [0, 1) from
 * split(split(lt_rng_seed(seed), "holdout"), d): the same documents for the same seed,
 * whatever global_batch or the strategy. Held-out documents give no sample (sample ids
 * number the others). They are listed in ascending u_d: a shuffled order. */
uint64_t lt_sampler_n_heldout(const lt_sampler *s);
/* Held-out document i (< n_heldout) as a sample: its first min(len, context_len) tokens,
 * offset 0, id UINT64_MAX (it is in no step). */
void lt_sampler_heldout(const lt_sampler *s, uint64_t i, lt_sample *out);

/* ---- mixtures ----------------------------------------------------------------------
 * With a mixture (lt_sampler_mixes), step t's samples come from the sources in shares of
 * TOKENS: each source draws from its own epochs (a permutation of its samples per epoch,
 * stream split(sampler, "mix" + source index) then split(., epoch)), and each slot of a
 * step goes to the source furthest below its share so far, argmax_s (w_s T - t_s) with
 * w_s its normalized weight, T the tokens drawn in all and t_s by s (ties: the lower
 * index). A source that runs out starts its next epoch (lt_sampler_source_epoch); a
 * sample already in the step is passed over and opens the next step, so a step never
 * holds a sample twice and every epoch of a source is trained whole. Deterministic from
 * the seed; steps depend on all before them, so asking for an earlier step than the last
 * one recomputes from step 0 (ask in order). lt_sampler_step_epochs is an error then. */
bool lt_sampler_mixes(const lt_sampler *s);
/* The epoch source `src` (corpus numbering) is in after the last step computed. */
uint64_t lt_sampler_source_epoch(const lt_sampler *s, uint32_t src);
/* Source `src`'s normalized weight (its share of the tokens; 0 without a mixture). */
double lt_sampler_source_weight(const lt_sampler *s, uint32_t src);

/* ---- the samples view's `source` ---------------------------------------------------- */

/* The `source` column of the plan DB's samples view: "task=T,doc=D,tok=O", locating the
 * sample's first token in the shards (`dataprep cat DIR --task T --doc D`, token O); its
 * length is the view's `length` column. Writes at most `size` bytes (NUL included) and
 * returns the length of the full text, like snprintf. */
int lt_sample_source_format(const lt_sample *smp, char *buf, size_t size);

/* Parse a source text back into task, doc and offset (the other fields of *out are set to
 * 0). LT_ERR_INPUT naming the text for anything else. */
lt_status lt_sample_source_parse(const char *text, lt_sample *out, lt_error *err);

#endif /* LT_SAMPLER_H */
