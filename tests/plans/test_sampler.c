/*
 * tests/plans/test_sampler.c — unit tests for plans/sampler (cmocka).
 *
 * The batches are checked against a reference written here independently of sampler.c:
 * a Fisher-Yates shuffle from lt_rng_below calls over the documented stream layout, and
 * the epoch boundary rule applied to the whole position sequence built epoch by epoch
 * (sampler.c computes epochs on demand, in any order, with a shortcut for the common case).
 *
 * Without arguments: runs the tests. With a mode argument:
 *   test_sampler --bench LENGTHS_FILE STEPS GLOBAL_BATCH CONTEXT_LEN [truncate|split]
 *       times loading, creating the sample table and sampling STEPS steps in order (ms).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "dataprep/shard.h" /* lt_shard_writer_* (a tiny dataprep directory) */
#include "lib/rng.h"        /* lt_rng_seed, lt_rng_split, lt_rng_below */
#include "lib/sha256.h"     /* lt_sha256_hex */
#include "plans/batches/sampler.h"
#include "tests/testutil.h" /* lt_test_tmpdir_*, lt_test_now_ms */

static char tmp_root[128];

static lt_corpus *corpus_of(const int64_t *len, size_t n) {
    lt_corpus *c = NULL;
    lt_error err;
    lt_status st = lt_corpus_from_lengths(&c, len, n, "test", &err);
    if (st != LT_OK) fail_msg("corpus: %s", err.what);
    return c;
}

static lt_sampler *sampler_of(const lt_corpus *c, int64_t C, int64_t B, uint64_t seed, lt_sample_policy p) {
    lt_sampler_config cfg = {.context_len = C, .global_batch = B, .seed = seed, .policy = p};
    lt_sampler *s = NULL;
    lt_error err;
    lt_status st = lt_sampler_create(&s, c, &cfg, &err);
    if (st != LT_OK) fail_msg("sampler: %s (%s)", err.what, err.where);
    return s;
}

/* A corpus of n documents whose lengths are 1..n (so truncate with a large C gives
 * sample i <-> length i + 1). */
static lt_corpus *counting_corpus(size_t n) {
    int64_t *len = malloc(n * sizeof *len);
    assert_non_null(len);
    for (size_t i = 0; i < n; i++) len[i] = (int64_t)i + 1;
    lt_corpus *c = corpus_of(len, n);
    free(len);
    return c;
}

/* ---- the reference ---------------------------------------------------------------- */

/* Epoch e's raw shuffle, written out from the stream layout of sampler.h. */
static void ref_shuffle(uint64_t seed, uint64_t e, uint64_t n, uint64_t *perm) {
    lt_rng root, sampler, ep;
    lt_rng_seed(&root, seed);
    lt_rng_split(&sampler, &root, UINT64_C(0x73616d706c6572)); /* "sampler" */
    lt_rng_split(&ep, &sampler, e);
    for (uint64_t i = 0; i < n; i++) perm[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = lt_rng_below(&ep, i + 1);
        uint64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* The sample ids of positions [0, n_pos): epochs appended one after the other; when the
 * sequence so far does not end on a step boundary, the next epoch's first h = B - r
 * samples are the first h of its shuffle that are not among the sequence's last r, and
 * the rest of the epoch follows in shuffled order. */
static uint64_t *ref_sequence(uint64_t seed, uint64_t n, uint64_t B, uint64_t n_pos) {
    uint64_t *seq = malloc((n_pos + n) * sizeof *seq);
    uint64_t *perm = malloc(n * sizeof *perm);
    bool *picked = malloc(n * sizeof *picked);
    assert_true(seq && perm && picked);
    uint64_t len = 0;
    for (uint64_t e = 0; len < n_pos; e++) {
        ref_shuffle(seed, e, n, perm);
        uint64_t r = len % B, h = r ? B - r : 0, got = 0;
        memset(picked, 0, n * sizeof *picked);
        for (uint64_t i = 0; i < n && got < h; i++) {
            bool in_tail = false;
            for (uint64_t k = len - r; k < len; k++) in_tail |= seq[k] == perm[i];
            if (!in_tail) {
                seq[len + got++] = perm[i];
                picked[i] = true;
            }
        }
        assert_int_equal(got, h);
        for (uint64_t i = 0; i < n; i++)
            if (!picked[i]) seq[len + got++] = perm[i];
        len += n;
    }
    free(perm);
    free(picked);
    return seq;
}

static void check_step_matches(lt_sampler *s, uint64_t t, const uint64_t *seq, uint64_t B) {
    lt_sample *out = malloc(B * sizeof *out);
    assert_non_null(out);
    lt_error err;
    assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
    for (uint64_t i = 0; i < B; i++)
        if (out[i].id != seq[t * B + i])
            fail_msg("step %" PRIu64 " position %" PRIu64 ": sample %" PRIu64 ", reference %" PRIu64, t, i, out[i].id,
                     seq[t * B + i]);
    free(out);
}

/* ---- samples ---------------------------------------------------------------------- */

static void test_truncate_lengths(void **state) {
    (void)state;
    const int64_t len[] = {5, 130, 128, 1, 300};
    lt_corpus *c = corpus_of(len, 5);
    lt_sampler *s = sampler_of(c, 128, 2, 1, LT_SAMPLE_TRUNCATE);
    assert_int_equal(lt_sampler_n_samples(s), 5);
    const int64_t want[] = {5, 128, 128, 1, 128};
    for (uint64_t id = 0; id < 5; id++) {
        lt_sample smp;
        lt_sampler_sample(s, id, &smp);
        assert_int_equal(smp.id, id);
        assert_int_equal(smp.corpus_doc, id);
        assert_int_equal(smp.task, 0);
        assert_int_equal(smp.doc, id);
        assert_int_equal(smp.offset, 0);
        assert_int_equal(smp.length, want[id]);
    }
    assert_int_equal(lt_sampler_n_tokens(s), 5 + 128 + 128 + 1 + 128);
    assert_int_equal(lt_corpus_n_tokens(c), 5 + 130 + 128 + 1 + 300);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

static void test_split_lengths(void **state) {
    (void)state;
    const int64_t len[] = {5, 130, 128, 1, 300};
    lt_corpus *c = corpus_of(len, 5);
    lt_sampler *s = sampler_of(c, 128, 2, 1, LT_SAMPLE_SPLIT);
    /* 5 | 128 2 | 128 | 1 | 128 128 44 */
    assert_int_equal(lt_sampler_n_samples(s), 8);
    const struct { uint64_t doc; int64_t off, len; } want[] = {
        {0, 0, 5}, {1, 0, 128}, {1, 128, 2}, {2, 0, 128}, {3, 0, 1}, {4, 0, 128}, {4, 128, 128}, {4, 256, 44},
    };
    int64_t sum[5] = {0};
    for (uint64_t id = 0; id < 8; id++) {
        lt_sample smp;
        lt_sampler_sample(s, id, &smp);
        assert_int_equal(smp.id, id);
        assert_int_equal(smp.corpus_doc, want[id].doc);
        assert_int_equal(smp.offset, want[id].off);
        assert_int_equal(smp.length, want[id].len);
        assert_true(smp.length >= 1 && smp.length <= 128);
        /* the pieces tile the document in order */
        assert_int_equal(smp.offset, sum[smp.corpus_doc]);
        sum[smp.corpus_doc] += smp.length;
    }
    for (int d = 0; d < 5; d++) assert_int_equal(sum[d], len[d]);
    assert_int_equal(lt_sampler_n_tokens(s), lt_corpus_n_tokens(c));
    lt_sampler_free(s);
    lt_corpus_free(c);
}

static void test_split_pieces_sum_random(void **state) {
    (void)state;
    /* random lengths, several context lengths: the pieces of each document sum to it */
    lt_rng r;
    lt_rng_seed(&r, 99);
    enum { N = 500 };
    int64_t len[N];
    for (int i = 0; i < N; i++) len[i] = 1 + (int64_t)lt_rng_below(&r, 5000);
    lt_corpus *c = corpus_of(len, N);
    const int64_t ctx[] = {1, 7, 100, 4096, 5000, 100000};
    for (size_t k = 0; k < sizeof ctx / sizeof ctx[0]; k++) {
        lt_sampler *s = sampler_of(c, ctx[k], 1, 3, LT_SAMPLE_SPLIT);
        int64_t sum[N] = {0};
        uint64_t expect_n = 0;
        for (int i = 0; i < N; i++) expect_n += (uint64_t)((len[i] + ctx[k] - 1) / ctx[k]);
        assert_int_equal(lt_sampler_n_samples(s), expect_n);
        for (uint64_t id = 0; id < lt_sampler_n_samples(s); id++) {
            lt_sample smp;
            lt_sampler_sample(s, id, &smp);
            assert_int_equal(smp.offset, sum[smp.corpus_doc]);
            assert_true(smp.length >= 1 && smp.length <= ctx[k]);
            sum[smp.corpus_doc] += smp.length;
        }
        for (int i = 0; i < N; i++) assert_int_equal(sum[i], len[i]);
        lt_sampler_free(s);
    }
    lt_corpus_free(c);
}

static void test_empty_documents_give_no_sample(void **state) {
    (void)state;
    const int64_t len[] = {0, 3, 0, 0, 9};
    lt_corpus *c = corpus_of(len, 5);
    for (int p = 0; p < 2; p++) {
        lt_sampler *s = sampler_of(c, 4, 1, 1, (lt_sample_policy)p);
        assert_int_equal(lt_sampler_n_samples(s), p == 0 ? 2 : 4);
        lt_sample smp;
        lt_sampler_sample(s, 0, &smp);
        assert_int_equal(smp.corpus_doc, 1);
        lt_sampler_sample(s, 1, &smp);
        assert_int_equal(smp.corpus_doc, 4);
        assert_int_equal(smp.length, 4);
        lt_sampler_free(s);
    }
    lt_corpus_free(c);
}

/* ---- batches ---------------------------------------------------------------------- */

/* With B dividing N no boundary rule applies: the steps are the plain Fisher-Yates
 * permutations laid end to end. */
static void test_steps_are_fisher_yates(void **state) {
    (void)state;
    const uint64_t N = 24, B = 6, seed = 1234;
    lt_corpus *c = counting_corpus(N);
    lt_sampler *s = sampler_of(c, 1000, (int64_t)B, seed, LT_SAMPLE_TRUNCATE);
    uint64_t perm[24];
    lt_sample out[6];
    lt_error err;
    for (uint64_t e = 0; e < 3; e++) {
        ref_shuffle(seed, e, N, perm);
        for (uint64_t k = 0; k < N / B; k++) {
            uint64_t t = e * (N / B) + k;
            assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
            for (uint64_t i = 0; i < B; i++) {
                assert_int_equal(out[i].id, perm[k * B + i]);
                assert_int_equal(out[i].length, (int64_t)perm[k * B + i] + 1);
            }
        }
    }
    /* and the permutation is really shuffled: not the identity, not epoch 0 again */
    uint64_t p0[24], p1[24];
    ref_shuffle(seed, 0, N, p0);
    ref_shuffle(seed, 1, N, p1);
    int fixed = 0;
    for (uint64_t i = 0; i < N; i++) fixed += p0[i] == i;
    assert_true(fixed < 8);
    assert_memory_not_equal(p0, p1, sizeof p0);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

/* Every epoch is a permutation and every step is distinct, for shapes where steps
 * straddle epochs (including N < 2B - 1, where the boundary rule chains epochs). */
static void test_epochs_are_permutations(void **state) {
    (void)state;
    const struct { uint64_t n, b; } shapes[] = {{37, 5}, {7, 3}, {5, 3}, {4, 3}, {9, 8}, {10, 7}, {6, 6}, {1, 1}, {13, 13}, {100, 99}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const uint64_t N = shapes[k].n, B = shapes[k].b, n_epochs = 12;
        lt_corpus *c = counting_corpus(N);
        for (uint64_t seed = 0; seed < 5; seed++) {
            lt_sampler *s = sampler_of(c, 1000, (int64_t)B, seed, LT_SAMPLE_TRUNCATE);
            uint64_t n_steps = n_epochs * N / B;
            uint64_t *count = calloc(n_epochs * N, sizeof *count); /* [epoch][sample] */
            lt_sample *out = malloc(B * sizeof *out);
            bool *in_step = calloc(N, sizeof *in_step);
            assert_true(count && out && in_step);
            lt_error err;
            for (uint64_t t = 0; t < n_steps; t++) {
                assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
                uint64_t e0, e1;
                size_t n0;
                assert_int_equal(lt_sampler_step_epochs(s, t, &e0, &e1, &n0, &err), LT_OK);
                memset(in_step, 0, N * sizeof *in_step);
                for (uint64_t i = 0; i < B; i++) {
                    uint64_t e = i < n0 ? e0 : e1;
                    if (in_step[out[i].id])
                        fail_msg("N=%" PRIu64 " B=%" PRIu64 " seed %" PRIu64 " step %" PRIu64 ": sample %" PRIu64
                                 " twice",
                                 N, B, seed, t, out[i].id);
                    in_step[out[i].id] = true;
                    if (e < n_epochs) count[e * N + out[i].id]++;
                }
            }
            for (uint64_t e = 0; e + 1 < n_epochs; e++) /* the last epoch may be unfinished */
                for (uint64_t id = 0; id < N; id++)
                    if (count[e * N + id] != 1)
                        fail_msg("N=%" PRIu64 " B=%" PRIu64 " seed %" PRIu64 ": epoch %" PRIu64 " holds sample %" PRIu64
                                 " %" PRIu64 " times",
                                 N, B, seed, e, id, count[e * N + id]);
            free(count);
            free(out);
            free(in_step);
            lt_sampler_free(s);
        }
        lt_corpus_free(c);
    }
}

static void test_step_epochs_straddle(void **state) {
    (void)state;
    /* N = 7, B = 3: positions 0..6 epoch 0, 7..13 epoch 1; step 2 = positions 6,7,8 */
    lt_corpus *c = counting_corpus(7);
    lt_sampler *s = sampler_of(c, 100, 3, 5, LT_SAMPLE_TRUNCATE);
    lt_error err;
    uint64_t e0, e1;
    size_t n0;
    const struct { uint64_t t, e0, e1; size_t n0; } want[] = {
        {0, 0, 0, 3}, {1, 0, 0, 3}, {2, 0, 1, 1}, {3, 1, 1, 3}, {4, 1, 2, 2}, {5, 2, 2, 3}, {6, 2, 2, 3}, {7, 3, 3, 3},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        assert_int_equal(lt_sampler_step_epochs(s, want[k].t, &e0, &e1, &n0, &err), LT_OK);
        assert_int_equal(e0, want[k].e0);
        assert_int_equal(e1, want[k].e1);
        assert_int_equal(n0, want[k].n0);
    }
    /* step 2 holds the last sample of epoch 0 and the first two of epoch 1 */
    uint64_t p0[7];
    ref_shuffle(5, 0, 7, p0);
    lt_sample out[3];
    assert_int_equal(lt_sampler_step(s, 2, out, &err), LT_OK);
    assert_int_equal(out[0].id, p0[6]);
    assert_true(out[1].id != p0[6] && out[2].id != p0[6] && out[1].id != out[2].id);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

/* A straddling step whose next epoch starts with the previous epoch's last sample: the
 * boundary rule moves it out of the step (found by searching seeds). */
static void test_boundary_rule_conflict(void **state) {
    (void)state;
    const uint64_t N = 7, B = 3;
    lt_corpus *c = counting_corpus(N);
    uint64_t seed = 0, p0[7], p1[7];
    for (;; seed++) {
        assert_true(seed < 10000);
        ref_shuffle(seed, 0, N, p0);
        ref_shuffle(seed, 1, N, p1);
        if (p1[0] == p0[6]) break; /* raw epoch 1 opens with epoch 0's last sample */
    }
    lt_sampler *s = sampler_of(c, 100, (int64_t)B, seed, LT_SAMPLE_TRUNCATE);
    lt_sample out[3];
    lt_error err;
    assert_int_equal(lt_sampler_step(s, 2, out, &err), LT_OK);
    assert_int_equal(out[0].id, p0[6]);
    assert_int_equal(out[1].id, p1[1]); /* p1[0] passed over ... */
    assert_int_equal(out[2].id, p1[2]);
    assert_int_equal(lt_sampler_step(s, 3, out, &err), LT_OK);
    assert_int_equal(out[0].id, p1[0]); /* ... opens the next step */
    assert_int_equal(out[1].id, p1[3]);
    assert_int_equal(out[2].id, p1[4]);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

/* All steps equal the reference sequence, asked for in order, in reverse and at random,
 * for shapes with and without chained epochs. */
static void test_matches_reference_any_order(void **state) {
    (void)state;
    const struct { uint64_t n, b; } shapes[] = {{37, 5}, {7, 3}, {5, 3}, {4, 3}, {9, 8}, {10, 7}, {1000, 64}, {130, 128}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const uint64_t N = shapes[k].n, B = shapes[k].b, seed = 77 + k;
        const uint64_t n_steps = 8 * N / B + 3;
        uint64_t *seq = ref_sequence(seed, N, B, n_steps * B);
        lt_corpus *c = counting_corpus(N);
        lt_sampler *s = sampler_of(c, 1 << 20, (int64_t)B, seed, LT_SAMPLE_TRUNCATE);
        for (uint64_t t = 0; t < n_steps; t++) check_step_matches(s, t, seq, B);
        lt_sampler_free(s);
        s = sampler_of(c, 1 << 20, (int64_t)B, seed, LT_SAMPLE_TRUNCATE);
        for (uint64_t t = n_steps; t-- > 0;) check_step_matches(s, t, seq, B);
        lt_sampler_free(s);
        s = sampler_of(c, 1 << 20, (int64_t)B, seed, LT_SAMPLE_TRUNCATE);
        lt_rng r;
        lt_rng_seed(&r, k);
        for (int i = 0; i < 200; i++) check_step_matches(s, lt_rng_below(&r, n_steps), seq, B);
        lt_sampler_free(s);
        lt_corpus_free(c);
        free(seq);
    }
}

static void test_determinism_and_seed(void **state) {
    (void)state;
    const uint64_t N = 300, B = 32, n_steps = 40;
    lt_corpus *c = counting_corpus(N);
    lt_sampler *a = sampler_of(c, 64, (int64_t)B, 2024, LT_SAMPLE_SPLIT);
    lt_sampler *b = sampler_of(c, 64, (int64_t)B, 2024, LT_SAMPLE_SPLIT);
    lt_sampler *d = sampler_of(c, 64, (int64_t)B, 2025, LT_SAMPLE_SPLIT);
    int64_t la[32], lb[32];
    lt_sample sa[32], sb[32], sd[32];
    lt_error err;
    /* b walks the steps in a shuffled order */
    uint64_t order[40];
    for (uint64_t t = 0; t < n_steps; t++) order[t] = t;
    lt_rng r;
    lt_rng_seed(&r, 8);
    lt_rng_shuffle(&r, order, n_steps, sizeof order[0]);
    uint64_t (*ids_b)[32] = malloc(n_steps * sizeof *ids_b);
    assert_non_null(ids_b);
    for (uint64_t i = 0; i < n_steps; i++) {
        assert_int_equal(lt_sampler_step(b, order[i], sb, &err), LT_OK);
        for (uint64_t j = 0; j < B; j++) ids_b[order[i]][j] = sb[j].id;
    }
    int same_d = 0;
    for (uint64_t t = 0; t < n_steps; t++) {
        assert_int_equal(lt_sampler_step(a, t, sa, &err), LT_OK);
        assert_int_equal(lt_sampler_step_lengths(a, t, la, &err), LT_OK);
        assert_int_equal(lt_sampler_step_lengths(b, t, lb, &err), LT_OK);
        assert_int_equal(lt_sampler_step(d, t, sd, &err), LT_OK);
        for (uint64_t j = 0; j < B; j++) {
            assert_int_equal(sa[j].id, ids_b[t][j]);
            assert_int_equal(la[j], sa[j].length);
            assert_int_equal(lb[j], la[j]);
            same_d += sd[j].id == sa[j].id;
        }
    }
    assert_true(same_d < (int)(n_steps * B / 20)); /* another seed, other batches */
    free(ids_b);
    lt_sampler_free(a);
    lt_sampler_free(b);
    lt_sampler_free(d);
    lt_corpus_free(c);
}

/* A golden first batch: the stream layout is a contract (stored plans depend on it), so a
 * change of these numbers must be deliberate. Values from this implementation, cross-
 * checked against the independent reference above. */
static void test_golden_first_steps(void **state) {
    (void)state;
    lt_corpus *c = counting_corpus(10);
    lt_sampler *s = sampler_of(c, 100, 4, 1234, LT_SAMPLE_TRUNCATE);
    uint64_t *seq = ref_sequence(1234, 10, 4, 12);
    lt_sample out[4];
    lt_error err;
    uint64_t got[12];
    for (uint64_t t = 0; t < 3; t++) {
        assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
        for (int i = 0; i < 4; i++) got[t * 4 + (uint64_t)i] = out[i].id;
    }
    assert_memory_equal(got, seq, sizeof got);
    /* seed 1234, N = 10, B = 4: epoch 0 is 0 5 9 6 2 4 8 7 1 3; step 2 straddles */
    static const uint64_t golden[12] = {0, 5, 9, 6, 2, 4, 8, 7, 1, 3, 7, 6};
    for (int i = 0; i < 12; i++) assert_int_equal(got[i], golden[i]);
    free(seq);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

/* ---- loading ---------------------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_lengths_file(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/lengths.txt", tmp_root);
    write_text(path, "# a comment\n5\n130\n\n128\n 1 \n300\n");
    lt_corpus *c = NULL;
    lt_error err;
    assert_int_equal(lt_corpus_load_lengths(&c, path, &err), LT_OK);
    assert_int_equal(lt_corpus_n_docs(c), 5);
    assert_int_equal(lt_corpus_n_tasks(c), 1);
    const int64_t want[] = {5, 130, 128, 1, 300};
    for (uint64_t d = 0; d < 5; d++) {
        assert_int_equal(lt_corpus_doc_len(c, d), want[d]);
        uint32_t task;
        uint64_t td;
        lt_corpus_doc_ref(c, d, &task, &td);
        assert_int_equal(task, 0);
        assert_int_equal(td, d);
    }
    /* the fingerprint is the SHA-256 of the canonical printout, whatever the file's
     * comments and blanks: printf '5\n130\n128\n1\n300\n' | sha256sum */
    char hex[LT_SHA256_HEX_LEN + 1];
    lt_corpus_fingerprint(c, hex);
    assert_string_equal(hex, "6f02f7720425790ac2c3f1a719a831affe870f1cda4f93e142b4a2fb261a1c41");
    char want_hex[LT_SHA256_HEX_LEN + 1];
    lt_sha256_hex("5\n130\n128\n1\n300\n", strlen("5\n130\n128\n1\n300\n"), want_hex);
    assert_string_equal(hex, want_hex);
    /* a corpus built from the same lengths has the same fingerprint; another one not */
    lt_corpus *c2 = corpus_of(want, 5);
    char hex2[LT_SHA256_HEX_LEN + 1];
    lt_corpus_fingerprint(c2, hex2);
    assert_string_equal(hex, hex2);
    lt_corpus_free(c2);
    const int64_t other[] = {5, 130, 128, 1, 301};
    c2 = corpus_of(other, 5);
    lt_corpus_fingerprint(c2, hex2);
    assert_string_not_equal(hex, hex2);
    lt_corpus_free(c2);
    lt_corpus_free(c);

    /* errors: a missing file (I/O), a bad line (input) */
    assert_int_equal(lt_corpus_load_lengths(&c, "/nonexistent/lengths.txt", &err), LT_ERR_IO);
    assert_null(c);
    write_text(path, "5\nseven\n");
    assert_int_equal(lt_corpus_load_lengths(&c, path, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.where, ":2"));
}

static void test_fingerprint_large(void **state) {
    (void)state;
    /* more lengths than the formatting buffer holds: the same digest as one-shot hashing */
    enum { N = 5000 };
    int64_t *len = malloc(N * sizeof *len);
    char *text = malloc(N * 24);
    assert_true(len && text);
    size_t used = 0;
    for (int i = 0; i < N; i++) {
        len[i] = (int64_t)i * 7919 % 1000003 + (i % 3 == 0 ? INT64_C(4000000000) : 0);
        used += (size_t)sprintf(text + used, "%" PRId64 "\n", len[i]);
    }
    lt_corpus *c = corpus_of(len, N);
    char hex[LT_SHA256_HEX_LEN + 1], want[LT_SHA256_HEX_LEN + 1];
    lt_corpus_fingerprint(c, hex);
    lt_sha256_hex(text, used, want);
    assert_string_equal(hex, want);
    lt_corpus_free(c);
    free(len);
    free(text);
}

/* Write task `task` of `n_tasks` with documents of the given token counts (EOS none). */
static void write_task(const char *dir, uint32_t task, uint32_t n_tasks, const size_t *doc_len, size_t n_docs) {
    lt_shard_meta m;
    memset(&m, 0, sizeof m);
    m.token_width = 2;
    m.n_vocab = 1000;
    snprintf(m.encoding, sizeof m.encoding, "r50k_base");
    m.eos = LT_EOS_NONE;
    m.task_id = task;
    m.num_tasks = n_tasks;
    lt_shard_writer *w;
    lt_error err;
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    uint32_t f;
    assert_int_equal(lt_shard_writer_add_file(w, "in.jsonl", 10, &f, &err), LT_OK);
    uint32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = (uint32_t)i;
    for (size_t d = 0; d < n_docs; d++) {
        char id[24];
        snprintf(id, sizeof id, "%zu", d);
        lt_status st = lt_shard_writer_add_doc(w, f, id, "", 0, ids, doc_len[d], &err);
        if (st != LT_OK) fail_msg("add_doc: %s", err.what);
    }
    if (lt_shard_writer_finish(w, NULL, &err) != LT_OK) fail_msg("finish: %s", err.what);
    lt_shard_writer_free(w);
    char *done = lt_task_path(dir, task, "done");
    char text[64];
    snprintf(text, sizeof text, "{\"task\":%u,\"num_tasks\":%u}\n", task, n_tasks);
    write_text(done, text);
    free(done);
}

static void test_dataprep_directory(void **state) {
    (void)state;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/data", tmp_root);
    assert_int_equal(mkdir(dir, 0777), 0);
    lt_corpus *c = NULL;
    lt_error err;
    /* no finished task yet */
    assert_int_equal(lt_corpus_load_dataset(&c, dir, &err), LT_ERR_INPUT);
    const size_t t0[] = {3, 0, 200}, t1[] = {150};
    write_task(dir, 1, 2, t1, 1);
    /* task 0 missing */
    assert_int_equal(lt_corpus_load_dataset(&c, dir, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "not finished"));
    write_task(dir, 0, 2, t0, 3);
    assert_int_equal(lt_corpus_load_dataset(&c, dir, &err), LT_OK);
    assert_int_equal(lt_corpus_n_tasks(c), 2);
    assert_int_equal(lt_corpus_n_docs(c), 4);
    const int64_t want_len[] = {3, 0, 200, 150};
    const uint32_t want_task[] = {0, 0, 0, 1};
    const uint64_t want_doc[] = {0, 1, 2, 0};
    for (uint64_t d = 0; d < 4; d++) {
        assert_int_equal(lt_corpus_doc_len(c, d), want_len[d]);
        uint32_t task;
        uint64_t td;
        lt_corpus_doc_ref(c, d, &task, &td);
        assert_int_equal(task, want_task[d]);
        assert_int_equal(td, want_doc[d]);
    }
    char hex[LT_SHA256_HEX_LEN + 1], want[LT_SHA256_HEX_LEN + 1];
    lt_corpus_fingerprint(c, hex);
    lt_sha256_hex("3\n0\n200\n150\n", strlen("3\n0\n200\n150\n"), want);
    assert_string_equal(hex, want);

    /* split, C = 128: 3 | (empty) | 128 72 | 128 22 — sources locate the pieces */
    lt_sampler *s = sampler_of(c, 128, 5, 1, LT_SAMPLE_SPLIT);
    assert_int_equal(lt_sampler_n_samples(s), 5);
    const char *want_src[] = {"task=0,doc=0,tok=0", "task=0,doc=2,tok=0", "task=0,doc=2,tok=128",
                              "task=1,doc=0,tok=0", "task=1,doc=0,tok=128"};
    const int64_t want_slen[] = {3, 128, 72, 128, 22};
    for (uint64_t id = 0; id < 5; id++) {
        lt_sample smp;
        lt_sampler_sample(s, id, &smp);
        char src[64];
        lt_sample_source_format(&smp, src, sizeof src);
        assert_string_equal(src, want_src[id]);
        assert_int_equal(smp.length, want_slen[id]);
    }
    /* one step of all five samples: each exactly once */
    lt_sample out[5];
    assert_int_equal(lt_sampler_step(s, 0, out, &err), LT_OK);
    unsigned seen = 0;
    for (int i = 0; i < 5; i++) seen |= 1u << out[i].id;
    assert_int_equal(seen, 0x1f);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

/* ---- sources ---------------------------------------------------------------------- */

static void test_source_round_trip(void **state) {
    (void)state;
    lt_sample smp = {.task = 3, .doc = 17, .offset = 131072, .length = 5};
    char buf[64];
    assert_int_equal(lt_sample_source_format(&smp, buf, sizeof buf), (int)strlen("task=3,doc=17,tok=131072"));
    assert_string_equal(buf, "task=3,doc=17,tok=131072");
    lt_sample back;
    lt_error err;
    assert_int_equal(lt_sample_source_parse(buf, &back, &err), LT_OK);
    assert_int_equal(back.task, 3);
    assert_int_equal(back.doc, 17);
    assert_int_equal(back.offset, 131072);
    assert_int_equal(lt_sample_source_parse("task=4294967295,doc=18446744073709551615,tok=9223372036854775807", &back,
                                            &err),
                     LT_OK);
    assert_int_equal(back.task, UINT32_MAX);
    assert_int_equal(back.doc, UINT64_MAX);
    assert_int_equal(back.offset, INT64_MAX);
    const char *bad[] = {"", "task=3,doc=17", "task=3,doc=17,tok=", "task=x,doc=1,tok=0", "task=4294967296,doc=0,tok=0",
                         "task=1,doc=2,tok=3 ", "doc=2,task=1,tok=3", "task=1,doc=2,tok=9223372036854775808",
                         "task=-1,doc=2,tok=3", "task=1;doc=2;tok=3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (lt_sample_source_parse(bad[i], &back, &err) != LT_ERR_INPUT) fail_msg("'%s' parsed", bad[i]);
        assert_non_null(strstr(err.hint, "task=T,doc=D,tok=O"));
    }
}

/* ---- errors ----------------------------------------------------------------------- */

static void test_errors(void **state) {
    (void)state;
    lt_corpus *c = NULL;
    lt_error err;
    const int64_t len[] = {10, 20, 30};
    assert_int_equal(lt_corpus_from_lengths(&c, len, 0, "x", &err), LT_ERR_INPUT);
    assert_null(c);
    assert_non_null(strstr(err.what, "no documents"));
    const int64_t neg[] = {10, -1};
    assert_int_equal(lt_corpus_from_lengths(&c, neg, 2, "x", &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "negative"));
    const int64_t huge[] = {INT64_MAX, 1};
    assert_int_equal(lt_corpus_from_lengths(&c, huge, 2, "x", &err), LT_ERR_INPUT);

    c = corpus_of(len, 3);
    lt_sampler *s = NULL;
    lt_sampler_config cfg = {.context_len = 0, .global_batch = 1, .seed = 1, .policy = LT_SAMPLE_TRUNCATE};
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_USAGE);
    assert_null(s);
    assert_string_equal(err.where, "plan.context_len");
    cfg.context_len = 8;
    cfg.global_batch = 0;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_USAGE);
    assert_string_equal(err.where, "plan.global_batch");
    cfg.global_batch = 4; /* 3 samples */
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.what, "larger than the 3 samples"));
    assert_non_null(strstr(err.hint, "sample_policy = split"));
    cfg.policy = LT_SAMPLE_SPLIT; /* 2 + 3 + 4 = 9 samples of at most 8 tokens: fine */
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_OK);
    assert_int_equal(lt_sampler_n_samples(s), 9);
    /* a step whose positions overflow */
    lt_sample out[4];
    int64_t lens[4];
    uint64_t e0, e1;
    size_t n0;
    assert_int_equal(lt_sampler_step(s, UINT64_MAX / 2, out, &err), LT_ERR_USAGE);
    assert_int_equal(lt_sampler_step_lengths(s, UINT64_MAX / 4, lens, &err), LT_ERR_USAGE);
    assert_int_equal(lt_sampler_step_epochs(s, UINT64_MAX / 4, &e0, &e1, &n0, &err), LT_ERR_USAGE);
    /* a very large but valid step still works */
    assert_int_equal(lt_sampler_step_epochs(s, UINT64_MAX / 8, &e0, &e1, &n0, &err), LT_OK);
    assert_int_equal(lt_sampler_step(s, UINT64_MAX / 8, out, &err), LT_OK);
    lt_sampler_free(s);
    s = NULL;
    cfg.global_batch = 10;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_USAGE);
    assert_null(strstr(err.hint, "sample_policy = split"));
    cfg.global_batch = 2;
    cfg.policy = (lt_sample_policy)7;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_USAGE);
    lt_corpus_free(c);

    /* a corpus of empty documents has no samples */
    const int64_t zeros[] = {0, 0};
    c = corpus_of(zeros, 2);
    cfg.policy = LT_SAMPLE_TRUNCATE;
    cfg.global_batch = 1;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "no samples"));
    lt_corpus_free(c);

    /* policy names */
    lt_sample_policy p;
    assert_int_equal(lt_sample_policy_parse("truncate", "k", &p, &err), LT_OK);
    assert_int_equal(p, LT_SAMPLE_TRUNCATE);
    assert_int_equal(lt_sample_policy_parse("split", "k", &p, &err), LT_OK);
    assert_int_equal(p, LT_SAMPLE_SPLIT);
    assert_int_equal(lt_sample_policy_parse("pack", "plan.sample_policy", &p, &err), LT_ERR_USAGE);
    assert_string_equal(err.where, "plan.sample_policy");
    assert_non_null(strstr(err.hint, "truncate"));
    assert_string_equal(lt_sample_policy_name(LT_SAMPLE_SPLIT), "split");
    assert_string_equal(lt_sample_policy_name(LT_SAMPLE_TRUNCATE), "truncate");
}

/* ---- benchmark mode ---------------------------------------------------------------- */

static int bench(int argc, char **argv) {
    lt_error err;
    lt_sample_policy policy = LT_SAMPLE_TRUNCATE;
    if (argc == 7 && lt_sample_policy_parse(argv[6], "policy", &policy, &err) != LT_OK) return lt_error_exit(&err);
    double t0 = lt_test_now_ms();
    lt_corpus *c;
    if (lt_corpus_load_lengths(&c, argv[2], &err) != LT_OK) return lt_error_exit(&err);
    double t1 = lt_test_now_ms();
    lt_sampler_config cfg = {.context_len = strtoll(argv[5], NULL, 0),
                             .global_batch = strtoll(argv[4], NULL, 0),
                             .seed = 1234,
                             .policy = policy};
    lt_sampler *s;
    if (lt_sampler_create(&s, c, &cfg, &err) != LT_OK) return lt_error_exit(&err);
    double t2 = lt_test_now_ms();
    uint64_t steps = strtoull(argv[3], NULL, 0);
    int64_t *len = malloc((size_t)cfg.global_batch * sizeof *len);
    int64_t tokens = 0;
    for (uint64_t t = 0; t < steps; t++) {
        if (lt_sampler_step_lengths(s, t, len, &err) != LT_OK) return lt_error_exit(&err);
        for (int64_t i = 0; i < cfg.global_batch; i++) tokens += len[i];
    }
    double t3 = lt_test_now_ms();
    char hex[LT_SHA256_HEX_LEN + 1];
    lt_corpus_fingerprint(c, hex);
    double t4 = lt_test_now_ms();
    printf("docs=%" PRIu64 " samples=%" PRIu64 " steps=%" PRIu64 " tokens=%" PRId64 "\n", lt_corpus_n_docs(c),
           lt_sampler_n_samples(s), steps, tokens);
    printf("load_ms=%.1f create_ms=%.1f steps_ms=%.1f fingerprint_ms=%.1f fingerprint=%s\n", t1 - t0, t2 - t1,
           t3 - t2, t4 - t3, hex);
    free(len);
    lt_sampler_free(s);
    lt_corpus_free(c);
    return 0;
}

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(tmp_root, sizeof tmp_root, "sampler");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(tmp_root);
}

/* ---- mixtures and held-out documents ---------------------------------------------------
 * Expected values come from the contract, not from sampler.c: the weights (shares of
 * tokens), distinct samples per step, whole epochs per source, determinism. */

/* 3 sources: "web" (docs of 50..149 tokens), "code" (200..299), "wiki" (10..59), and
 * a few of each; documents interleaved. */
static lt_corpus *three_sources(size_t per) {
    int64_t *len = malloc(3 * per * sizeof *len);
    uint32_t *src = malloc(3 * per * sizeof *src);
    assert_true(len && src);
    lt_rng r;
    lt_rng_seed(&r, 99);
    for (size_t i = 0; i < 3 * per; i++) {
        src[i] = (uint32_t)(i % 3);
        int64_t base = src[i] == 0 ? 50 : src[i] == 1 ? 200 : 10;
        len[i] = base + (int64_t)lt_rng_below(&r, src[i] == 2 ? 50 : 100);
    }
    lt_corpus *c = corpus_of(len, 3 * per);
    static const char *const names[] = {"web", "code", "wiki"};
    lt_error err;
    assert_int_equal(lt_corpus_set_sources(c, src, names, 3, &err), LT_OK);
    free(len);
    free(src);
    return c;
}

static void test_mixture_shares_and_epochs(void **state) {
    (void)state;
    lt_corpus *c = three_sources(40);
    const lt_source_weight w[] = {{"web", 6, -1}, {"code", 3, -1}, {"wiki", 1, -1}};
    lt_sampler_config cfg = {.context_len = 1000, .global_batch = 16, .seed = 7, .policy = LT_SAMPLE_TRUNCATE,
                             .sources = w, .n_sources = 3};
    lt_sampler *s = NULL;
    lt_error err;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_OK);
    assert_true(lt_sampler_mixes(s));
    const uint64_t n = lt_sampler_n_samples(s), T = 300;
    uint64_t *count = calloc(n, sizeof *count);
    double tok[3] = {0};
    lt_sample out[16], again[16];
    for (uint64_t t = 0; t < T; t++) {
        assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
        for (int i = 0; i < 16; i++) {
            for (int j = 0; j < i; j++)
                if (out[i].id == out[j].id) fail_msg("step %" PRIu64 " holds sample %" PRIu64 " twice", t, out[i].id);
            count[out[i].id]++;
            tok[lt_corpus_doc_source(c, out[i].corpus_doc)] += (double)out[i].length;
        }
    }
    double total = tok[0] + tok[1] + tok[2];
    const double want[3] = {0.6, 0.3, 0.1};
    for (int k = 0; k < 3; k++)
        if (tok[k] / total < want[k] - 0.01 || tok[k] / total > want[k] + 0.01)
            fail_msg("source %d: %.4f of the tokens, weight %.2f", k, tok[k] / total, want[k]);
    /* whole epochs per source: the counts of one source's samples differ by at most 1 */
    for (int k = 0; k < 3; k++) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint64_t id = 0; id < n; id++) {
            lt_sample smp;
            lt_sampler_sample(s, id, &smp);
            if (lt_corpus_doc_source(c, smp.corpus_doc) != (uint32_t)k) continue;
            if (count[id] < lo) lo = count[id];
            if (count[id] > hi) hi = count[id];
        }
        if (hi - lo > 1) fail_msg("source %d: samples drawn %" PRIu64 " to %" PRIu64 " times", k, lo, hi);
        assert_true(lt_sampler_source_epoch(s, (uint32_t)k) >= lo);
    }
    assert_true(lt_sampler_source_epoch(s, 0) > 0); /* web is small for its weight: repeated */
    /* out of order and from a second sampler: the same steps */
    assert_int_equal(lt_sampler_step(s, 5, out, &err), LT_OK);
    lt_sampler *s2 = NULL;
    assert_int_equal(lt_sampler_create(&s2, c, &cfg, &err), LT_OK);
    assert_int_equal(lt_sampler_step(s2, 5, again, &err), LT_OK);
    for (int i = 0; i < 16; i++) assert_int_equal(out[i].id, again[i].id);
    cfg.seed = 8;
    lt_sampler *s3 = NULL;
    assert_int_equal(lt_sampler_create(&s3, c, &cfg, &err), LT_OK);
    assert_int_equal(lt_sampler_step(s3, 5, again, &err), LT_OK);
    int same = 0;
    for (int i = 0; i < 16; i++) same += out[i].id == again[i].id;
    assert_true(same < 16);
    uint64_t e0, e1;
    size_t n0;
    assert_int_equal(lt_sampler_step_epochs(s, 0, &e0, &e1, &n0, &err), LT_ERR_USAGE);
    free(count);
    lt_sampler_free(s);
    lt_sampler_free(s2);
    lt_sampler_free(s3);
    lt_corpus_free(c);
}

static void test_mixture_weight_zero_and_errors(void **state) {
    (void)state;
    lt_corpus *c = three_sources(10);
    lt_error err;
    lt_sampler *s = NULL;
    const lt_source_weight w0[] = {{"web", 1, -1}, {"code", 0, -1}, {"wiki", 1, -1}};
    lt_sampler_config cfg = {.context_len = 1000, .global_batch = 8, .seed = 1, .policy = LT_SAMPLE_TRUNCATE,
                             .sources = w0, .n_sources = 3};
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_OK);
    lt_sample out[8];
    for (uint64_t t = 0; t < 20; t++) {
        assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
        for (int i = 0; i < 8; i++) assert_int_not_equal(lt_corpus_doc_source(c, out[i].corpus_doc), 1);
    }
    lt_sampler_free(s);
    /* a source of the corpus the config does not name */
    const lt_source_weight w1[] = {{"web", 1, -1}, {"wiki", 1, -1}};
    cfg.sources = w1;
    cfg.n_sources = 2;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "the corpus holds source code, which the config does not name"));
    /* a weighted source the corpus does not hold */
    const lt_source_weight w2[] = {{"web", 1, -1}, {"code", 1, -1}, {"wiki", 1, -1}, {"books", 2, -1}};
    cfg.sources = w2;
    cfg.n_sources = 4;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "source books has weight 2 but no sample"));
    /* more samples per step than the weighted sources hold */
    cfg.sources = w0;
    cfg.n_sources = 3;
    cfg.global_batch = 21;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.what, "larger than the 20 samples of the weighted sources"));
    lt_corpus_free(c);
}

static void test_holdout(void **state) {
    (void)state;
    lt_corpus *c = three_sources(400); /* 1200 documents */
    const lt_source_weight w[] = {{"web", 1, -1}, {"code", 1, 0.0}, {"wiki", 1, 0.5}};
    lt_sampler_config cfg = {.context_len = 1000, .global_batch = 32, .seed = 3, .policy = LT_SAMPLE_TRUNCATE,
                             .holdout = 0.1, .sources = w, .n_sources = 3};
    lt_sampler *s = NULL;
    lt_error err;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_OK);
    uint64_t nh = lt_sampler_n_heldout(s), per[3] = {0};
    bool *held = calloc(1200, sizeof *held);
    for (uint64_t i = 0; i < nh; i++) {
        lt_sample smp;
        lt_sampler_heldout(s, i, &smp);
        assert_int_equal(smp.id, UINT64_MAX);
        assert_int_equal(smp.offset, 0);
        assert_int_equal(smp.length, lt_corpus_doc_len(c, smp.corpus_doc));
        assert_false(held[smp.corpus_doc]);
        held[smp.corpus_doc] = true;
        per[lt_corpus_doc_source(c, smp.corpus_doc)]++;
    }
    /* binomial(400, p): within 5 standard deviations */
    if (per[0] < 20 || per[0] > 70) fail_msg("web: %" PRIu64 " of 400 held out at 0.1", per[0]);
    assert_int_equal(per[1], 0);
    if (per[2] < 150 || per[2] > 250) fail_msg("wiki: %" PRIu64 " of 400 held out at 0.5", per[2]);
    assert_int_equal(lt_sampler_n_samples(s), 1200 - nh);
    lt_sample out[32];
    for (uint64_t t = 0; t < 60; t++) {
        assert_int_equal(lt_sampler_step(s, t, out, &err), LT_OK);
        for (int i = 0; i < 32; i++)
            if (held[out[i].corpus_doc]) fail_msg("step %" PRIu64 " trains held-out document %" PRIu64, t, out[i].corpus_doc);
    }
    /* the same documents, in the same order, whatever the batch; without sources too */
    lt_sampler_config cfg2 = cfg;
    cfg2.global_batch = 5;
    lt_sampler *s2 = NULL;
    assert_int_equal(lt_sampler_create(&s2, c, &cfg2, &err), LT_OK);
    assert_int_equal(lt_sampler_n_heldout(s2), nh);
    for (uint64_t i = 0; i < nh; i++) {
        lt_sample a, b;
        lt_sampler_heldout(s, i, &a);
        lt_sampler_heldout(s2, i, &b);
        assert_int_equal(a.corpus_doc, b.corpus_doc);
    }
    lt_sampler_free(s2);
    lt_corpus *plain = counting_corpus(500);
    lt_sampler_config cfg3 = {.context_len = 1000, .global_batch = 8, .seed = 3, .policy = LT_SAMPLE_TRUNCATE,
                              .holdout = 0.2};
    assert_int_equal(lt_sampler_create(&s2, plain, &cfg3, &err), LT_OK);
    assert_false(lt_sampler_mixes(s2));
    nh = lt_sampler_n_heldout(s2);
    if (nh < 60 || nh > 140) fail_msg("%" PRIu64 " of 500 held out at 0.2", nh);
    assert_int_equal(lt_sampler_n_samples(s2), 500 - nh);
    lt_sampler_free(s2);
    lt_corpus_free(plain);
    free(held);
    lt_sampler_free(s);
    lt_corpus_free(c);
}

static void test_token_budget(void **state) {
    (void)state;
    lt_corpus *c = counting_corpus(300); /* lengths 1..300 */
    const int64_t C = 128, budget = 1000;
    lt_sampler_config cfg = {.context_len = C, .global_batch = 64, .seed = 11, .policy = LT_SAMPLE_TRUNCATE,
                             .global_batch_tokens = budget, .min_step_samples = 2};
    lt_sampler *s = NULL;
    lt_error err;
    assert_int_equal(lt_sampler_create(&s, c, &cfg, &err), LT_OK);
    assert_false(lt_sampler_mixes(s));
    const uint64_t n = lt_sampler_n_samples(s);
    uint64_t *count = calloc(n, sizeof *count), drawn = 0;
    lt_sample out[64], again[64];
    size_t k, k2;
    for (uint64_t t = 0; t < 200; t++) {
        assert_int_equal(lt_sampler_step_n(s, t, out, &k, &err), LT_OK);
        assert_true(k >= 2 && k <= 64);
        int64_t tok = 0;
        for (size_t i = 0; i < k; i++) {
            tok += out[i].length;
            count[out[i].id]++;
            for (size_t j = 0; j < i; j++) assert_int_not_equal(out[i].id, out[j].id);
        }
        drawn += k;
        if (tok > budget || tok <= budget - C) fail_msg("step %" PRIu64 ": %" PRId64 " tokens, budget %" PRId64, t, tok, budget);
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t id = 0; id < n; id++) {
        lo = count[id] < lo ? count[id] : lo;
        hi = count[id] > hi ? count[id] : hi;
    }
    if (hi - lo > 1) fail_msg("samples drawn %" PRIu64 " to %" PRIu64 " times in %" PRIu64 " draws", lo, hi, drawn);
    assert_int_equal(lt_sampler_step_n(s, 7, out, &k, &err), LT_OK); /* out of order: the same */
    lt_sampler *s2 = NULL;
    assert_int_equal(lt_sampler_create(&s2, c, &cfg, &err), LT_OK);
    assert_int_equal(lt_sampler_step_n(s2, 7, again, &k2, &err), LT_OK);
    assert_int_equal(k, k2);
    for (size_t i = 0; i < k; i++) assert_int_equal(out[i].id, again[i].id);
    assert_int_equal(lt_sampler_step(s, 0, out, &err), LT_ERR_USAGE);
    free(count);
    lt_sampler_free(s);
    lt_sampler_free(s2);
    lt_corpus_free(c);
}

int main(int argc, char **argv) {
    if (argc >= 6 && argc <= 7 && strcmp(argv[1], "--bench") == 0) return bench(argc, argv);
    if (argc >= 2) {
        fprintf(stderr, "usage: %s [--bench LENGTHS_FILE STEPS GLOBAL_BATCH CONTEXT_LEN [truncate|split]]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncate_lengths),
        cmocka_unit_test(test_split_lengths),
        cmocka_unit_test(test_split_pieces_sum_random),
        cmocka_unit_test(test_empty_documents_give_no_sample),
        cmocka_unit_test(test_steps_are_fisher_yates),
        cmocka_unit_test(test_epochs_are_permutations),
        cmocka_unit_test(test_step_epochs_straddle),
        cmocka_unit_test(test_boundary_rule_conflict),
        cmocka_unit_test(test_matches_reference_any_order),
        cmocka_unit_test(test_determinism_and_seed),
        cmocka_unit_test(test_golden_first_steps),
        cmocka_unit_test(test_lengths_file),
        cmocka_unit_test(test_fingerprint_large),
        cmocka_unit_test(test_dataprep_directory),
        cmocka_unit_test(test_source_round_trip),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_mixture_shares_and_epochs),
        cmocka_unit_test(test_mixture_weight_zero_and_errors),
        cmocka_unit_test(test_holdout),
        cmocka_unit_test(test_token_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
