/*
 * dataprep/shard.c — token shards (zstd seekable format) and their index (dataprep/shard.h).
 *
 * Shard, task-IIIII.tokens.zst: zstd frames, each the little-endian ids (token_width bytes
 * each) of whole documents, then the seek table of zstd's seekable format
 * (facebook/zstd contrib/seekable_format/zstd_seekable_compression_format.md) as a
 * skippable frame:
 *     u32 0x184D2A5E, u32 12 * n_frames + 9,
 *     per frame: u32 compressed size, u32 decompressed size, u32 checksum (the low 32 bits
 *                of XXH64(decompressed bytes, seed 0)),
 *     u32 n_frames, u8 0x80 (Checksum_Flag), u32 0x8F92EAB1.
 * Each zstd frame carries its content size and its own checksum. Frames are independent:
 * each is one ZSTD_compress2() call, single-threaded inside zstd, at one level, so a frame's
 * bytes depend only on its ids and the level, never on which thread or context made them.
 * That lets lt_shard_writer_set_threads() hand frames to a pool of compression threads
 * while the writer's thread appends the finished frames to the file in frame order: the
 * shard is byte-identical for any number of threads (tests/dataprep/threads.sh).
 * A frame closes at the first document end where it holds >= frame_bytes; documents of
 * 0 tokens belong to the frame being filled; at finish the pending documents (even when
 * all are empty) make the last frame; no documents at all = no frames.
 *
 * Index, task-IIIII.index (all integers little-endian; every section 8-byte aligned):
 *   offset size
 *     0     8  magic "LTIDX\0v1"
 *     8     4  version (LT_INDEX_VERSION = 2; version 1 is read too: see files)
 *    12     4  header size (256)
 *    16     4  token_width (2 or 4)
 *    20     4  n_vocab
 *    24    32  vocab_sha256
 *    56    32  encoding name, NUL-padded (at least one NUL)
 *    88     4  eos policy (0 none, 1 append)      92  4  eos_id
 *    96     4  task_id                            100 4  num_tasks
 *   104     8  n_docs        112 8 n_tokens       120 8  n_frames     128 8 n_files
 *   136    80  sections, each {u64 offset, u64 bytes}, in this order and file order:
 *              doc_offsets  u64[n_docs + 1]: first token of each document, then n_tokens
 *              doc_sources  per document {u32 file, u32 flags, u64 id, u64 name}
 *                           (id and name are offsets into the string table)
 *              files        per input file {u64 path (string offset), u64 size, u64 source}:
 *                           source is the string offset of the file's named source
 *                           ([source.NAME]; "" = the unnamed data.input); version 1
 *                           entries are {path, size} only (16 bytes), their source ""
 *              frames       per frame {u64 offset, u64 size, u64 first_doc, u64 n_docs,
 *                           u64 first_token, u64 n_tokens} (= lt_index_frame)
 *              strings      NUL-terminated strings; byte 0 is NUL (the empty string,
 *                           offset 0 = no id/name); consecutive equal ids/names share one
 *   216     8  shard_bytes (size of the .tokens.zst file)
 *   224     8  frame_bytes (the target frame size used)
 *   232     4  zstd level (int32)
 *   236    20  reserved, zero
 *   256        sections; zero padding between them to 8-byte boundaries
 *   end - 32   SHA-256 of every byte before it
 *
 * Validation on open (each failure is LT_ERR_INPUT naming the file and the field; a
 * version above LT_INDEX_VERSION is LT_ERR_VERSION): magic, version, header size, width,
 * vocabulary size, encoding padding, EOS policy and id, task numbers, counts against the
 * file size, every section's offset and size (exactly the layout above), reserved bytes,
 * doc offsets (0, non-decreasing, ending at n_tokens), sources (file in range, known
 * flags, string offsets in range), files, frames (tiling the shard from offset 0, tiling
 * the documents, token ranges from doc_offsets, sizes fitting the seek table's u32),
 * shard_bytes against the frames, the string table's ends, and last the trailing hash
 * (so that a damaged field is named by its check rather than by the hash).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h> /* XXH64: the seek table's frame checksums */
#include <zstd.h>   /* ZSTD_compress2, ZSTD_decompressDCtx */

#include "dataprep/shard.h"
#include "lib/bytes.h"  /* lt_put_le32, lt_get_le64, ...: the index's little-endian fields */
#include "lib/files.h"  /* lt_atomic_open/commit/abort */
#include "lib/sha256.h" /* lt_sha256_* */

/* ---- layout constants ------------------------------------------------------------- */

#define IDX_MAGIC "LTIDX\0v1"
#define IDX_HEADER_BYTES 256u
#define IDX_TRAILER_BYTES 32u
#define IDX_SOURCE_BYTES 24u
#define IDX_FILE_BYTES 24u    /* version 2 */
#define IDX_FILE_BYTES_V1 16u /* version 1: no source */
#define IDX_FRAME_BYTES 48u
#define IDX_NSECTIONS 5
#define OFF_VERSION 8
#define OFF_HEADER_SIZE 12
#define OFF_WIDTH 16
#define OFF_NVOCAB 20
#define OFF_VOCAB_SHA 24
#define OFF_ENCODING 56
#define OFF_EOS 88
#define OFF_EOS_ID 92
#define OFF_TASK 96
#define OFF_NTASKS 100
#define OFF_NDOCS 104
#define OFF_NTOKENS 112
#define OFF_NFRAMES 120
#define OFF_NFILES 128
#define OFF_SECTIONS 136
#define OFF_SHARD_BYTES 216
#define OFF_FRAME_BYTES 224
#define OFF_ZSTD_LEVEL 232
#define OFF_RESERVED 236

#define SEEK_SKIPPABLE_MAGIC 0x184D2A5Eu
#define SEEK_MAGIC 0x8F92EAB1u
#define SEEK_ENTRY_BYTES 12u
#define SEEK_FOOTER_BYTES 9u
#define SEEK_CHECKSUM_FLAG 0x80u
#define FRAME_BYTES_MAX (1ull << 31)

static const char *const section_names[IDX_NSECTIONS] = {"doc_offsets", "doc_sources", "files", "frames",
                                                         "strings"};
enum { SEC_DOC_OFFSETS, SEC_DOC_SOURCES, SEC_FILES, SEC_FRAMES, SEC_STRINGS };

static uint64_t align8(uint64_t v) { return (v + 7) & ~(uint64_t)7; }

/* Size of the seek table for n frames. */
static uint64_t seek_table_bytes(uint64_t n_frames) {
    return 8 + SEEK_ENTRY_BYTES * n_frames + SEEK_FOOTER_BYTES;
}

char *lt_task_path(const char *dir, uint32_t task, const char *suffix) {
    int n = snprintf(NULL, 0, "%s/task-%05" PRIu32 ".%s", dir, task, suffix);
    LT_CHECK(n >= 0);
    char *p = lt_malloc_check((size_t)n + 1);
    snprintf(p, (size_t)n + 1, "%s/task-%05" PRIu32 ".%s", dir, task, suffix);
    return p;
}

/* ---- writer ----------------------------------------------------------------------- */

typedef struct doc_source {
    uint32_t file, flags;
    uint64_t id, name; /* string offsets */
} doc_source;

typedef struct file_entry {
    uint64_t path, size, source;
} file_entry;

typedef struct frame_entry {
    lt_index_frame f;
    uint32_t raw_bytes, checksum;
} frame_entry;

/* One frame on its way through the compression pool: raw ids in, compressed bytes out.
 * Jobs live in a ring of `cap` slots; frame k uses slot k % cap, so the writer can wait
 * for frames strictly in order and the memory held is cap x (raw + compressed) frames. */
typedef struct frame_job {
    uint8_t *raw;
    size_t raw_len, raw_cap;
    void *cbuf;
    size_t cbuf_cap, c_len;
    uint32_t checksum;
    bool done;
    lt_status st;
    lt_error err;
} frame_job;

typedef struct compress_pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv, hash_cv;
    pthread_t *threads;
    pthread_t hasher;        /* SHA-256 of the appended frames, in file order */
    bool hasher_started;
    ZSTD_CCtx **cctxs;       /* one per thread */
    int n_threads;
    frame_job *jobs;         /* cap slots */
    size_t cap;
    uint64_t next_hash;      /* oldest frame appended but not yet hashed (its slot is busy) */
    uint64_t next_write;     /* oldest frame not yet appended to the file */
    uint64_t next_start;     /* next frame a compression thread picks up */
    uint64_t next_submit;    /* frames submitted so far */
    bool stop;
    double cpu_s;            /* the compression threads' CPU time, added as each ends */
    double hash_cpu_s;       /* the hasher's */
} compress_pool;

struct lt_shard_writer {
    lt_shard_meta meta; /* defaults resolved */
    char *shard_path, *index_path;
    lt_atomic_file shard;
    ZSTD_CCtx *cctx;
    uint8_t *fbuf; /* the frame being filled (raw little-endian ids) */
    size_t fbuf_len, fbuf_cap;
    void *cbuf;
    size_t cbuf_cap;
    lt_sha256 shard_hash;
    uint64_t shard_bytes;
    uint64_t *doc_offsets; /* n_docs + 1 entries */
    doc_source *sources;
    size_t n_docs, docs_cap, sources_cap;
    file_entry *files;
    size_t n_files, files_cap;
    frame_entry *frames;
    size_t n_frames, frames_cap;
    char *strings;
    size_t strings_len, strings_cap;
    uint64_t last_id, last_name; /* string offsets of the previous document's id and name */
    uint64_t n_tokens;
    uint64_t frame_first_doc, frame_first_token;
    lt_status broken; /* sticky after an I/O or compression failure */
    lt_error broken_err;
    bool finished;
    compress_pool *pool; /* NULL: frames are compressed on the writer's thread */
    double compress_cpu_s; /* compression CPU time (the pool's, once it is stopped, or inline) */
    double hash_cpu_s;     /* the shard hash's CPU time when a pool thread computed it */
};

static ZSTD_CCtx *new_cctx(int level, size_t *zerr);
static void pool_free(lt_shard_writer *w);

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    *cap = c;
    return lt_realloc_check(p, c * elem);
}

static uint64_t add_string(lt_shard_writer *w, const char *s) {
    if (s == NULL || s[0] == '\0') return 0;
    size_t n = strlen(s) + 1;
    w->strings = grow(w->strings, &w->strings_cap, w->strings_len + n, 1);
    uint64_t off = w->strings_len;
    memcpy(w->strings + off, s, n);
    w->strings_len += n;
    return off;
}

/* The offset of s, reusing `last` when the string is the same as the previous one. */
static uint64_t add_string_dedup(lt_shard_writer *w, const char *s, uint64_t *last) {
    if (s == NULL || s[0] == '\0') return 0;
    if (*last != 0 && strcmp(w->strings + *last, s) == 0) return *last;
    return *last = add_string(w, s);
}

static lt_status check_meta(const lt_shard_meta *m, lt_error *err) {
    if (m->token_width != 2 && m->token_width != 4)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard token_width is %" PRIu32 " (must be 2 or 4)",
                       m->token_width);
    if (m->n_vocab == 0) return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard n_vocab is 0");
    if (m->token_width == 2 && m->n_vocab > 65536u)
        return lt_fail(err, LT_ERR_INTERNAL, NULL,
                       "shard token_width 2 cannot hold a vocabulary of %" PRIu32 " tokens", m->n_vocab);
    if (strnlen(m->encoding, sizeof m->encoding) == sizeof m->encoding)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard encoding name is not NUL-terminated within 32 bytes");
    if (m->eos != LT_EOS_NONE && m->eos != LT_EOS_APPEND)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard eos policy %d is unknown", (int)m->eos);
    if (m->eos == LT_EOS_APPEND && m->eos_id >= m->n_vocab)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard eos_id %" PRIu32 " is not below n_vocab %" PRIu32,
                       m->eos_id, m->n_vocab);
    if (m->num_tasks == 0 || m->task_id >= m->num_tasks)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard task %" PRIu32 " of %" PRIu32 " is out of range",
                       m->task_id, m->num_tasks);
    int level = m->zstd_level ? m->zstd_level : 1;
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "zstd level %d is outside %d..%d", level, ZSTD_minCLevel(),
                       ZSTD_maxCLevel());
    if (m->frame_bytes > FRAME_BYTES_MAX)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "shard frame_bytes %zu is above %llu", m->frame_bytes,
                       (unsigned long long)FRAME_BYTES_MAX);
    return LT_OK;
}

lt_status lt_shard_writer_open(lt_shard_writer **out, const char *dir, const lt_shard_meta *meta, lt_error *err) {
    *out = NULL;
    lt_status st = check_meta(meta, err);
    if (st != LT_OK) return st;
    lt_shard_writer *w = lt_calloc_check(1, sizeof *w);
    w->meta = *meta;
    /* the bytes after the name's NUL are part of the index: make them zero */
    size_t elen = strlen(meta->encoding);
    memset(w->meta.encoding + elen, 0, sizeof w->meta.encoding - elen);
    if (w->meta.zstd_level == 0) w->meta.zstd_level = 1;
    if (w->meta.frame_bytes == 0) w->meta.frame_bytes = LT_SHARD_FRAME_BYTES_DEFAULT;
    w->shard_path = lt_task_path(dir, meta->task_id, "tokens.zst");
    w->index_path = lt_task_path(dir, meta->task_id, "index");
    size_t r;
    w->cctx = new_cctx(w->meta.zstd_level, &r);
    if (ZSTD_isError(r)) {
        st = lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "zstd setup failed: %s", ZSTD_getErrorName(r));
        lt_shard_writer_free(w);
        return st;
    }
    st = lt_atomic_open(&w->shard, w->shard_path, err);
    if (st != LT_OK) {
        lt_shard_writer_free(w);
        return st;
    }
    lt_sha256_init(&w->shard_hash);
    w->doc_offsets = grow(NULL, &w->docs_cap, 1, sizeof *w->doc_offsets);
    w->doc_offsets[0] = 0;
    w->strings = grow(NULL, &w->strings_cap, 1, 1);
    w->strings[0] = '\0';
    w->strings_len = 1;
    *out = w;
    return LT_OK;
}

static lt_status writer_broken(lt_shard_writer *w, lt_error *err) {
    if (err) *err = w->broken_err;
    return w->broken;
}

/* A failure after which the shard cannot be completed: remember it. */
static lt_status writer_break(lt_shard_writer *w, lt_status st, lt_error *err) {
    w->broken = st;
    if (err) w->broken_err = *err;
    else lt_fail(&w->broken_err, st, w->shard_path, "an earlier write failed");
    return st;
}

lt_status lt_shard_writer_add_file(lt_shard_writer *w, const char *path, uint64_t size, uint32_t *file_idx,
                                   lt_error *err) {
    return lt_shard_writer_add_source_file(w, path, size, "", file_idx, err);
}

lt_status lt_shard_writer_add_source_file(lt_shard_writer *w, const char *path, uint64_t size, const char *source,
                                          uint32_t *file_idx, lt_error *err) {
    if (w->broken) return writer_broken(w, err);
    if (w->finished) return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "add_file after finish");
    if (w->n_files >= UINT32_MAX) return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "too many input files");
    w->files = grow(w->files, &w->files_cap, w->n_files + 1, sizeof *w->files);
    w->files[w->n_files].path = add_string(w, path);
    w->files[w->n_files].size = size;
    w->files[w->n_files].source = source && source[0] ? add_string(w, source) : 0;
    *file_idx = (uint32_t)w->n_files++;
    return LT_OK;
}

/* Append bytes to the shard; `hash`: add them to the shard's SHA-256 here (else the pool's
 * hasher thread does, in the same order). */
static lt_status write_shard_bytes(lt_shard_writer *w, const void *p, size_t n, bool hash, lt_error *err) {
    if (n && fwrite(p, 1, n, w->shard.fp) != n)
        return lt_fail(err, LT_ERR_IO, w->shard_path, "write failed: %s", strerror(errno));
    if (hash) lt_sha256_update(&w->shard_hash, p, n);
    w->shard_bytes += n;
    return LT_OK;
}

/* Compress one frame's raw ids (a compression thread's job, or the writer's own when
 * there is no pool). Only the job is touched: any thread may run it. */
static void compress_job(frame_job *j, ZSTD_CCtx *cctx, const char *shard_path) {
    size_t bound = ZSTD_compressBound(j->raw_len);
    if (bound > j->cbuf_cap) {
        free(j->cbuf);
        j->cbuf = lt_malloc_check(bound);
        j->cbuf_cap = bound;
    }
    static const uint8_t nothing[1];
    const uint8_t *src = j->raw_len ? j->raw : nothing;
    j->st = LT_OK;
    size_t c = ZSTD_compress2(cctx, j->cbuf, j->cbuf_cap, src, j->raw_len);
    if (ZSTD_isError(c)) {
        j->st = lt_fail(&j->err, LT_ERR_INTERNAL, shard_path, "zstd compression failed: %s", ZSTD_getErrorName(c));
        return;
    }
    j->c_len = c;
    j->checksum = (uint32_t)XXH64(src, j->raw_len, 0);
}

/* Append a compressed frame to the shard and complete its frame-table entry (the offset is
 * known only now: it is the sum of the sizes of the frames before it). */
static lt_status append_frame(lt_shard_writer *w, frame_job *j, size_t frame, lt_error *err) {
    if (j->st != LT_OK) {
        *err = j->err;
        return j->st;
    }
    if (j->c_len > UINT32_MAX)
        return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "frame %zu exceeds the seek table's 4 GiB limit", frame);
    frame_entry *fe = &w->frames[frame];
    fe->f.offset = w->shard_bytes;
    fe->f.size = j->c_len;
    fe->checksum = j->checksum;
    return write_shard_bytes(w, j->cbuf, j->c_len, w->pool == NULL, err);
}

static void *compress_main(void *arg);

/* CPU seconds of the calling thread. */
static double thread_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait for the oldest submitted frame and append it. */
static lt_status pool_write_oldest(lt_shard_writer *w, lt_error *err) {
    compress_pool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    frame_job *j = &p->jobs[p->next_write % p->cap];
    while (!j->done) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    lt_status st = append_frame(w, j, (size_t)p->next_write, err);
    if (st != LT_OK) return st;
    pthread_mutex_lock(&p->mu);
    j->done = false;
    p->next_write++;
    pthread_cond_signal(&p->hash_cv);
    pthread_mutex_unlock(&p->mu);
    return LT_OK;
}

/* Append every frame already compressed, in order, without waiting for the others. */
static lt_status pool_write_ready(lt_shard_writer *w, lt_error *err) {
    compress_pool *p = w->pool;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool ready = p->next_write < p->next_submit && p->jobs[p->next_write % p->cap].done;
        pthread_mutex_unlock(&p->mu);
        if (!ready) return LT_OK;
        lt_status st = pool_write_oldest(w, err);
        if (st != LT_OK) return st;
    }
}

/* Close the frame being filled: record its entry (documents and tokens; offset, size and
 * checksum once compressed) and compress it, here or in the pool. */
static lt_status flush_frame(lt_shard_writer *w, lt_error *err) {
    if (w->fbuf_len > UINT32_MAX)
        return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "frame %zu exceeds the seek table's 4 GiB limit",
                       w->n_frames);
    if (w->n_frames >= UINT32_MAX)
        return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "too many frames for the seek table");
    w->frames = grow(w->frames, &w->frames_cap, w->n_frames + 1, sizeof *w->frames);
    size_t frame = w->n_frames++;
    frame_entry *fe = &w->frames[frame];
    memset(fe, 0, sizeof *fe);
    fe->f.first_doc = w->frame_first_doc;
    fe->f.n_docs = w->n_docs - w->frame_first_doc;
    fe->f.first_token = w->frame_first_token;
    fe->f.n_tokens = w->n_tokens - w->frame_first_token;
    fe->raw_bytes = (uint32_t)w->fbuf_len;
    w->frame_first_doc = w->n_docs;
    w->frame_first_token = w->n_tokens;
    lt_status st = LT_OK;
    compress_pool *p = w->pool;
    if (!p) {
        /* one job on the stack over the writer's own buffers */
        frame_job j = {.raw = w->fbuf, .raw_len = w->fbuf_len, .cbuf = w->cbuf, .cbuf_cap = w->cbuf_cap};
        double c0 = thread_cpu_s();
        compress_job(&j, w->cctx, w->shard_path);
        w->compress_cpu_s += thread_cpu_s() - c0;
        w->cbuf = j.cbuf;
        w->cbuf_cap = j.cbuf_cap;
        st = append_frame(w, &j, frame, err);
        w->fbuf_len = 0;
        return st;
    }
    /* a free slot: the ring is full when cap frames are between hashed and submitted; the
     * oldest slot frees once its frame is appended (here) and hashed (by the hasher) */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool full = p->next_submit - p->next_hash == p->cap, unwritten = p->next_write == p->next_hash;
        if (full && !unwritten) {
            uint64_t h = p->next_hash;
            while (p->next_hash == h) pthread_cond_wait(&p->done_cv, &p->mu);
        }
        pthread_mutex_unlock(&p->mu);
        if (!full) break;
        if (unwritten && (st = pool_write_oldest(w, err)) != LT_OK) return st;
    }
    frame_job *j = &p->jobs[p->next_submit % p->cap];
    /* hand the filled buffer over and keep the slot's old one for the next frame */
    uint8_t *raw = j->raw;
    size_t raw_cap = j->raw_cap;
    j->raw = w->fbuf;
    j->raw_cap = w->fbuf_cap;
    j->raw_len = w->fbuf_len;
    j->done = false;
    w->fbuf = raw;
    w->fbuf_cap = raw_cap;
    w->fbuf_len = 0;
    pthread_mutex_lock(&p->mu);
    p->next_submit++;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    return pool_write_ready(w, err);
}

static void *compress_main(void *arg) {
    lt_shard_writer *w = arg;
    compress_pool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    int me = 0;
    while (me < p->n_threads && !pthread_equal(p->threads[me], pthread_self())) me++;
    for (;;) {
        while (!p->stop && p->next_start == p->next_submit) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop) break;
        frame_job *j = &p->jobs[p->next_start++ % p->cap];
        pthread_mutex_unlock(&p->mu);
        compress_job(j, p->cctxs[me], w->shard_path);
        pthread_mutex_lock(&p->mu);
        j->done = true;
        pthread_cond_broadcast(&p->done_cv);
    }
    p->cpu_s += thread_cpu_s();
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The shard's SHA-256 over the appended frames, in file order: it is the writer's largest
 * serial cost after compression (about 300 MB/s of compressed bytes here), so it runs
 * beside the writer. */
static void *hash_main(void *arg) {
    lt_shard_writer *w = arg;
    compress_pool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next_hash == p->next_write) pthread_cond_wait(&p->hash_cv, &p->mu);
        if (p->next_hash == p->next_write) break; /* stopped with nothing left */
        frame_job *j = &p->jobs[p->next_hash % p->cap];
        pthread_mutex_unlock(&p->mu);
        lt_sha256_update(&w->shard_hash, j->cbuf, j->c_len);
        pthread_mutex_lock(&p->mu);
        p->next_hash++;
        pthread_cond_broadcast(&p->done_cv);
    }
    p->hash_cpu_s += thread_cpu_s();
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Stop and free the pool (frames not yet written are dropped: finish drains them first). */
static void pool_free(lt_shard_writer *w) {
    compress_pool *p = w->pool;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_cond_broadcast(&p->hash_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    if (p->hasher_started) pthread_join(p->hasher, NULL);
    w->compress_cpu_s += p->cpu_s;
    w->hash_cpu_s += p->hash_cpu_s;
    for (int i = 0; i < p->n_threads; i++) ZSTD_freeCCtx(p->cctxs[i]);
    for (size_t i = 0; i < p->cap; i++) {
        free(p->jobs[i].raw);
        free(p->jobs[i].cbuf);
    }
    free(p->jobs);
    free(p->cctxs);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->hash_cv);
    free(p);
    w->pool = NULL;
}

/* A compression context with the shard's parameters (the same for every thread: the
 * frames' bytes must not depend on which context made them). */
static ZSTD_CCtx *new_cctx(int level, size_t *zerr) {
    ZSTD_CCtx *c = ZSTD_createCCtx();
    LT_CHECK_ALLOC(c);
    size_t r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, 0);
    *zerr = r;
    return c;
}

lt_status lt_shard_writer_set_threads(lt_shard_writer *w, int n, lt_error *err) {
    if (w->broken) return writer_broken(w, err);
    if (w->pool || w->n_frames || w->finished)
        return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "set_threads after the first frame or twice");
    if (n < 0 || n > 1024)
        return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "%d compression threads (0..1024)", n);
    if (n == 0) return LT_OK;
    compress_pool *p = lt_calloc_check(1, sizeof *p);
    /* two frames per thread: one being compressed, one waiting, so no thread idles while
     * the writer appends; and the writer's own next frame fills meanwhile */
    p->cap = 2 * (size_t)n + 1;
    p->jobs = lt_calloc_check(p->cap, sizeof *p->jobs);
    p->threads = lt_calloc_check((size_t)n, sizeof *p->threads);
    p->cctxs = lt_calloc_check((size_t)n, sizeof *p->cctxs);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    pthread_cond_init(&p->hash_cv, NULL);
    w->pool = p;
    for (int i = 0; i < n; i++) {
        size_t r;
        p->cctxs[i] = new_cctx(w->meta.zstd_level, &r);
        if (ZSTD_isError(r)) {
            for (int k = 0; k <= i; k++) ZSTD_freeCCtx(p->cctxs[k]);
            p->n_threads = 0;
            pool_free(w);
            return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "zstd setup failed: %s", ZSTD_getErrorName(r));
        }
    }
    /* hold the lock while starting, so that each thread finds its own entry in threads[] */
    pthread_mutex_lock(&p->mu);
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&p->threads[started], NULL, compress_main, w) != 0) break;
    p->n_threads = started;
    if (started == n) p->hasher_started = pthread_create(&p->hasher, NULL, hash_main, w) == 0;
    pthread_mutex_unlock(&p->mu);
    if (started < n || !p->hasher_started) {
        for (int i = started; i < n; i++) ZSTD_freeCCtx(p->cctxs[i]);
        pool_free(w);
        return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "cannot start %d compression threads and a hasher "
                       "(started %d)", n, started);
    }
    return LT_OK;
}

lt_status lt_shard_writer_add_doc(lt_shard_writer *w, uint32_t file_idx, const char *id, const char *name,
                                  uint32_t flags, const uint32_t *ids, size_t n, lt_error *err) {
    if (w->broken) return writer_broken(w, err);
    char where[64];
    snprintf(where, sizeof where, "document %zu", w->n_docs);
    if (w->finished) return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "add_doc after finish");
    if (file_idx >= w->n_files)
        return lt_fail(err, LT_ERR_INTERNAL, where, "input file %" PRIu32 " was not registered (%zu files)",
                       file_idx, w->n_files);
    if (flags & ~(uint32_t)(LT_DOC_TRUNCATED | LT_DOC_REPAIRED))
        return lt_fail(err, LT_ERR_INTERNAL, where, "unknown document flags 0x%" PRIx32, flags);
    const uint32_t width = w->meta.token_width, n_vocab = w->meta.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= n_vocab || (width == 2 && ids[i] > 0xFFFFu))
            return lt_fail(err, LT_ERR_INTERNAL, where,
                           "token %zu of document %zu (id \"%.100s\"): id %" PRIu32
                           " is not below the vocabulary size %" PRIu32 " (token width %" PRIu32 ")",
                           i, w->n_docs, id ? id : "", ids[i], n_vocab, width);
    const bool eos = w->meta.eos == LT_EOS_APPEND;
    const uint64_t total = (uint64_t)n + eos;
    const uint64_t bytes = total * width;
    /* a frame's decompressed size is a u32 in the seek table */
    if (w->fbuf_len > 0 && w->fbuf_len + bytes > UINT32_MAX) {
        lt_status st = flush_frame(w, err);
        if (st != LT_OK) return writer_break(w, st, err);
    }
    if (bytes > UINT32_MAX)
        return lt_fail(err, LT_ERR_INPUT, where,
                       "document %zu (id \"%.100s\") has %" PRIu64 " tokens: more than one zstd seekable frame "
                       "can hold (4 GiB)",
                       w->n_docs, id ? id : "", total);
    w->fbuf = grow(w->fbuf, &w->fbuf_cap, w->fbuf_len + (size_t)bytes, 1);
    uint8_t *p = w->fbuf + w->fbuf_len;
    if (width == 2) {
        for (size_t i = 0; i < n; i++, p += 2) lt_put_le16(p, (uint16_t)ids[i]);
        if (eos) lt_put_le16(p, (uint16_t)w->meta.eos_id);
    } else {
        for (size_t i = 0; i < n; i++, p += 4) lt_put_le32(p, ids[i]);
        if (eos) lt_put_le32(p, w->meta.eos_id);
    }
    w->fbuf_len += (size_t)bytes;
    w->doc_offsets = grow(w->doc_offsets, &w->docs_cap, w->n_docs + 2, sizeof *w->doc_offsets);
    w->sources = grow(w->sources, &w->sources_cap, w->n_docs + 1, sizeof *w->sources);
    doc_source *src = &w->sources[w->n_docs];
    src->file = file_idx;
    src->flags = flags;
    src->id = add_string_dedup(w, id, &w->last_id);
    src->name = add_string_dedup(w, name, &w->last_name);
    w->n_tokens += total;
    w->n_docs++;
    w->doc_offsets[w->n_docs] = w->n_tokens;
    if (w->fbuf_len >= w->meta.frame_bytes) {
        lt_status st = flush_frame(w, err);
        if (st != LT_OK) return writer_break(w, st, err);
    }
    return LT_OK;
}

/* The index file being written: every byte goes to the file and both hashes. */
typedef struct index_out {
    FILE *fp;
    const char *path;
    lt_sha256 body; /* the trailer's hash: everything before it */
    lt_sha256 whole;
    uint64_t pos;
    lt_status st;
    lt_error *err;
} index_out;

static void out_bytes(index_out *o, const void *p, size_t n) {
    if (o->st != LT_OK || n == 0) return;
    if (fwrite(p, 1, n, o->fp) != n) {
        o->st = lt_fail(o->err, LT_ERR_IO, o->path, "write failed: %s", strerror(errno));
        return;
    }
    lt_sha256_update(&o->body, p, n);
    lt_sha256_update(&o->whole, p, n);
    o->pos += n;
}

static void out_pad8(index_out *o) {
    static const uint8_t zero[8];
    out_bytes(o, zero, (size_t)(align8(o->pos) - o->pos));
}

/* Write records of `rec` bytes through a staging buffer; fill(i, p) encodes record i. */
#define OUT_RECORDS(o, count, rec, fill_stmt)                                  \
    do {                                                                       \
        uint8_t stage_[4096];                                                  \
        size_t used_ = 0;                                                      \
        for (size_t i_ = 0; i_ < (count); i_++) {                              \
            if (used_ + (rec) > sizeof stage_) {                               \
                out_bytes((o), stage_, used_);                                 \
                used_ = 0;                                                     \
            }                                                                  \
            uint8_t *p_ = stage_ + used_;                                      \
            size_t i = i_;                                                     \
            uint8_t *p = p_;                                                   \
            fill_stmt;                                                         \
            used_ += (rec);                                                    \
        }                                                                      \
        out_bytes((o), stage_, used_);                                         \
    } while (0)

static lt_status write_index(lt_shard_writer *w, lt_atomic_file *af, uint8_t index_sha[32], uint64_t *index_bytes,
                             lt_error *err) {
    uint64_t sec_bytes[IDX_NSECTIONS] = {
        8 * ((uint64_t)w->n_docs + 1), IDX_SOURCE_BYTES * (uint64_t)w->n_docs, IDX_FILE_BYTES * (uint64_t)w->n_files,
        IDX_FRAME_BYTES * (uint64_t)w->n_frames, w->strings_len};
    uint64_t sec_off[IDX_NSECTIONS], pos = IDX_HEADER_BYTES;
    for (int s = 0; s < IDX_NSECTIONS; s++) {
        sec_off[s] = pos;
        pos = align8(pos + sec_bytes[s]);
    }
    uint8_t h[IDX_HEADER_BYTES] = {0};
    memcpy(h, IDX_MAGIC, 8);
    lt_put_le32(h + OFF_VERSION, LT_INDEX_VERSION);
    lt_put_le32(h + OFF_HEADER_SIZE, IDX_HEADER_BYTES);
    lt_put_le32(h + OFF_WIDTH, w->meta.token_width);
    lt_put_le32(h + OFF_NVOCAB, w->meta.n_vocab);
    memcpy(h + OFF_VOCAB_SHA, w->meta.vocab_sha256, 32);
    memcpy(h + OFF_ENCODING, w->meta.encoding, 32);
    lt_put_le32(h + OFF_EOS, (uint32_t)w->meta.eos);
    lt_put_le32(h + OFF_EOS_ID, w->meta.eos_id);
    lt_put_le32(h + OFF_TASK, w->meta.task_id);
    lt_put_le32(h + OFF_NTASKS, w->meta.num_tasks);
    lt_put_le64(h + OFF_NDOCS, w->n_docs);
    lt_put_le64(h + OFF_NTOKENS, w->n_tokens);
    lt_put_le64(h + OFF_NFRAMES, w->n_frames);
    lt_put_le64(h + OFF_NFILES, w->n_files);
    for (int s = 0; s < IDX_NSECTIONS; s++) {
        lt_put_le64(h + OFF_SECTIONS + 16 * s, sec_off[s]);
        lt_put_le64(h + OFF_SECTIONS + 16 * s + 8, sec_bytes[s]);
    }
    lt_put_le64(h + OFF_SHARD_BYTES, w->shard_bytes);
    lt_put_le64(h + OFF_FRAME_BYTES, w->meta.frame_bytes);
    lt_put_le32(h + OFF_ZSTD_LEVEL, (uint32_t)w->meta.zstd_level);

    index_out o = {.fp = af->fp, .path = w->index_path, .st = LT_OK, .err = err};
    lt_sha256_init(&o.body);
    lt_sha256_init(&o.whole);
    out_bytes(&o, h, sizeof h);
    OUT_RECORDS(&o, w->n_docs + 1, 8, lt_put_le64(p, w->doc_offsets[i]));
    out_pad8(&o);
    OUT_RECORDS(&o, w->n_docs, IDX_SOURCE_BYTES, {
        lt_put_le32(p, w->sources[i].file);
        lt_put_le32(p + 4, w->sources[i].flags);
        lt_put_le64(p + 8, w->sources[i].id);
        lt_put_le64(p + 16, w->sources[i].name);
    });
    out_pad8(&o);
    OUT_RECORDS(&o, w->n_files, IDX_FILE_BYTES, {
        lt_put_le64(p, w->files[i].path);
        lt_put_le64(p + 8, w->files[i].size);
        lt_put_le64(p + 16, w->files[i].source);
    });
    out_pad8(&o);
    OUT_RECORDS(&o, w->n_frames, IDX_FRAME_BYTES, {
        const lt_index_frame *f = &w->frames[i].f;
        lt_put_le64(p, f->offset);
        lt_put_le64(p + 8, f->size);
        lt_put_le64(p + 16, f->first_doc);
        lt_put_le64(p + 24, f->n_docs);
        lt_put_le64(p + 32, f->first_token);
        lt_put_le64(p + 40, f->n_tokens);
    });
    out_pad8(&o);
    out_bytes(&o, w->strings, w->strings_len);
    out_pad8(&o);
    if (o.st == LT_OK && o.pos != pos)
        return lt_fail(err, LT_ERR_INTERNAL, w->index_path, "index layout: wrote %" PRIu64 " bytes, planned %" PRIu64,
                       o.pos, pos);
    uint8_t trailer[32];
    lt_sha256_final(&o.body, trailer);
    if (o.st == LT_OK && fwrite(trailer, 1, 32, o.fp) != 32)
        o.st = lt_fail(err, LT_ERR_IO, w->index_path, "write failed: %s", strerror(errno));
    lt_sha256_update(&o.whole, trailer, 32);
    lt_sha256_final(&o.whole, index_sha);
    *index_bytes = o.pos + 32;
    return o.st;
}

lt_status lt_shard_writer_finish(lt_shard_writer *w, lt_shard_summary *sum, lt_error *err) {
    if (w->broken) return writer_broken(w, err);
    if (w->finished) return lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "finish called twice");
    lt_status st = LT_OK;
    /* pending documents (possibly all empty) make the last frame */
    if (w->n_docs > w->frame_first_doc) st = flush_frame(w, err);
    while (st == LT_OK && w->pool && w->pool->next_write < w->pool->next_submit) st = pool_write_oldest(w, err);
    if (st != LT_OK) return writer_break(w, st, err);
    if (w->pool) { /* every frame hashed before the seek table is, here */
        compress_pool *p = w->pool;
        pthread_mutex_lock(&p->mu);
        while (p->next_hash < p->next_write) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    pool_free(w);
    if (seek_table_bytes(w->n_frames) - 8 > UINT32_MAX)
        return writer_break(w, lt_fail(err, LT_ERR_INTERNAL, w->shard_path, "too many frames for the seek table"),
                            err);
    /* the seek table (zstd seekable format), a skippable frame */
    size_t tlen = (size_t)seek_table_bytes(w->n_frames);
    uint8_t *t = lt_malloc_check(tlen);
    lt_put_le32(t, SEEK_SKIPPABLE_MAGIC);
    lt_put_le32(t + 4, (uint32_t)(tlen - 8));
    for (size_t i = 0; i < w->n_frames; i++) {
        uint8_t *e = t + 8 + SEEK_ENTRY_BYTES * i;
        lt_put_le32(e, (uint32_t)w->frames[i].f.size);
        lt_put_le32(e + 4, w->frames[i].raw_bytes);
        lt_put_le32(e + 8, w->frames[i].checksum);
    }
    uint8_t *foot = t + tlen - SEEK_FOOTER_BYTES;
    lt_put_le32(foot, (uint32_t)w->n_frames);
    foot[4] = SEEK_CHECKSUM_FLAG;
    lt_put_le32(foot + 5, SEEK_MAGIC);
    st = write_shard_bytes(w, t, tlen, true, err);
    free(t);
    if (st != LT_OK) return writer_break(w, st, err);

    lt_atomic_file ix;
    st = lt_atomic_open(&ix, w->index_path, err);
    if (st != LT_OK) return writer_break(w, st, err);
    uint8_t index_sha[32];
    uint64_t index_bytes = 0;
    st = write_index(w, &ix, index_sha, &index_bytes, err);
    if (st != LT_OK) {
        lt_atomic_abort(&ix);
        return writer_break(w, st, err);
    }
    /* shard first, then the index: an index never names a shard that is not there */
    st = lt_atomic_commit(&w->shard, err);
    if (st != LT_OK) {
        lt_atomic_abort(&ix);
        return writer_break(w, st, err);
    }
    st = lt_atomic_commit(&ix, err);
    if (st != LT_OK) {
        unlink(w->shard_path); /* keep "nothing visible unless finish succeeds" */
        return writer_break(w, st, err);
    }
    w->finished = true;
    if (sum) {
        memset(sum, 0, sizeof *sum);
        sum->n_docs = w->n_docs;
        sum->n_tokens = w->n_tokens;
        sum->n_frames = w->n_frames;
        sum->shard_bytes = w->shard_bytes;
        sum->compress_cpu_s = w->compress_cpu_s;
        sum->hash_cpu_s = w->hash_cpu_s;
        sum->index_bytes = index_bytes;
        lt_sha256_final(&w->shard_hash, sum->shard_sha256);
        memcpy(sum->index_sha256, index_sha, 32);
    }
    return LT_OK;
}

void lt_shard_writer_free(lt_shard_writer *w) {
    if (w == NULL) return;
    pool_free(w);
    lt_atomic_abort(&w->shard);
    ZSTD_freeCCtx(w->cctx);
    free(w->shard_path);
    free(w->index_path);
    free(w->fbuf);
    free(w->cbuf);
    free(w->doc_offsets);
    free(w->sources);
    free(w->files);
    free(w->frames);
    free(w->strings);
    free(w);
}

/* ---- index reader ----------------------------------------------------------------- */

struct lt_index {
    char *path;
    const uint8_t *map;
    size_t size;
    lt_shard_meta meta;
    uint64_t n_docs, n_tokens, n_frames, n_files, shard_bytes;
    uint32_t version;
    uint64_t file_bytes; /* bytes of a files entry: IDX_FILE_BYTES, or IDX_FILE_BYTES_V1 for version 1 */
    const uint8_t *doc_offsets, *sources, *files, *frames;
    const char *strings;
    uint64_t strings_bytes;
};

#define BAD(...) lt_fail(err, LT_ERR_INPUT, path, __VA_ARGS__)

static lt_status validate_header(lt_index *ix, lt_error *err) {
    const char *path = ix->path;
    const uint8_t *m = ix->map;
    const uint64_t size = ix->size;
    if (size < 8 || memcmp(m, IDX_MAGIC, 8) != 0) {
        lt_status st = BAD("not a longtail token index (index.magic is not \"LTIDX\\0v1\")");
        lt_error_hint(err, "an index is task-NNNNN.index written by `dataprep run`");
        return st;
    }
    if (size < 12) return BAD("index truncated in its header (%" PRIu64 " bytes)", size);
    uint32_t version = lt_get_le32(m + OFF_VERSION);
    if (version > LT_INDEX_VERSION) {
        lt_status st = lt_fail(err, LT_ERR_VERSION, path, "index.version is %" PRIu32 "; this program reads up to %d",
                               version, LT_INDEX_VERSION);
        lt_error_hint(err, "the index was written by a newer longtail; use that version or re-run dataprep");
        return st;
    }
    if (version == 0) return BAD("index.version is 0");
    ix->version = version;
    ix->file_bytes = version == 1 ? IDX_FILE_BYTES_V1 : IDX_FILE_BYTES;
    if (size < (uint64_t)IDX_HEADER_BYTES + IDX_TRAILER_BYTES)
        return BAD("index truncated: %" PRIu64 " bytes, less than the header and trailer (%u)", size,
                   IDX_HEADER_BYTES + IDX_TRAILER_BYTES);
    uint32_t hsize = lt_get_le32(m + OFF_HEADER_SIZE);
    if (hsize != IDX_HEADER_BYTES) return BAD("index.header_size is %" PRIu32 " (must be %u)", hsize, IDX_HEADER_BYTES);
    lt_shard_meta *mt = &ix->meta;
    mt->token_width = lt_get_le32(m + OFF_WIDTH);
    if (mt->token_width != 2 && mt->token_width != 4)
        return BAD("index.token_width is %" PRIu32 " (must be 2 or 4)", mt->token_width);
    mt->n_vocab = lt_get_le32(m + OFF_NVOCAB);
    if (mt->n_vocab == 0) return BAD("index.n_vocab is 0");
    if (mt->token_width == 2 && mt->n_vocab > 65536u)
        return BAD("index.n_vocab is %" PRIu32 ", too large for index.token_width 2", mt->n_vocab);
    memcpy(mt->vocab_sha256, m + OFF_VOCAB_SHA, 32);
    memcpy(mt->encoding, m + OFF_ENCODING, 32);
    size_t elen = strnlen(mt->encoding, 32);
    if (elen == 32) return BAD("index.encoding is not NUL-terminated");
    for (size_t i = elen; i < 32; i++)
        if (mt->encoding[i] != '\0') return BAD("index.encoding has bytes after its NUL (byte %zu)", i);
    uint32_t eos = lt_get_le32(m + OFF_EOS);
    if (eos != LT_EOS_NONE && eos != LT_EOS_APPEND)
        return BAD("index.eos_policy is %" PRIu32 " (must be 0 none or 1 append)", eos);
    mt->eos = (lt_eos_policy)eos;
    mt->eos_id = lt_get_le32(m + OFF_EOS_ID);
    if (eos == LT_EOS_APPEND && mt->eos_id >= mt->n_vocab)
        return BAD("index.eos_id %" PRIu32 " is not below index.n_vocab %" PRIu32, mt->eos_id, mt->n_vocab);
    mt->task_id = lt_get_le32(m + OFF_TASK);
    mt->num_tasks = lt_get_le32(m + OFF_NTASKS);
    if (mt->num_tasks == 0) return BAD("index.num_tasks is 0");
    if (mt->task_id >= mt->num_tasks)
        return BAD("index.task_id %" PRIu32 " is not below index.num_tasks %" PRIu32, mt->task_id, mt->num_tasks);
    ix->n_docs = lt_get_le64(m + OFF_NDOCS);
    ix->n_tokens = lt_get_le64(m + OFF_NTOKENS);
    ix->n_frames = lt_get_le64(m + OFF_NFRAMES);
    ix->n_files = lt_get_le64(m + OFF_NFILES);
    /* counts against the file size first, so the products below cannot overflow */
    if (ix->n_docs > size / (8 + IDX_SOURCE_BYTES))
        return BAD("index.n_docs %" PRIu64 " is too large for a file of %" PRIu64 " bytes", ix->n_docs, size);
    if (ix->n_frames > size / IDX_FRAME_BYTES)
        return BAD("index.n_frames %" PRIu64 " is too large for a file of %" PRIu64 " bytes", ix->n_frames, size);
    if (ix->n_files > size / ix->file_bytes || ix->n_files > UINT32_MAX)
        return BAD("index.n_files %" PRIu64 " is too large for a file of %" PRIu64 " bytes", ix->n_files, size);
    if (ix->n_docs > 0 && ix->n_frames == 0) return BAD("index.n_frames is 0 but index.n_docs is %" PRIu64, ix->n_docs);
    if (ix->n_frames > ix->n_docs)
        return BAD("index.n_frames %" PRIu64 " is more than index.n_docs %" PRIu64, ix->n_frames, ix->n_docs);
    ix->shard_bytes = lt_get_le64(m + OFF_SHARD_BYTES);
    uint64_t fb = lt_get_le64(m + OFF_FRAME_BYTES);
    if (fb == 0 || fb > FRAME_BYTES_MAX) return BAD("index.frame_bytes %" PRIu64 " is out of range", fb);
    mt->frame_bytes = (size_t)fb;
    mt->zstd_level = (int32_t)lt_get_le32(m + OFF_ZSTD_LEVEL);
    for (size_t i = OFF_RESERVED; i < IDX_HEADER_BYTES; i++)
        if (m[i] != 0) return BAD("index.reserved byte %zu is not zero", i);

    const uint64_t expect_bytes[IDX_NSECTIONS] = {8 * (ix->n_docs + 1), IDX_SOURCE_BYTES * ix->n_docs,
                                                  ix->file_bytes * ix->n_files, IDX_FRAME_BYTES * ix->n_frames, 0};
    const uint64_t body_end = size - IDX_TRAILER_BYTES;
    uint64_t pos = IDX_HEADER_BYTES;
    const uint8_t *sec[IDX_NSECTIONS];
    for (int s = 0; s < IDX_NSECTIONS; s++) {
        uint64_t off = lt_get_le64(m + OFF_SECTIONS + 16 * s), bytes = lt_get_le64(m + OFF_SECTIONS + 16 * s + 8);
        if (off != pos)
            return BAD("index.%s.offset is %" PRIu64 ", expected %" PRIu64, section_names[s], off, pos);
        if (s != SEC_STRINGS && bytes != expect_bytes[s])
            return BAD("index.%s.bytes is %" PRIu64 ", expected %" PRIu64, section_names[s], bytes, expect_bytes[s]);
        if (bytes > body_end - off)
            return BAD("index.%s (%" PRIu64 " bytes at %" PRIu64 ") runs past the end of the file (%" PRIu64
                       " bytes with the trailer); truncated?",
                       section_names[s], bytes, off, size);
        sec[s] = m + off;
        pos = align8(off + bytes);
        if (s == SEC_STRINGS) ix->strings_bytes = bytes;
    }
    if (pos != body_end)
        return BAD("index size %" PRIu64 " does not match its sections (expected %" PRIu64 " bytes); truncated or "
                   "padded?",
                   size, pos + IDX_TRAILER_BYTES);
    ix->doc_offsets = sec[SEC_DOC_OFFSETS];
    ix->sources = sec[SEC_DOC_SOURCES];
    ix->files = sec[SEC_FILES];
    ix->frames = sec[SEC_FRAMES];
    ix->strings = (const char *)sec[SEC_STRINGS];
    return LT_OK;
}

static lt_status validate_body(lt_index *ix, lt_error *err) {
    const char *path = ix->path;
    const uint32_t width = ix->meta.token_width;
    if (ix->strings_bytes == 0 || ix->strings[0] != '\0')
        return BAD("index.strings does not start with the empty string");
    if (ix->strings[ix->strings_bytes - 1] != '\0') return BAD("index.strings does not end with a NUL");
    uint64_t prev = lt_get_le64(ix->doc_offsets);
    if (prev != 0) return BAD("index.doc_offsets[0] is %" PRIu64 " (must be 0)", prev);
    for (uint64_t d = 1; d <= ix->n_docs; d++) {
        uint64_t o = lt_get_le64(ix->doc_offsets + 8 * d);
        if (o < prev) return BAD("index.doc_offsets not increasing at document %" PRIu64, d);
        prev = o;
    }
    if (prev != ix->n_tokens)
        return BAD("index.doc_offsets ends at %" PRIu64 " but index.n_tokens is %" PRIu64, prev, ix->n_tokens);
    for (uint64_t d = 0; d < ix->n_docs; d++) {
        const uint8_t *s = ix->sources + IDX_SOURCE_BYTES * d;
        uint32_t file = lt_get_le32(s), flags = lt_get_le32(s + 4);
        uint64_t id = lt_get_le64(s + 8), name = lt_get_le64(s + 16);
        if (file >= ix->n_files)
            return BAD("index.doc_sources[%" PRIu64 "].file is %" PRIu32 ", not below index.n_files %" PRIu64, d, file,
                       ix->n_files);
        if (flags & ~(uint32_t)(LT_DOC_TRUNCATED | LT_DOC_REPAIRED))
            return BAD("index.doc_sources[%" PRIu64 "].flags 0x%" PRIx32 " has unknown bits", d, flags);
        if (id >= ix->strings_bytes || name >= ix->strings_bytes)
            return BAD("index.doc_sources[%" PRIu64 "].%s is outside index.strings", d,
                       id >= ix->strings_bytes ? "id" : "name");
    }
    for (uint64_t f = 0; f < ix->n_files; f++) {
        if (lt_get_le64(ix->files + ix->file_bytes * f) >= ix->strings_bytes)
            return BAD("index.files[%" PRIu64 "].path is outside index.strings", f);
        if (ix->version >= 2 && lt_get_le64(ix->files + ix->file_bytes * f + 16) >= ix->strings_bytes)
            return BAD("index.files[%" PRIu64 "].source is outside index.strings", f);
    }
    uint64_t coff = 0, doc = 0;
    for (uint64_t i = 0; i < ix->n_frames; i++) {
        const uint8_t *p = ix->frames + IDX_FRAME_BYTES * i;
        uint64_t off = lt_get_le64(p), sz = lt_get_le64(p + 8), fd = lt_get_le64(p + 16), nd = lt_get_le64(p + 24),
                 ft = lt_get_le64(p + 32), nt = lt_get_le64(p + 40);
        if (off != coff) return BAD("index.frames[%" PRIu64 "].offset is %" PRIu64 ", expected %" PRIu64, i, off, coff);
        if (sz == 0 || sz > UINT32_MAX) return BAD("index.frames[%" PRIu64 "].size %" PRIu64 " is out of range", i, sz);
        if (fd != doc) return BAD("index.frames[%" PRIu64 "].first_doc is %" PRIu64 ", expected %" PRIu64, i, fd, doc);
        if (nd == 0 || nd > ix->n_docs - doc)
            return BAD("index.frames[%" PRIu64 "].n_docs %" PRIu64 " is out of range", i, nd);
        uint64_t t0 = lt_get_le64(ix->doc_offsets + 8 * fd), t1 = lt_get_le64(ix->doc_offsets + 8 * (fd + nd));
        if (ft != t0)
            return BAD("index.frames[%" PRIu64 "].first_token is %" PRIu64 ", expected %" PRIu64, i, ft, t0);
        if (nt != t1 - t0)
            return BAD("index.frames[%" PRIu64 "].n_tokens is %" PRIu64 ", expected %" PRIu64, i, nt, t1 - t0);
        if (nt > UINT32_MAX / width)
            return BAD("index.frames[%" PRIu64 "] holds %" PRIu64 " tokens, more than a 4 GiB frame", i, nt);
        coff += sz;
        doc += nd;
    }
    if (doc != ix->n_docs)
        return BAD("index.frames cover %" PRIu64 " documents but index.n_docs is %" PRIu64, doc, ix->n_docs);
    if (ix->shard_bytes != coff + seek_table_bytes(ix->n_frames))
        return BAD("index.shard_bytes is %" PRIu64 ", expected %" PRIu64 " (frames and seek table)", ix->shard_bytes,
                   coff + seek_table_bytes(ix->n_frames));
    uint8_t digest[32];
    lt_sha256 h;
    lt_sha256_init(&h);
    lt_sha256_update(&h, ix->map, ix->size - IDX_TRAILER_BYTES);
    lt_sha256_final(&h, digest);
    if (memcmp(digest, ix->map + ix->size - IDX_TRAILER_BYTES, 32) != 0) {
        lt_status st = BAD("index.sha256 (the trailer) does not match the file's contents");
        lt_error_hint(err, "the index is damaged; re-run this dataprep task");
        return st;
    }
    return LT_OK;
}

lt_status lt_index_open(lt_index **out, const char *path, lt_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        lt_status st = lt_fail(err, LT_ERR_IO, path, "cannot stat: %s", strerror(errno));
        close(fd);
        return st;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lt_fail(err, LT_ERR_INPUT, path, "not a regular file");
    }
    if (sb.st_size < 8) {
        close(fd);
        lt_status st = lt_fail(err, LT_ERR_INPUT, path, "not a longtail token index (index.magic: file of %lld bytes)",
                               (long long)sb.st_size);
        lt_error_hint(err, "an index is task-NNNNN.index written by `dataprep run`");
        return st;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return lt_fail(err, LT_ERR_INPUT, path, "index too large to map");
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED) return lt_fail(err, LT_ERR_IO, path, "cannot map: %s", strerror(saved));
    lt_index *ix = lt_calloc_check(1, sizeof *ix);
    ix->path = lt_strdup_check(path);
    ix->map = map;
    ix->size = (size_t)sb.st_size;
    lt_status st = validate_header(ix, err);
    if (st == LT_OK) st = validate_body(ix, err);
    if (st != LT_OK) {
        lt_index_close(ix);
        return st;
    }
    *out = ix;
    return LT_OK;
}

#undef BAD

void lt_index_close(lt_index *ix) {
    if (ix == NULL) return;
    if (ix->map) munmap((void *)ix->map, ix->size);
    free(ix->path);
    free(ix);
}

const lt_shard_meta *lt_index_meta(const lt_index *ix) { return &ix->meta; }
uint64_t lt_index_n_docs(const lt_index *ix) { return ix->n_docs; }
uint64_t lt_index_n_tokens(const lt_index *ix) { return ix->n_tokens; }

uint64_t lt_index_doc_offset(const lt_index *ix, uint64_t doc) {
    LT_CHECK(doc <= ix->n_docs);
    return lt_get_le64(ix->doc_offsets + 8 * doc);
}

uint64_t lt_index_doc_len(const lt_index *ix, uint64_t doc) {
    LT_CHECK(doc < ix->n_docs);
    return lt_get_le64(ix->doc_offsets + 8 * (doc + 1)) - lt_get_le64(ix->doc_offsets + 8 * doc);
}

void lt_index_doc_source(const lt_index *ix, uint64_t doc, lt_index_source *out) {
    LT_CHECK(doc < ix->n_docs);
    const uint8_t *s = ix->sources + IDX_SOURCE_BYTES * doc;
    out->file = lt_get_le32(s);
    out->flags = lt_get_le32(s + 4);
    out->id = ix->strings + lt_get_le64(s + 8);
    out->name = ix->strings + lt_get_le64(s + 16);
}

uint32_t lt_index_n_files(const lt_index *ix) { return (uint32_t)ix->n_files; }

const char *lt_index_file_path(const lt_index *ix, uint32_t file) {
    LT_CHECK(file < ix->n_files);
    return ix->strings + lt_get_le64(ix->files + ix->file_bytes * file);
}

const char *lt_index_file_source(const lt_index *ix, uint32_t file) {
    LT_CHECK(file < ix->n_files);
    return ix->version >= 2 ? ix->strings + lt_get_le64(ix->files + ix->file_bytes * file + 16) : "";
}

uint64_t lt_index_file_size(const lt_index *ix, uint32_t file) {
    LT_CHECK(file < ix->n_files);
    return lt_get_le64(ix->files + ix->file_bytes * file + 8);
}

uint64_t lt_index_n_frames(const lt_index *ix) { return ix->n_frames; }

void lt_index_frame_get(const lt_index *ix, uint64_t frame, lt_index_frame *out) {
    LT_CHECK(frame < ix->n_frames);
    const uint8_t *p = ix->frames + IDX_FRAME_BYTES * frame;
    out->offset = lt_get_le64(p);
    out->size = lt_get_le64(p + 8);
    out->first_doc = lt_get_le64(p + 16);
    out->n_docs = lt_get_le64(p + 24);
    out->first_token = lt_get_le64(p + 32);
    out->n_tokens = lt_get_le64(p + 40);
}

uint64_t lt_index_frame_of_doc(const lt_index *ix, uint64_t doc) {
    LT_CHECK(doc < ix->n_docs);
    /* the last frame whose first_doc <= doc (frames tile the documents, none empty) */
    uint64_t lo = 0, hi = ix->n_frames;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (lt_get_le64(ix->frames + IDX_FRAME_BYTES * mid + 16) <= doc) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* ---- shard reader ----------------------------------------------------------------- */

struct lt_shard {
    const lt_index *ix;
    char *path;
    int fd;
    ZSTD_DCtx *dctx;
    uint8_t *cbuf, *dbuf;
    size_t cbuf_cap, dbuf_cap;
    uint32_t *ids;
    size_t ids_cap;
    uint64_t cached; /* frame in ids[], or UINT64_MAX */
    uint32_t checksum; /* XXH64 low 32 bits of the cached frame's bytes (when computed) */
};

/* "x.index" -> "x.tokens.zst" (otherwise the name with ".tokens.zst" appended). */
static char *shard_path_of(const char *index_path) {
    size_t n = strlen(index_path);
    size_t stem = n >= 6 && strcmp(index_path + n - 6, ".index") == 0 ? n - 6 : n;
    char *p = lt_malloc_check(stem + sizeof ".tokens.zst");
    memcpy(p, index_path, stem);
    memcpy(p + stem, ".tokens.zst", sizeof ".tokens.zst");
    return p;
}

lt_status lt_shard_open(lt_shard **out, const char *path, const lt_index *ix, lt_error *err) {
    *out = NULL;
    char *p = path ? lt_strdup_check(path) : shard_path_of(ix->path);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        lt_status st = lt_fail(err, LT_ERR_IO, p, "cannot open: %s", strerror(errno));
        free(p);
        return st;
    }
    struct stat sb;
    lt_status st = LT_OK;
    if (fstat(fd, &sb) != 0) st = lt_fail(err, LT_ERR_IO, p, "cannot stat: %s", strerror(errno));
    else if ((uint64_t)sb.st_size != ix->shard_bytes) {
        st = lt_fail(err, LT_ERR_INPUT, p, "shard is %lld bytes but its index %s says %" PRIu64,
                     (long long)sb.st_size, ix->path, ix->shard_bytes);
        lt_error_hint(err, "the shard and the index are from different runs, or the shard is damaged");
    }
    if (st != LT_OK) {
        close(fd);
        free(p);
        return st;
    }
    lt_shard *sh = lt_calloc_check(1, sizeof *sh);
    sh->ix = ix;
    sh->path = p;
    sh->fd = fd;
    sh->dctx = ZSTD_createDCtx();
    LT_CHECK_ALLOC(sh->dctx);
    sh->cached = UINT64_MAX;
    *out = sh;
    return LT_OK;
}

void lt_shard_close(lt_shard *sh) {
    if (sh == NULL) return;
    close(sh->fd);
    ZSTD_freeDCtx(sh->dctx);
    free(sh->path);
    free(sh->cbuf);
    free(sh->dbuf);
    free(sh->ids);
    free(sh);
}

static lt_status read_at(int fd, const char *path, void *buf, size_t n, uint64_t off, lt_error *err) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return lt_fail(err, LT_ERR_IO, path, "read failed: %s", strerror(errno));
        }
        if (r == 0)
            return lt_fail(err, LT_ERR_INPUT, path, "shard truncated: %zu bytes at offset %" PRIu64 " are missing",
                           n - got, off + got);
        got += (size_t)r;
    }
    return LT_OK;
}

/* Decompress frame f into sh->ids (widened to uint32). */
static lt_status load_frame(lt_shard *sh, uint64_t f, bool checksum, lt_error *err) {
    if (sh->cached == f && !checksum) return LT_OK;
    sh->cached = UINT64_MAX;
    lt_index_frame fr;
    lt_index_frame_get(sh->ix, f, &fr);
    const uint32_t width = sh->ix->meta.token_width, n_vocab = sh->ix->meta.n_vocab;
    const size_t raw = (size_t)fr.n_tokens * width; /* <= 4 GiB: checked on open */
    sh->cbuf = grow(sh->cbuf, &sh->cbuf_cap, (size_t)fr.size, 1);
    lt_status st = read_at(sh->fd, sh->path, sh->cbuf, (size_t)fr.size, fr.offset, err);
    if (st != LT_OK) return st;
    char where[PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: frame %" PRIu64, sh->path, f);
    size_t csize = ZSTD_findFrameCompressedSize(sh->cbuf, (size_t)fr.size);
    if (ZSTD_isError(csize) || csize != fr.size)
        return lt_fail(err, LT_ERR_INPUT, where, "not one zstd frame of %" PRIu64 " bytes (%s)", fr.size,
                       ZSTD_isError(csize) ? ZSTD_getErrorName(csize) : "size differs");
    unsigned long long content = ZSTD_getFrameContentSize(sh->cbuf, (size_t)fr.size);
    if (content != raw)
        return lt_fail(err, LT_ERR_INPUT, where, "the zstd frame holds %llu bytes, the index says %zu",
                       content == ZSTD_CONTENTSIZE_UNKNOWN || content == ZSTD_CONTENTSIZE_ERROR ? 0ull : content, raw);
    sh->ids = grow(sh->ids, &sh->ids_cap, fr.n_tokens + 1, sizeof *sh->ids);
    uint8_t *dst;
    if (width == 4) {
        dst = (uint8_t *)sh->ids;
    } else {
        sh->dbuf = grow(sh->dbuf, &sh->dbuf_cap, raw + 1, 1);
        dst = sh->dbuf;
    }
    size_t r = ZSTD_decompressDCtx(sh->dctx, dst, raw + 1, sh->cbuf, (size_t)fr.size);
    if (ZSTD_isError(r)) return lt_fail(err, LT_ERR_INPUT, where, "zstd: %s", ZSTD_getErrorName(r));
    if (r != raw) return lt_fail(err, LT_ERR_INPUT, where, "decompressed to %zu bytes, the index says %zu", r, raw);
    if (checksum) sh->checksum = (uint32_t)XXH64(dst, raw, 0);
    for (size_t i = 0; i < fr.n_tokens; i++) {
        uint32_t id = width == 4 ? lt_get_le32(dst + 4 * i) : lt_get_le16(dst + 2 * i);
        if (id >= n_vocab)
            return lt_fail(err, LT_ERR_INPUT, where, "token %" PRIu64 " is %" PRIu32 ", not below n_vocab %" PRIu32,
                           fr.first_token + i, id, n_vocab);
        sh->ids[i] = id;
    }
    sh->cached = f;
    return LT_OK;
}

lt_status lt_shard_doc(lt_shard *sh, uint64_t doc, const uint32_t **ids, size_t *n, lt_error *err) {
    if (doc >= sh->ix->n_docs)
        return lt_fail(err, LT_ERR_INTERNAL, sh->path, "document %" PRIu64 " of %" PRIu64 " does not exist", doc,
                       sh->ix->n_docs);
    uint64_t f = lt_index_frame_of_doc(sh->ix, doc);
    lt_status st = load_frame(sh, f, false, err);
    if (st != LT_OK) return st;
    lt_index_frame fr;
    lt_index_frame_get(sh->ix, f, &fr);
    *ids = sh->ids + (lt_index_doc_offset(sh->ix, doc) - fr.first_token);
    *n = (size_t)lt_index_doc_len(sh->ix, doc);
    return LT_OK;
}

lt_status lt_shard_verify(const char *shard_path, const lt_index *ix, lt_error *err) {
    lt_shard *sh;
    lt_status st = lt_shard_open(&sh, shard_path, ix, err);
    if (st != LT_OK) return st;
    const char *path = sh->path;
    uint64_t n = ix->n_frames, end = 0, tokens = 0;
    if (n > 0) {
        lt_index_frame last;
        lt_index_frame_get(ix, n - 1, &last);
        end = last.offset + last.size;
    }
    size_t tlen = (size_t)seek_table_bytes(n);
    uint8_t *t = lt_malloc_check(tlen);
    st = read_at(sh->fd, path, t, tlen, end, err);
    if (st == LT_OK) {
        const uint8_t *foot = t + tlen - SEEK_FOOTER_BYTES;
        if (lt_get_le32(t) != SEEK_SKIPPABLE_MAGIC || lt_get_le32(foot + 5) != SEEK_MAGIC)
            st = lt_fail(err, LT_ERR_INPUT, path, "no zstd seek table after the last frame (offset %" PRIu64 ")", end);
        else if (lt_get_le32(t + 4) != tlen - 8)
            st = lt_fail(err, LT_ERR_INPUT, path, "seek table frame size is %" PRIu32 ", expected %zu", lt_get_le32(t + 4),
                         tlen - 8);
        else if (lt_get_le32(foot) != n)
            st = lt_fail(err, LT_ERR_INPUT, path, "seek table has %" PRIu32 " frames, the index %" PRIu64,
                         lt_get_le32(foot), n);
        else if (foot[4] != SEEK_CHECKSUM_FLAG)
            st = lt_fail(err, LT_ERR_INPUT, path, "seek table descriptor is 0x%02x, expected 0x80 (checksums)",
                         foot[4]);
    }
    for (uint64_t f = 0; f < n && st == LT_OK; f++) {
        lt_index_frame fr;
        lt_index_frame_get(ix, f, &fr);
        const uint8_t *e = t + 8 + SEEK_ENTRY_BYTES * f;
        uint64_t raw = fr.n_tokens * ix->meta.token_width;
        if (lt_get_le32(e) != fr.size || lt_get_le32(e + 4) != raw) {
            st = lt_fail(err, LT_ERR_INPUT, path,
                         "frame %" PRIu64 ": seek table says %" PRIu32 " -> %" PRIu32 " bytes, the index %" PRIu64
                         " -> %" PRIu64,
                         f, lt_get_le32(e), lt_get_le32(e + 4), fr.size, raw);
            break;
        }
        st = load_frame(sh, f, true, err);
        if (st != LT_OK) break;
        if (sh->checksum != lt_get_le32(e + 8)) {
            st = lt_fail(err, LT_ERR_INPUT, path,
                         "frame %" PRIu64 ": checksum %08" PRIx32 " of its bytes differs from the seek table's %08" PRIx32,
                         f, sh->checksum, lt_get_le32(e + 8));
            break;
        }
        tokens += fr.n_tokens;
    }
    if (st == LT_OK && tokens != ix->n_tokens)
        st = lt_fail(err, LT_ERR_INPUT, path, "frames hold %" PRIu64 " tokens, the index %" PRIu64, tokens,
                     ix->n_tokens);
    free(t);
    lt_shard_close(sh);
    return st;
}
