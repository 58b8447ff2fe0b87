/*
 * tests/dataprep/test_shard.c — token shards and their index (dataprep/shard.h): write/read
 * round trips of random documents (empty ones, one larger than a frame, widths 2 and 4,
 * EOS appended or not), document-aligned frames, the seek table parsed here independently,
 * plain zstd reading the whole shard as the concatenation of all ids, byte-identical
 * output (also with frames compressed by 1, 2 or 5 threads), atomicity, index validation (every header field, truncation, any flipped byte:
 * a clean error naming the field, never a crash) and lt_shard_verify catching damage.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <xxhash.h>
#include <zstd.h>

#include "tests/testutil.h"

#include "dataprep/shard.h"
#include "lib/rng.h"
#include "lib/sha256.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "shard");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

/* ---- helpers ---------------------------------------------------------------------- */

typedef struct doc {
    uint32_t *ids;
    size_t n;
    char id[32], name[64];
    uint32_t file, flags;
    bool null_id;
} doc;

typedef struct docset {
    doc *d;
    size_t n;
} docset;

static void docset_free(docset *s) {
    for (size_t i = 0; i < s->n; i++) free(s->d[i].ids);
    free(s->d);
    s->d = NULL;
    s->n = 0;
}

/* Random documents: lengths 0..max_len (about 1 in 8 empty), one `huge` document in the
 * middle when huge > 0, names shared by runs of consecutive documents. */
static docset random_docs(lt_rng *rng, size_t n, size_t max_len, size_t huge, uint32_t n_vocab, uint32_t n_files) {
    docset s = {lt_calloc_check(n, sizeof(doc)), n};
    for (size_t i = 0; i < n; i++) {
        doc *d = &s.d[i];
        d->n = lt_rng_below(rng, 8) == 0 ? 0 : (size_t)lt_rng_below(rng, max_len + 1);
        if (huge && i == n / 2) d->n = huge;
        d->ids = lt_malloc_check((d->n + 1) * sizeof *d->ids);
        for (size_t k = 0; k < d->n; k++) d->ids[k] = (uint32_t)lt_rng_below(rng, n_vocab);
        d->null_id = lt_rng_below(rng, 10) == 0;
        snprintf(d->id, sizeof d->id, "doc-%zu", i);
        snprintf(d->name, sizeof d->name, "group-%zu", i / 5);
        d->file = (uint32_t)(i * n_files / n);
        d->flags = (uint32_t)lt_rng_below(rng, 4);
    }
    return s;
}

static lt_shard_meta make_meta(uint32_t width, uint32_t n_vocab, lt_eos_policy eos, size_t frame_bytes) {
    lt_shard_meta m;
    memset(&m, 0, sizeof m);
    m.token_width = width;
    m.n_vocab = n_vocab;
    for (int i = 0; i < 32; i++) m.vocab_sha256[i] = (uint8_t)(i * 7 + 1);
    snprintf(m.encoding, sizeof m.encoding, "%s", width == 2 ? "r50k_base" : "o200k_base");
    m.eos = eos;
    m.eos_id = n_vocab - 1;
    m.task_id = 3;
    m.num_tasks = 8;
    m.frame_bytes = frame_bytes;
    return m;
}

static void make_dir(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", root, name);
    mkdir(out, 0777);
}

/* Write the documents with `threads` compression threads (0: on this thread). */
static void write_docs_threads(const char *dir, const lt_shard_meta *m, const docset *s, uint32_t n_files,
                               lt_shard_summary *sum, int threads) {
    lt_shard_writer *w;
    lt_error err;
    assert_int_equal(lt_shard_writer_open(&w, dir, m, &err), LT_OK);
    assert_int_equal(lt_shard_writer_set_threads(w, threads, &err), LT_OK);
    for (uint32_t f = 0; f < n_files; f++) {
        char p[64];
        uint32_t idx;
        snprintf(p, sizeof p, "/data/input-%u.jsonl", f);
        assert_int_equal(lt_shard_writer_add_file(w, p, 1000u + f, &idx, &err), LT_OK);
        assert_int_equal(idx, f);
    }
    for (size_t i = 0; i < s->n; i++) {
        const doc *d = &s->d[i];
        lt_status st = lt_shard_writer_add_doc(w, d->file, d->null_id ? NULL : d->id, d->name, d->flags, d->ids, d->n,
                                               &err);
        if (st != LT_OK) fail_msg("add_doc %zu: %s (%s)", i, err.what, err.where);
    }
    lt_status st = lt_shard_writer_finish(w, sum, &err);
    if (st != LT_OK) fail_msg("finish: %s (%s)", err.what, err.where);
    lt_shard_writer_free(w);
}

static void write_docs(const char *dir, const lt_shard_meta *m, const docset *s, uint32_t n_files,
                       lt_shard_summary *sum) {
    write_docs_threads(dir, m, s, n_files, sum, 0);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = lt_malloc_check((size_t)len + 1);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void spill(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The expected token stream of the documents (EOS appended when the meta says so). */
static uint32_t *expected_stream(const docset *s, const lt_shard_meta *m, size_t *n) {
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++) total += s->d[i].n + (m->eos == LT_EOS_APPEND);
    uint32_t *all = lt_malloc_check((total + 1) * sizeof *all);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        memcpy(all + k, s->d[i].ids, s->d[i].n * sizeof *all);
        k += s->d[i].n;
        if (m->eos == LT_EOS_APPEND) all[k++] = m->eos_id;
    }
    *n = total;
    return all;
}

/* Read everything back through the library and compare with the documents. */
static void check_readback(const char *dir, const lt_shard_meta *m, const docset *s, uint32_t n_files) {
    char *ipath = lt_task_path(dir, m->task_id, "index"), *spath = lt_task_path(dir, m->task_id, "tokens.zst");
    lt_index *ix;
    lt_error err;
    lt_status st = lt_index_open(&ix, ipath, &err);
    if (st != LT_OK) fail_msg("index open: %s (%s)", err.what, err.where);
    const lt_shard_meta *im = lt_index_meta(ix);
    assert_int_equal(im->token_width, m->token_width);
    assert_int_equal(im->n_vocab, m->n_vocab);
    assert_memory_equal(im->vocab_sha256, m->vocab_sha256, 32);
    assert_string_equal(im->encoding, m->encoding);
    assert_int_equal(im->eos, m->eos);
    assert_int_equal(im->eos_id, m->eos_id);
    assert_int_equal(im->task_id, m->task_id);
    assert_int_equal(im->num_tasks, m->num_tasks);
    assert_int_equal(im->zstd_level, m->zstd_level ? m->zstd_level : 1);
    size_t fb = m->frame_bytes ? m->frame_bytes : LT_SHARD_FRAME_BYTES_DEFAULT;
    assert_int_equal(im->frame_bytes, fb);
    assert_int_equal(lt_index_n_docs(ix), s->n);
    assert_int_equal(lt_index_n_files(ix), n_files);
    for (uint32_t f = 0; f < n_files; f++) {
        char p[64];
        snprintf(p, sizeof p, "/data/input-%u.jsonl", f);
        assert_string_equal(lt_index_file_path(ix, f), p);
        assert_int_equal(lt_index_file_size(ix, f), 1000u + f);
    }
    const bool eos = m->eos == LT_EOS_APPEND;
    uint64_t tokens = 0;
    lt_shard *sh;
    assert_int_equal(lt_shard_open(&sh, spath, ix, &err), LT_OK);
    for (size_t i = 0; i < s->n; i++) {
        const doc *d = &s->d[i];
        assert_int_equal(lt_index_doc_offset(ix, i), tokens);
        assert_int_equal(lt_index_doc_len(ix, i), d->n + eos);
        lt_index_source src;
        lt_index_doc_source(ix, i, &src);
        assert_int_equal(src.file, d->file);
        assert_int_equal(src.flags, d->flags);
        assert_string_equal(src.id, d->null_id ? "" : d->id);
        assert_string_equal(src.name, d->name);
        const uint32_t *ids;
        size_t n;
        st = lt_shard_doc(sh, i, &ids, &n, &err);
        if (st != LT_OK) fail_msg("doc %zu: %s (%s)", i, err.what, err.where);
        assert_int_equal(n, d->n + eos);
        if (d->n) assert_memory_equal(ids, d->ids, d->n * sizeof *ids);
        if (eos) assert_int_equal(ids[d->n], m->eos_id);
        uint64_t f = lt_index_frame_of_doc(ix, i);
        lt_index_frame fr;
        lt_index_frame_get(ix, f, &fr);
        assert_true(fr.first_doc <= i && i < fr.first_doc + fr.n_docs);
        tokens += n;
    }
    assert_int_equal(lt_index_doc_offset(ix, s->n), tokens);
    assert_int_equal(lt_index_n_tokens(ix), tokens);
    /* random access backwards too (the frame cache must not confuse documents) */
    for (size_t i = s->n; i-- > 0;) {
        const uint32_t *ids;
        size_t n;
        assert_int_equal(lt_shard_doc(sh, i, &ids, &n, &err), LT_OK);
        assert_int_equal(n, s->d[i].n + eos);
        if (s->d[i].n) assert_memory_equal(ids, s->d[i].ids, s->d[i].n * sizeof *ids);
    }
    lt_shard_close(sh);
    /* frames are document-aligned: each closes at the first document end at or past
     * frame_bytes, so without its last document it is below frame_bytes */
    uint64_t nf = lt_index_n_frames(ix), next_doc = 0, off = 0;
    for (uint64_t f = 0; f < nf; f++) {
        lt_index_frame fr;
        lt_index_frame_get(ix, f, &fr);
        assert_int_equal(fr.first_doc, next_doc);
        assert_int_equal(fr.offset, off);
        assert_true(fr.n_docs >= 1);
        uint64_t raw = fr.n_tokens * m->token_width;
        uint64_t last_len = lt_index_doc_len(ix, fr.first_doc + fr.n_docs - 1) * m->token_width;
        assert_true(raw - last_len < fb);
        if (f + 1 < nf) assert_true(raw >= fb);
        next_doc += fr.n_docs;
        off += fr.size;
    }
    assert_int_equal(next_doc, s->n);
    st = lt_shard_verify(spath, ix, &err);
    if (st != LT_OK) fail_msg("verify: %s (%s)", err.what, err.where);
    /* NULL shard path: derived from the index path */
    assert_int_equal(lt_shard_verify(NULL, ix, &err), LT_OK);
    lt_index_close(ix);
    free(ipath);
    free(spath);
}

/* The shard read without the library: plain zstd over the whole file gives the token
 * stream; the seek table (walked from the end) matches the frames found by zstd. */
static void check_plain_zstd(const char *dir, const lt_shard_meta *m, const docset *s) {
    char *spath = lt_task_path(dir, m->task_id, "tokens.zst");
    size_t n;
    unsigned char *file = slurp(spath, &n);
    size_t n_exp;
    uint32_t *exp = expected_stream(s, m, &n_exp);
    size_t cap = n_exp * m->token_width + 16;
    unsigned char *raw = lt_malloc_check(cap);
    size_t got = ZSTD_decompress(raw, cap, file, n);
    if (ZSTD_isError(got)) fail_msg("ZSTD_decompress: %s", ZSTD_getErrorName(got));
    assert_int_equal(got, n_exp * m->token_width);
    for (size_t i = 0; i < n_exp; i++) {
        uint32_t v = m->token_width == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8 : rd32(raw + 4 * i);
        if (v != exp[i]) fail_msg("token %zu: %u, expected %u", i, v, exp[i]);
    }
    /* seek table: footer, then entries */
    assert_true(n >= 17);
    const unsigned char *foot = file + n - 9;
    assert_int_equal(rd32(foot + 5), 0x8F92EAB1u);
    assert_int_equal(foot[4], 0x80);
    uint32_t nf = rd32(foot);
    size_t table = 8 + 12 * (size_t)nf + 9;
    assert_true(table <= n);
    const unsigned char *t = file + n - table;
    assert_int_equal(rd32(t), 0x184D2A5Eu);
    assert_int_equal(rd32(t + 4), 12 * nf + 9);
    size_t pos = 0, rawpos = 0;
    for (uint32_t f = 0; f < nf; f++) {
        const unsigned char *e = t + 8 + 12 * (size_t)f;
        size_t fsz = ZSTD_findFrameCompressedSize(file + pos, n - table - pos);
        assert_false(ZSTD_isError(fsz));
        assert_int_equal(rd32(e), fsz);
        unsigned long long content = ZSTD_getFrameContentSize(file + pos, fsz);
        assert_int_equal(rd32(e + 4), content);
        assert_int_equal(rd32(e + 8), (uint32_t)XXH64(raw + rawpos, (size_t)content, 0));
        pos += fsz;
        rawpos += (size_t)content;
    }
    assert_int_equal(pos, n - table);
    assert_int_equal(rawpos, got);
    free(exp);
    free(raw);
    free(file);
    free(spath);
}

static void roundtrip(const char *name, uint32_t width, uint32_t n_vocab, lt_eos_policy eos, size_t frame_bytes,
                      size_t n_docs, size_t max_len, size_t huge, uint64_t seed) {
    lt_rng rng;
    lt_rng_seed(&rng, seed);
    docset s = random_docs(&rng, n_docs, max_len, huge, n_vocab - 1, 3);
    lt_shard_meta m = make_meta(width, n_vocab, eos, frame_bytes);
    char dir[512];
    make_dir(dir, sizeof dir, name);
    lt_shard_summary sum;
    write_docs(dir, &m, &s, 3, &sum);
    assert_int_equal(sum.n_docs, n_docs);
    check_readback(dir, &m, &s, 3);
    check_plain_zstd(dir, &m, &s);
    /* the summary's hashes and sizes are those of the files */
    const char *suffix[2] = {"tokens.zst", "index"};
    for (int k = 0; k < 2; k++) {
        char *p = lt_task_path(dir, m.task_id, suffix[k]);
        size_t n;
        unsigned char *data = slurp(p, &n);
        lt_sha256 h;
        uint8_t dg[32];
        lt_sha256_init(&h);
        lt_sha256_update(&h, data, n);
        lt_sha256_final(&h, dg);
        assert_memory_equal(dg, k ? sum.index_sha256 : sum.shard_sha256, 32);
        assert_int_equal(n, k ? sum.index_bytes : sum.shard_bytes);
        free(data);
        free(p);
    }
    docset_free(&s);
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_roundtrip_width2_eos(void **state) {
    (void)state;
    /* 16 KiB frames, a 40000-token (80 KB) document in the middle */
    roundtrip("w2", 2, 50257, LT_EOS_APPEND, 16384, 400, 1500, 40000, 1);
}

static void test_roundtrip_width4_no_eos(void **state) {
    (void)state;
    roundtrip("w4", 4, 200019, LT_EOS_NONE, 10000, 300, 900, 30000, 2);
}

static void test_roundtrip_default_frames(void **state) {
    (void)state;
    roundtrip("default", 2, 65536, LT_EOS_APPEND, 0, 50, 3000, 0, 3);
    roundtrip("tiny-frames", 4, 100, LT_EOS_NONE, 1, 60, 5, 0, 4); /* a frame per non-empty document */
}

static void test_empty_and_no_documents(void **state) {
    (void)state;
    char dir[512];
    lt_shard_meta m = make_meta(2, 1000, LT_EOS_NONE, 64);
    /* no documents: no frames, a seek table of 0 entries */
    docset none = {NULL, 0};
    make_dir(dir, sizeof dir, "none");
    lt_shard_summary sum;
    write_docs(dir, &m, &none, 1, &sum);
    assert_int_equal(sum.n_frames, 0);
    assert_int_equal(sum.shard_bytes, 17);
    check_readback(dir, &m, &none, 1);
    /* only empty documents: one empty frame holds them */
    docset empty = {lt_calloc_check(4, sizeof(doc)), 4};
    for (size_t i = 0; i < 4; i++) {
        empty.d[i].ids = lt_malloc_check(sizeof(uint32_t));
        snprintf(empty.d[i].id, sizeof empty.d[i].id, "e%zu", i);
    }
    make_dir(dir, sizeof dir, "empty");
    write_docs(dir, &m, &empty, 1, &sum);
    assert_int_equal(sum.n_frames, 1);
    assert_int_equal(sum.n_tokens, 0);
    check_readback(dir, &m, &empty, 1);
    check_plain_zstd(dir, &m, &empty);
    /* empty documents after a full frame belong to the next (last) frame */
    empty.d[0].n = 100; /* 200 bytes > 64 */
    free(empty.d[0].ids);
    empty.d[0].ids = lt_calloc_check(100, sizeof(uint32_t));
    make_dir(dir, sizeof dir, "empty-after");
    write_docs(dir, &m, &empty, 1, &sum);
    assert_int_equal(sum.n_frames, 2);
    check_readback(dir, &m, &empty, 1);
    check_plain_zstd(dir, &m, &empty);
    docset_free(&empty);
}

static void test_byte_identical(void **state) {
    (void)state;
    lt_rng rng;
    lt_rng_seed(&rng, 7);
    docset s = random_docs(&rng, 200, 800, 0, 50000, 2);
    lt_shard_meta m = make_meta(2, 50257, LT_EOS_APPEND, 4096);
    char a[512], b[512];
    make_dir(a, sizeof a, "same-a");
    make_dir(b, sizeof b, "same-b");
    lt_shard_summary sa, sb;
    write_docs(a, &m, &s, 2, &sa);
    write_docs(b, &m, &s, 2, &sb);
    assert_memory_equal(sa.shard_sha256, sb.shard_sha256, 32);
    assert_memory_equal(sa.index_sha256, sb.index_sha256, 32);
    const char *suffix[2] = {"tokens.zst", "index"};
    for (int k = 0; k < 2; k++) {
        char *pa = lt_task_path(a, 3, suffix[k]), *pb = lt_task_path(b, 3, suffix[k]);
        size_t na, nb;
        unsigned char *da = slurp(pa, &na), *db = slurp(pb, &nb);
        assert_int_equal(na, nb);
        assert_memory_equal(da, db, na);
        free(da);
        free(db);
        free(pa);
        free(pb);
    }
    docset_free(&s);
}

static size_t dir_entries(const char *dir);

/* Frames compressed by a pool of 1, 2 or 5 threads give the same files as on the writer's
 * own thread: small frames (many more than the pool's 2n + 1 slots), widths 2 and 4, a
 * document larger than a frame. The shards also pass lt_shard_verify. */
static void test_byte_identical_any_threads(void **state) {
    (void)state;
    lt_rng rng;
    lt_rng_seed(&rng, 11);
    for (int width = 2; width <= 4; width += 2) {
        docset s = random_docs(&rng, 300, 900, 20000, 50000, 3);
        lt_shard_meta m = make_meta((uint32_t)width, width == 2 ? 50257 : 100277, LT_EOS_APPEND, 2048);
        char ref[512];
        char name[64];
        snprintf(name, sizeof name, "threads-w%d-0", width);
        make_dir(ref, sizeof ref, name);
        lt_shard_summary s0;
        write_docs_threads(ref, &m, &s, 3, &s0, 0);
        assert_true(s0.n_frames > 20);
        const int threads[] = {1, 2, 5};
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            char dir[512];
            snprintf(name, sizeof name, "threads-w%d-%d", width, threads[t]);
            make_dir(dir, sizeof dir, name);
            lt_shard_summary st;
            write_docs_threads(dir, &m, &s, 3, &st, threads[t]);
            assert_int_equal(st.n_frames, s0.n_frames);
            assert_int_equal(st.shard_bytes, s0.shard_bytes);
            assert_memory_equal(st.shard_sha256, s0.shard_sha256, 32);
            assert_memory_equal(st.index_sha256, s0.index_sha256, 32);
            const char *suffix[2] = {"tokens.zst", "index"};
            for (int k = 0; k < 2; k++) {
                char *pa = lt_task_path(ref, 3, suffix[k]), *pb = lt_task_path(dir, 3, suffix[k]);
                size_t na, nb;
                unsigned char *da = slurp(pa, &na), *db = slurp(pb, &nb);
                assert_int_equal(na, nb);
                assert_memory_equal(da, db, na);
                free(da);
                free(db);
                free(pa);
                free(pb);
            }
            char *ip = lt_task_path(dir, 3, "index"), *sp = lt_task_path(dir, 3, "tokens.zst");
            lt_index *ix;
            lt_error err;
            assert_int_equal(lt_index_open(&ix, ip, &err), LT_OK);
            if (lt_shard_verify(sp, ix, &err) != LT_OK) fail_msg("verify: %s (%s)", err.what, err.where);
            lt_index_close(ix);
            free(ip);
            free(sp);
        }
        docset_free(&s);
    }
}

/* A writer with a compression pool freed before finish (an aborted run) stops its
 * threads and leaves nothing behind, whatever frames were in flight. */
static void test_threads_abort_leaves_nothing(void **state) {
    (void)state;
    lt_rng rng;
    lt_rng_seed(&rng, 12);
    docset s = random_docs(&rng, 200, 900, 0, 50000, 1);
    lt_shard_meta m = make_meta(2, 50257, LT_EOS_NONE, 1024);
    char dir[512];
    make_dir(dir, sizeof dir, "threads-abort");
    lt_shard_writer *w;
    lt_error err;
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    assert_int_equal(lt_shard_writer_set_threads(w, 3, &err), LT_OK);
    uint32_t idx;
    assert_int_equal(lt_shard_writer_add_file(w, "/data/a.jsonl", 1, &idx, &err), LT_OK);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(lt_shard_writer_add_doc(w, 0, s.d[i].id, "", 0, s.d[i].ids, s.d[i].n, &err), LT_OK);
    /* a second call is refused: the pool is fixed before the first frame */
    assert_int_not_equal(lt_shard_writer_set_threads(w, 2, &err), LT_OK);
    lt_shard_writer_free(w);
    assert_int_equal(dir_entries(dir), 0);
    docset_free(&s);
}

static size_t dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void test_atomic(void **state) {
    (void)state;
    char dir[512];
    make_dir(dir, sizeof dir, "atomic");
    lt_shard_meta m = make_meta(2, 1000, LT_EOS_APPEND, 64);
    lt_shard_writer *w;
    lt_error err;
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    uint32_t f;
    assert_int_equal(lt_shard_writer_add_file(w, "in.jsonl", 5, &f, &err), LT_OK);
    uint32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = (uint32_t)i;
    for (int i = 0; i < 10; i++) assert_int_equal(lt_shard_writer_add_doc(w, f, "x", "y", 0, ids, 100, &err), LT_OK);
    assert_true(dir_entries(dir) >= 1); /* the hidden temporary exists meanwhile */
    lt_shard_writer_free(w);
    assert_int_equal(dir_entries(dir), 0); /* no shard, no index, no temporary */
    lt_shard_writer_free(NULL);
    /* finish then free: both files stay, nothing else */
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    assert_int_equal(lt_shard_writer_add_file(w, "in.jsonl", 5, &f, &err), LT_OK);
    assert_int_equal(lt_shard_writer_add_doc(w, f, "x", "y", 0, ids, 100, &err), LT_OK);
    assert_int_equal(lt_shard_writer_finish(w, NULL, &err), LT_OK);
    assert_int_equal(lt_shard_writer_finish(w, NULL, &err), LT_ERR_INTERNAL);
    lt_shard_writer_free(w);
    assert_int_equal(dir_entries(dir), 2);
}

static void test_writer_rejects_bad_input(void **state) {
    (void)state;
    char dir[512];
    make_dir(dir, sizeof dir, "reject");
    lt_error err;
    lt_shard_writer *w;
    /* bad meta */
    lt_shard_meta bad = make_meta(3, 1000, LT_EOS_NONE, 0);
    assert_int_equal(lt_shard_writer_open(&w, dir, &bad, &err), LT_ERR_INTERNAL);
    assert_null(w);
    bad = make_meta(2, 70000, LT_EOS_NONE, 0);
    assert_int_equal(lt_shard_writer_open(&w, dir, &bad, &err), LT_ERR_INTERNAL);
    bad = make_meta(2, 1000, LT_EOS_APPEND, 0);
    bad.eos_id = 1000;
    assert_int_equal(lt_shard_writer_open(&w, dir, &bad, &err), LT_ERR_INTERNAL);
    bad = make_meta(2, 1000, LT_EOS_NONE, 0);
    bad.task_id = 8;
    assert_int_equal(lt_shard_writer_open(&w, dir, &bad, &err), LT_ERR_INTERNAL);
    assert_int_equal(dir_entries(dir), 0);

    lt_shard_meta m = make_meta(2, 1000, LT_EOS_NONE, 64);
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    uint32_t f, ids[3] = {1, 2, 999};
    assert_int_equal(lt_shard_writer_add_file(w, "in.jsonl", 5, &f, &err), LT_OK);
    assert_int_equal(lt_shard_writer_add_doc(w, f, "a", NULL, 0, ids, 3, &err), LT_OK);
    ids[1] = 1000; /* = n_vocab */
    assert_int_equal(lt_shard_writer_add_doc(w, f, "bad-doc", NULL, 0, ids, 3, &err), LT_ERR_INTERNAL);
    assert_non_null(strstr(err.where, "document 1"));
    assert_non_null(strstr(err.what, "bad-doc"));
    assert_non_null(strstr(err.what, "1000"));
    assert_int_equal(lt_shard_writer_add_doc(w, 7, "a", NULL, 0, ids, 1, &err), LT_ERR_INTERNAL);
    assert_int_equal(lt_shard_writer_add_doc(w, f, "a", NULL, 0x10, ids, 1, &err), LT_ERR_INTERNAL);
    /* a rejected document leaves the writer usable */
    ids[1] = 2;
    assert_int_equal(lt_shard_writer_add_doc(w, f, "b", NULL, 0, ids, 3, &err), LT_OK);
    lt_shard_summary sum;
    assert_int_equal(lt_shard_writer_finish(w, &sum, &err), LT_OK);
    assert_int_equal(sum.n_docs, 2);
    assert_int_equal(sum.n_tokens, 6);
    lt_shard_writer_free(w);

    /* width 4 with a large vocabulary takes ids above 65535 */
    make_dir(dir, sizeof dir, "reject4");
    m = make_meta(4, 100000, LT_EOS_NONE, 64);
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    assert_int_equal(lt_shard_writer_add_file(w, "in.jsonl", 5, &f, &err), LT_OK);
    ids[0] = 99999;
    assert_int_equal(lt_shard_writer_add_doc(w, f, "a", NULL, 0, ids, 1, &err), LT_OK);
    ids[0] = 100000;
    assert_int_equal(lt_shard_writer_add_doc(w, f, "a", NULL, 0, ids, 1, &err), LT_ERR_INTERNAL);
    lt_shard_writer_free(w);
}

static void test_task_path(void **state) {
    (void)state;
    char *p = lt_task_path("out", 3, "index");
    assert_string_equal(p, "out/task-00003.index");
    free(p);
    p = lt_task_path("/a/b", 123456, "tokens.zst");
    assert_string_equal(p, "/a/b/task-123456.tokens.zst");
    free(p);
}

/* ---- index validation ------------------------------------------------------------- */

/* A small valid index (and its shard) in DIR "valid": 5 documents, 3 frames. */
static unsigned char *valid_index(size_t *n, char *dir, size_t dir_size) {
    make_dir(dir, dir_size, "valid");
    docset s = {lt_calloc_check(5, sizeof(doc)), 5};
    size_t lens[5] = {40, 0, 40, 3, 50};
    for (size_t i = 0; i < 5; i++) {
        s.d[i].n = lens[i];
        s.d[i].ids = lt_malloc_check((lens[i] + 1) * sizeof(uint32_t));
        for (size_t k = 0; k < lens[i]; k++) s.d[i].ids[k] = (uint32_t)(i * 100 + k);
        snprintf(s.d[i].id, sizeof s.d[i].id, "id-%zu", i);
        snprintf(s.d[i].name, sizeof s.d[i].name, "name-%zu", i);
        s.d[i].file = (uint32_t)(i / 3);
        s.d[i].flags = (uint32_t)(i & 1);
    }
    lt_shard_meta m = make_meta(2, 1000, LT_EOS_APPEND, 64);
    lt_shard_summary sum;
    write_docs(dir, &m, &s, 2, &sum);
    assert_int_equal(sum.n_frames, 3);
    docset_free(&s);
    char *p = lt_task_path(dir, 3, "index");
    unsigned char *data = slurp(p, n);
    free(p);
    return data;
}

/* Open `data` as an index; it must fail with `status` and a WHAT containing `want`. */
static void expect_bad(const unsigned char *data, size_t n, lt_status status, const char *want, const char *label) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad.index", root);
    spill(path, data, n);
    lt_index *ix = (lt_index *)1;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_index_open(&ix, path, &err);
    if (st == LT_OK) fail_msg("%s: the damaged index was accepted", label);
    assert_null(ix);
    if (st != status) fail_msg("%s: status %d, expected %d (%s)", label, (int)st, (int)status, err.what);
    if (strcmp(err.where, path) != 0) fail_msg("%s: WHERE is \"%s\", not the file", label, err.where);
    if (want && !strstr(err.what, want)) fail_msg("%s: \"%s\" does not contain \"%s\"", label, err.what, want);
}

typedef struct field_case {
    const char *label;
    size_t offset;
    int bytes; /* 4 or 8 */
    uint64_t value;
    lt_status status;
    const char *want;
} field_case;

/* Version 2 records each file's named source; a version 1 index (files entries without
 * one, written by earlier releases) still opens, every source "". The v1 bytes are made
 * from a v2 index here: 16-byte files entries, sections moved, the trailing hash redone. */
static void test_index_sources_and_v1(void **state) {
    (void)state;
    char dir[512];
    make_dir(dir, sizeof dir, "sources");
    lt_shard_meta m = make_meta(2, 1000, LT_EOS_NONE, 64);
    lt_shard_writer *w;
    lt_error err;
    assert_int_equal(lt_shard_writer_open(&w, dir, &m, &err), LT_OK);
    uint32_t f0, f1, f2;
    assert_int_equal(lt_shard_writer_add_source_file(w, "/c/a.wet.gz", 11, "web", &f0, &err), LT_OK);
    assert_int_equal(lt_shard_writer_add_source_file(w, "/c/b.jsonl", 22, "code", &f1, &err), LT_OK);
    assert_int_equal(lt_shard_writer_add_file(w, "/c/c.jsonl", 33, &f2, &err), LT_OK);
    const uint32_t ids[3] = {1, 2, 3};
    for (uint32_t f = 0; f < 3; f++) assert_int_equal(lt_shard_writer_add_doc(w, f, "x", "", 0, ids, 3, &err), LT_OK);
    lt_shard_summary sum;
    assert_int_equal(lt_shard_writer_finish(w, &sum, &err), LT_OK);
    lt_shard_writer_free(w);
    char *path = lt_task_path(dir, 3, "index");
    lt_index *ix;
    assert_int_equal(lt_index_open(&ix, path, &err), LT_OK);
    assert_string_equal(lt_index_file_source(ix, 0), "web");
    assert_string_equal(lt_index_file_source(ix, 1), "code");
    assert_string_equal(lt_index_file_source(ix, 2), "");
    lt_index_close(ix);

    size_t n;
    unsigned char *v2 = slurp(path, &n);
    unsigned char *v1 = lt_calloc_check(n, 1);
    memcpy(v1, v2, 256);
    wr32(v1 + 8, 1);
    uint64_t pos = 256;
    for (int sec = 0; sec < 5; sec++) {
        uint64_t off = rd64(v2 + 136 + 16 * sec), bytes = rd64(v2 + 136 + 16 * sec + 8);
        uint64_t nb = bytes;
        if (sec == 2) { /* files: drop each entry's source */
            nb = 16 * (bytes / 24);
            for (uint64_t e = 0; e < bytes / 24; e++) memcpy(v1 + pos + 16 * e, v2 + off + 24 * e, 16);
        } else {
            memcpy(v1 + pos, v2 + off, bytes);
        }
        wr64(v1 + 136 + 16 * sec, pos);
        wr64(v1 + 136 + 16 * sec + 8, nb);
        pos = (pos + nb + 7) / 8 * 8;
    }
    lt_sha256 h;
    lt_sha256_init(&h);
    lt_sha256_update(&h, v1, pos);
    lt_sha256_final(&h, v1 + pos);
    spill(path, v1, pos + 32);
    assert_int_equal(lt_index_open(&ix, path, &err), LT_OK);
    assert_int_equal(lt_index_n_files(ix), 3);
    for (uint32_t f = 0; f < 3; f++) {
        assert_string_equal(lt_index_file_source(ix, f), "");
        assert_int_equal(lt_index_file_size(ix, f), 11 * (f + 1));
    }
    assert_string_equal(lt_index_file_path(ix, 1), "/c/b.jsonl");
    lt_index_source src;
    lt_index_doc_source(ix, 2, &src);
    assert_int_equal(src.file, 2);
    assert_int_equal(lt_index_doc_len(ix, 2), 3);
    lt_index_close(ix);
    free(v1);
    free(v2);
    free(path);
}

static void test_index_header_fields(void **state) {
    (void)state;
    char dir[512];
    size_t n;
    unsigned char *good = valid_index(&n, dir, sizeof dir);
    const uint64_t n_docs = 5;
    const field_case cases[] = {
        {"version newer", 8, 4, 3, LT_ERR_VERSION, "index.version is 3"},
        {"version 0", 8, 4, 0, LT_ERR_INPUT, "index.version is 0"},
        {"header size", 12, 4, 128, LT_ERR_INPUT, "index.header_size"},
        {"width", 16, 4, 3, LT_ERR_INPUT, "index.token_width is 3"},
        {"n_vocab 0", 20, 4, 0, LT_ERR_INPUT, "index.n_vocab is 0"},
        {"n_vocab too large for width", 20, 4, 70000, LT_ERR_INPUT, "index.n_vocab is 70000"},
        {"n_vocab below eos", 20, 4, 999, LT_ERR_INPUT, "index.eos_id"},
        {"eos policy", 88, 4, 7, LT_ERR_INPUT, "index.eos_policy"},
        {"eos id", 92, 4, 5000, LT_ERR_INPUT, "index.eos_id"},
        {"task id", 96, 4, 8, LT_ERR_INPUT, "index.task_id"},
        {"num tasks", 100, 4, 0, LT_ERR_INPUT, "index.num_tasks is 0"},
        {"n_docs huge", 104, 8, UINT64_MAX / 2, LT_ERR_INPUT, "index.n_docs"},
        {"n_docs + 1", 104, 8, n_docs + 1, LT_ERR_INPUT, "index.doc_offsets.bytes"},
        {"n_tokens", 112, 8, 12345, LT_ERR_INPUT, "index.n_tokens"},
        {"n_frames huge", 120, 8, 1ull << 40, LT_ERR_INPUT, "index.n_frames"},
        {"n_frames 0", 120, 8, 0, LT_ERR_INPUT, "index.n_frames is 0"},
        {"n_frames 2", 120, 8, 2, LT_ERR_INPUT, "index.frames.bytes"},
        {"n_files huge", 128, 8, 1ull << 40, LT_ERR_INPUT, "index.n_files"},
        {"n_files 3", 128, 8, 3, LT_ERR_INPUT, "index.files.bytes"},
        {"doc_offsets offset", 136, 8, 264, LT_ERR_INPUT, "index.doc_offsets.offset"},
        {"doc_offsets bytes", 144, 8, 40, LT_ERR_INPUT, "index.doc_offsets.bytes"},
        {"doc_sources offset", 152, 8, 0, LT_ERR_INPUT, "index.doc_sources.offset"},
        {"doc_sources bytes", 160, 8, 1, LT_ERR_INPUT, "index.doc_sources.bytes"},
        {"files offset", 168, 8, 1u << 20, LT_ERR_INPUT, "index.files.offset"},
        {"files bytes", 176, 8, 0, LT_ERR_INPUT, "index.files.bytes"},
        {"frames offset", 184, 8, 8, LT_ERR_INPUT, "index.frames.offset"},
        {"frames bytes", 192, 8, 48, LT_ERR_INPUT, "index.frames.bytes"},
        {"strings offset", 200, 8, 0, LT_ERR_INPUT, "index.strings.offset"},
        {"strings bytes huge", 208, 8, 1u << 30, LT_ERR_INPUT, "index.strings"},
        {"strings bytes short", 208, 8, 1, LT_ERR_INPUT, "does not match its sections"},
        {"shard bytes", 216, 8, 99999, LT_ERR_INPUT, "index.shard_bytes"},
        {"frame bytes 0", 224, 8, 0, LT_ERR_INPUT, "index.frame_bytes"},
        {"reserved", 240, 4, 1, LT_ERR_INPUT, "index.reserved byte 240"},
        {"reserved last", 252, 4, 1u << 24, LT_ERR_INPUT, "index.reserved byte 255"},
    };
    unsigned char *bad = lt_malloc_check(n);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memcpy(bad, good, n);
        if (cases[c].bytes == 4) wr32(bad + cases[c].offset, (uint32_t)cases[c].value);
        else wr64(bad + cases[c].offset, cases[c].value);
        expect_bad(bad, n, cases[c].status, cases[c].want, cases[c].label);
    }
    /* magic, encoding */
    memcpy(bad, good, n);
    bad[3] = 'x';
    expect_bad(bad, n, LT_ERR_INPUT, "index.magic", "magic");
    memcpy(bad, good, n);
    memset(bad + 56, 'x', 32);
    expect_bad(bad, n, LT_ERR_INPUT, "index.encoding is not NUL-terminated", "encoding");
    memcpy(bad, good, n);
    bad[56 + 31] = 'x';
    expect_bad(bad, n, LT_ERR_INPUT, "index.encoding has bytes after its NUL", "encoding padding");
    /* a newer version carries a hint */
    memcpy(bad, good, n);
    wr32(bad + 8, 9);
    char path[512];
    snprintf(path, sizeof path, "%s/new.index", root);
    spill(path, bad, n);
    lt_index *ix;
    lt_error err;
    assert_int_equal(lt_index_open(&ix, path, &err), LT_ERR_VERSION);
    assert_true(strlen(err.hint) > 0);
    /* not a file, missing file */
    assert_int_equal(lt_index_open(&ix, root, &err), LT_ERR_INPUT);
    snprintf(path, sizeof path, "%s/missing.index", root);
    assert_int_equal(lt_index_open(&ix, path, &err), LT_ERR_IO);
    free(bad);
    free(good);
}

static void test_index_body_fields(void **state) {
    (void)state;
    char dir[512];
    size_t n;
    unsigned char *good = valid_index(&n, dir, sizeof dir);
    unsigned char *bad = lt_malloc_check(n);
    const uint64_t offs = rd64(good + 136), srcs = rd64(good + 152), files = rd64(good + 168),
                   frames = rd64(good + 184), strings = rd64(good + 200), sbytes = rd64(good + 208);
    struct {
        const char *label;
        uint64_t at;
        uint64_t value;
        int bytes;
        const char *want;
    } cases[] = {
        {"doc_offsets[0]", offs, 1, 8, "index.doc_offsets[0] is 1"},
        {"doc_offsets decreasing", offs + 8 * 3, 1, 8, "index.doc_offsets not increasing at document 3"},
        {"doc_offsets end", offs + 8 * 5, 1u << 20, 8, "index.doc_offsets ends at"},
        {"source file", srcs + 24, 2, 4, "index.doc_sources[1].file is 2"},
        {"source flags", srcs + 24 * 2 + 4, 0x100, 4, "index.doc_sources[2].flags"},
        {"source id", srcs + 24 * 3 + 8, sbytes, 8, "index.doc_sources[3].id is outside"},
        {"source name", srcs + 24 * 4 + 16, 1u << 30, 8, "index.doc_sources[4].name is outside"},
        {"file path", files + 24, sbytes + 5, 8, "index.files[1].path is outside"},
        {"file source", files + 24 + 16, sbytes, 8, "index.files[1].source is outside"},
        {"frame offset", frames + 48, 5, 8, "index.frames[1].offset"},
        {"frame size", frames + 8, 0, 8, "index.frames[0].size"},
        {"frame first_doc", frames + 48 + 16, 0, 8, "index.frames[1].first_doc"},
        {"frame n_docs", frames + 24, 0, 8, "index.frames[0].n_docs"},
        {"frame n_docs large", frames + 48 * 2 + 24, 9, 8, "index.frames[2].n_docs"},
        {"frame first_token", frames + 48 + 32, 3, 8, "index.frames[1].first_token"},
        {"frame n_tokens", frames + 48 + 40, 3, 8, "index.frames[1].n_tokens"},
        {"strings start", strings, 'a', 1, "index.strings does not start"},
        {"strings end", strings + sbytes - 1, 'a', 1, "index.strings does not end with a NUL"},
        {"hash", strings + 3, 'Z', 1, "index.sha256"},
        {"trailer", n - 1, good[n - 1] ^ 1u, 1, "index.sha256"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memcpy(bad, good, n);
        if (cases[c].bytes == 8) wr64(bad + cases[c].at, cases[c].value);
        else if (cases[c].bytes == 4) wr32(bad + cases[c].at, (uint32_t)cases[c].value);
        else bad[cases[c].at] = (unsigned char)cases[c].value;
        expect_bad(bad, n, LT_ERR_INPUT, cases[c].want, cases[c].label);
    }
    free(bad);
    free(good);
}

static void test_index_truncated_and_flipped(void **state) {
    (void)state;
    char dir[512], label[64];
    size_t n;
    unsigned char *good = valid_index(&n, dir, sizeof dir);
    for (size_t k = 0; k < n; k++) {
        snprintf(label, sizeof label, "truncated to %zu", k);
        expect_bad(good, k, LT_ERR_INPUT, NULL, label);
    }
    unsigned char *bad = lt_malloc_check(n + 8);
    memcpy(bad, good, n);
    memset(bad + n, 0, 8);
    expect_bad(bad, n + 8, LT_ERR_INPUT, NULL, "8 bytes appended");
    for (size_t k = 0; k < n; k++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(bad, good, n);
            bad[k] ^= (unsigned char)(1u << bit);
            snprintf(label, sizeof label, "bit %d of byte %zu flipped", bit, k);
            /* the version's top bits make a "newer" version */
            expect_bad(bad, n, k >= 8 && k < 12 && (k > 8 || bit != 1) ? LT_ERR_VERSION : LT_ERR_INPUT, NULL, label);
        }
    }
    free(bad);
    free(good);
}

/* ---- lt_shard_verify and damaged shards ------------------------------------------- */

static void test_verify_catches_damage(void **state) {
    (void)state;
    char dir[512];
    size_t n;
    unsigned char *idx = valid_index(&n, dir, sizeof dir);
    free(idx);
    char *ipath = lt_task_path(dir, 3, "index"), *spath = lt_task_path(dir, 3, "tokens.zst");
    char bpath[512];
    snprintf(bpath, sizeof bpath, "%s/bad.tokens.zst", root);
    lt_index *ix;
    lt_error err;
    assert_int_equal(lt_index_open(&ix, ipath, &err), LT_OK);
    assert_int_equal(lt_shard_verify(spath, ix, &err), LT_OK);
    size_t sn;
    unsigned char *good = slurp(spath, &sn), *bad = lt_malloc_check(sn);
    lt_index_frame f1;
    lt_index_frame_get(ix, 1, &f1);
    /* every byte of frame 1 flipped in turn: verify fails, reading its documents fails */
    for (uint64_t at = f1.offset; at < f1.offset + f1.size; at++) {
        memcpy(bad, good, sn);
        bad[at] ^= 0x40;
        spill(bpath, bad, sn);
        lt_error_clear(&err);
        if (lt_shard_verify(bpath, ix, &err) == LT_OK) fail_msg("flipped byte %llu not caught", (unsigned long long)at);
        assert_true(err.where[0] != '\0');
    }
    /* a flipped byte in the middle of the frame: the document read fails cleanly */
    memcpy(bad, good, sn);
    bad[f1.offset + f1.size / 2] ^= 0x40;
    spill(bpath, bad, sn);
    lt_shard *sh;
    assert_int_equal(lt_shard_open(&sh, bpath, ix, &err), LT_OK);
    const uint32_t *ids;
    size_t nids;
    assert_int_equal(lt_shard_doc(sh, f1.first_doc, &ids, &nids, &err), LT_ERR_INPUT);
    assert_int_equal(lt_shard_doc(sh, 0, &ids, &nids, &err), LT_OK); /* other frames still read */
    assert_int_equal(nids, 41);
    assert_int_equal(lt_shard_doc(sh, 99, &ids, &nids, &err), LT_ERR_INTERNAL);
    lt_shard_close(sh);
    /* seek table: a checksum, a decompressed size, a compressed size, the footer */
    const size_t table = sn - (8 + 12 * 3 + 9);
    struct {
        size_t at;
        const char *want;
    } st_cases[] = {
        {table + 8 + 12 + 8, "checksum"},
        {table + 8 + 12 * 2 + 4, "seek table says"},
        {table + 8, "seek table says"},
        {sn - 9, "seek table has"},
        {sn - 5, "descriptor"},
        {sn - 1, "no zstd seek table"},
        {table, "no zstd seek table"},
        {table + 4, "frame size"},
    };
    for (size_t c = 0; c < sizeof st_cases / sizeof st_cases[0]; c++) {
        memcpy(bad, good, sn);
        bad[st_cases[c].at] ^= 0x01;
        spill(bpath, bad, sn);
        assert_int_equal(lt_shard_verify(bpath, ix, &err), LT_ERR_INPUT);
        if (!strstr(err.what, st_cases[c].want)) fail_msg("case %zu: \"%s\" lacks \"%s\"", c, err.what, st_cases[c].want);
    }
    /* a shard of another size: open fails with a hint */
    spill(bpath, good, sn - 1);
    assert_int_equal(lt_shard_verify(bpath, ix, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "index"));
    assert_true(strlen(err.hint) > 0);
    snprintf(bpath, sizeof bpath, "%s/missing.tokens.zst", root);
    assert_int_equal(lt_shard_verify(bpath, ix, &err), LT_ERR_IO);
    lt_index_close(ix);
    lt_index_close(NULL);
    lt_shard_close(NULL);
    free(good);
    free(bad);
    free(ipath);
    free(spath);
}

/* Out-of-vocabulary ids in a well-formed shard (written with a larger vocabulary and an
 * index claiming a smaller one) are caught by lt_shard_doc and lt_shard_verify. */
static void test_verify_catches_ids_outside_vocab(void **state) {
    (void)state;
    char dir[512];
    make_dir(dir, sizeof dir, "oov");
    lt_shard_meta m = make_meta(2, 1000, LT_EOS_NONE, 64);
    docset s = {lt_calloc_check(1, sizeof(doc)), 1};
    s.d[0].n = 3;
    s.d[0].ids = lt_malloc_check(3 * sizeof(uint32_t));
    s.d[0].ids[0] = 1, s.d[0].ids[1] = 900, s.d[0].ids[2] = 2;
    lt_shard_summary sum;
    write_docs(dir, &m, &s, 1, &sum);
    docset_free(&s);
    char *ipath = lt_task_path(dir, 3, "index");
    size_t n;
    unsigned char *data = slurp(ipath, &n);
    wr32(data + 20, 500); /* n_vocab */
    lt_sha256 h;
    lt_sha256_init(&h);
    lt_sha256_update(&h, data, n - 32);
    lt_sha256_final(&h, data + n - 32);
    spill(ipath, data, n);
    lt_index *ix;
    lt_error err;
    assert_int_equal(lt_index_open(&ix, ipath, &err), LT_OK);
    assert_int_equal(lt_shard_verify(NULL, ix, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "900"));
    lt_index_close(ix);
    free(data);
    free(ipath);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_width2_eos),
        cmocka_unit_test(test_roundtrip_width4_no_eos),
        cmocka_unit_test(test_roundtrip_default_frames),
        cmocka_unit_test(test_empty_and_no_documents),
        cmocka_unit_test(test_byte_identical),
        cmocka_unit_test(test_byte_identical_any_threads),
        cmocka_unit_test(test_threads_abort_leaves_nothing),
        cmocka_unit_test(test_atomic),
        cmocka_unit_test(test_writer_rejects_bad_input),
        cmocka_unit_test(test_task_path),
        cmocka_unit_test(test_index_header_fields),
        cmocka_unit_test(test_index_sources_and_v1),
        cmocka_unit_test(test_index_body_fields),
        cmocka_unit_test(test_index_truncated_and_flipped),
        cmocka_unit_test(test_verify_catches_damage),
        cmocka_unit_test(test_verify_catches_ids_outside_vocab),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
