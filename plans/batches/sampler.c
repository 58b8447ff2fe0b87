/*
 * plans/batches/sampler.c — the batch sampler (plans/batches/sampler.h; docs/sampler.md).
 *
 * Representation. The corpus keeps its lengths in canonical order plus the first corpus
 * document of each task. The sampler keeps, per sample, its corpus document, and per
 * document its first sample id (so a piece's index is id - first[doc]). Permutations of
 * epochs are computed on demand and cached in two slots (a step touches at most two
 * epochs, so walking the steps in order shuffles each epoch once).
 */
#include "plans/batches/sampler.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/dataset.h"      /* lt_dataset_open, lt_index_n_docs, lt_index_doc_len */
#include "lib/rng.h"               /* lt_rng_seed, lt_rng_split, lt_rng_shuffle */
#include "lib/sha256.h"            /* lt_sha256_* */
#include "plans/batches/lengths.h" /* lt_lengths_read */

/* ------------------------------------------------------------------ corpus */

struct lt_corpus {
    uint64_t n_docs;
    int64_t *len;         /* n_docs lengths */
    uint64_t n_tokens;
    uint32_t n_tasks;
    uint64_t *task_first; /* n_tasks + 1: first corpus document of each task, then n_docs */
    uint32_t n_src;       /* named sources (>= 1: "" is the unnamed data.input) */
    char **src_name;      /* n_src names, in the order first met */
    uint32_t *src;        /* n_docs: each document's source (NULL: all source 0) */
};

/* A corpus taking ownership of len[n] and task_first[n_tasks + 1] (checked here). */
static lt_status corpus_adopt(lt_corpus **out, int64_t *len, uint64_t n, uint64_t *task_first, uint32_t n_tasks,
                              const char *where, lt_error *err) {
    *out = NULL;
    lt_status st = LT_OK;
    uint64_t total = 0;
    if (n == 0) {
        st = lt_fail(err, LT_ERR_INPUT, where, "the corpus has no documents");
        lt_error_hint(err, "give a lengths file with at least one count, or a dataprep directory with documents");
    }
    for (uint64_t i = 0; st == LT_OK && i < n; i++) {
        if (len[i] < 0) {
            st = lt_fail(err, LT_ERR_INPUT, where, "document %" PRIu64 " has a negative length (%" PRId64 ")", i,
                         len[i]);
        } else if ((uint64_t)len[i] > (uint64_t)INT64_MAX - total) {
            st = lt_fail(err, LT_ERR_INPUT, where, "the corpus has more than 2^63 tokens");
        } else {
            total += (uint64_t)len[i];
        }
    }
    if (st != LT_OK) {
        free(len);
        free(task_first);
        return st;
    }
    lt_corpus *c = lt_calloc_check(1, sizeof *c);
    c->n_docs = n;
    c->len = len;
    c->n_tokens = total;
    c->n_tasks = n_tasks;
    c->task_first = task_first;
    c->n_src = 1;
    c->src_name = lt_malloc_check(sizeof *c->src_name);
    c->src_name[0] = lt_strdup_check("");
    *out = c;
    return LT_OK;
}

/* Source index of `name` in c, added when new. */
static uint32_t corpus_source(lt_corpus *c, const char *name) {
    for (uint32_t i = 0; i < c->n_src; i++)
        if (strcmp(c->src_name[i], name) == 0) return i;
    c->src_name = lt_realloc_check(c->src_name, (c->n_src + 1) * sizeof *c->src_name);
    c->src_name[c->n_src] = lt_strdup_check(name);
    return c->n_src++;
}

lt_status lt_corpus_from_lengths(lt_corpus **out, const int64_t *lengths, size_t n, const char *where,
                                 lt_error *err) {
    int64_t *len = lt_malloc_check((n ? n : 1) * sizeof *len);
    if (n) memcpy(len, lengths, n * sizeof *len);
    uint64_t *tf = lt_malloc_check(2 * sizeof *tf);
    tf[0] = 0;
    tf[1] = n;
    return corpus_adopt(out, len, n, tf, 1, where, err);
}

lt_status lt_corpus_load_lengths(lt_corpus **out, const char *path, lt_error *err) {
    *out = NULL;
    int64_t *len;
    size_t n;
    lt_status st = lt_lengths_read(path, &len, &n, err);
    if (st != LT_OK) return st;
    uint64_t *tf = lt_malloc_check(2 * sizeof *tf);
    tf[0] = 0;
    tf[1] = n;
    return corpus_adopt(out, len, n, tf, 1, path, err);
}

lt_status lt_corpus_load_dataset(lt_corpus **out, const char *dir, lt_error *err) {
    *out = NULL;
    lt_dataset *ds = NULL;
    lt_status st = lt_dataset_open(&ds, dir, -1, err);
    if (st != LT_OK) return st;
    uint64_t *tf = lt_malloc_check(((size_t)ds->num_tasks + 1) * sizeof *tf);
    uint64_t n = 0;
    for (uint32_t t = 0; t < ds->num_tasks; t++) {
        tf[t] = n;
        n += lt_index_n_docs(ds->tasks[t].index);
    }
    tf[ds->num_tasks] = n;
    int64_t *len = lt_malloc_check((n ? n : 1) * sizeof *len);
    for (uint32_t t = 0; t < ds->num_tasks; t++) {
        const lt_index *ix = ds->tasks[t].index;
        uint64_t nd = lt_index_n_docs(ix);
        for (uint64_t d = 0; d < nd; d++) {
            uint64_t l = lt_index_doc_len(ix, d);
            len[tf[t] + d] = l > (uint64_t)INT64_MAX ? -1 : (int64_t)l;
        }
    }
    uint32_t n_tasks = ds->num_tasks;
    st = corpus_adopt(out, len, n, tf, n_tasks, dir, err);
    if (st == LT_OK) { /* each document's source: its input file's (index version 2) */
        lt_corpus *c = *out;
        c->src = lt_calloc_check(n ? n : 1, sizeof *c->src);
        for (uint32_t t = 0; t < ds->num_tasks; t++) {
            const lt_index *ix = ds->tasks[t].index;
            uint32_t nf = lt_index_n_files(ix);
            uint32_t *fsrc = lt_malloc_check((nf ? nf : 1) * sizeof *fsrc);
            for (uint32_t f = 0; f < nf; f++) fsrc[f] = corpus_source(c, lt_index_file_source(ix, f));
            uint64_t nd = lt_index_n_docs(ix);
            for (uint64_t d = 0; d < nd; d++) {
                lt_index_source is;
                lt_index_doc_source(ix, d, &is);
                c->src[tf[t] + d] = fsrc[is.file];
            }
            free(fsrc);
        }
        /* the unnamed source only when some document has it */
        bool unnamed = false;
        for (uint64_t d = 0; d < n && !unnamed; d++) unnamed = c->src[d] == 0;
        if (!unnamed && c->n_src > 1) {
            free(c->src_name[0]);
            memmove(c->src_name, c->src_name + 1, (c->n_src - 1) * sizeof *c->src_name);
            c->n_src--;
            for (uint64_t d = 0; d < n; d++) c->src[d]--;
        }
    }
    lt_dataset_close(ds);
    return st;
}

void lt_corpus_free(lt_corpus *c) {
    if (!c) return;
    for (uint32_t i = 0; i < c->n_src; i++) free(c->src_name[i]);
    free(c->src_name);
    free(c->src);
    free(c->len);
    free(c->task_first);
    free(c);
}

uint32_t lt_corpus_n_tasks(const lt_corpus *c) { return c->n_tasks; }
uint64_t lt_corpus_n_docs(const lt_corpus *c) { return c->n_docs; }
uint64_t lt_corpus_n_tokens(const lt_corpus *c) { return c->n_tokens; }
uint32_t lt_corpus_n_sources(const lt_corpus *c) { return c->n_src; }

const char *lt_corpus_source_name(const lt_corpus *c, uint32_t src) {
    LT_CHECK(src < c->n_src);
    return c->src_name[src];
}

lt_status lt_corpus_set_sources(lt_corpus *c, const uint32_t *src, const char *const *names, uint32_t n_names,
                                lt_error *err) {
    if (n_names == 0) return lt_fail(err, LT_ERR_USAGE, NULL, "a corpus has at least one source");
    for (uint64_t d = 0; d < c->n_docs; d++)
        if (src[d] >= n_names)
            return lt_fail(err, LT_ERR_INPUT, NULL, "document %" PRIu64 " has source %" PRIu32 " of %" PRIu32, d, src[d],
                           n_names);
    for (uint32_t i = 0; i < c->n_src; i++) free(c->src_name[i]);
    free(c->src_name);
    c->src_name = lt_malloc_check(n_names * sizeof *c->src_name);
    for (uint32_t i = 0; i < n_names; i++) c->src_name[i] = lt_strdup_check(names[i]);
    c->n_src = n_names;
    free(c->src);
    c->src = lt_malloc_check((c->n_docs ? c->n_docs : 1) * sizeof *c->src);
    memcpy(c->src, src, c->n_docs * sizeof *c->src);
    return LT_OK;
}

uint32_t lt_corpus_doc_source(const lt_corpus *c, uint64_t doc) {
    LT_CHECK(doc < c->n_docs);
    return c->src ? c->src[doc] : 0;
}

int64_t lt_corpus_doc_len(const lt_corpus *c, uint64_t doc) {
    LT_CHECK(doc < c->n_docs);
    return c->len[doc];
}

void lt_corpus_doc_ref(const lt_corpus *c, uint64_t doc, uint32_t *task, uint64_t *task_doc) {
    LT_CHECK(doc < c->n_docs);
    /* the last task whose first document is <= doc (tasks may be empty: take the last) */
    uint32_t lo = 0, hi = c->n_tasks; /* task_first[lo] <= doc < task_first[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->task_first[mid] <= doc) lo = mid;
        else hi = mid;
    }
    *task = lo;
    *task_doc = doc - c->task_first[lo];
}

void lt_corpus_fingerprint(const lt_corpus *c, char hex[LT_SHA256_HEX_LEN + 1]) {
    lt_sha256 h;
    lt_sha256_init(&h);
    char buf[1 << 14];
    size_t used = 0;
    for (uint64_t i = 0; i < c->n_docs; i++) {
        if (used > sizeof buf - 32) {
            lt_sha256_update(&h, buf, used);
            used = 0;
        }
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%" PRId64 "\n", c->len[i]);
    }
    lt_sha256_update(&h, buf, used);
    lt_sha256_final_hex(&h, hex);
}

/* ------------------------------------------------------------------ policy */

lt_status lt_sample_policy_parse(const char *name, const char *where, lt_sample_policy *out, lt_error *err) {
    if (strcmp(name, "truncate") == 0) *out = LT_SAMPLE_TRUNCATE;
    else if (strcmp(name, "split") == 0) *out = LT_SAMPLE_SPLIT;
    else {
        lt_status st = lt_fail(err, LT_ERR_USAGE, where, "unknown sample policy '%.64s'", name);
        lt_error_hint(err, "the policies are: truncate (the papers' setting), split");
        return st;
    }
    return LT_OK;
}

const char *lt_sample_policy_name(lt_sample_policy p) {
    switch (p) {
    case LT_SAMPLE_TRUNCATE: return "truncate";
    case LT_SAMPLE_SPLIT: return "split";
    }
    return "?";
}

/* ------------------------------------------------------------------ sampler */

typedef struct epoch_slot {
    bool valid;
    uint64_t epoch;
    uint64_t *perm; /* n sample ids: the epoch's final order (boundary rule applied) */
    uint64_t used;  /* for eviction: larger = used more recently */
} epoch_slot;

struct lt_sampler {
    const lt_corpus *corpus;
    lt_sampler_config cfg;
    uint64_t n;           /* samples */
    uint64_t B;           /* global_batch */
    uint64_t n_tokens;    /* tokens of all samples */
    uint64_t *sample_doc; /* n: corpus document of each sample */
    uint64_t *first;      /* n_docs + 1: first sample id of each document */
    uint64_t max_step;    /* steps t <= max_step have positions that fit in 64 bits */
    lt_rng stream;        /* split(seed(seed), LT_SAMPLER_STREAM) */
    epoch_slot slot[2];
    uint64_t clock;
    /* scratch for the boundary rule, B entries each */
    uint64_t *tail, *keep, *passed;
    /* held-out documents (validation): never sampled, in a shuffled order */
    uint64_t n_held;
    uint64_t *held;       /* n_held corpus documents */
    /* the mixture of named sources (NULL: one stream over all samples, above) */
    struct mixture *mix;
};

/* ------------------------------------------------------------------ mixture
 *
 * Named sources mixed by weight, as shares of TOKENS (docs/sampler.md, "Mixtures"): each
 * source s draws its own samples in its own epochs (a Fisher-Yates permutation of its
 * samples per epoch, stream split(split(sampler, MIX_STREAM + s), epoch)); a step's slots
 * are filled one at a time from the source furthest below its share so far,
 * argmax_s (w_s * T - t_s) over the tokens T drawn in all and t_s from s (ties: the lower
 * source index). A source that runs out starts its next epoch (counted: lt_sampler_source
 * _epochs). A sample already in the step is passed over and comes first in the next step,
 * so every epoch of a source is still trained whole and a step never holds a sample twice;
 * a source whose every sample is in the step already is left out of the rest of the step.
 * The order depends on every step before, so the state walks forward from step 0 and a
 * step asked for out of order restarts the walk (the planner asks in order). */
#define MIX_STREAM UINT64_C(0x6d697800000000) /* "mix" */

typedef struct mix_source {
    double w;           /* normalized weight; 0: never drawn */
    uint64_t *ids;      /* its sample ids, ascending */
    uint64_t n;
    lt_rng stream;
    uint64_t *perm;     /* the current epoch's order (indices into ids) */
    uint64_t epoch, pos;
    uint64_t *deferred; /* passed over in the last step: drawn first in the next */
    uint64_t n_def, def_cap;
    double tokens;      /* drawn so far */
} mix_source;

typedef struct mixture {
    bool pooled;        /* one source holding every sample (a token budget without sources) */
    uint32_t n_src;
    mix_source *src;
    uint64_t next_step; /* the state is at the start of this step */
    uint32_t *stamp;    /* per sample: 1 + the last step (mod 2^32 - 1) it was drawn in, 0 never */
    double total;
    uint64_t *pending;  /* scratch: deferred samples still pending in the current step */
} mixture;

/* (x * n) mod b without overflow for b < 2^32. */
static uint64_t mulmod(uint64_t x, uint64_t n, uint64_t b) { return ((x % b) * (n % b)) % b; }

/* r(e): how many samples of epoch e lie in the step that straddles the end of epoch e
 * (0 when the epoch ends on a step boundary). */
static uint64_t tail_count(const lt_sampler *s, uint64_t e) { return mulmod(e + 1, s->n, s->B); }

/* h(e): how many positions of epoch e lie in the step that straddles its start. */
static uint64_t head_count(const lt_sampler *s, uint64_t e) {
    if (e == 0) return 0;
    uint64_t r = tail_count(s, e - 1);
    return r ? s->B - r : 0;
}

/* Whether epoch e's last r(e) positions are those of its raw shuffle, whatever epoch
 * e - 1 was: the boundary rule rewrites at most positions [0, B) of an epoch (h + the
 * passed-over samples <= h + r(e-1) = B), which stay clear of its tail when N >= B + r(e). */
static bool tail_is_raw(const lt_sampler *s, uint64_t e) {
    uint64_t r = tail_count(s, e);
    return r == 0 || s->n >= s->B + r;
}

static void raw_shuffle(const lt_sampler *s, uint64_t e, uint64_t *perm) {
    for (uint64_t i = 0; i < s->n; i++) perm[i] = i;
    lt_rng r;
    lt_rng_split(&r, &s->stream, e);
    lt_rng_shuffle(&r, perm, (size_t)s->n, sizeof *perm);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The boundary rule on a raw permutation: the first h samples become the first h of the
 * raw order not among the previous epoch's last r samples, s->tail[0..r) (r + h = B; the
 * tail is sorted here); the samples passed over follow them in their raw order;
 * everything after is untouched. */
static void apply_boundary_rule(lt_sampler *s, uint64_t *perm, uint64_t r, uint64_t h) {
    if (h == 0 || r == 0) return;
    uint64_t *sorted = s->tail;
    qsort(sorted, (size_t)r, sizeof *sorted, cmp_u64);
    uint64_t n_keep = 0, n_passed = 0, i = 0;
    for (; n_keep < h; i++) {
        LT_CHECK(i < s->n); /* N - r >= B - r = h samples are not in the tail */
        if (bsearch(&perm[i], sorted, (size_t)r, sizeof *sorted, cmp_u64)) s->passed[n_passed++] = perm[i];
        else s->keep[n_keep++] = perm[i];
    }
    if (n_passed == 0) return;
    memcpy(perm, s->keep, n_keep * sizeof *perm);
    memcpy(perm + n_keep, s->passed, n_passed * sizeof *perm);
}

static epoch_slot *cached(lt_sampler *s, uint64_t e) {
    for (int k = 0; k < 2; k++)
        if (s->slot[k].valid && s->slot[k].epoch == e) return &s->slot[k];
    return NULL;
}

/* Compute epoch e's final order into perm (which must not be a cached slot's buffer). */
static void build_epoch(lt_sampler *s, uint64_t e, uint64_t *perm) {
    /* walk back to the first epoch x0 whose predecessor's tail is known without going
     * further: epoch 0, a cached predecessor, or a predecessor with a raw tail */
    uint64_t x0 = e;
    while (x0 > 0 && !cached(s, x0 - 1) && !tail_is_raw(s, x0 - 1)) x0--;
    uint64_t r = 0;
    if (x0 > 0) {
        r = tail_count(s, x0 - 1);
        if (r) {
            epoch_slot *prev = cached(s, x0 - 1);
            if (prev) {
                memcpy(s->tail, prev->perm + (s->n - r), r * sizeof *s->tail);
            } else {
                raw_shuffle(s, x0 - 1, perm);
                memcpy(s->tail, perm + (s->n - r), r * sizeof *s->tail);
            }
        }
    }
    for (uint64_t x = x0;; x++) {
        raw_shuffle(s, x, perm);
        uint64_t h = head_count(s, x);
        LT_CHECK(h == (r ? s->B - r : 0));
        apply_boundary_rule(s, perm, r, h);
        if (x == e) break;
        r = tail_count(s, x);
        memcpy(s->tail, perm + (s->n - r), r * sizeof *s->tail);
    }
}

/* The final order of epoch e, from the cache or computed into the least recently used
 * slot (so the epoch asked for just before stays cached: a step's two epochs coexist). */
static const uint64_t *epoch_perm(lt_sampler *s, uint64_t e) {
    epoch_slot *sl = cached(s, e);
    if (!sl) {
        sl = s->slot[1].used < s->slot[0].used ? &s->slot[1] : &s->slot[0];
        sl->valid = false; /* build_epoch may look for cached predecessors: not this one */
        build_epoch(s, e, sl->perm);
        sl->valid = true;
        sl->epoch = e;
    }
    sl->used = ++s->clock;
    return sl->perm;
}

/* The mixture source of sample `id` (its corpus source; 0 when pooled). */
static uint32_t mix_source_of(const lt_sampler *s, uint64_t id) {
    return s->mix->pooled ? 0 : lt_corpus_doc_source(s->corpus, s->sample_doc[id]);
}

/* Tokens of sample `id`. */
static int64_t sample_length(const lt_sampler *s, uint64_t id) {
    uint64_t d = s->sample_doc[id];
    int64_t C = s->cfg.context_len, off = (int64_t)(id - s->first[d]) * C, rest = s->corpus->len[d] - off;
    return rest < C ? rest : C;
}

static void mix_shuffle(mix_source *ms) {
    for (uint64_t i = 0; i < ms->n; i++) ms->perm[i] = i;
    lt_rng r;
    lt_rng_split(&r, &ms->stream, ms->epoch);
    lt_rng_shuffle(&r, ms->perm, (size_t)ms->n, sizeof *ms->perm);
}

/* Back to the start of step 0. */
static void mix_reset(lt_sampler *s) {
    mixture *m = s->mix;
    for (uint32_t k = 0; k < m->n_src; k++) {
        mix_source *ms = &m->src[k];
        ms->epoch = ms->pos = ms->n_def = 0;
        ms->tokens = 0;
        if (ms->n) mix_shuffle(ms);
    }
    memset(m->stamp, 0, s->n * sizeof *m->stamp);
    m->total = 0;
    m->next_step = 0;
}

/* The next sample of source ms not drawn in the step marked `mark`: the samples passed over
 * in earlier steps first, then its epochs' order; false when all of its samples are in the
 * step already. */
static bool mix_next(mixture *m, mix_source *ms, uint32_t mark, uint64_t *out) {
    for (uint64_t i = 0; i < ms->n_def; i++) {
        if (m->stamp[ms->deferred[i]] == mark) continue;
        *out = ms->deferred[i];
        memmove(ms->deferred + i, ms->deferred + i + 1, (ms->n_def - i - 1) * sizeof *ms->deferred);
        ms->n_def--;
        return true;
    }
    for (uint64_t k = 0; k < ms->n; k++) {
        if (ms->pos == ms->n) {
            ms->epoch++;
            ms->pos = 0;
            mix_shuffle(ms);
        }
        uint64_t id = ms->ids[ms->perm[ms->pos++]];
        if (m->stamp[id] != mark) {
            *out = id;
            return true;
        }
        if (ms->n_def == ms->def_cap) {
            ms->def_cap = ms->def_cap ? 2 * ms->def_cap : 16;
            ms->deferred = lt_realloc_check(ms->deferred, ms->def_cap * sizeof *ms->deferred);
        }
        ms->deferred[ms->n_def++] = id;
    }
    return false;
}

/* Draw step m->next_step into ids[] (at most B) and move the state past it; returns its
 * number of samples: B, or with a token budget (plan.global_batch_tokens) as many as fill
 * it: a sample that would pass the budget is put back (it opens the next step) once the
 * step holds min_step_samples. */
static uint64_t mix_fill(lt_sampler *s, uint64_t *ids) {
    mixture *m = s->mix;
    const uint32_t mark = (uint32_t)(m->next_step % UINT32_MAX) + 1;
    const int64_t budget = s->cfg.global_batch_tokens;
    const uint64_t min_n = s->cfg.min_step_samples > 1 ? (uint64_t)s->cfg.min_step_samples : 1;
    int64_t step_tokens = 0;
    bool *out_of = lt_calloc_check(m->n_src, sizeof *out_of);
    uint64_t slot = 0;
    while (slot < s->B) {
        int64_t best = -1;
        double best_v = 0;
        for (uint32_t k = 0; k < m->n_src; k++) {
            const mix_source *ms = &m->src[k];
            if (ms->w <= 0 || ms->n == 0 || out_of[k]) continue;
            double v = ms->w * m->total - ms->tokens; /* how far below its share */
            if (best < 0 || v > best_v) {
                best = k;
                best_v = v;
            }
        }
        if (best < 0 && budget > 0) break; /* every sample is in the step already */
        LT_CHECK(best >= 0); /* B <= the samples of the drawn sources (lt_sampler_create) */
        mix_source *ms = &m->src[best];
        uint64_t id;
        if (!mix_next(m, ms, mark, &id)) {
            out_of[best] = true;
            continue;
        }
        int64_t len = sample_length(s, id);
        if (budget > 0 && slot >= min_n && step_tokens + len > budget) { /* it opens the next step */
            if (ms->n_def == ms->def_cap) {
                ms->def_cap = ms->def_cap ? 2 * ms->def_cap : 16;
                ms->deferred = lt_realloc_check(ms->deferred, ms->def_cap * sizeof *ms->deferred);
            }
            memmove(ms->deferred + 1, ms->deferred, ms->n_def * sizeof *ms->deferred);
            ms->deferred[0] = id;
            ms->n_def++;
            break;
        }
        m->stamp[id] = mark;
        ids[slot++] = id;
        step_tokens += len;
        ms->tokens += (double)len;
        m->total += (double)len;
        if (budget > 0 && step_tokens >= budget && slot >= min_n) break;
    }
    free(out_of);
    m->next_step++;
    return slot;
}

static void mix_free(mixture *m) {
    if (!m) return;
    for (uint32_t k = 0; k < m->n_src; k++) {
        free(m->src[k].ids);
        free(m->src[k].perm);
        free(m->src[k].deferred);
    }
    free(m->src);
    free(m->stamp);
    free(m);
}

/* The weight (and holdout) the config gives corpus source `name` ("" = the unnamed
 * data.input: weight 1, the global holdout); NULL when the config does not name it. */
static const lt_source_weight *config_source(const lt_sampler_config *cfg, const char *name) {
    static const lt_source_weight unnamed = {"", 1.0, -1.0};
    for (size_t i = 0; i < cfg->n_sources; i++)
        if (strcmp(cfg->sources[i].name, name) == 0) return &cfg->sources[i];
    return name[0] ? NULL : &unnamed;
}

/* Whether the sampler mixes sources: the config names some and the corpus records them. */
static bool wants_mixture(const lt_corpus *c, const lt_sampler_config *cfg) {
    if (cfg->n_sources == 0) return false;
    for (uint32_t i = 0; i < c->n_src; i++)
        if (c->src_name[i][0]) return true;
    return false;
}

/* Build the mixture of sampler s (samples counted, sample_doc filled). */
static lt_status mix_create(lt_sampler *s, bool pooled, lt_error *err) {
    const lt_corpus *c = s->corpus;
    const lt_sampler_config *cfg = &s->cfg;
    mixture *m = lt_calloc_check(1, sizeof *m);
    m->pooled = pooled;
    m->n_src = pooled ? 1 : c->n_src;
    m->src = lt_calloc_check(m->n_src, sizeof *m->src);
    s->mix = m;
    double wsum = 0;
    uint64_t drawable = 0;
    for (uint64_t id = 0; id < s->n; id++) m->src[mix_source_of(s, id)].n++;
    for (uint32_t k = 0; k < m->n_src && pooled; k++) {
        m->src[k].w = 1;
        wsum = 1;
        drawable = s->n;
    }
    for (uint32_t k = 0; k < c->n_src && !pooled; k++) {
        const char *name = c->src_name[k];
        const lt_source_weight *w = config_source(cfg, name);
        if (!w) {
            lt_status st = lt_fail(err, LT_ERR_CONFIG, NULL, "the corpus holds source %s, which the config does not name",
                                   name);
            lt_error_hint(err, "add [source.%s] with its weight (0 leaves it out of training)", name);
            return st;
        }
        m->src[k].w = w->weight;
        if (w->weight > 0) {
            wsum += w->weight;
            drawable += m->src[k].n;
        }
    }
    for (size_t i = 0; i < cfg->n_sources && !pooled; i++) {
        uint32_t k = 0;
        while (k < c->n_src && strcmp(c->src_name[k], cfg->sources[i].name) != 0) k++;
        if (cfg->sources[i].weight > 0 && (k == c->n_src || m->src[k].n == 0)) {
            lt_status st = lt_fail(err, LT_ERR_INPUT, NULL, "source %s has weight %g but no sample in the corpus",
                                   cfg->sources[i].name, cfg->sources[i].weight);
            lt_error_hint(err, "were its files tokenized with it (dataprep run with [source.%s])? all of its "
                               "documents held out or empty?", cfg->sources[i].name);
            return st;
        }
    }
    if (wsum <= 0) return lt_fail(err, LT_ERR_CONFIG, NULL, "every source has weight 0: nothing to train");
    if (s->B > drawable) {
        lt_status st = lt_fail(err, LT_ERR_USAGE, "plan.global_batch",
                               "global_batch %" PRIu64 " is larger than the %" PRIu64 " samples of the weighted sources",
                               s->B, drawable);
        lt_error_hint(err, "a step holds distinct samples: lower plan.global_batch, or give more data");
        return st;
    }
    for (uint32_t k = 0; k < m->n_src; k++) {
        mix_source *ms = &m->src[k];
        ms->w /= wsum;
        ms->ids = lt_malloc_check((ms->n ? ms->n : 1) * sizeof *ms->ids);
        ms->perm = lt_malloc_check((ms->n ? ms->n : 1) * sizeof *ms->perm);
        ms->n = 0;
        lt_rng_split(&ms->stream, &s->stream, MIX_STREAM + k);
    }
    for (uint64_t id = 0; id < s->n; id++) {
        mix_source *ms = &m->src[mix_source_of(s, id)];
        ms->ids[ms->n++] = id;
    }
    m->stamp = lt_malloc_check((s->n ? s->n : 1) * sizeof *m->stamp);
    mix_reset(s);
    return LT_OK;
}

/* Held-out documents: document d (not empty) of a source with holdout share h is held out
 * when u_d < h, u_d uniform in [0, 1) from split(split(seed, HOLDOUT_STREAM), d); they are
 * kept in ascending u_d, a shuffled order that a larger share only extends. */
#define HOLDOUT_STREAM UINT64_C(0x686f6c646f7574) /* "holdout" */

typedef struct held_doc {
    double u;
    uint64_t doc;
} held_doc;

static int cmp_held(const void *a, const void *b) {
    const held_doc *x = a, *y = b;
    if (x->u != y->u) return x->u < y->u ? -1 : 1;
    return (x->doc > y->doc) - (x->doc < y->doc);
}

/* Mark the held-out documents in held[] (n_docs flags) and list them in s->held. */
static void choose_holdout(lt_sampler *s, bool *held) {
    const lt_corpus *c = s->corpus;
    const lt_sampler_config *cfg = &s->cfg;
    double *share = lt_malloc_check(c->n_src * sizeof *share);
    bool any = false;
    for (uint32_t k = 0; k < c->n_src; k++) {
        const lt_source_weight *w = config_source(cfg, c->src_name[k]);
        share[k] = w && w->holdout >= 0 ? w->holdout : cfg->holdout;
        any |= share[k] > 0;
    }
    if (!any) {
        free(share);
        return;
    }
    lt_rng root, hs;
    lt_rng_seed(&root, cfg->seed);
    lt_rng_split(&hs, &root, HOLDOUT_STREAM);
    held_doc *list = NULL;
    uint64_t n = 0, cap = 0;
    for (uint64_t d = 0; d < c->n_docs; d++) {
        double h = share[lt_corpus_doc_source(c, d)];
        if (h <= 0 || c->len[d] <= 0) continue;
        lt_rng r;
        lt_rng_split(&r, &hs, d);
        double u = lt_rng_double(&r);
        if (u >= h) continue;
        held[d] = true;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            list = lt_realloc_check(list, cap * sizeof *list);
        }
        list[n++] = (held_doc){u, d};
    }
    qsort(list, (size_t)n, sizeof *list, cmp_held);
    s->held = lt_malloc_check((n ? n : 1) * sizeof *s->held);
    for (uint64_t i = 0; i < n; i++) s->held[i] = list[i].doc;
    s->n_held = n;
    free(list);
    free(share);
}

lt_status lt_sampler_create(lt_sampler **out, const lt_corpus *corpus, const lt_sampler_config *cfg,
                            lt_error *err) {
    *out = NULL;
    const int64_t C = cfg->context_len, B = cfg->global_batch;
    if (cfg->policy != LT_SAMPLE_TRUNCATE && cfg->policy != LT_SAMPLE_SPLIT)
        return lt_fail(err, LT_ERR_USAGE, "plan.sample_policy", "unknown sample policy %d", (int)cfg->policy);
    if (C < 1) {
        lt_status st = lt_fail(err, LT_ERR_USAGE, "plan.context_len", "context_len must be at least 1 (got %" PRId64 ")",
                               C);
        lt_error_hint(err, "context_len is the most tokens of one sample, e.g. 128K");
        return st;
    }
    if (B < 1) {
        lt_status st = lt_fail(err, LT_ERR_USAGE, "plan.global_batch",
                               "global_batch must be at least 1 (got %" PRId64 ")", B);
        lt_error_hint(err, "global_batch is the number of samples of one step, e.g. 512");
        return st;
    }
    if ((uint64_t)B >= (UINT64_C(1) << 32))
        return lt_fail(err, LT_ERR_USAGE, "plan.global_batch", "global_batch %" PRId64 " is too large (at most 2^32 - 1)",
                       B);
    lt_sampler *s = lt_calloc_check(1, sizeof *s);
    s->corpus = corpus;
    s->cfg = *cfg; /* sources and n_sources are used here only: the caller's, not kept */
    s->B = (uint64_t)B;
    lt_rng root;
    lt_rng_seed(&root, cfg->seed);
    lt_rng_split(&s->stream, &root, LT_SAMPLER_STREAM);
    /* the held-out documents, then the samples of the others */
    const uint64_t nd = corpus->n_docs;
    bool *held = lt_calloc_check(nd ? nd : 1, sizeof *held);
    choose_holdout(s, held);
    uint64_t *first = lt_malloc_check((nd + 1) * sizeof *first);
    uint64_t n = 0, tokens = 0;
    for (uint64_t d = 0; d < nd; d++) {
        first[d] = n;
        int64_t l = held[d] ? 0 : corpus->len[d];
        if (cfg->policy == LT_SAMPLE_TRUNCATE) {
            n += l > 0;
            tokens += (uint64_t)(l < C ? l : C);
        } else {
            n += (uint64_t)(l / C) + (l % C != 0);
            tokens += (uint64_t)l;
        }
    }
    first[nd] = n;
    free(held);
    s->first = first;
    s->n = n;
    s->n_tokens = tokens;
    lt_status st = LT_OK;
    if (n == 0) {
        st = lt_fail(err, LT_ERR_INPUT, NULL, "the corpus has no samples: all %" PRIu64 " documents are empty%s", nd,
                     s->n_held ? " or held out" : "");
        lt_error_hint(err, "check the input: a sample needs a document of at least one token");
    } else if ((uint64_t)B > n) {
        st = lt_fail(err, LT_ERR_USAGE, "plan.global_batch",
                     "global_batch %" PRId64 " is larger than the %" PRIu64 " samples of the corpus", B, n);
        lt_error_hint(err,
                      "a step holds distinct samples: lower plan.global_batch to at most %" PRIu64
                      "%s, or give more data",
                      n, cfg->policy == LT_SAMPLE_TRUNCATE ? " (or use sample_policy = split)" : "");
    }
    if (st == LT_OK) {
        s->sample_doc = lt_malloc_check(n * sizeof *s->sample_doc);
        for (uint64_t d = 0; d < nd; d++)
            for (uint64_t id = first[d]; id < first[d + 1]; id++) s->sample_doc[id] = d;
        /* positions of step t end at (t + 1) * B; the epoch arithmetic adds up to N more */
        s->max_step = (UINT64_MAX - n) / s->B - 1;
        if (wants_mixture(corpus, cfg) || cfg->global_batch_tokens > 0) {
            st = mix_create(s, !wants_mixture(corpus, cfg), err);
        } else {
            for (int k = 0; k < 2; k++) s->slot[k].perm = lt_malloc_check(n * sizeof *s->slot[k].perm);
            s->tail = lt_malloc_check(s->B * sizeof *s->tail);
            s->keep = lt_malloc_check(s->B * sizeof *s->keep);
            s->passed = lt_malloc_check(s->B * sizeof *s->passed);
        }
    }
    s->cfg.sources = NULL;
    s->cfg.n_sources = 0;
    if (st != LT_OK) {
        lt_sampler_free(s);
        return st;
    }
    *out = s;
    return LT_OK;
}

void lt_sampler_free(lt_sampler *s) {
    if (!s) return;
    free(s->sample_doc);
    free(s->first);
    for (int k = 0; k < 2; k++) free(s->slot[k].perm);
    free(s->tail);
    free(s->keep);
    free(s->passed);
    free(s->held);
    mix_free(s->mix);
    free(s);
}

bool lt_sampler_mixes(const lt_sampler *s) { return s->mix != NULL && !s->mix->pooled; }

uint64_t lt_sampler_source_epoch(const lt_sampler *s, uint32_t src) {
    if (!s->mix || src >= s->mix->n_src) return 0;
    return s->mix->src[src].epoch;
}

double lt_sampler_source_weight(const lt_sampler *s, uint32_t src) {
    if (!s->mix || s->mix->pooled || src >= s->mix->n_src) return 0;
    return s->mix->src[src].w;
}

uint64_t lt_sampler_n_heldout(const lt_sampler *s) { return s->n_held; }

void lt_sampler_heldout(const lt_sampler *s, uint64_t i, lt_sample *out) {
    LT_CHECK(i < s->n_held);
    uint64_t d = s->held[i];
    int64_t C = s->cfg.context_len, len = s->corpus->len[d];
    out->id = UINT64_MAX;
    out->corpus_doc = d;
    lt_corpus_doc_ref(s->corpus, d, &out->task, &out->doc);
    out->offset = 0;
    out->length = len < C ? len : C;
}

uint64_t lt_sampler_n_samples(const lt_sampler *s) { return s->n; }
uint64_t lt_sampler_n_tokens(const lt_sampler *s) { return s->n_tokens; }
const lt_sampler_config *lt_sampler_config_of(const lt_sampler *s) { return &s->cfg; }

void lt_sampler_sample(const lt_sampler *s, uint64_t id, lt_sample *out) {
    LT_CHECK(id < s->n);
    uint64_t d = s->sample_doc[id];
    int64_t C = s->cfg.context_len, len = s->corpus->len[d];
    int64_t off = (int64_t)(id - s->first[d]) * C; /* piece k starts at k*C (always 0 under truncate) */
    out->id = id;
    out->corpus_doc = d;
    lt_corpus_doc_ref(s->corpus, d, &out->task, &out->doc);
    out->offset = off;
    out->length = len - off < C ? len - off : C;
}

static lt_status check_step(const lt_sampler *s, uint64_t t, lt_error *err) {
    if (t > s->max_step)
        return lt_fail(err, LT_ERR_USAGE, NULL, "step %" PRIu64 " is out of range (at most %" PRIu64 ")", t,
                       s->max_step);
    return LT_OK;
}

lt_status lt_sampler_step_epochs(const lt_sampler *s, uint64_t t, uint64_t *first, uint64_t *last,
                                 size_t *n_first, lt_error *err) {
    if (s->mix)
        return lt_fail(err, LT_ERR_USAGE, NULL, "a mixture of sources has an epoch per source (lt_sampler_source_epoch)");
    lt_status st = check_step(s, t, err);
    if (st != LT_OK) return st;
    uint64_t p0 = t * s->B, p1 = p0 + s->B - 1;
    *first = p0 / s->n;
    *last = p1 / s->n;
    *n_first = *first == *last ? (size_t)s->B : (size_t)(*last * s->n - p0);
    return LT_OK;
}

/* The sample ids of step t into ids[B]. */
static lt_status step_ids(lt_sampler *s, uint64_t t, uint64_t *ids, lt_error *err);

/* The sample ids of step t into ids[B]; *n of them (B unless a token budget). */
static lt_status step_ids_n(lt_sampler *s, uint64_t t, uint64_t *ids, uint64_t *n, lt_error *err) {
    *n = s->B;
    if (s->mix) {
        lt_status st = check_step(s, t, err);
        if (st != LT_OK) return st;
        if (t < s->mix->next_step) mix_reset(s); /* out of order: walk again from step 0 */
        while (s->mix->next_step <= t) *n = mix_fill(s, ids);
        return LT_OK;
    }
    return step_ids(s, t, ids, err);
}

static lt_status step_ids(lt_sampler *s, uint64_t t, uint64_t *ids, lt_error *err) {
    uint64_t e0, e1;
    size_t n0;
    lt_status st = lt_sampler_step_epochs(s, t, &e0, &e1, &n0, err);
    if (st != LT_OK) return st;
    uint64_t p0 = t * s->B;
    const uint64_t *perm0 = epoch_perm(s, e0);
    memcpy(ids, perm0 + (p0 - e0 * s->n), n0 * sizeof *ids);
    if (n0 < s->B) {
        const uint64_t *perm1 = epoch_perm(s, e1); /* perm0 stays valid: most recently used */
        memcpy(ids + n0, perm1, (s->B - n0) * sizeof *ids);
    }
    return LT_OK;
}

lt_status lt_sampler_step_n(lt_sampler *s, uint64_t t, lt_sample *out, size_t *n, lt_error *err) {
    uint64_t *ids = lt_malloc_check(s->B * sizeof *ids), k = 0;
    lt_status st = step_ids_n(s, t, ids, &k, err);
    for (uint64_t i = 0; st == LT_OK && i < k; i++) lt_sampler_sample(s, ids[i], &out[i]);
    *n = st == LT_OK ? (size_t)k : 0;
    free(ids);
    return st;
}

lt_status lt_sampler_step(lt_sampler *s, uint64_t t, lt_sample *out, lt_error *err) {
    if (s->cfg.global_batch_tokens > 0)
        return lt_fail(err, LT_ERR_USAGE, NULL, "a token budget gives steps of varying size: lt_sampler_step_n");
    uint64_t *ids = lt_malloc_check(s->B * sizeof *ids);
    lt_status st = step_ids_n(s, t, ids, &(uint64_t){0}, err);
    for (uint64_t i = 0; st == LT_OK && i < s->B; i++) lt_sampler_sample(s, ids[i], &out[i]);
    free(ids);
    return st;
}

lt_status lt_sampler_step_lengths(lt_sampler *s, uint64_t t, int64_t *lengths, lt_error *err) {
    if (s->cfg.global_batch_tokens > 0)
        return lt_fail(err, LT_ERR_USAGE, NULL, "a token budget gives steps of varying size: lt_sampler_step_n");
    uint64_t *ids = lt_malloc_check(s->B * sizeof *ids);
    lt_status st = step_ids_n(s, t, ids, &(uint64_t){0}, err);
    for (uint64_t i = 0; st == LT_OK && i < s->B; i++) lengths[i] = sample_length(s, ids[i]);
    free(ids);
    return st;
}

/* ------------------------------------------------------------------ source */

int lt_sample_source_format(const lt_sample *smp, char *buf, size_t size) {
    return snprintf(buf, size, "task=%" PRIu32 ",doc=%" PRIu64 ",tok=%" PRId64, smp->task, smp->doc, smp->offset);
}

/* Parse "KEY=DIGITS" at *p (advancing it); false unless the digits fit in `max`. */
static bool parse_field(const char **p, const char *key, uint64_t max, uint64_t *out) {
    size_t kl = strlen(key);
    if (strncmp(*p, key, kl) != 0 || (*p)[kl] != '=') return false;
    const char *q = *p + kl + 1;
    if (*q < '0' || *q > '9') return false;
    uint64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        uint64_t dgt = (uint64_t)(*q - '0');
        if (v > (max - dgt) / 10) return false;
        v = v * 10 + dgt;
    }
    *out = v;
    *p = q;
    return true;
}

lt_status lt_sample_source_parse(const char *text, lt_sample *out, lt_error *err) {
    memset(out, 0, sizeof *out);
    const char *p = text;
    uint64_t task, doc, tok;
    if (parse_field(&p, "task", UINT32_MAX, &task) && *p++ == ',' && parse_field(&p, "doc", UINT64_MAX, &doc) &&
        *p++ == ',' && parse_field(&p, "tok", INT64_MAX, &tok) && *p == '\0') {
        out->task = (uint32_t)task;
        out->doc = doc;
        out->offset = (int64_t)tok;
        return LT_OK;
    }
    lt_status st = lt_fail(err, LT_ERR_INPUT, NULL, "'%.80s' is not a sample source", text);
    lt_error_hint(err, "a sample source reads task=T,doc=D,tok=O");
    return st;
}
