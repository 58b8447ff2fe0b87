/*
 * train/io/ckpt_dist.c — checkpoints of the distributed engine (train/io/ckpt.h "Checkpoints in
 * parts"): DIR/ckpt-NNNNNNNN.d/ holds one part per pipeline stage, written by that stage's
 * DP rank 0, and a text manifest that rank 0 writes last, once every part is on disk.
 *
 * Part file (stage-S.bin; little-endian):
 *   "LTPART01" | u32 version 1 | u32 stage | u32 n (tensors) | u32 has_optimizer
 *   | u64 n_params (of the whole model) | i64 step | u32 index[n] (tensor table indices)
 *   | the tensors' parameters (f32, in index order) | their m | their v (has_optimizer)
 *   | u64 XXH64 (seed 0) of every byte before it
 * Manifest (manifest.txt, key = value lines, ending with "end = 1"): the model's
 * dimensions, the training state (step, random stream, data position, AdamW t), the layout
 * it was written from, and per part its file, size and checksum. A directory without a
 * complete manifest is not a checkpoint (a job killed while writing one leaves only that).
 * Reading assembles the whole model from every part, whatever the layout reading it, or
 * one rank's part (its stage, its TP shard) from the files that hold its tensors.
 */
#include "train/io/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "lib/bytes.h"       /* lt_put_le32, lt_get_le32, lt_put_le_floats, lt_get_le_floats */
#include "lib/files.h"       /* lt_atomic_*, lt_mkdir_p, lt_read_file */
#include "lib/model.h"       /* lt_model_preset */
#include "train/dist/dist.h" /* lt_dist */

#define PART_MAGIC "LTPART01"
#define MANIFEST "manifest.txt"

char *lt_ckpt_dist_path(const char *dir, int64_t step) {
    size_t n = strlen(dir) + 40;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/ckpt-%08lld.d", dir, (long long)step);
    return p;
}

bool lt_ckpt_is_dist(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static char *manifest_path(const char *cdir) {
    char *p = malloc(strlen(cdir) + sizeof MANIFEST + 2);
    if (p) sprintf(p, "%s/%s", cdir, MANIFEST);
    return p;
}

bool lt_ckpt_dist_complete(const char *path) {
    char *m = manifest_path(path);
    struct stat sb;
    bool ok = m && stat(m, &sb) == 0 && S_ISREG(sb.st_mode);
    free(m);
    return ok;
}

/* Both formats store the model's name; here, below train/io/ckpt.c (which reads the single
 * file and hands a directory to this file), so that the calls between the two go one way. */
const char *lt_ckpt_model_name(const char *stored) {
    const lt_model_shape *p = lt_model_preset(stored);
    return p ? p->name : "custom";
}

/* ---------------------------------------------------------------- writing */

/* The part's bytes (malloc'd) for the tensors mine[] of m / opt. */
static uint8_t *encode_part(const lt_llama *m, const lt_adamw *opt, const bool *mine, int stage, int64_t step,
                            size_t *len) {
    uint32_t n = 0;
    size_t floats = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (mine[i]) n++, floats += (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
    size_t arrays = opt ? 3 : 1, head = 8 + 4 * 4 + 8 + 8;
    *len = head + 4 * (size_t)n + 4 * floats * arrays + 8;
    uint8_t *b = malloc(*len), *p = b;
    if (!b) return NULL;
    memcpy(p, PART_MAGIC, 8), p += 8;
    lt_put_le32(p, 1), lt_put_le32(p + 4, (uint32_t)stage), lt_put_le32(p + 8, n), lt_put_le32(p + 12, opt ? 1 : 0), p += 16;
    lt_put_le64(p, m->n_params_whole), lt_put_le64(p + 8, (uint64_t)step), p += 16;
    for (int i = 0; i < m->n_tensors; i++) /* each tensor's place in the whole model's table */
        if (mine[i]) lt_put_le32(p, (uint32_t)m->tensors[i].index), p += 4;
    const float *src[3] = {m->params, opt ? opt->m : NULL, opt ? opt->v : NULL};
    for (size_t a = 0; a < arrays; a++)
        for (int i = 0; i < m->n_tensors; i++) {
            if (!mine[i]) continue;
            size_t c = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            lt_put_le_floats(p, src[a] + m->tensors[i].offset, c);
            p += 4 * c;
        }
    lt_put_le64(p, XXH64(b, (size_t)(p - b), 0));
    return b;
}

/* What rank 0 learns of each part. */
typedef struct part_info {
    int32_t stage, written; /* written: 1 when this rank wrote a part */
    uint64_t bytes, hash;
} part_info;

lt_status lt_ckpt_dist_write(const lt_dist *d, const char *dir, const lt_llama *m, const lt_adamw *opt,
                             const lt_ckpt_state *st, lt_error *err) {
    lt_comm *c = d->comm;
    const lt_comm_layout *l = lt_comm_layout_of(c);
    char *cdir = lt_ckpt_dist_path(dir, st->step);
    if (!cdir) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    lt_status s = LT_OK;
    part_info me = {.stage = d->stage};
    if (d->dp_rank == 0 && d->tp_rank == 0) { /* one writer per stage (its TP group assembled m: train.c) */
        s = lt_mkdir_p(cdir, 0777, err);
        size_t len = 0;
        uint8_t *b = s == LT_OK ? encode_part(m, opt, d->mine, d->stage, st->step, &len) : NULL;
        if (s == LT_OK && !b) s = lt_fail(err, LT_ERR_NOMEM, cdir, "out of memory for a checkpoint part");
        char name[32];
        snprintf(name, sizeof name, "stage-%d.bin", d->stage);
        char *path = malloc(strlen(cdir) + sizeof name + 2);
        if (s == LT_OK && !path) s = lt_fail(err, LT_ERR_NOMEM, cdir, "out of memory");
        if (s == LT_OK) {
            sprintf(path, "%s/%s", cdir, name);
            s = lt_write_file_atomic(path, b, len, err);
        }
        if (s == LT_OK) me.written = 1, me.bytes = len, me.hash = lt_get_le64(b + len - 8);
        free(path), free(b);
    }
    /* every part on disk before the manifest names them */
    void *all = NULL;
    size_t *lens = l->rank == 0 ? calloc((size_t)l->world, sizeof *lens) : NULL;
    if (s == LT_OK && l->rank == 0 && !lens) s = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (s == LT_OK) s = lt_comm_gather_bytes(c, &me, sizeof me, &all, lens, err);
    if (s == LT_OK && l->rank == 0) {
        size_t cap = 4096 + (size_t)l->pp * 128;
        char *t = malloc(cap);
        if (!t) s = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        size_t n = 0;
        const lt_model_shape *sh = &m->shape;
#define PUT(...) (n += (size_t)snprintf(t + n, n < cap ? cap - n : 0, __VA_ARGS__))
        if (t) {
            PUT("# longtail checkpoint in parts (train/io/ckpt_dist.c): a part per pipeline stage, this file last\n");
            PUT("format = longtail-checkpoint-parts\nversion = 1\nstep = %" PRId64 "\n", st->step);
            PUT("model = %s\nlayers = %d\nhidden = %d\nheads = %d\nkv_heads = %d\nffn = %d\nvocab = %d\n",
                sh->name ? sh->name : "custom", sh->layers, sh->hidden, sh->heads, sh->kv_heads, sh->ffn, sh->vocab);
            PUT("tie_embeddings = %d\ngated_ffn = %d\nrope_theta = %.17g\nnorm_eps = %.17g\n", sh->tie_embeddings,
                sh->gated_ffn, sh->rope_theta, sh->norm_eps);
            /* lib/model.h's family and RoPE scaling (absent in older manifests: llama, none) */
            PUT("family = %d\nrope_scaling = %d\nrope_factor = %.17g\nrope_low_freq_factor = %.17g\n"
                "rope_high_freq_factor = %.17g\nrope_original_max_pos = %d\n", sh->family, sh->rope_scaling,
                sh->rope_factor, sh->rope_low_freq_factor, sh->rope_high_freq_factor, sh->rope_original_max_pos);
            PUT("n_params = %zu\nhas_optimizer = %d\nadam_t = %" PRId64 "\n", m->n_params_whole, opt ? 1 : 0,
                opt ? opt->t : 0);
            PUT("data_pos = %" PRIu64 "\ndata_epoch = %" PRIu64 "\n", st->data_pos, st->data_epoch);
            PUT("rng = %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64
                " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %d\n",
                st->rng.key[0], st->rng.key[1], st->rng.ctr[0], st->rng.ctr[1], st->rng.ctr[2], st->rng.ctr[3],
                st->rng.buf[0], st->rng.buf[1], st->rng.buf[2], st->rng.buf[3], st->rng.pos);
            PUT("dp = %d\npp = %d\n", l->dp, l->pp);
            if (l->tp > 1) PUT("tp = %d\n", l->tp); /* (a record: the parts are whole tensors, as at tp = 1) */
            const part_info *pi = all;
            for (int r = 0; r < l->world; r++)
                if (pi[r].written)
                    PUT("part = stage-%d.bin %" PRIu64 " %016" PRIx64 "\n", (int)pi[r].stage, pi[r].bytes, pi[r].hash);
            PUT("end = 1\n");
        }
#undef PUT
        if (s == LT_OK && n >= cap) s = lt_fail(err, LT_ERR_INTERNAL, NULL, "the manifest outgrew its buffer");
        char *mpath = malloc(strlen(cdir) + sizeof MANIFEST + 2);
        if (s == LT_OK && !mpath) s = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        if (s == LT_OK) {
            sprintf(mpath, "%s/%s", cdir, MANIFEST);
            s = lt_write_file_atomic(mpath, t, n, err);
        }
        free(mpath), free(t);
    }
    free(all), free(lens), free(cdir);
    if (s == LT_OK) s = lt_comm_barrier(c, err); /* the checkpoint exists for every rank from here */
    return s;
}

/* ---------------------------------------------------------------- reading */

typedef struct manifest {
    lt_model_shape shape;
    char model[32];
    uint64_t n_params;
    int has_opt;
    int64_t adam_t;
    lt_ckpt_state st;
    int n_parts;
    char part[64][40];
    uint64_t part_bytes[64], part_hash[64];
} manifest;

static lt_status parse_manifest(const char *path, manifest *mf, lt_error *err) {
    memset(mf, 0, sizeof *mf);
    char *text;
    size_t len;
    lt_status s = lt_read_file(path, &text, &len, err);
    if (s != LT_OK) return s;
    bool end = false, fmt = false;
    int have = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && s == LT_OK; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || !line[0]) continue;
        char key[32], val[512];
        if (sscanf(line, "%31s = %511[^\n]", key, val) != 2) {
            s = lt_fail(err, LT_ERR_INPUT, path, "not a 'key = value' line: '%.80s'", line);
            break;
        }
        int iv = atoi(val);
        if (!strcmp(key, "format")) fmt = !strcmp(val, "longtail-checkpoint-parts");
        else if (!strcmp(key, "version") && iv != 1)
            s = lt_fail(err, LT_ERR_VERSION, path, "manifest version %d (this trainer reads 1)", iv);
        else if (!strcmp(key, "step")) mf->st.step = strtoll(val, NULL, 10), have |= 1;
        else if (!strcmp(key, "model")) snprintf(mf->model, sizeof mf->model, "%.31s", val);
        else if (!strcmp(key, "layers")) mf->shape.layers = iv, have |= 2;
        else if (!strcmp(key, "hidden")) mf->shape.hidden = iv;
        else if (!strcmp(key, "heads")) mf->shape.heads = iv;
        else if (!strcmp(key, "kv_heads")) mf->shape.kv_heads = iv;
        else if (!strcmp(key, "ffn")) mf->shape.ffn = iv;
        else if (!strcmp(key, "vocab")) mf->shape.vocab = iv;
        else if (!strcmp(key, "tie_embeddings")) mf->shape.tie_embeddings = iv;
        else if (!strcmp(key, "gated_ffn")) mf->shape.gated_ffn = iv;
        else if (!strcmp(key, "rope_theta")) mf->shape.rope_theta = strtod(val, NULL);
        else if (!strcmp(key, "norm_eps")) mf->shape.norm_eps = strtod(val, NULL);
        else if (!strcmp(key, "family")) mf->shape.family = iv;
        else if (!strcmp(key, "rope_scaling")) mf->shape.rope_scaling = iv;
        else if (!strcmp(key, "rope_factor")) mf->shape.rope_factor = strtod(val, NULL);
        else if (!strcmp(key, "rope_low_freq_factor")) mf->shape.rope_low_freq_factor = strtod(val, NULL);
        else if (!strcmp(key, "rope_high_freq_factor")) mf->shape.rope_high_freq_factor = strtod(val, NULL);
        else if (!strcmp(key, "rope_original_max_pos")) mf->shape.rope_original_max_pos = iv;
        else if (!strcmp(key, "n_params")) mf->n_params = strtoull(val, NULL, 10), have |= 4;
        else if (!strcmp(key, "has_optimizer")) mf->has_opt = iv;
        else if (!strcmp(key, "adam_t")) mf->adam_t = strtoll(val, NULL, 10);
        else if (!strcmp(key, "data_pos")) mf->st.data_pos = strtoull(val, NULL, 10);
        else if (!strcmp(key, "data_epoch")) mf->st.data_epoch = strtoull(val, NULL, 10);
        else if (!strcmp(key, "rng")) {
            lt_rng *r = &mf->st.rng;
            if (sscanf(val, "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64
                       " %" SCNx64 " %" SCNx64 " %" SCNx64 " %d", &r->key[0], &r->key[1], &r->ctr[0], &r->ctr[1],
                       &r->ctr[2], &r->ctr[3], &r->buf[0], &r->buf[1], &r->buf[2], &r->buf[3], &r->pos) != 11)
                s = lt_fail(err, LT_ERR_INPUT, path, "a damaged rng line");
            have |= 8;
        } else if (!strcmp(key, "part")) {
            if (mf->n_parts == 64) s = lt_fail(err, LT_ERR_INPUT, path, "more than 64 parts");
            else if (sscanf(val, "%39s %" SCNu64 " %" SCNx64, mf->part[mf->n_parts], &mf->part_bytes[mf->n_parts],
                            &mf->part_hash[mf->n_parts]) != 3 || strchr(mf->part[mf->n_parts], '/'))
                s = lt_fail(err, LT_ERR_INPUT, path, "a damaged part line: '%.80s'", line);
            else mf->n_parts++;
        } else if (!strcmp(key, "end")) end = true;
    }
    free(text);
    if (s == LT_OK && (!fmt || !end || have != 15 || mf->n_parts == 0))
        s = lt_fail(err, LT_ERR_INPUT, path, "not a complete checkpoint manifest (format, step, layers, n_params, rng, "
                    "parts and the closing 'end = 1' are required)");
    mf->shape.name = lt_ckpt_model_name(mf->model); /* a preset's static name, or "custom" */
    return s;
}

lt_status lt_ckpt_dist_peek(const char *cdir, lt_ckpt_info *info, lt_error *err) {
    char *mp = manifest_path(cdir);
    if (!mp) return lt_fail(err, LT_ERR_NOMEM, cdir, "out of memory");
    static manifest mf; /* large; peek is not reentrant-critical */
    lt_status s = parse_manifest(mp, &mf, err);
    free(mp);
    if (s != LT_OK) return s;
    memset(info, 0, sizeof *info);
    info->shape = mf.shape;
    info->state = mf.st;
    info->n_params = mf.n_params;
    info->has_optimizer = mf.has_opt;
    info->adam_t = mf.adam_t;
    return LT_OK;
}

/* Does part file `path` hold a tensor of m (its index list, read without the rest)? A file
 * that cannot be read says yes: reading it in full reports why. */
static bool part_has_any(const char *path, const lt_llama *m) {
    FILE *f = fopen(path, "rb");
    uint8_t h[40];
    if (!f) return true;
    bool any = fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, PART_MAGIC, 8) != 0;
    uint32_t n = any ? 0 : lt_get_le32(h + 16);
    for (uint32_t i = 0; !any && i < n; i++) {
        uint8_t b[4];
        if (fread(b, 1, 4, f) != 4) any = true;
        else any = lt_llama_tensor_by_index(m, (int)lt_get_le32(b)) != NULL;
    }
    fclose(f);
    return any;
}

lt_status lt_ckpt_dist_read_stage(const char *cdir, int tp, int tp_rank, const lt_llama_part *held, lt_llama *m,
                                  lt_adamw *opt, lt_ckpt_state *st_out, lt_error *err) {
    lt_llama_part part = *held;
    memset(m, 0, sizeof *m);
    if (opt) memset(opt, 0, sizeof *opt);
    char *mp = manifest_path(cdir);
    manifest *mf = calloc(1, sizeof *mf);
    lt_llama w = {0}; /* the whole model's table at tp 1: the parts' tensors by index */
    if (!mp || !mf) {
        free(mp), free(mf);
        return lt_fail(err, LT_ERR_NOMEM, cdir, "out of memory");
    }
    lt_status s = parse_manifest(mp, mf, err);
    free(mp);
    if (s == LT_OK) s = lt_llama_create_table(&w, &mf->shape, 1, 0, err);
    if (s == LT_OK && w.n_params_whole != mf->n_params)
        s = lt_fail(err, LT_ERR_INPUT, cdir, "the manifest says %" PRIu64 " parameters, its dimensions give %zu",
                    mf->n_params, w.n_params_whole);
    if (s == LT_OK && part.l1 < 0) part.l1 = mf->shape.layers;
    if (s == LT_OK) s = lt_llama_create_part(m, &mf->shape, tp, tp_rank, &part, err);
    if (s == LT_OK && opt) s = lt_adamw_init(opt, m->n_params, err);
    if (s == LT_OK && opt) opt->t = mf->has_opt ? mf->adam_t : 0;
    bool *seen = s == LT_OK ? calloc((size_t)m->n_tensors + 1, sizeof *seen) : NULL;
    size_t most = 0; /* the largest whole tensor: the decoding buffer */
    for (int t = 0; s == LT_OK && t < w.n_tensors; t++)
        if ((size_t)w.tensors[t].rows * (size_t)w.tensors[t].cols > most) most = (size_t)w.tensors[t].rows * w.tensors[t].cols;
    float *tmp = s == LT_OK ? malloc((most + 1) * sizeof *tmp) : NULL;
    if (s == LT_OK && (!seen || !tmp)) s = lt_fail(err, LT_ERR_NOMEM, cdir, "out of memory");
    for (int k = 0; s == LT_OK && k < mf->n_parts; k++) {
        char *path = malloc(strlen(cdir) + 48);
        if (!path) {
            s = lt_fail(err, LT_ERR_NOMEM, cdir, "out of memory");
            break;
        }
        sprintf(path, "%s/%s", cdir, mf->part[k]);
        if (!part_has_any(path, m)) { /* another stage's part: not read */
            free(path);
            continue;
        }
        char *b;
        size_t len;
        s = lt_read_file(path, &b, &len, err);
        const uint8_t *p = (const uint8_t *)b;
        if (s == LT_OK && (len != mf->part_bytes[k] || len < 48 || memcmp(p, PART_MAGIC, 8) != 0))
            s = lt_fail(err, LT_ERR_INPUT, path, "%zu bytes, the manifest says %" PRIu64 " (or not a checkpoint part)",
                        len, mf->part_bytes[k]);
        if (s == LT_OK && (lt_get_le64(p + len - 8) != mf->part_hash[k] || XXH64(p, len - 8, 0) != mf->part_hash[k]))
            s = lt_fail(err, LT_ERR_INPUT, path, "damaged: its checksum does not match the manifest's");
        uint32_t n = s == LT_OK ? lt_get_le32(p + 16) : 0, has_opt = s == LT_OK ? lt_get_le32(p + 20) : 0;
        const uint8_t *idx = p + 40, *q = idx + 4 * (size_t)n;
        size_t floats = 0;
        for (uint32_t i = 0; s == LT_OK && i < n; i++) {
            uint32_t t = lt_get_le32(idx + 4 * i);
            if (t >= (uint32_t)w.n_tensors) s = lt_fail(err, LT_ERR_INPUT, path, "names tensor %u of %d", t, w.n_tensors);
            else floats += (size_t)w.tensors[t].rows * (size_t)w.tensors[t].cols;
        }
        size_t arrays = has_opt ? 3 : 1;
        if (s == LT_OK && (lt_get_le64(p + 24) != w.n_params_whole || 40 + 4 * (size_t)n + 4 * floats * arrays + 8 != len))
            s = lt_fail(err, LT_ERR_INPUT, path, "its size does not match its tensors");
        if (s == LT_OK && opt && mf->has_opt && !has_opt)
            s = lt_fail(err, LT_ERR_INPUT, path, "has no optimizer moments, the manifest says it should");
        float *dst[3] = {m->params, opt ? opt->m : NULL, opt ? opt->v : NULL};
        for (size_t a = 0; s == LT_OK && a < arrays; a++)
            for (uint32_t i = 0; i < n; i++) {
                uint32_t t = lt_get_le32(idx + 4 * i);
                size_t c = (size_t)w.tensors[t].rows * (size_t)w.tensors[t].cols;
                const lt_tensor_info *pt = lt_llama_tensor_by_index(m, (int)t);
                if (pt && dst[a]) { /* this rank's shard of the whole tensor */
                    lt_get_le_floats(tmp, q, c);
                    lt_llama_shard_tensor(m, pt, m->tp_rank, tmp, dst[a] + pt->offset, false);
                }
                if (pt) seen[pt - m->tensors] = true;
                q += 4 * c;
            }
        free(b), free(path);
    }
    for (int t = 0; s == LT_OK && t < m->n_tensors; t++)
        if (!seen[t]) s = lt_fail(err, LT_ERR_INPUT, cdir, "no part holds tensor %s", m->tensors[t].name);
    free(seen), free(tmp);
    lt_llama_free(&w);
    if (s == LT_OK && st_out) *st_out = mf->st;
    free(mf);
    if (s != LT_OK) {
        lt_llama_free(m);
        if (opt) lt_adamw_free(opt);
    }
    return s;
}

lt_status lt_ckpt_dist_read(const char *cdir, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st_out, lt_error *err) {
    lt_llama_part whole = {.l0 = 0, .l1 = -1, .first = true, .last = true};
    return lt_ckpt_dist_read_stage(cdir, 1, 0, &whole, m, opt, st_out, err);
}
